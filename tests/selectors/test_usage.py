"""Usage numbers from samples and jobs through ingest, rollups and selectors, checked by hand.

Cluster over [T0, T0 + 2 h), now = T0 + 1 day:
- gpu-001 (vision, 8 GPUs): hour 0 all GPUs sampled at 50% busy; hour 1 only GPUs 0-3 sampled,
  at 100% busy (coverage 50%). A radar job holds all 8 GPUs from 0:30 to 1:30.
- gpu-002 (radar) is added at T0 + 12 h: nothing available in the range.
- gpu-003 (vision) is retired at T0 + 6 h and sends no samples: available but not covered.
"""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from efficiency.choices import JobSource, JobState, MappingKind
from efficiency.collectors.records import GpuReading, JobRecord
from efficiency.forms import TimeRange
from efficiency.selectors import usage
from efficiency.services.ingest import gpu_readings_ingest, jobs_ingest
from efficiency.services.rollups import rollups_refresh
from tests.factories import ClusterFactory, DepartmentFactory, DepartmentMappingFactory, NodeFactory

T0 = datetime(2026, 11, 20, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=1)
RANGE = TimeRange("custom", T0, T0 + timedelta(hours=2))


def _readings(host, start, gpus, activity_pct, minutes=60):
    return [
        GpuReading(
            host,
            gpu,
            int((start + timedelta(minutes=m)).timestamp() * 1000),
            gr_engine_active_pct=activity_pct,
        )
        for m in range(minutes)
        for gpu in gpus
    ]


@pytest.fixture
def world(db, settings):
    settings.PORTAL_RAW_RETENTION_DAYS = 3650
    cluster = ClusterFactory(slug="hand")
    vision, radar = DepartmentFactory(code="vision"), DepartmentFactory(code="radar")
    DepartmentMappingFactory(kind=MappingKind.SLURM_ACCOUNT, value="radar", department=radar)
    NodeFactory(cluster=cluster, hostname="gpu-001", owner_department=vision)
    NodeFactory(
        cluster=cluster, hostname="gpu-002", owner_department=radar, in_service_from=T0 + timedelta(hours=12)
    )
    NodeFactory(
        cluster=cluster, hostname="gpu-003", owner_department=vision, in_service_until=T0 + timedelta(hours=6)
    )
    readings = _readings("gpu-001", T0, range(8), 50.0) + _readings(
        "gpu-001", T0 + timedelta(hours=1), range(4), 100.0
    )
    gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=60, now=NOW)
    job = JobRecord(
        source=JobSource.SLURM, external_id="j1", account="radar", user_name="u", name="radar-train",
        state=JobState.COMPLETED, gpu_count=8, submitted_at=T0,
        started_at=T0 + timedelta(minutes=30), ended_at=T0 + timedelta(minutes=90),
        node_names=("gpu-001",), node_count=1,
    )  # fmt: skip
    jobs_ingest(cluster=cluster, source=JobSource.SLURM, records=[job], now=NOW)
    rollups_refresh(now=NOW)
    return cluster, vision, radar


def test_cluster_totals(world, org_committee):
    totals = usage.cluster_usage(user=org_committee, time_range=RANGE)
    assert totals.available_gpu_hours == 32  # gpu-001 and gpu-003, 8 GPUs x 2 h each
    assert totals.sampled_gpu_hours == 12  # 8 + 4
    assert totals.busy_gpu_hours == 8  # 4 + 4
    assert totals.allocated_gpu_hours == 8  # the radar job: 8 GPUs x 1 h
    assert totals.utilization == pytest.approx(8 / 12)  # not 8 / 32: missing data is not idle
    assert totals.allocation_rate == pytest.approx(8 / 32)
    assert totals.coverage == pytest.approx(12 / 32)


def test_a_range_that_cuts_a_job_counts_only_its_part(world, org_committee):
    second_hour = TimeRange("custom", T0 + timedelta(hours=1), T0 + timedelta(hours=2))
    assert usage.cluster_usage(user=org_committee, time_range=second_hour).allocated_gpu_hours == 4


def test_departments_own_capacity_and_use_their_jobs_time(world, org_committee):
    rows = {
        row.department.code: row.totals
        for row in usage.department_usage_list(user=org_committee, time_range=RANGE)
    }
    assert rows["vision"].available_gpu_hours == 32
    assert rows["vision"].allocated_gpu_hours == 0
    assert rows["vision"].utilization == 0.0
    # radar borrowed vision's node: it used 8 GPU-hours but owned none in the range.
    assert rows["radar"].available_gpu_hours == 0
    assert rows["radar"].allocated_gpu_hours == 8
    assert rows["radar"].allocation_rate is None


def test_heatmap_shows_uncovered_hours_as_missing(world, org_committee):
    _, vision, _ = world
    heatmap = usage.department_heatmap(user=org_committee, department=vision, time_range=RANGE)
    assert heatmap.nodes == ["gpu-001", "gpu-003"]
    assert heatmap.values_pct == [[50.0, 100.0], [None, None]]


def test_job_efficiency_and_series(world, org_committee):
    _, _, radar = world
    (row,) = usage.job_usage_list(user=org_committee, time_range=RANGE, department=radar)
    assert row.job.external_id == "j1"
    assert row.gpu_hours == 8
    assert row.efficiency == 1.0  # the node's busy time in its hours, capped at what it held
    series = usage.cluster_usage_series(user=org_committee, time_range=RANGE)
    assert [round(p.gpus_allocated, 1) for p in series] == [4.0, 4.0]
    assert [p.gpus_available for p in series] == [16.0, 16.0]


def test_idle_allocation_found_with_its_wasted_gpu_hours(world, org_committee):
    cluster, vision, _ = world
    NodeFactory(cluster=cluster, hostname="gpu-004", owner_department=vision)
    start = T0 + timedelta(hours=3)
    gpu_readings_ingest(
        cluster=cluster,
        readings=_readings("gpu-004", start, range(8), 0.0, minutes=180),
        interval_s=60,
        now=NOW,
    )
    DepartmentMappingFactory(kind=MappingKind.SLURM_ACCOUNT, value="vision", department=vision)
    job = JobRecord(
        source=JobSource.SLURM, external_id="j2", account="vision", user_name="idler", name="notebook",
        state=JobState.COMPLETED, gpu_count=8, submitted_at=start, started_at=start,
        ended_at=start + timedelta(hours=3), node_names=("gpu-004",), node_count=1,
    )  # fmt: skip
    jobs_ingest(cluster=cluster, source=JobSource.SLURM, records=[job], now=NOW)
    rollups_refresh(now=NOW)
    day = TimeRange("custom", T0, T0 + timedelta(days=1))
    (idle,) = usage.idle_allocation_list(user=org_committee, time_range=day, department=vision)
    assert (idle.job.external_id, idle.idle_hours, idle.wasted_gpu_hours) == ("j2", 3, 24.0)


def test_a_department_head_sees_only_their_department(world):
    from efficiency.choices import Role
    from tests.factories import UserFactory

    head = UserFactory(username="radar-head", role=(Role.DEPARTMENT_HEAD, "radar"))
    assert [row.department.code for row in usage.department_usage_list(user=head, time_range=RANGE)] == [
        "radar"
    ]
    # The cluster total for a head covers only the nodes their departments own.
    assert usage.cluster_usage(user=head, time_range=RANGE).available_gpu_hours == 0


@pytest.fixture
def org_committee(db):
    from efficiency.choices import Role
    from tests.factories import UserFactory

    return UserFactory(username="committee-member", role=Role.COMMITTEE)


def test_day_resolution_reads_node_days_with_the_same_numbers(world, org_committee):
    _, vision, _ = world
    two_weeks = TimeRange("custom", T0 - timedelta(days=7), T0 + timedelta(days=7))
    heatmap = usage.department_heatmap(user=org_committee, department=vision, time_range=two_weeks)
    assert heatmap.nodes == ["gpu-001", "gpu-003"]
    # gpu-001's day: 12 sampled GPU-hours, 8 busy → 66.7%; gpu-003 has no samples.
    values = dict(zip(heatmap.nodes, heatmap.values_pct, strict=True))
    assert [v for v in values["gpu-001"] if v is not None] == [66.7]
    assert all(v is None for v in values["gpu-003"])
    assert usage.cluster_usage(user=org_committee, time_range=two_weeks).busy_gpu_hours == 8


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_idle_stretches_found_in_sql_equal_the_python_rule(db, org_committee, seed):
    import random

    from efficiency.models import JobHour
    from tests.factories import JobFactory, JobHourFactory, NodeFactory

    rng = random.Random(seed)
    department = DepartmentFactory(code=f"d{seed}")
    node = NodeFactory()  # jobs without node placement have no idle stretches: their busy time is unknown
    rows = []
    for _ in range(6):
        job = JobFactory(department=department)
        job.nodes.add(node)
        for hour in range(48):
            if rng.random() < 0.3:
                continue  # the job did not hold GPUs that hour
            allocated = rng.choice([3600.0, 7200.0, 28800.0])
            busy = 0.0 if rng.random() < 0.6 else allocated * rng.random()
            rows.append(JobHourFactory.build(job=job, department=department, hour=T0 + timedelta(hours=hour),
                                             allocated_gpu_s=allocated, busy_gpu_s=busy))  # fmt: skip
    JobHour.objects.bulk_create(rows)
    window = TimeRange("custom", T0, T0 + timedelta(days=2))
    for min_hours in (1, 2, 3):
        found = usage.idle_allocation_list(user=org_committee, time_range=window, min_hours=min_hours)
        reference = usage.idle_stretches_reference(user=org_committee, time_range=window, min_hours=min_hours)
        assert [(i.job.pk, i.start, i.end, i.idle_hours, round(i.wasted_gpu_hours, 6)) for i in found] == [
            (s.job_id, s.start, s.end, s.hours, round(s.allocated_gpu_s / 3600, 6)) for s in reference
        ]
        assert found, "the pattern has idle stretches"


def test_an_hourly_map_of_many_cells_is_merged_into_blocks_of_hours(world, org_committee):
    _, vision, _ = world
    heatmap = usage.department_heatmap(user=org_committee, department=vision, time_range=RANGE, max_cells=2)
    # 2 nodes x 2 hours = 4 cells > 2: blocks of 2 hours; gpu-001: 8 busy of 12 sampled.
    assert heatmap.block_hours == 2
    assert heatmap.times == [T0]
    assert heatmap.values_pct == [[66.7], [None]]


def test_the_hour_under_way_is_left_out_of_the_series_not_drawn_as_a_shrinking_cluster(world, org_committee):
    # At 1:30 the second hour holds half an hour of GPU time: as an hourly average it would read
    # as 8 GPUs available of 16. The series stops at the last whole hour.
    half_past_one = T0 + timedelta(hours=1, minutes=30)
    with time_machine.travel(half_past_one, tick=False):
        rollups_refresh(now=half_past_one)
        series = usage.cluster_usage_series(user=org_committee, time_range=RANGE)

    assert [p.time for p in series] == [T0]
    assert [p.gpus_available for p in series] == [16.0]


def test_a_gpus_activity_weighs_each_sample_by_the_time_it_stands_for(db):
    """Two one-minute samples at 0 % and one two-minute sample at 90 %: the GPU was busy 108 of
    240 s, 45 % (as the rollups and the Utilization card count it), not the samples' mean 30 %."""
    from datetime import UTC, datetime, timedelta

    from efficiency.permissions import Role
    from efficiency.selectors.usage import node_gpu_usage
    from efficiency.timeranges import TimeRange
    from tests.factories import GpuSampleFactory, NodeFactory, UserFactory

    node = NodeFactory(gpu_count=1)
    start = datetime(2026, 11, 30, 8, tzinfo=UTC)
    for minute, value, interval in ((0, 0.0, 60), (1, 0.0, 60), (2, 90.0, 120)):
        GpuSampleFactory(
            node=node, gpu_index=0, ts=start + timedelta(minutes=minute), util_pct=value,
            gr_engine_active_pct=None, interval_s=interval,
        )  # fmt: skip
    admin = UserFactory(username="admin-gpu-usage", role=Role.PLATFORM_ADMIN)
    [gpu] = node_gpu_usage(
        user=admin, node=node, time_range=TimeRange("custom", start, start + timedelta(hours=1))
    )
    assert gpu.utilization_pct == 45.0
    assert gpu.samples == 3


_GPU_SECONDS = st.one_of(
    st.just(0.0),
    st.floats(min_value=0.0, max_value=86_400.0 * 8, allow_nan=False),
    st.integers(min_value=0, max_value=28_800).map(float),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.tuples(_GPU_SECONDS, _GPU_SECONDS), min_size=1, max_size=8))
@example(cells=[(5e-324, 1.0), (1e-300, 86_400.0)])  # quotients past the largest double (a CI run found them)
def test_heatmap_cells_worked_out_in_the_database_equal_the_python_rule(db, org_committee, cells):
    # The busy share of each cell is divided and capped by the database; rounded in Python. For
    # any sampled and busy GPU-seconds (none sampled, busier than sampled, fractions) the cells are
    # what round(min(busy / sampled, 1) * 100, 1) gives, None where nothing was sampled, on hourly
    # maps (NodeHour) and daily ones (NodeDay) alike.
    from efficiency.models import NodeDay, NodeHour
    from efficiency.times import portal_day_zone
    from tests.factories import NodeDayFactory, NodeHourFactory

    NodeHour.objects.all().delete()
    NodeDay.objects.all().delete()
    department = DepartmentFactory(code="cells")
    node = NodeFactory(hostname="cell-node", owner_department=department)
    expected = [None if sampled <= 0 else round(min(busy / sampled, 1.0) * 100, 1) for sampled, busy in cells]

    for hour, (sampled, busy) in enumerate(cells):
        NodeHourFactory(node=node, hour=T0 + timedelta(hours=hour), sampled_gpu_s=sampled, busy_gpu_s=busy)
    hours = TimeRange("custom", T0, T0 + timedelta(hours=len(cells)))
    hourly = usage.department_heatmap(user=org_committee, department=department, time_range=hours)
    assert hourly.block_hours == 1
    assert hourly.values_pct == [expected]

    zone = portal_day_zone()
    first = T0.astimezone(zone).date() + timedelta(days=1)
    for offset, (sampled, busy) in enumerate(cells):
        NodeDayFactory(node=node, day=first + timedelta(days=offset), day_zone=zone.key,
                       sampled_gpu_s=sampled, busy_gpu_s=busy)  # fmt: skip
    start = datetime.combine(first, datetime.min.time(), tzinfo=zone)
    days_range = TimeRange("custom", start, start + timedelta(days=14))  # over a week: by day
    daily = usage.department_heatmap(user=org_committee, department=department, time_range=days_range)
    assert daily.values_pct[0][: len(cells)] == expected
