"""Rollups computed from stored samples and jobs, on a real database."""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection

from efficiency.choices import JobSource, JobState, MappingKind
from efficiency.collectors.records import GpuReading, JobRecord
from efficiency.models import DepartmentHour, GpuSample, JobHour, NodeDay, NodeHour, RollupDirtyHour
from efficiency.services.ingest import gpu_readings_ingest, jobs_ingest
from efficiency.services.rollups import (
    node_days_rezone,
    retention_prune,
    rollup_hours_compute,
    rollups_refresh,
)
from tests.factories import ClusterFactory, DepartmentFactory, DepartmentMappingFactory, NodeFactory

T0 = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.fixture
def setup(db):
    cluster = ClusterFactory(slug="c1")
    owner = DepartmentFactory(code="bev")
    user = DepartmentFactory(code="radar")
    DepartmentMappingFactory(kind=MappingKind.SLURM_ACCOUNT, value="radar", department=user)
    node = NodeFactory(cluster=cluster, hostname="gpu-001", gpu_count=8, owner_department=owner)
    return cluster, node, owner, user


def readings(hour_start, *, gr, util=None, minutes=60, gpus=8):
    return [
        GpuReading(
            "gpu-001",
            gpu,
            int((hour_start + timedelta(minutes=m)).timestamp() * 1000),
            gr_engine_active_pct=gr,
            util_pct=util,
            power_w=300.0,
        )
        for m in range(minutes)
        for gpu in range(gpus)
    ]


def test_hour_with_half_busy_gpus_and_a_half_hour_job(setup):
    cluster, node, owner, user = setup
    gpu_readings_ingest(cluster=cluster, readings=readings(T0, gr=50.0, util=100.0), interval_s=60, now=NOW)
    record = JobRecord(
        source=JobSource.SLURM, external_id="7", account="radar", user_name="u", name="n",
        state=JobState.COMPLETED, gpu_count=4, submitted_at=T0, started_at=T0 + timedelta(minutes=15),
        ended_at=T0 + timedelta(minutes=45), node_names=("gpu-001",), node_count=1,
    )  # fmt: skip
    jobs_ingest(cluster=cluster, source=JobSource.SLURM, records=[record], now=NOW)

    assert rollups_refresh(now=NOW) == 1
    row = NodeHour.objects.get(node=node, hour=T0)
    assert (row.available_gpu_s, row.sampled_gpu_s, row.busy_gpu_s) == (28_800, 28_800, 14_400)
    assert row.gpu_util_busy_gpu_s == 28_800  # GPU_UTIL says 100%: the overstatement, kept apart
    assert row.allocated_gpu_s == 7_200
    assert row.owner_department == owner
    assert row.power_w_avg == 300.0
    (department_row,) = DepartmentHour.objects.all()
    assert (department_row.department, department_row.allocated_gpu_s, department_row.busy_gpu_s) == (
        user,
        7_200,
        7_200,
    )
    assert not RollupDirtyHour.objects.exists()


def test_late_samples_recompute_the_hour_without_double_counting(setup):
    cluster, *_ = setup
    gpu_readings_ingest(cluster=cluster, readings=readings(T0, gr=100.0, minutes=30), interval_s=60, now=NOW)
    rollups_refresh(now=NOW)
    assert NodeHour.objects.get(hour=T0).sampled_gpu_s == 14_400
    # The second half of the hour arrives late, and the first half again.
    gpu_readings_ingest(cluster=cluster, readings=readings(T0, gr=100.0, minutes=60), interval_s=60, now=NOW)
    rollups_refresh(now=NOW)
    row = NodeHour.objects.get(hour=T0)
    assert (row.sampled_gpu_s, row.busy_gpu_s) == (28_800, 28_800)
    assert NodeHour.objects.count() == 1


def test_refresh_with_nothing_dirty_does_nothing(setup):
    assert rollups_refresh(now=NOW) == 0


def test_gpu_util_is_the_activity_where_gr_engine_active_is_missing(setup):
    cluster, *_ = setup
    gpu_readings_ingest(cluster=cluster, readings=readings(T0, gr=None, util=25.0), interval_s=60, now=NOW)
    rollups_refresh(now=NOW)
    assert NodeHour.objects.get(hour=T0).busy_gpu_s == 7_200


def test_retention_drops_old_raw_samples_but_keeps_rollups(setup, settings):
    cluster, *_ = setup
    gpu_readings_ingest(cluster=cluster, readings=readings(T0, gr=10.0, minutes=2), interval_s=60, now=NOW)
    rollups_refresh(now=NOW)
    settings.PORTAL_RAW_RETENTION_DAYS = 1
    pruned = retention_prune(now=NOW + timedelta(days=2))
    if connection.vendor == "postgresql":  # the day's partition went whole, no row was deleted
        assert (pruned["sample_days_dropped"], pruned["samples"]) == (1, 0)
    else:
        assert pruned["samples"] == 16
    assert not GpuSample.objects.exists()
    assert NodeHour.objects.filter(hour=T0).exists()


def test_job_hours_sum_a_jobs_share_over_its_nodes(setup):
    cluster, _, owner, _ = setup
    other = NodeFactory(cluster=cluster, hostname="gpu-002", gpu_count=8, owner_department=owner)
    gpu_readings_ingest(cluster=cluster, readings=readings(T0, gr=50.0), interval_s=60, now=NOW)
    record = JobRecord(
        source=JobSource.SLURM, external_id="8", account="radar", user_name="u", name="n",
        state=JobState.RUNNING, gpu_count=16, submitted_at=T0, started_at=T0,
        node_names=("gpu-001", "gpu-002"), node_count=2,
    )  # fmt: skip
    jobs_ingest(cluster=cluster, source=JobSource.SLURM, records=[record], now=NOW)
    rollups_refresh(now=NOW)
    row = JobHour.objects.get(job__external_id="8", hour=T0)
    # 16 GPUs held all hour; gpu-001 was 50% busy, gpu-002 sent no samples (busy unknown = 0).
    assert (row.allocated_gpu_s, row.busy_gpu_s) == (57_600, 14_400)
    assert other.pk


# 15:00 and 16:00 UTC on 29 November: one UTC day, but 23:00 on the 29th and 00:00 on the 30th in
# Shanghai.
EVENING = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)


def node_days():
    return sorted(NodeDay.objects.values_list("day", "day_zone", "sampled_gpu_s"))


def test_node_days_are_cut_at_midnight_of_the_portal_zone_and_say_which(setup, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    cluster, *_ = setup
    gpu_readings_ingest(
        cluster=cluster, readings=readings(EVENING, gr=50.0, minutes=120), interval_s=60, now=NOW
    )
    rollups_refresh(now=NOW)
    assert node_days() == [
        (date(2026, 11, 29), "Asia/Shanghai", 28_800),
        (date(2026, 11, 30), "Asia/Shanghai", 28_800),
    ]


def test_node_days_of_another_zone_are_recomputed_on_the_next_run_without_new_data(setup, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    cluster, *_ = setup
    gpu_readings_ingest(
        cluster=cluster, readings=readings(EVENING, gr=50.0, minutes=120), interval_s=60, now=NOW
    )
    rollups_refresh(now=NOW)
    settings.TIME_ZONE = "UTC"
    assert rollups_refresh(now=NOW) == 0  # no hour was dirty
    assert node_days() == [(date(2026, 11, 29), "UTC", 57_600)]


def test_node_days_of_unknown_zone_from_before_portal_days_are_recomputed(setup, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    cluster, *_ = setup
    gpu_readings_ingest(
        cluster=cluster, readings=readings(EVENING, gr=50.0, minutes=120), interval_s=60, now=NOW
    )
    rollups_refresh(now=NOW)
    NodeDay.objects.update(day_zone="")  # as the migration leaves rows of before
    other = NodeFactory(cluster=cluster, hostname="gpu-009", gpu_count=8)
    NodeDay.objects.create(
        node=other, day=date(2026, 11, 1), cluster=cluster, day_zone="",
        available_gpu_s=1.0, allocated_gpu_s=0.0, sampled_gpu_s=1.0, busy_gpu_s=0.0,
    )  # fmt: skip
    assert node_days_rezone() == 2
    # gpu-009 has no hours behind its row: nothing to recompute it from, so it goes.
    assert node_days() == [(date(2026, 11, 29), "Europe/Berlin", 57_600)]
    assert node_days_rezone() == 0


def every_hour(start, end):
    return [start + timedelta(hours=i) for i in range(int((end - start) / timedelta(hours=1)))]


def test_node_days_hold_23_hours_on_the_spring_forward_day_and_25_on_the_fall_back_day(setup, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    cluster, *_ = setup
    spring = every_hour(datetime(2026, 3, 27, 23, tzinfo=UTC), datetime(2026, 3, 30, 22, tzinfo=UTC))
    autumn = every_hour(datetime(2026, 10, 23, 22, tzinfo=UTC), datetime(2026, 10, 26, 23, tzinfo=UTC))
    later = datetime(2026, 12, 1, tzinfo=UTC)
    rollup_hours_compute(cluster=cluster, hours=spring + autumn, now=later)  # 8 GPUs in service
    by_rollup = {
        day: gpu_s / 8 / 3600 for day, gpu_s in NodeDay.objects.values_list("day", "available_gpu_s")
    }
    assert by_rollup == {
        date(2026, 3, 28): 24, date(2026, 3, 29): 23, date(2026, 3, 30): 24,
        date(2026, 10, 24): 24, date(2026, 10, 25): 25, date(2026, 10, 26): 24,
    }  # fmt: skip
    # Rebuilt from the hours over seven months (several queries of a month's days): the same.
    NodeDay.objects.update(day_zone="UTC")
    assert node_days_rezone() == 1
    assert dict(NodeDay.objects.values_list("day", "available_gpu_s")) == {
        day: hours * 8 * 3600 for day, hours in by_rollup.items()
    }
    assert set(NodeDay.objects.values_list("day_zone", flat=True)) == {"Europe/Berlin"}
