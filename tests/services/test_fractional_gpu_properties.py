"""Invariants of GPU-hours with shared GPUs and with and without node placement.

- Allocated GPU-hours by department over a range == the sum over its jobs of
  ``gpu_milli`` / 1000 x the hours each ran, clipped to the range: whether the scheduler named
  the job's nodes or not (placement unknown), as long as no node is claimed beyond its GPUs.
- A job's GPU-hours never exceed its GPUs x its run time in the range, even on nodes the
  scheduler data over-subscribes (the rollup scales those down to what the node has).
- Hostile GPU shares (negative, above 1000 per GPU, not a number, huge) are rejected with a
  reason and the rest of the delivery is kept.
"""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.choices import JobSource, JobState, Role
from efficiency.collectors.records import JobRecord
from efficiency.models import Job, JobHour, Node, RollupDirtyHour, ScopeHour
from efficiency.selectors import usage
from efficiency.services.ingest import jobs_ingest
from efficiency.services.rollups import rollup_hours_compute
from efficiency.services.sources import jobs_csv_import
from efficiency.timeranges import TimeRange
from tests.factories import ClusterFactory, DepartmentFactory, NodeFactory, UserFactory

T0 = datetime(2026, 11, 2, tzinfo=UTC)
NOW = T0 + timedelta(hours=30)
RANGE = TimeRange("custom", T0 + timedelta(hours=4), T0 + timedelta(hours=20))
ALL_HOURS = [T0 + timedelta(hours=h) for h in range(31)]


@pytest.fixture
def world(db):
    cluster = ClusterFactory(slug="p")
    departments = [DepartmentFactory(code="vision"), DepartmentFactory(code="radar")]
    committee = UserFactory(role=Role.COMMITTEE)
    return cluster, departments, committee


jobs_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "department": st.sampled_from(["vision", "radar"]),
            "gpus": st.integers(1, 8),
            "milli_per_gpu": st.one_of(st.just(1000), st.integers(1, 1000)),
            "start_min": st.integers(0, 28 * 60),
            "run_min": st.one_of(st.none(), st.integers(1, 24 * 60)),  # None: still running
            "placement": st.sampled_from(["none", "own", "shared-0", "shared-1"]),
        }
    ),
    min_size=1,
    max_size=8,
)


def _run(cluster, drawn: list[dict]) -> list[Job]:
    Job.objects.all().delete()
    Node.objects.all().delete()
    JobHour.objects.all().delete()
    ScopeHour.objects.all().delete()
    for name in ("shared-0", "shared-1"):  # one GPU each: easily over-subscribed
        NodeFactory(cluster=cluster, hostname=name, gpu_count=1, owner_department=None)
    records = []
    for index, job in enumerate(drawn):
        node_names = ()
        if job["placement"] == "own":
            node_names = (f"own-{index}",)
            NodeFactory(cluster=cluster, hostname=f"own-{index}", gpu_count=8, owner_department=None)
        elif job["placement"] != "none":
            node_names = (job["placement"],)
        started = T0 + timedelta(minutes=job["start_min"])
        ended = None if job["run_min"] is None else min(started + timedelta(minutes=job["run_min"]), NOW)
        records.append(
            JobRecord(
                source=JobSource.CSV,
                external_id=f"j{index}",
                account="",
                user_name="u",
                name="n",
                state=JobState.RUNNING if ended is None else JobState.COMPLETED,
                gpu_count=job["gpus"],
                gpu_milli=job["gpus"] * job["milli_per_gpu"],
                submitted_at=started,
                started_at=started,
                ended_at=ended,
                node_count=len(node_names),
                node_names=node_names,
                config={"department_code": job["department"]},
            )
        )
    result = jobs_ingest(cluster=cluster, source=JobSource.CSV, records=records, now=NOW)
    assert result.rejected == []
    rollup_hours_compute(cluster=cluster, hours=ALL_HOURS, now=NOW)
    RollupDirtyHour.objects.all().delete()
    return list(Job.objects.select_related("department"))


def _clipped_hours(job: Job) -> float:
    start = max(job.started_at, RANGE.start)
    end = min(job.ended_at or NOW, RANGE.end, NOW)
    return max(0.0, (end - start).total_seconds() / 3600)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=jobs_strategy)
def test_department_gpu_hours_are_the_jobs_shares_times_their_clipped_run_time(world, drawn):
    cluster, departments, committee = world
    drawn = [dict(job, placement="none" if job["placement"].startswith("shared") else job["placement"])
             for job in drawn]  # fmt: skip
    jobs = _run(cluster, drawn)
    expected = {department.code: 0.0 for department in departments}
    unplaced = {department.code: 0.0 for department in departments}
    for job in jobs:
        expected[job.department.code] += job.gpu_milli / 1000 * _clipped_hours(job)
        if not job.nodes.exists():
            unplaced[job.department.code] += job.gpu_milli / 1000 * _clipped_hours(job)
    rows = usage.department_usage_list(user=committee, time_range=RANGE)
    assert {r.department.code: r.totals.allocated_gpu_hours for r in rows} == pytest.approx(
        expected, abs=1e-6
    )
    assert {r.department.code: r.unplaced_gpu_hours for r in rows} == pytest.approx(unplaced, abs=1e-6)
    total = usage.cluster_usage(user=committee, time_range=RANGE).allocated_gpu_hours
    assert total == pytest.approx(sum(expected.values()), abs=1e-6)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=jobs_strategy)
def test_a_job_never_holds_more_than_its_gpus_times_its_run_time(world, drawn):
    cluster, _, committee = world
    jobs = _run(cluster, drawn)
    held = {j.job.pk: j.gpu_hours for j in usage.job_usage_list(user=committee, time_range=RANGE, limit=None)}
    for job in jobs:
        most = job.gpu_milli / 1000 * _clipped_hours(job)
        assert held.get(job.pk, 0.0) <= most + 1e-9
        assert held.get(job.pk, 0.0) <= job.gpu_count * _clipped_hours(job) + 1e-9


# --- Hostile GPU shares ----------------------------------------------------------------------------

HEADER = "job_id,department,account,user,name,gpus,nodes,submit_time,start_time,end_time,state,gpu_milli"


def _row(job_id: str, gpus: str, milli: str) -> str:
    times = "2026-11-02T00:00:00Z,2026-11-02T00:00:00Z,2026-11-02T02:00:00Z"
    return f"{job_id},vision,,u,n,{gpus},0,{times},completed,{milli}"


def test_hostile_gpu_shares_in_a_csv_are_rejected_with_the_reason_and_the_rest_kept(world):
    cluster, _, _ = world
    text = "\n".join(
        [
            HEADER,
            _row("half", "1", "500"),
            _row("negative", "1", "-500"),
            _row("too-much", "2", "1001"),
            _row("words", "1", "half"),
            _row("huge", "8", "9" * 40),
            _row("decimal", "1", "0.5"),
            _row("no-gpus", "0", "500"),
            _row("whole", "4", ""),
        ]
    )
    run = jobs_csv_import(cluster=cluster, text=text + "\n", now=NOW)
    reasons = {item["reason"] for item in run.rejects if item["kind"] == "rejected"}
    assert reasons == {
        "column 'gpu_milli': value '-500' is not a whole number ≥ 0",
        "column 'gpu_milli': value '1001' is more than 1000",
        "column 'gpu_milli': value 'half' is not a whole number ≥ 0",
        f"column 'gpu_milli': value '{'9' * 40}' is more than 1000",
        "column 'gpu_milli': value '0.5' is not a whole number ≥ 0",
        "column 'gpu_milli': value '500' for a job without GPUs (gpus is 0)",
    }
    kept = {job.external_id: (job.gpu_count, job.gpu_milli, job.gpu_hours) for job in Job.objects.all()}
    # half: 0.5 GPU x 2 h = 1 GPU-hour; whole: 4 GPUs x 2 h = 8 GPU-hours
    assert kept == {"half": (1, 500, 1.0), "whole": (4, 4000, 8.0)}


@pytest.mark.parametrize(
    ("gpus", "share", "reason"),
    [
        (1, -1, "job bad: GPU share -1 thousandths is outside 0..1000 (at most 1000 for each of its 1 GPUs)"),
        (
            2,
            2001,
            "job bad: GPU share 2001 thousandths is outside 0..2000 (at most 1000 for each of its 2 GPUs)",
        ),
        (
            1,
            "500",
            "job bad: GPU share '500' thousandths is outside 0..1000 (at most 1000 for each of its 1 GPUs)",
        ),
        (
            1,
            0.5,
            "job bad: GPU share 0.5 thousandths is outside 0..1000 (at most 1000 for each of its 1 GPUs)",
        ),
        (
            8,
            2**64,
            f"job bad: GPU share {2**64} thousandths is outside 0..8000 "
            "(at most 1000 for each of its 8 GPUs)",
        ),
        (3_000_000, None, "job bad: GPU count 3000000 is outside 0..2147483"),
    ],
)
def test_hostile_gpu_shares_from_any_collector_are_rejected_and_the_rest_kept(world, gpus, share, reason):
    cluster, _, _ = world
    base = {
        "source": JobSource.SLURM,
        "account": "",
        "user_name": "u",
        "name": "n",
        "state": JobState.COMPLETED,
        "submitted_at": T0,
        "started_at": T0,
        "ended_at": T0 + timedelta(hours=1),
        "config": {"department_code": "vision"},
    }
    result = jobs_ingest(
        cluster=cluster,
        source=JobSource.SLURM,
        records=[
            JobRecord(external_id="bad", gpu_count=gpus, gpu_milli=share, **base),
            JobRecord(external_id="good", gpu_count=2, gpu_milli=1500, **base),
        ],
        now=NOW,
    )
    assert [r.reason for r in result.rejected] == [reason]
    good = Job.objects.get()
    assert (good.external_id, good.gpus_text, good.gpu_hours) == ("good", "1.5", 1.5)


def _record(share: int | None, state=JobState.COMPLETED, **extra) -> JobRecord:
    fields = {
        "source": JobSource.CSV,
        "external_id": "j1",
        "account": "",
        "user_name": "u",
        "name": "n",
        "state": state,
        "gpu_count": 1,
        "gpu_milli": share,
        "submitted_at": T0 + timedelta(hours=4),
        "started_at": T0 + timedelta(hours=4),
        "ended_at": T0 + timedelta(hours=6),
        "config": {"department_code": "vision"},
    }
    fields.update(extra)
    return JobRecord(**fields)


def _vision_gpu_hours(committee) -> float:
    [vision] = [
        row
        for row in usage.department_usage_list(user=committee, time_range=RANGE)
        if row.department.code == "vision"
    ]
    return vision.totals.allocated_gpu_hours


def _deliver(cluster, *records) -> None:
    jobs_ingest(cluster=cluster, source=JobSource.CSV, records=list(records), now=NOW)
    hours = list(RollupDirtyHour.objects.values_list("hour", flat=True))
    RollupDirtyHour.objects.all().delete()
    rollup_hours_compute(cluster=cluster, hours=hours, now=NOW)


def test_a_changed_share_recomputes_the_hours_and_a_late_stale_record_changes_nothing(world):
    cluster, _, committee = world
    _deliver(cluster, _record(None))  # whole: 1 GPU x 2 h
    assert _vision_gpu_hours(committee) == pytest.approx(2.0)
    _deliver(cluster, _record(250))  # the scheduler now says a quarter of it: 0.25 x 2 h
    assert _vision_gpu_hours(committee) == pytest.approx(0.5)
    # a pending record of the same job delivered late (out of order) with another share: kept as it was
    _deliver(cluster, _record(1000, state=JobState.PENDING, started_at=None, ended_at=None))
    assert Job.objects.get().gpu_milli == 250
    assert _vision_gpu_hours(committee) == pytest.approx(0.5)
    # the same record twice in one delivery: the last word wins, stored once
    _deliver(cluster, _record(500), _record(750))
    assert (Job.objects.count(), Job.objects.get().gpu_milli) == (1, 750)
    assert _vision_gpu_hours(committee) == pytest.approx(1.5)
