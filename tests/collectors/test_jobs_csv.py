"""Jobs CSV import: the documented format, bad rows, and the converted Alibaba GPU trace."""

import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from efficiency.choices import Framework, JobState
from efficiency.collectors.jobs_csv import FRAMEWORKS, JOB_STATES, parse_jobs_csv
from tests.fixtures.jobs.convert_alibaba_2023 import convert_text

ROOT = Path(__file__).resolve().parent.parent.parent
ALIBABA_FIXTURE = ROOT / "tests" / "fixtures" / "jobs" / "alibaba_2023_pods.csv"
HEADER = "job_id,department,account,user,name,gpus,nodes,submit_time,start_time,end_time,state"
SHANGHAI = ZoneInfo("Asia/Shanghai")


def csv_row(
    job_id="j1",
    department="vision",
    account="",
    gpus="8",
    nodes="1",
    submit="2026-11-02T08:00:00Z",
    start="2026-11-02T08:00:05Z",
    end="",
    state="running",
):
    return f"{job_id},{department},{account},zhang.wei,train,{gpus},{nodes},{submit},{start},{end},{state}"


def parse(*rows, header=HEADER, **options):
    return parse_jobs_csv("\n".join([header, *rows]) + "\n", **options)


def only_record(outcome):
    assert outcome.rejected == []
    assert len(outcome.records) == 1
    return outcome.records[0]


def only_reason(outcome):
    assert outcome.records == []
    assert len(outcome.rejected) == 1
    return outcome.rejected[0].reason


# the documented format


def test_documented_example_parses():
    doc = (ROOT / "docs" / "jobs-csv-format.md").read_text(encoding="utf-8")
    example = re.search(r"```csv\n(.*?)```", doc, re.S)
    assert example is not None
    outcome = parse_jobs_csv(example.group(1))
    assert outcome.rejected == []
    first, second, third = outcome.records
    assert first.node_names == ("gpu-001", "gpu-002", "gpu-003", "gpu-004")
    assert first.ended_at == datetime(2026, 11, 2, 12, 41, 17, tzinfo=UTC)
    assert (first.framework, first.gpu_model) == ("megatron", "NVIDIA H100 80GB HBM3")
    assert (second.account, second.config, second.state) == ("vit-team", {}, "pending")
    assert third.config == {"department_code": "bev"}


def test_parser_values_agree_with_the_model_choices():
    assert set(JobState.values) == JOB_STATES
    assert set(Framework.values) == FRAMEWORKS


def test_row_becomes_a_csv_record():
    job = only_record(parse(csv_row(end="2026-11-02T09:00:05Z", state="completed")))
    assert job.source == "csv"
    assert (job.external_id, job.account, job.user_name, job.name) == ("j1", "", "zhang.wei", "train")
    assert (job.gpu_count, job.node_count, job.state) == (8, 1, "completed")
    assert job.submitted_at == datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    assert job.started_at == datetime(2026, 11, 2, 8, 0, 5, tzinfo=UTC)
    assert job.ended_at == datetime(2026, 11, 2, 9, 0, 5, tzinfo=UTC)
    assert job.config == {"department_code": "vision"}
    assert job.framework == "unknown"


def test_account_alone_is_enough():
    job = only_record(parse(csv_row(department="", account="slurm-vision")))
    assert (job.account, job.config) == ("slurm-vision", {})


def test_optional_columns_are_read():
    header = HEADER + ",gpu_model,node_names,framework,gpu_milli"
    spaced = only_record(parse(csv_row(nodes="") + ",h100,gpu-001 gpu-002,PyTorch,1000", header=header))
    assert spaced.node_names == ("gpu-001", "gpu-002")
    assert spaced.node_count == 2  # nodes empty: the number of names
    assert (spaced.gpu_model, spaced.framework, spaced.config["gpu_milli"]) == ("h100", "pytorch", 1000)
    commas = only_record(parse(csv_row() + ',,"gpu-001, gpu-002",,460', header=header))
    assert commas.node_names == ("gpu-001", "gpu-002")
    assert commas.config == {"department_code": "vision", "gpu_milli": 460}


def test_extra_columns_and_column_order_do_not_matter():
    header = "state,comment,job_id,account,department,user,name,gpus,nodes,submit_time,start_time,end_time"
    row = "PENDING,resubmitted twice,j9,,radar,li.na,eval,4,1,2026-11-02T08:00:00Z,,"
    job = only_record(parse(row, header=header))
    assert (job.external_id, job.state, job.gpu_count, job.config) == (
        "j9",
        "pending",
        4,
        {"department_code": "radar"},
    )


def test_header_names_ignore_case_and_spaces():
    header = " Job_ID ,DEPARTMENT,account,user,name,gpus,nodes,submit_time,start_time,end_time,state"
    assert only_record(parse(csv_row(), header=header)).external_id == "j1"


def test_utf8_bom_is_tolerated():
    text = "\ufeff" + HEADER + "\n" + csv_row() + "\n"
    assert only_record(parse_jobs_csv(text)).external_id == "j1"


def test_blank_rows_and_windows_line_endings_are_fine():
    text = HEADER + "\r\n\r\n" + csv_row() + "\r\n,,,,,,,,,,\r\n"
    assert only_record(parse_jobs_csv(text)).external_id == "j1"


def test_empty_end_time_is_none():
    assert only_record(parse(csv_row(end=""))).ended_at is None


# times


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-02T08:00:00Z", datetime(2026, 11, 2, 8, 0, tzinfo=UTC)),
        ("2026-11-02T16:00:00+08:00", datetime(2026, 11, 2, 8, 0, tzinfo=UTC)),
        ("2026-11-02T08:00:00", datetime(2026, 11, 2, 8, 0, tzinfo=UTC)),
        ("2026-11-02 08:00:00", datetime(2026, 11, 2, 8, 0, tzinfo=UTC)),
        ("2026-11-02T08:00:00.250", datetime(2026, 11, 2, 8, 0, 0, 250_000, tzinfo=UTC)),
        ("2026-11-02", datetime(2026, 11, 2, tzinfo=UTC)),
        ("1793520000", datetime(2026, 11, 1, 8, 0, tzinfo=UTC)),
        ("1793520000.5", datetime(2026, 11, 1, 8, 0, 0, 500_000, tzinfo=UTC)),
    ],
)
def test_times_are_iso_8601_or_epoch_seconds(value, expected):
    job = only_record(parse(csv_row(submit=value, start="")))
    assert job.submitted_at == expected
    assert job.submitted_at.utcoffset() == timedelta(0)


def test_naive_times_use_the_default_timezone_and_offsets_win():
    job = only_record(
        parse(csv_row(submit="2026-11-02T08:00:00", start="2026-11-02T08:00:05Z"), default_timezone=SHANGHAI)
    )
    assert job.submitted_at == datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
    assert job.started_at == datetime(2026, 11, 2, 8, 0, 5, tzinfo=UTC)


def test_epoch_seconds_ignore_the_default_timezone():
    job = only_record(parse(csv_row(submit="1793520000", start=""), default_timezone=SHANGHAI))
    assert job.submitted_at == datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


# bad rows


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (csv_row(job_id=""), "column 'job_id': a value is required"),
        (
            csv_row(department="", account=""),
            "column 'department' or 'account': one of them must have a value",
        ),
        (csv_row(gpus=""), "column 'gpus': a value is required (0 for a job without GPUs)"),
        (csv_row(gpus="0.5"), "column 'gpus': value '0.5' is not a whole number ≥ 0"),
        (csv_row(gpus="-1"), "column 'gpus': value '-1' is not a whole number ≥ 0"),
        (csv_row(gpus="８"), "column 'gpus': value '８' is not a whole number ≥ 0"),
        (csv_row(nodes="two"), "column 'nodes': value 'two' is not a whole number ≥ 0"),
        (csv_row(submit=""), "column 'submit_time': a value is required"),
        (
            csv_row(submit="02/11/2026 08:00"),
            "column 'submit_time': value '02/11/2026 08:00' is neither ISO 8601 nor seconds since the epoch",
        ),
        (
            csv_row(start="1793520000000"),
            "column 'start_time': value '1793520000000' is out of range as epoch seconds",
        ),
        (
            csv_row(start="2026-11-02T07:59:59Z"),
            "column 'start_time': value '2026-11-02T07:59:59Z' is before submit_time",
        ),
        (
            csv_row(end="2026-11-02T08:00:04Z", state="completed"),
            "column 'end_time': value '2026-11-02T08:00:04Z' is before start_time",
        ),
        (
            csv_row(start="", end="2026-11-02T07:00:00Z", state="cancelled"),
            "column 'end_time': value '2026-11-02T07:00:00Z' is before submit_time",
        ),
        (
            csv_row(state="done"),
            "column 'state': value 'done' is not one of cancelled, completed, failed, node_fail, pending, "
            "preempted, running, timeout",
        ),
        (csv_row() + ",extra", "expected 11 fields as in the header, got 12"),
        ("j1,vision,,zhang.wei", "expected 11 fields as in the header, got 4"),
        (csv_row(department="vis\x00ion"), "row contains a NUL character"),
    ],
)
def test_bad_row_is_rejected_with_column_and_value(row, reason):
    assert only_reason(parse(row)) == reason


def test_bad_optional_values_are_rejected():
    header = HEADER + ",framework,gpu_milli"
    assert only_reason(parse(csv_row() + ",tensorflow,", header=header)) == (
        "column 'framework': value 'tensorflow' is not one of accelerated, deepspeed, megatron, other, "
        "pytorch, unknown"
    )
    assert only_reason(parse(csv_row() + ",,1500", header=header)) == (
        "column 'gpu_milli': value '1500' is more than 1000"
    )


def test_bad_rows_keep_the_rest_with_line_numbers_and_excerpts():
    outcome = parse(
        csv_row(job_id="a"),
        csv_row(job_id="b", gpus="lots"),
        csv_row(job_id="c"),
        '"d",vision,,zhang.wei,"multi\nline name",x,1,2026-11-02T08:00:00Z,,,pending',
        csv_row(job_id="e"),
    )
    assert [record.external_id for record in outcome.records] == ["a", "c", "e"]
    assert [(rejected.line_no, rejected.reason) for rejected in outcome.rejected] == [
        (3, "column 'gpus': value 'lots' is not a whole number ≥ 0"),
        (5, "column 'gpus': value 'x' is not a whole number ≥ 0"),
    ]
    assert outcome.rejected[0].excerpt == csv_row(job_id="b", gpus="lots")
    assert outcome.rejected[1].excerpt.startswith('"d",vision,,zhang.wei,"multi')


def test_multiline_quoted_name_is_kept():
    row = 'j1,vision,,zhang.wei,"line one\nline two",8,1,2026-11-02T08:00:00Z,,,pending'
    assert only_record(parse(row)).name == "line one\nline two"


def test_header_missing_a_required_column_rejects_the_file():
    header = "job_id,account,user,name,gpus,nodes,submit_time,start_time,state"
    outcome = parse("j1,acct,u,n,8,1,2026-11-02T08:00:00Z,,pending", header=header)
    assert outcome.records == []
    assert [(rejected.line_no, rejected.reason) for rejected in outcome.rejected] == [
        (1, "header lacks required column(s) department, end_time")
    ]


def test_empty_text_gives_nothing():
    outcome = parse_jobs_csv("")
    assert (outcome.records, outcome.rejected) == ([], [])


# the Alibaba cluster-trace-gpu-v2023 pod list, converted by tests/fixtures/jobs/convert_alibaba_2023.py


@pytest.fixture(scope="module")
def alibaba():
    return parse_jobs_csv(ALIBABA_FIXTURE.read_text(encoding="utf-8"))


def test_every_alibaba_pod_becomes_a_record(alibaba):
    # openb_pod_list_default.csv lists 8,152 pods; none has to be rejected.
    assert len(alibaba.records) == 8152
    assert alibaba.rejected == []
    assert len({record.external_id for record in alibaba.records}) == 8152


def test_alibaba_states_follow_the_documented_mapping(alibaba):
    assert Counter(record.state for record in alibaba.records) == {
        "cancelled": 5159,  # Running, deleted before the trace ends
        "failed": 1870,
        "pending": 897,  # never scheduled
        "completed": 192,
        "running": 34,  # Running at the end of the trace
    }


def test_alibaba_gpus_and_departments(alibaba):
    assert sum(record.gpu_count for record in alibaba.records) == 7433
    assert sum(1 for record in alibaba.records if record.gpu_count == 0) == 1088
    assert Counter(record.config["department_code"] for record in alibaba.records) == {
        "radar": 1202,
        "vision": 1158,
        "mapping": 1158,
        "bev": 1153,
        "sim": 1135,
        "cabin": 1134,
        "data": 1105,
        "e2e": 100,
        "pnc": 7,
    }


def test_alibaba_fixture_size_is_reasonable():
    assert ALIBABA_FIXTURE.stat().st_size < 2_000_000


# Three lines copied verbatim from openb_pod_list_default.csv (columns: name, cpu_milli,
# memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time,
# scheduled_time), checked by hand against the converted records below.
TRACE_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
SHARED_RUNNING = "openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061"
EIGHT_GPU_SUCCEEDED = "openb-pod-0017,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497"
NEVER_SCHEDULED = "openb-pod-0061,11908,47104,1,1000,,BE,Pending,10001278,10001403,"


def test_alibaba_spot_check_shared_gpu_pod_still_running(alibaba):
    job = next(record for record in alibaba.records if record.external_id == "openb-pod-0001")
    # 427,061 s = 4 d 22 h 37 min 41 s after 2026-10-01T00:00:00Z; deleted at 12,902,960 s, the
    # trace's last moment, so still running. LS and pod number 1: 1 mod 4 → radar.
    assert job.state == "running"
    assert job.submitted_at == job.started_at == datetime(2026, 10, 5, 22, 37, 41, tzinfo=UTC)
    assert job.ended_at is None
    assert (job.gpu_count, job.config["gpu_milli"], job.node_count) == (1, 460, 1)
    assert job.config["department_code"] == "radar"


def test_alibaba_spot_check_eight_gpu_pod_that_succeeded(alibaba):
    job = next(record for record in alibaba.records if record.external_id == "openb-pod-0017")
    # 9,437,497 s = 109 d 5 h 31 min 37 s; 10,769,854 s = 124 d 15 h 37 min 34 s. Burstable → e2e.
    assert job.state == "completed"
    assert job.submitted_at == job.started_at == datetime(2027, 1, 18, 5, 31, 37, tzinfo=UTC)
    assert job.ended_at == datetime(2027, 2, 2, 15, 37, 34, tzinfo=UTC)
    assert (job.gpu_count, job.config["gpu_milli"]) == (8, 1000)
    assert job.config["department_code"] == "e2e"


def test_alibaba_spot_check_pod_never_scheduled(alibaba):
    job = next(record for record in alibaba.records if record.external_id == "openb-pod-0061")
    # 10,001,278 s = 115 d 18 h 7 min 58 s; no scheduled_time. BE and pod number 61: 61 mod 3 → mapping.
    assert job.state == "pending"
    assert job.submitted_at == datetime(2027, 1, 24, 18, 7, 58, tzinfo=UTC)
    assert (job.started_at, job.ended_at, job.node_count) == (None, None, 0)
    assert job.gpu_count == 1
    assert job.config["department_code"] == "mapping"


def test_converter_reproduces_the_fixture_rows_for_the_original_lines():
    converted = convert_text(
        "\n".join([TRACE_HEADER, SHARED_RUNNING, EIGHT_GPU_SUCCEEDED, NEVER_SCHEDULED]) + "\n"
    )
    fixture_lines = ALIBABA_FIXTURE.read_text(encoding="utf-8").splitlines()
    wanted = {"openb-pod-0001", "openb-pod-0017", "openb-pod-0061"}
    expected = [fixture_lines[0], *(line for line in fixture_lines if line.split(",", 1)[0] in wanted)]
    assert converted.splitlines() == expected
