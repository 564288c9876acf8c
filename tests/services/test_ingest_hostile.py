"""One poison record never stops a job source: rejected with its reason, the rest stored, the
watermark moved. Run these on PostgreSQL (``DATABASE_URL=postgres://...``): SQLite stores any
integer, so only PostgreSQL's ``integer`` column shows the ``DataError`` the checks prevent.
"""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.choices import JobSource, RunStatus, SourceKind
from efficiency.collectors.records import JOB_TEXT_LIMITS, JobRecord
from efficiency.collectors.slurm import SACCT_FORMAT
from efficiency.models import DataSource, Job
from efficiency.services.ingest import jobs_ingest
from efficiency.services.sources import jobs_csv_import, source_collect
from tests.factories import ClusterFactory, NodeFactory

NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
T0 = NOW - timedelta(days=1)
CSV_HEADER = "job_id,department,account,user,name,gpus,nodes,submit_time,start_time,end_time,state"


@pytest.fixture
def cluster(db, settings, tmp_path):
    settings.PORTAL_SOURCE_ROOTS = [str(tmp_path)]
    cluster = ClusterFactory(slug="c1")
    NodeFactory(cluster=cluster, hostname="gpu-001", gpu_count=8)
    return cluster


def _source(cluster, kind, path: Path, **config) -> DataSource:
    return DataSource.objects.create(
        cluster=cluster, kind=kind, name=kind, config={"path": str(path), **config}
    )


def _sacct(rows: list[tuple[str, int, str]]) -> str:
    lines = [SACCT_FORMAT.replace(",", "|")]
    for job_id, gpus, submit in rows:
        lines.append(
            f"{job_id}|train|acct|alice|gpu|COMPLETED|{submit}|{submit}|{submit}|00:10:00|1|"
            f"billing=8,cpu=8,gres/gpu={gpus},node=1||gpu-001|0:0"
        )
    return "\n".join(lines) + "\n"


def _k8s(items: list[tuple[str, int, int, str]]) -> str:
    def job(name, gpus, parallelism, created):
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "ml", "creationTimestamp": created},
            "spec": {
                "parallelism": parallelism,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "pytorch:2.4",
                                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                            }
                        ]
                    }
                },
            },
            "status": {},
        }

    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [job(*item) for item in items]})


def _csv(rows: list[tuple[str, int, str]]) -> str:
    lines = [CSV_HEADER]
    lines += [f"{job_id},,acct,alice,train,{gpus},1,{submit},,,pending" for job_id, gpus, submit in rows]
    return "\n".join(lines) + "\n"


def _good_time(fmt: str) -> str:
    return {
        "slurm": T0.replace(tzinfo=None).isoformat(timespec="seconds"),
        "k8s": T0.isoformat().replace("+00:00", "Z"),
        "csv": T0.isoformat(),
    }[fmt]


# --- The findings, one by one ---------------------------------------------------------------------


def test_kubernetes_job_with_parallelism_past_int32_is_rejected_and_the_others_stored(cluster, tmp_path):
    path = tmp_path / "jobs.json"
    created = _good_time("k8s")
    path.write_text(_k8s([("huge", 2, 2147483647, created), ("ok", 8, 1, created)]))
    source = _source(cluster, SourceKind.KUBERNETES, path)
    run = source_collect(source_id=source.pk, now=NOW)
    assert (run.status, run.stored, run.rejected) == (RunStatus.PARTIAL, 1, 1)
    assert run.rejects[0]["reason"] == "job ml/huge: GPU count 4294967294 is outside 0..2147483"
    assert list(Job.objects.values_list("external_id", flat=True)) == ["ml/ok"]
    source.refresh_from_db()
    assert source.watermark == NOW
    assert source.consecutive_failures == 0


def test_sacct_row_with_gres_gpu_99999999999_is_rejected_and_the_watermark_moves(cluster, tmp_path):
    path = tmp_path / "sacct.txt"
    submit = _good_time("slurm")
    path.write_text(_sacct([("101", 99999999999, submit), ("102", 8, submit)]))
    source = _source(cluster, SourceKind.SLURM, path)
    run = source_collect(source_id=source.pk, now=NOW)
    assert (run.stored, run.rejected) == (1, 1)
    assert run.rejects[0]["reason"] == "job 101: GPU count 99999999999 is outside 0..2147483"
    assert Job.objects.get().external_id == "102"
    source.refresh_from_db()
    assert source.watermark == NOW
    # The next run reads the same poison row and still moves on.
    again = source_collect(source_id=source.pk, now=NOW + timedelta(minutes=5))
    assert (again.status, again.rejected) == (RunStatus.PARTIAL, 1)
    source.refresh_from_db()
    assert source.watermark == NOW + timedelta(minutes=5)


def test_csv_rows_in_year_1_and_9999_are_rejected_with_their_reason(cluster):
    text = _csv(
        [
            ("a", 1, "0001-01-01T00:00:00+05:00"),
            ("b", 1, "9999-12-31T23:00:00-05:00"),
            ("c", 1, "9999-12-30T00:00:00+00:00"),
            ("d", 99999999999, _good_time("csv")),
            ("e", 2, _good_time("csv")),
        ]
    )
    run = jobs_csv_import(cluster=cluster, text=text, now=NOW)
    reasons = [item["reason"] for item in run.rejects if item["kind"] == "rejected"]
    assert reasons == [
        "column 'submit_time': value '0001-01-01T00:00:00+05:00' is out of range in UTC",
        "column 'submit_time': value '9999-12-31T23:00:00-05:00' is out of range in UTC",
        "job c: submit time 9999-12-30T00:00:00+00:00 is outside 1970-01-01 .. 2027-12-01",
        "job d: GPU count 99999999999 is outside 0..2147483",
    ]
    assert list(Job.objects.values_list("external_id", flat=True)) == ["e"]


def test_negative_gpu_count_is_rejected_and_long_names_are_cut_with_a_warning(cluster):
    base = {
        "source": JobSource.SLURM,
        "account": "acct",
        "user_name": "u" * 200,
        "state": "completed",
        "submitted_at": T0,
    }
    result = jobs_ingest(
        cluster=cluster,
        source=JobSource.SLURM,
        records=[
            JobRecord(external_id="neg", name="x", gpu_count=-8, **base),
            JobRecord(external_id="long", name="n" * 600, gpu_count=8, **base),
        ],
        now=NOW,
    )
    assert [r.reason for r in result.rejected] == ["job neg: GPU count -8 is outside 0..2147483"]
    assert "job long: name of 600 characters cut to 500" in [w.reason for w in result.warnings]
    assert "job long: user_name of 200 characters cut to 150" in [w.reason for w in result.warnings]
    stored = Job.objects.get()
    assert (stored.external_id, len(stored.name), len(stored.user_name)) == ("long", 500, 150)


def test_text_limits_agree_with_the_job_model():
    for name, limit in JOB_TEXT_LIMITS.items():
        assert Job._meta.get_field(name).max_length == limit, name


# --- The class of inputs: any GPU count, any moment, every job collector -------------------------

gpu_counts = st.one_of(
    st.integers(min_value=0, max_value=64),
    st.integers(min_value=-(2**63), max_value=2**70),
    st.sampled_from([2**31 - 1, 2**31, 2**32, 99999999999, -1]),
)
moments = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30))
offsets = st.sampled_from(["Z", "+05:00", "-05:00", "+14:00", "-12:00"])


def _render(fmt: str, rows):
    if fmt == "slurm":
        return _sacct(
            [(job_id, gpus, moment.isoformat(timespec="seconds")) for job_id, gpus, moment, _ in rows]
        )
    if fmt == "k8s":
        return _k8s(
            [
                (f"j{job_id}", 1, gpus, moment.isoformat(timespec="seconds") + off)
                for job_id, gpus, moment, off in rows
            ]
        )
    return _csv(
        [
            (job_id, gpus, moment.isoformat(timespec="seconds") + off.replace("Z", "+00:00"))
            for job_id, gpus, moment, off in rows
        ]
    )


def _external_id(fmt: str, job_id: str) -> str:
    return f"ml/j{job_id}" if fmt == "k8s" else job_id


@pytest.mark.parametrize("fmt", ["slurm", "k8s", "csv"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_row_is_stored_or_rejected_with_a_reason_and_good_rows_always_store(
    cluster, tmp_path, fmt, data
):
    hostile = data.draw(st.lists(st.tuples(gpu_counts, moments, offsets), min_size=1, max_size=5))
    rows = [(str(100 + i), gpus, moment, off) for i, (gpus, moment, off) in enumerate(hostile)]
    rows.append(("1", 8, T0.replace(tzinfo=None), "Z"))  # the good row
    Job.objects.all().delete()
    DataSource.objects.all().delete()
    text = _render(fmt, rows)
    if fmt == "csv":
        run = jobs_csv_import(cluster=cluster, text=text, now=NOW)
    else:
        path = tmp_path / f"{fmt}.txt"
        path.write_text(text)
        kind = SourceKind.SLURM if fmt == "slurm" else SourceKind.KUBERNETES
        source = _source(cluster, kind, path, timezone="Asia/Shanghai")
        run = source_collect(source_id=source.pk, now=NOW)
        source.refresh_from_db()
        assert source.watermark == NOW
    assert run.status in {RunStatus.OK, RunStatus.PARTIAL}
    stored = set(Job.objects.values_list("external_id", flat=True))
    assert _external_id(fmt, "1") in stored
    rejected = [item for item in run.rejects if item["kind"] == "rejected"]
    assert all(item["reason"] for item in rejected)
    assert len(stored) + len(rejected) == len(rows)
    for job_id, *_ in rows:
        if _external_id(fmt, job_id) not in stored:
            assert any(job_id in item["excerpt"] for item in rejected), job_id


@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=500), st.integers(min_value=0, max_value=100)),
        max_size=30,
    )
)
def test_merged_job_spans_mark_exactly_the_hours_of_each_job(spans):
    from efficiency.services.ingest import _span_hours

    hour = timedelta(hours=1)
    pairs = [(T0 + start * hour, T0 + (start + length) * hour) for start, length in spans]
    naive = {first + i * hour for first, last in pairs for i in range(int((last - first) / hour) + 1)}
    assert _span_hours(pairs) == naive


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    readings=st.lists(
        st.tuples(
            st.one_of(st.integers(min_value=-(2**62), max_value=2**62), st.just(-99999999999999999)),
            st.one_of(st.none(), st.integers(min_value=-(2**40), max_value=2**40)),
            st.lists(st.tuples(st.integers(min_value=0, max_value=2**40), st.floats(0, 10)), max_size=2),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_every_gpu_reading_is_stored_or_rejected_and_a_good_one_always_stores(cluster, readings):
    from efficiency.collectors.records import GpuReading
    from efficiency.models import GpuSample
    from efficiency.services.ingest import gpu_readings_ingest

    GpuSample.objects.all().delete()
    good_ms = int((NOW - timedelta(minutes=1)).timestamp() * 1000)
    batch = [GpuReading("gpu-001", 0, good_ms, util_pct=50.0)]
    batch += [
        GpuReading("gpu-001", 1 + i % 7, ts, util_pct=1.0, xid_last=xid, xid_counts=tuple(counts))
        for i, (ts, xid, counts) in enumerate(readings)
    ]
    result = gpu_readings_ingest(cluster=cluster, readings=batch, interval_s=60, now=NOW)
    assert GpuSample.objects.filter(gpu_index=0).exists()
    assert all(item.reason for item in result.rejected)
    assert result.stored + result.duplicates + sum("sample at" in r.reason for r in result.rejected) == len(
        batch
    )
