"""Slurm sacct and squeue parsing, against hand-written output in Slurm 22.05's exact format."""

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from efficiency.collectors.slurm import (
    SACCT_FORMAT,
    SQUEUE_FORMAT,
    expand_hostlist,
    parse_sacct,
    parse_squeue,
    sacct_command,
    squeue_command,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "jobs"
SHANGHAI = ZoneInfo("Asia/Shanghai")  # UTC+8 all year
BERLIN = ZoneInfo("Europe/Berlin")  # summer time ends 2026-10-25
HEADER = "JobID|JobName|Account|User|State|Submit|Start|End|AllocTRES|ReqTRES|NodeList|NNodes|ExitCode"


def fixture(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def sacct_row(
    job_id="7001",
    state="COMPLETED",
    submit="2026-11-02T08:00:00",
    start="2026-11-02T08:00:01",
    end="2026-11-02T09:00:01",
    alloc="billing=64,cpu=64,gres/gpu=8,mem=500G,node=1",
    req="billing=64,cpu=64,gres/gpu=8,mem=500G,node=1",
    nodes="gpu-001",
    nnodes="1",
    name="train",
):
    return (
        f"{job_id}|{name}|vision|zhang.wei|{state}|{submit}|{start}|{end}|{alloc}|{req}|{nodes}|{nnodes}|0:0"
    )


def parse_rows(*rows, timezone=SHANGHAI):
    return parse_sacct("\n".join([HEADER, *rows]) + "\n", timezone=timezone)


def only_record(outcome):
    assert outcome.rejected == []
    assert len(outcome.records) == 1
    return outcome.records[0]


def by_id(outcome):
    return {record.external_id: record for record in outcome.records}


# sacct fixtures


def test_allocations_fixture_gives_every_job_and_rejects_nothing():
    outcome = parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI)
    assert outcome.rejected == []
    assert len(outcome.records) == 23
    assert {record.source for record in outcome.records} == {"slurm"}


def test_fixture_header_is_the_format_the_portal_asks_for():
    header = fixture("sacct_allocations.txt").splitlines()[0]
    assert header.split("|") == SACCT_FORMAT.split(",")


def test_every_slurm_state_maps_to_a_portal_state():
    jobs = by_id(parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI))
    states = {job_id: jobs[job_id].state for job_id in jobs}
    assert states == {
        "4817": "completed",
        "4818": "cancelled",  # CANCELLED by 1003
        "4819": "failed",
        "4820": "timeout",
        "4821": "preempted",
        "4822": "node_fail",
        "4823": "failed",  # OUT_OF_MEMORY
        "4824": "pending",
        "4825": "running",
        "4826": "pending",  # REQUEUED
        "4827": "running",  # SUSPENDED
        "4828": "node_fail",  # BOOT_FAIL
        "4829": "timeout",  # DEADLINE
        "4830_3": "completed",
        "4830_4": "running",
        "4830_[5-9%2]": "pending",
        "4840+0": "running",
        "4840+1": "running",
        "4841": "completed",
        "4842": "cancelled",
        "4843": "completed",
        "4844": "completed",
        "4845": "completed",
    }


def test_completed_job_carries_everything_sacct_printed():
    job = by_id(parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI))["4817"]
    assert job.account == "vision"
    assert job.user_name == "zhang.wei"
    assert job.name == "pretrain-7b"
    assert job.gpu_count == 32
    assert job.gpu_model == ""
    assert job.node_count == 4
    assert job.node_names == ("gpu-001", "gpu-002", "gpu-003", "gpu-004")
    assert job.submitted_at == datetime(2026, 11, 2, 0, 15, 3, tzinfo=UTC)
    assert job.started_at == datetime(2026, 11, 2, 0, 15, 5, tzinfo=UTC)
    assert job.ended_at == datetime(2026, 11, 2, 12, 41, 17, tzinfo=UTC)
    assert job.exit_code == "0:0"
    assert job.framework == "unknown"
    assert job.config == {"partition": "gpu", "elapsed_s": 12 * 3600 + 26 * 60 + 12}


def test_all_times_are_timezone_aware_utc():
    outcome = parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI)
    for record in outcome.records:
        for moment in (record.submitted_at, record.started_at, record.ended_at):
            assert moment is None or moment.utcoffset() == timedelta(0)


def test_elapsed_with_days_is_read_as_seconds():
    job = by_id(parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI))["4820"]
    assert job.config["elapsed_s"] == 86_414  # 1-00:00:14


# job ids: steps, arrays, het jobs


def test_job_steps_are_skipped_not_rejected():
    outcome = parse_sacct(fixture("sacct_with_steps.txt"), timezone=SHANGHAI)
    assert outcome.rejected == []
    assert [record.external_id for record in outcome.records] == [
        "5001",
        "5002_1",
        "5002_2",
        "5020+0",
        "5020+1",
    ]


def test_step_rows_add_nothing_to_their_job():
    job = by_id(parse_sacct(fixture("sacct_with_steps.txt"), timezone=SHANGHAI))["5001"]
    assert job.gpu_count == 16
    assert job.node_names == ("gpu-001", "gpu-002")
    assert job.user_name == "zhang.wei"


def test_header_order_is_free_and_unknown_columns_are_ignored():
    job = by_id(parse_sacct(fixture("sacct_with_steps.txt"), timezone=SHANGHAI))["5002_1"]
    assert (job.name, job.account, job.state, job.exit_code) == ("sweep", "radar", "failed", "2:0")
    assert job.config == {"array_job_id": "5002", "array_task": "1"}  # no Partition column here


def test_array_task_keeps_its_printed_id():
    job = by_id(parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI))["4830_4"]
    assert job.config["array_job_id"] == "4830"
    assert job.config["array_task"] == "4"


def test_pending_array_range_is_one_pending_record():
    jobs = by_id(parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI))
    pending = jobs["4830_[5-9%2]"]
    assert pending.state == "pending"
    assert pending.gpu_count == 1  # per task, from ReqTRES
    assert pending.node_names == ()
    assert pending.config["array_task"] == "[5-9%2]"


def test_het_job_components_are_separate_records():
    jobs = by_id(parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI))
    assert (jobs["4840+0"].gpu_count, jobs["4840+1"].gpu_count) == (16, 0)
    assert jobs["4840+1"].node_names == ("cpu-01", "cpu-02")
    assert jobs["4840+1"].config["het_job_id"] == "4840"
    assert jobs["4840+1"].config["het_offset"] == 1


@pytest.mark.parametrize("job_id", ["abc", "123_", "123+", "_4", "123_[5-9", "4830_4+1x"])
def test_malformed_job_id_is_rejected(job_id):
    outcome = parse_rows(sacct_row(job_id=job_id))
    assert outcome.records == []
    assert "is not a Slurm job id" in outcome.rejected[0].reason


# times


def test_local_times_follow_daylight_saving_time():
    summer = only_record(
        parse_rows(sacct_row(submit="2026-10-24T12:00:00", start="", end=""), timezone=BERLIN)
    )
    winter = only_record(
        parse_rows(sacct_row(submit="2026-10-26T12:00:00", start="", end=""), timezone=BERLIN)
    )
    assert summer.submitted_at == datetime(2026, 10, 24, 10, 0, tzinfo=UTC)  # CEST, UTC+2
    assert winter.submitted_at == datetime(2026, 10, 26, 11, 0, tzinfo=UTC)  # CET, UTC+1


@pytest.mark.parametrize("no_time", ["Unknown", "None", ""])
def test_unknown_none_and_empty_times_are_none(no_time):
    job = only_record(parse_rows(sacct_row(start=no_time, end=no_time)))
    assert job.started_at is None
    assert job.ended_at is None


def test_job_cancelled_in_the_queue_has_an_end_but_no_start():
    job = by_id(parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI))["4842"]
    assert job.started_at is None
    assert job.ended_at == datetime(2026, 11, 3, 1, 5, 10, tzinfo=UTC)


def test_job_cancelled_in_the_queue_with_start_stamped_at_the_cancel_never_started():
    # As our own slurmctld 22.05 + slurmdbd printed it (CI, tests/slurm): scancel of a waiting job
    # gives Start = End = the cancel time and no nodes.
    job = only_record(
        parse_rows(
            sacct_row(
                state="CANCELLED by 0", submit="2026-12-02T06:56:55", start="2026-12-02T06:56:57",
                end="2026-12-02T06:56:57", alloc="", req="billing=1,cpu=1,gres/gpu=8,node=1",
                nodes="None assigned",
            )
        )
    )  # fmt: skip
    assert job.state == "cancelled"
    assert job.started_at is None
    assert job.ended_at == datetime(2026, 12, 1, 22, 56, 57, tzinfo=UTC)


def test_bad_start_time_rejects_the_row_and_names_the_column():
    outcome = parse_rows(sacct_row(start="yesterday"))
    assert outcome.records == []
    assert outcome.rejected[0].reason == "Start 'yesterday' is not a Slurm time (YYYY-MM-DDTHH:MM:SS)"


# GPUs from TRES


@pytest.mark.parametrize(
    ("alloc", "gpus", "model"),
    [
        ("billing=8,cpu=64,gres/gpu=8,mem=500G,node=1", 8, ""),
        ("billing=64,cpu=64,gres/gpu:h100=8,gres/gpu=8,mem=500G,node=1", 8, "h100"),
        ("cpu=64,gres/gpu:h100=8,mem=500G,node=1", 8, "h100"),
        ("cpu=64,gres/gpu:a100=4,gres/gpu:h100=4,mem=500G,node=1", 8, "a100,h100"),
        ("billing=32,cpu=32,mem=256G,node=1", 0, ""),
        ("billing=8,cpu=8,gres/gpu=1,gres/gpumem=80G,gres/gpuutil=97,mem=64G,node=1", 1, ""),
        ("cpu=8,gres/shard=4,mem=64G,node=1", 0, ""),
    ],
)
def test_gpus_are_read_from_tres(alloc, gpus, model):
    job = only_record(parse_rows(sacct_row(alloc=alloc)))
    assert (job.gpu_count, job.gpu_model) == (gpus, model)


def test_pending_job_counts_the_gpus_it_asked_for():
    job = by_id(parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI))["4824"]
    assert job.gpu_count == 64
    assert job.node_count == 8
    assert job.node_names == ()


def test_non_numeric_gpu_tres_is_rejected():
    outcome = parse_rows(sacct_row(alloc="cpu=8,gres/gpu=eight,node=1"))
    assert outcome.records == []
    assert outcome.rejected[0].reason == "AllocTRES gres/gpu='eight' is not a whole number of GPUs"


def test_node_count_falls_back_to_the_node_list():
    header = "JobID|State|Submit|NodeList"
    outcome = parse_sacct(f"{header}\n7001|RUNNING|2026-11-02T08:00:00|gpu-[001-003]\n", timezone=SHANGHAI)
    assert only_record(outcome).node_count == 3


def test_node_range_request_counts_its_minimum():
    job = only_record(parse_rows(sacct_row(state="PENDING", start="Unknown", end="Unknown", nnodes="2-4")))
    assert job.node_count == 2


# hostlists


@pytest.mark.parametrize(
    ("expression", "hosts"),
    [
        ("gpu-[001-004,007]", ("gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-007")),
        ("gpu-001,gpu-017", ("gpu-001", "gpu-017")),
        ("node[1-3]-ib", ("node1-ib", "node2-ib", "node3-ib")),
        ("None assigned", ()),
        ("", ()),
        ("gpu-001", ("gpu-001",)),
        ("n[8-10]", ("n8", "n9", "n10")),
        ("n[08-10]", ("n08", "n09", "n10")),
        ("r[1-2]n[1-2]", ("r1n1", "r1n2", "r2n1", "r2n2")),
        ("gpu-[001-002],cpu-[1,3]", ("gpu-001", "gpu-002", "cpu-1", "cpu-3")),
        ("a100-[1]", ("a100-1",)),
    ],
)
def test_hostlist_expands(expression, hosts):
    assert expand_hostlist(expression) == hosts


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("gpu-[004-001]", "runs backwards"),
        ("gpu-[001-004", "'[' without ']'"),
        ("gpu-001]", "']' without '['"),
        ("gpu-[[1-2]]", "nested brackets"),
        ("gpu-[a-c]", "bad range"),
        ("gpu-[]", "bad range"),
        ("gpu-001,,gpu-002", "bad host name"),
        ("gpu 001", "bad host name"),
        ("gpu-[1-9999999]", "more than 100000 hosts"),
        ("r[1-1000]n[1-1000]", "more than 100000 hosts"),
    ],
)
def test_malformed_hostlist_raises(expression, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        expand_hostlist(expression)


def test_bad_node_list_rejects_the_row():
    outcome = parse_rows(sacct_row(nodes="gpu-[004-001]"))
    assert outcome.rejected[0].reason == "NodeList 'gpu-[004-001]': range '004-001' runs backwards"


# bad input


def test_bad_rows_are_rejected_and_good_rows_kept():
    outcome = parse_sacct(fixture("sacct_bad_rows.txt"), timezone=SHANGHAI)
    assert [record.external_id for record in outcome.records] == ["6001", "6002", "6008"]
    assert [(rejected.line_no, rejected.reason) for rejected in outcome.rejected] == [
        (4, "unknown Slurm state 'REVOKED' in State"),
        (6, "Submit '11/05-08:30:00' is not a Slurm time (YYYY-MM-DDTHH:MM:SS)"),
        (7, "Submit is '', a job needs a submit time"),
        (8, "NodeList 'gpu-[004-001]': range '004-001' runs backwards"),
        (9, "expected 15 fields as in the header, got 7"),
    ]
    assert by_id(outcome)["6002"].name == "eval|a|b"


def test_a_bar_in_the_job_name_keeps_the_job_and_its_fields():
    job = only_record(parse_rows(sacct_row(name="train | lr=3e-4 |")))
    assert job.name == "train | lr=3e-4 |"
    assert (job.account, job.gpu_count) == ("vision", 8)


def test_a_bar_is_not_recovered_when_another_column_holds_free_text():
    text = "JobID|JobName|Comment|State|Submit\n7|a|b|c|COMPLETED|2026-11-05T08:00:00\n"
    outcome = parse_sacct(text, timezone=SHANGHAI)
    assert outcome.records == []
    assert (
        outcome.rejected[0].reason
        == "expected 5 fields as in the header, got 6 (JobName, Comment may hold '|')"
    )


def test_non_ascii_job_name_is_kept():
    job = by_id(parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI))["4841"]
    assert job.name == "训练-bev-融合"
    assert job.node_names == ("gpu-001", "gpu-002", "gpu-007")


def test_unicode_line_separator_in_a_name_does_not_split_the_row():
    job = only_record(parse_rows(sacct_row(name="a\u2028b\x85c")))
    assert job.name == "a\u2028b\x85c"


def test_empty_fields_give_empty_strings():
    job = by_id(parse_sacct(fixture("sacct_allocations.txt"), timezone=SHANGHAI))["4845"]
    assert (job.name, job.account, job.user_name, job.gpu_count) == ("", "", "", 0)


def test_windows_line_endings_are_read():
    text = "\r\n".join([HEADER, sacct_row()]) + "\r\n"
    assert only_record(parse_sacct(text, timezone=SHANGHAI)).exit_code == "0:0"


def test_row_with_nul_is_rejected():
    outcome = parse_rows(sacct_row(name="tr\x00ain"), sacct_row(job_id="7002"))
    assert [record.external_id for record in outcome.records] == ["7002"]
    assert outcome.rejected[0].reason == "row contains a NUL character"
    assert outcome.rejected[0].line_no == 2


def test_header_without_required_fields_rejects_the_whole_text():
    outcome = parse_sacct("JobID|JobName|Start\n7001|train|2026-11-02T08:00:00\n", timezone=SHANGHAI)
    assert outcome.records == []
    assert len(outcome.rejected) == 1
    assert outcome.rejected[0].reason == "sacct header lacks required field(s) State, Submit"
    assert outcome.rejected[0].line_no == 1


def test_empty_output_and_header_only_give_nothing():
    assert parse_sacct("", timezone=SHANGHAI).records == []
    assert parse_sacct("", timezone=SHANGHAI).rejected == []
    header_only = parse_sacct(SACCT_FORMAT.replace(",", "|") + "\n", timezone=SHANGHAI)
    assert (header_only.records, header_only.rejected) == ([], [])


def test_older_parsable_output_with_a_trailing_bar_is_read():
    text = "JobID|State|Submit|NodeList|\n7001|COMPLETED|2026-11-02T08:00:00|gpu-001|\n"
    assert only_record(parse_sacct(text, timezone=SHANGHAI)).node_names == ("gpu-001",)


def test_truncated_state_with_plus_is_read():
    assert only_record(parse_rows(sacct_row(state="CANCELLED+"))).state == "cancelled"


# sacct command


def test_sacct_command_asks_for_allocations_in_cluster_local_time():
    since = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
    until = datetime(2026, 11, 2, 1, 30, tzinfo=UTC)
    assert sacct_command(since, until, timezone=SHANGHAI) == [
        "sacct",
        "--parsable2",
        "--allusers",
        "--allocations",
        "-S",
        "2026-11-02T08:00:00",
        "-E",
        "2026-11-02T09:30:00",
        f"--format={SACCT_FORMAT}",
    ]


def test_sacct_command_refuses_naive_times():
    with pytest.raises(ValueError, match="timezone-aware"):
        sacct_command(datetime(2026, 11, 2), datetime(2026, 11, 3), timezone=SHANGHAI)


def test_sacct_format_names_the_required_fields():
    fields = SACCT_FORMAT.split(",")
    assert {"JobID", "State", "Submit", "AllocTRES", "ReqTRES", "NodeList"} <= set(fields)


def test_a_reason_column_gives_a_pending_job_its_pending_reason():
    # sacct's Reason is "the last reason a job was blocked from running": only a pending job's
    # says why it waits now.
    text = "\n".join(
        [
            HEADER + "|Reason",
            sacct_row(
                job_id="7101",
                state="PENDING",
                start="Unknown",
                end="Unknown",
                alloc="",
                nodes="None assigned",
            )
            + "|QOSMaxGRESPerAccount",
            sacct_row(job_id="7102") + "|Resources",
        ]
    )
    jobs = by_id(parse_sacct(text + "\n", timezone=SHANGHAI))
    assert jobs["7101"].config["pending_reason"] == "QOSMaxGRESPerAccount"
    assert "pending_reason" not in jobs["7102"].config


# squeue


def test_squeue_command_uses_the_documented_format():
    assert squeue_command() == ["squeue", "-h", "-t", "PENDING", "-o", "%i|%j|%a|%u|%T|%V|%b|%D|%r"]
    assert SQUEUE_FORMAT == "%i|%j|%a|%u|%T|%V|%b|%D|%r"


def test_squeue_fixture_gives_pending_jobs_and_rejects_bad_rows():
    outcome = parse_squeue(fixture("squeue_pending.txt"), timezone=SHANGHAI)
    jobs = by_id(outcome)
    assert list(jobs) == ["4824", "4830_[5-9%2]", "4850", "4851", "4852", "4853"]
    assert {job.state for job in jobs.values()} == {"pending"}
    assert [(rejected.line_no, rejected.reason) for rejected in outcome.rejected] == [
        (7, "expected 9 fields (%i|%j|%a|%u|%T|%V|%b|%D|%r), got 6"),
        (8, "submit time (%V) 'N/A-time' is not a Slurm time (YYYY-MM-DDTHH:MM:SS)"),
    ]


def test_squeue_gpus_are_per_node_times_nodes():
    jobs = by_id(parse_squeue(fixture("squeue_pending.txt"), timezone=SHANGHAI))
    assert (jobs["4824"].gpu_count, jobs["4824"].node_count) == (64, 8)
    assert (jobs["4850"].gpu_count, jobs["4850"].gpu_model) == (32, "h100")
    assert jobs["4851"].gpu_count == 0  # N/A: no GPUs requested
    assert jobs["4853"].gpu_count == 8


def test_squeue_records_the_pending_reason_and_submit_time():
    jobs = by_id(parse_squeue(fixture("squeue_pending.txt"), timezone=SHANGHAI))
    job = jobs["4853"]
    assert job.config == {"pending_reason": "ReqNodeNotAvail, UnavailableNodes:gpu-[041-042]"}
    assert job.submitted_at == datetime(2026, 11, 3, 3, 30, tzinfo=UTC)
    assert (job.account, job.user_name, job.name) == ("pnc", "wu.tao", "pnc-short")
    assert jobs["4830_[5-9%2]"].config["pending_reason"] == "JobArrayTaskLimit"


def test_squeue_job_name_with_bars_is_recovered():
    job = by_id(parse_squeue(fixture("squeue_pending.txt"), timezone=SHANGHAI))["4852"]
    assert (job.name, job.account, job.user_name, job.gpu_count) == ("eval|a|b", "sim", "sun.hao", 2)


@pytest.mark.parametrize(
    ("tres", "gpus", "model"),
    [
        ("gres/gpu:8", 8, ""),
        ("gres:gpu:8", 8, ""),
        ("gres:gpu:h100:8", 8, "h100"),
        ("gres/gpu:h100:8", 8, "h100"),
        ("gres/gpu", 1, ""),
        ("gres/gpu:h100", 1, "h100"),
        ("gres/gpu=4", 4, ""),
        ("gres/gpu:4(IDX:0-3)", 4, ""),
        ("gres/gpu:2,gres/shard:4", 2, ""),
        ("N/A", 0, ""),
        ("", 0, ""),
    ],
)
def test_squeue_tres_per_node_spellings(tres, gpus, model):
    line = f"9001|job|vision|zhang.wei|PENDING|2026-11-03T10:00:00|{tres}|1|Priority"
    job = only_record(parse_squeue(line, timezone=SHANGHAI))
    assert (job.gpu_count, job.gpu_model) == (gpus, model)


def test_squeue_rejects_running_jobs_and_bad_node_counts():
    text = "\n".join(
        [
            "9001|job|vision|zhang.wei|RUNNING|2026-11-03T10:00:00|gres/gpu:8|1|None",
            "9002|job|vision|zhang.wei|PENDING|2026-11-03T10:00:00|gres/gpu:8|two|Priority",
            "9003|job|vision|zhang.wei|PENDING|2026-11-03T10:00:00|gres/gpu:a:b:8|1|Priority",
        ]
    )
    outcome = parse_squeue(text, timezone=SHANGHAI)
    assert outcome.records == []
    assert [rejected.reason for rejected in outcome.rejected] == [
        "state (%T) is 'RUNNING'; only PENDING jobs are read from squeue",
        "nodes (%D) 'two' is not a whole number",
        "tres_per_node (%b) 'gres/gpu:a:b:8' is not a GPU request such as gres/gpu:8",
    ]


def test_squeue_header_line_is_skipped():
    text = "JOBID|NAME|ACCOUNT|USER|STATE|SUBMIT_TIME|TRES_PER_NODE|NODES|REASON\n"
    text += "9001|job|vision|zhang.wei|PENDING|2026-11-03T10:00:00|gres/gpu:8|1|Priority\n"
    assert only_record(parse_squeue(text, timezone=SHANGHAI)).external_id == "9001"


def test_real_sacct_output_with_a_bar_in_a_job_name_keeps_the_job():
    # Captured from Slurm 22.05.8 (scripts/slurm-local.sh): sbatch -J 'eval|ckpt=3|lr 3e-4'.
    outcome = parse_sacct(fixture("sacct_bar_in_name_slurm22.txt"), timezone=UTC)
    assert outcome.rejected == []
    jobs = by_id(outcome)
    assert (jobs["1"].name, jobs["1"].account, jobs["1"].gpu_count) == ("eval|ckpt=3|lr 3e-4", "vision", 2)
    assert jobs["2"].name == "plain-train"
