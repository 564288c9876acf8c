"""Ingest services on a real database: idempotent, and bad records rejected one by one."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from efficiency.choices import JobSource, JobState, MappingKind
from efficiency.collectors.records import GpuReading, JobRecord, LogLines
from efficiency.models import DataSource, GpuSample, Job, LogChunk, Node, RollupDirtyHour
from efficiency.services.ingest import gpu_readings_ingest, gpu_samples_write, jobs_ingest, log_chunks_ingest
from tests.factories import ClusterFactory, DepartmentFactory, DepartmentMappingFactory, NodeFactory

NOW = datetime(2026, 11, 30, 8, 30, tzinfo=UTC)
T0 = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


@pytest.fixture
def cluster(db):
    cluster = ClusterFactory(slug="c1")
    NodeFactory(cluster=cluster, hostname="gpu-001", gpu_count=8)
    return cluster


def reading(minute: int, gpu: int = 0, host: str = "gpu-001", **values) -> GpuReading:
    values.setdefault("util_pct", 90.0)
    values.setdefault("gr_engine_active_pct", 40.0)
    return GpuReading(hostname=host, gpu_index=gpu, timestamp_ms=ms(T0 + timedelta(minutes=minute)), **values)


def test_readings_are_stored_once_even_when_delivered_twice(cluster):
    batch = [reading(m, gpu) for m in range(3) for gpu in range(8)]
    first = gpu_readings_ingest(cluster=cluster, readings=batch, interval_s=60, now=NOW)
    again = gpu_readings_ingest(cluster=cluster, readings=batch, interval_s=60, now=NOW)
    assert (first.received, first.stored, first.duplicates) == (24, 24, 0)
    assert (again.received, again.stored, again.duplicates) == (24, 0, 24)
    assert GpuSample.objects.count() == 24
    assert list(RollupDirtyHour.objects.values_list("hour", flat=True)) == [T0]


def test_a_partly_stored_delivery_stores_only_its_new_rows(cluster):
    gpu_readings_ingest(
        cluster=cluster,
        readings=[reading(m, gpu) for m in (0, 1) for gpu in range(8)],
        interval_s=60,
        now=NOW,
    )
    overlap = gpu_readings_ingest(
        cluster=cluster,
        readings=[reading(m, gpu) for m in (1, 2) for gpu in range(8)],
        interval_s=60,
        now=NOW,
    )
    assert (overlap.stored, overlap.duplicates) == (8, 8)
    assert GpuSample.objects.count() == 24


def test_every_value_is_stored_as_it_was_read(cluster):
    exact = {
        "util_pct": 37.5,
        "gr_engine_active_pct": 12.345678901234567,
        "sm_active_pct": None,
        "fb_used_mib": 81_559,  # an int in a float column
        "power_w": 699.125,
        "temp_c": 0.0,
        "ecc_dbe_total": 3.0,
        "xid_last": 79,
    }
    at = T0 + timedelta(minutes=7, seconds=5, milliseconds=123)
    stored = [
        GpuReading(hostname="gpu-001", gpu_index=5, timestamp_ms=ms(at), **exact),
        GpuReading(hostname="gpu-001", gpu_index=6, timestamp_ms=ms(at)),  # nothing reported
    ]
    gpu_readings_ingest(cluster=cluster, readings=stored, interval_s=15, now=NOW)
    row = GpuSample.objects.get(gpu_index=5)
    assert (row.ts, row.interval_s) == (at, 15)
    assert {name: getattr(row, name) for name in exact} == exact
    empty = GpuSample.objects.get(gpu_index=6)
    assert all(getattr(empty, name) is None for name in exact)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the COPY paths are PostgreSQL's")
def test_rows_the_direct_copy_collides_with_are_stored_once(cluster):
    # Nothing is stored at this instant, so the rows are COPYed straight into the table, where a
    # key given twice fails the COPY on the primary key: the case of a concurrent writer storing
    # some of them between the check and the COPY. The write must fall back and store each once.
    node_id = cluster.nodes.get().pk
    at = ms(T0)
    values = (50.0, None, None, 1.0, 2.0, 3.0, None, None)
    rows = [(node_id, 0, at, values), (node_id, 1, at, values), (node_id, 0, at, values)]
    assert gpu_samples_write(rows, interval_s=60) == 2
    assert sorted(GpuSample.objects.values_list("gpu_index", flat=True)) == [0, 1]
    assert gpu_samples_write(rows, interval_s=60) == 0  # and a replay stores nothing


def test_xid_counts_are_returned_to_the_caller_and_not_recorded_as_faults(cluster):
    from efficiency.models import FaultSignal
    from efficiency.services.ingest import XidCount

    node_id = cluster.nodes.get().pk
    result = gpu_readings_ingest(
        cluster=cluster,
        readings=[reading(0, gpu=2, xid_counts=((79, 1.0), (48, 0.0))), reading(0, gpu=3)],
        interval_s=60,
        now=NOW,
    )
    assert result.xid_counts == [XidCount(node_id, 2, 79, ms(T0))]
    assert result.stored == 2
    assert not FaultSignal.objects.exists()


def test_out_of_order_readings_are_all_kept(cluster):
    gpu_readings_ingest(
        cluster=cluster, readings=[reading(5), reading(1), reading(3)], interval_s=60, now=NOW
    )
    assert sorted(s.ts.minute for s in GpuSample.objects.all()) == [1, 3, 5]


def test_an_unknown_node_is_discovered_from_its_readings_and_an_unknown_gpu_rejected(cluster):
    result = gpu_readings_ingest(
        cluster=cluster,
        readings=[
            reading(0),
            reading(0, host="ghost-9"),
            reading(0, host="ghost-9", gpu=1),
            reading(1, gpu=8),
        ],
        interval_s=60,
        now=NOW,
    )
    assert result.stored == 3
    assert result.discovered == ["ghost-9"]
    assert [r.reason for r in result.rejected] == ["GPU 8 does not exist on gpu-001 (8 GPUs)"]
    ghost = Node.objects.get(hostname="ghost-9")
    assert (ghost.state, ghost.gpu_count) == ("discovered", 2)


def test_clock_skew_and_too_old_samples_are_rejected(cluster, settings):
    settings.PORTAL_RAW_RETENTION_DAYS = 7
    future = GpuReading("gpu-001", 0, ms(NOW + timedelta(minutes=10)), util_pct=1.0)
    ancient = GpuReading("gpu-001", 0, ms(NOW - timedelta(days=8)), util_pct=1.0)
    slightly_ahead = GpuReading("gpu-001", 0, ms(NOW + timedelta(minutes=2)), util_pct=1.0)
    result = gpu_readings_ingest(
        cluster=cluster, readings=[future, ancient, slightly_ahead], interval_s=60, now=NOW
    )
    assert result.stored == 1
    assert any("in the future (clock skew?)" in r.reason for r in result.rejected)
    assert any("older than retention" in r.reason for r in result.rejected)


def test_mig_instances_are_averaged_into_their_gpu(cluster):
    result = gpu_readings_ingest(
        cluster=cluster,
        readings=[
            reading(0, gr_engine_active_pct=20.0, util_pct=None, mig_instance="1"),
            reading(0, gr_engine_active_pct=60.0, util_pct=None, mig_instance="2"),
        ],
        interval_s=60,
        now=NOW,
    )
    assert result.stored == 1
    assert GpuSample.objects.get().gr_engine_active_pct == 40.0


@pytest.fixture
def mapped(cluster):
    vision = DepartmentFactory(code="vision")
    radar = DepartmentFactory(code="radar")
    DepartmentMappingFactory(kind=MappingKind.SLURM_ACCOUNT, value="acct-v", department=vision)
    DepartmentMappingFactory(kind=MappingKind.SLURM_ACCOUNT, value="acct-r", department=radar)
    # A cluster-specific mapping wins over the global one.
    DepartmentMappingFactory(
        kind=MappingKind.SLURM_ACCOUNT, value="acct-r", department=vision, cluster=cluster
    )
    return cluster


def job(external_id="100", state=JobState.RUNNING, account="acct-v", **kw) -> JobRecord:
    base = {
        "source": JobSource.SLURM,
        "external_id": external_id,
        "account": account,
        "user_name": "alice",
        "name": "train",
        "state": state,
        "gpu_count": 8,
        "submitted_at": T0,
        "started_at": T0 + timedelta(minutes=5),
        "node_names": ("gpu-001",),
        "node_count": 1,
    }
    base.update(kw)
    return JobRecord(**base)


def test_jobs_are_upserted_with_department_and_nodes(mapped):
    result = jobs_ingest(
        cluster=mapped, source=JobSource.SLURM, records=[job(), job("101", account="acct-r")], now=NOW
    )
    assert result.stored == 2
    jobs = {j.external_id: j for j in Job.objects.all()}
    assert jobs["100"].department.code == "vision"
    assert jobs["101"].department.code == "vision"  # cluster-specific mapping
    assert [n.hostname for n in jobs["100"].nodes.all()] == ["gpu-001"]


def test_same_job_twice_changes_nothing_and_counts_a_duplicate(mapped):
    jobs_ingest(cluster=mapped, source=JobSource.SLURM, records=[job()], now=NOW)
    before = Job.objects.get().updated_at
    again = jobs_ingest(cluster=mapped, source=JobSource.SLURM, records=[job()], now=NOW)
    assert (again.stored, again.duplicates) == (0, 1)
    assert Job.objects.get().updated_at == before


def test_finished_job_is_not_reopened_by_a_late_running_record(mapped):
    done = job(state=JobState.COMPLETED, ended_at=T0 + timedelta(hours=1))
    jobs_ingest(cluster=mapped, source=JobSource.SLURM, records=[done], now=NOW)
    jobs_ingest(cluster=mapped, source=JobSource.SLURM, records=[job(state=JobState.RUNNING)], now=NOW)
    assert Job.objects.get().state == JobState.COMPLETED


def test_running_job_is_updated_when_it_finishes(mapped):
    jobs_ingest(cluster=mapped, source=JobSource.SLURM, records=[job()], now=NOW)
    done = job(state=JobState.FAILED, ended_at=T0 + timedelta(hours=1))
    result = jobs_ingest(cluster=mapped, source=JobSource.SLURM, records=[done], now=NOW)
    assert result.stored == 1
    assert Job.objects.get().state == JobState.FAILED


def test_unmapped_account_and_unknown_node_are_warnings_not_losses(mapped):
    result = jobs_ingest(
        cluster=mapped,
        source=JobSource.SLURM,
        records=[job(account="nobody", node_names=("gpu-001", "gpu-999"))],
        now=NOW,
    )
    assert result.stored == 1
    assert Job.objects.get().department is None
    assert sorted(w.reason for w in result.warnings) == [
        "account or namespace 'nobody' maps to no department (1 jobs); add a mapping",
        "jobs ran on unknown node 'gpu-999' (1 jobs)",
    ]


def test_csv_department_code_wins_over_account(mapped):
    record = job(account="acct-v", config={"department_code": "radar"}, source=JobSource.CSV)
    jobs_ingest(cluster=mapped, source=JobSource.CSV, records=[record], now=NOW)
    assert Job.objects.get().department.code == "radar"


def test_log_chunks_are_stored_once_and_linked_to_their_job(mapped):
    jobs_ingest(cluster=mapped, source=JobSource.SLURM, records=[job()], now=NOW)
    source = DataSource.objects.create(cluster=mapped, kind="log_files", name="logs")
    chunks = [
        LogLines("100/rank-0.log", "1:2", 0, 10, "a\nb\n", 2, job_external_id="100", rank=0),
        LogLines("100/rank-0.log", "1:2", 10, 20, "c\x00\n", 1, job_external_id="100", rank=0),
    ]
    first = log_chunks_ingest(source=source, chunks=chunks, now=NOW)
    second = log_chunks_ingest(source=source, chunks=chunks, now=NOW)
    assert (first.stored, second.stored, second.duplicates) == (2, 0, 2)
    stored = LogChunk.objects.order_by("start_offset")
    assert [c.job.external_id for c in stored] == ["100", "100"]
    assert "\x00" not in stored[1].text


def test_of_a_longer_replay_of_a_log_chunk_the_lines_after_the_stored_ones_are_stored(mapped):
    source = DataSource.objects.create(cluster=mapped, kind="log_files", name="logs")
    short = LogLines("7/rank-0.log", "1:2", 0, 4, "a\nb\n", 2)
    longer = LogLines("7/rank-0.log", "1:2", 0, 6, "a\nb\nc\n", 3)
    log_chunks_ingest(source=source, chunks=[short], now=NOW)
    first_id = LogChunk.objects.get().pk
    result = log_chunks_ingest(source=source, chunks=[longer], now=NOW)
    assert result.stored == 1
    # The stored chunk is left as it was (the workers read it once, by id); the new line is a
    # chunk of its own, after it.
    stored = [
        (c.pk == first_id, c.start_offset, c.end_offset, c.text, c.line_count)
        for c in LogChunk.objects.order_by("start_offset")
    ]
    assert stored == [(True, 0, 4, "a\nb\n", 2), (False, 4, 6, "c\n", 1)]
    assert log_chunks_ingest(source=source, chunks=[short, longer], now=NOW).duplicates == 2
    # Longer again, past both: only what neither holds is new.
    longest = LogLines("7/rank-0.log", "1:2", 0, 10, "a\nb\nc\nd\ne\n", 5)
    assert log_chunks_ingest(source=source, chunks=[longest], now=NOW).stored == 1
    assert LogChunk.objects.order_by("start_offset").last().text == "d\ne\n"
    assert "".join(LogChunk.objects.order_by("start_offset").values_list("text", flat=True)) == longest.text


def test_a_replay_whose_text_does_not_match_its_offsets_is_cut_by_lines_or_refused(mapped):
    source = DataSource.objects.create(cluster=mapped, kind="log_files", name="logs")
    log_chunks_ingest(source=source, chunks=[LogLines("7/rank-0.log", "1:2", 0, 4, "a\nb\n", 2)], now=NOW)
    # From the stored chunk's start: its two lines are known, so what follows them is stored.
    dishonest = LogLines("7/rank-0.log", "1:2", 0, 100, "a\nb\nc\n", 3)
    assert log_chunks_ingest(source=source, chunks=[dishonest], now=NOW).stored == 1
    assert LogChunk.objects.order_by("start_offset").last().text == "c\n"
    # From inside a stored chunk: nothing says where its lines end.
    inside = LogLines("7/rank-0.log", "1:2", 2, 200, "b\nc\nd\n", 3)
    result = log_chunks_ingest(source=source, chunks=[inside], now=NOW)
    assert result.stored == 0
    assert [r.reason for r in result.rejected] == [
        "chunk at 2 overlaps what was delivered before up to 100, but its text does not end a line there: "
        "not stored"
    ]
    assert LogChunk.objects.count() == 2


def test_a_running_jobs_elapsed_time_does_not_recompute_its_past_hours(mapped):
    long_ago = NOW - timedelta(days=2)
    jobs_ingest(cluster=mapped, source=JobSource.SLURM, records=[job(started_at=long_ago)], now=NOW)
    RollupDirtyHour.objects.all().delete()
    ticking = job(started_at=long_ago, config={"elapsed_s": 172_860})
    assert jobs_ingest(cluster=mapped, source=JobSource.SLURM, records=[ticking], now=NOW).stored == 1
    assert not RollupDirtyHour.objects.exists()
    # The job ends: its span changed, so its hours are recomputed.
    done = job(started_at=long_ago, state=JobState.COMPLETED, ended_at=NOW - timedelta(hours=1))
    jobs_ingest(cluster=mapped, source=JobSource.SLURM, records=[done], now=NOW)
    assert RollupDirtyHour.objects.count() == 49  # from two days ago to now, hour by hour
