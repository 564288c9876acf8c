"""Hand-checked node-hour rollups, and node-hours summed into portal days."""

from datetime import UTC, date, datetime, timedelta

import pytest

from efficiency.analysis.rollup import (
    Allocation,
    DayPart,
    NodeWindow,
    SampleTotals,
    overlap_s,
    rollup_node_days,
    rollup_node_hour,
)

H = datetime(2026, 11, 2, 8, tzinfo=UTC)
LATER = H + timedelta(days=1)
NODE = NodeWindow(node_id=1, gpu_count=8, owner_department_id=10)


def totals(sampled, busy, util=None, sm=None, count=0):
    return SampleTotals(
        sampled, busy, util if util is not None else busy, sm if sm is not None else busy, count
    )


def test_overlap_handles_open_ends():
    assert overlap_s(H, H + timedelta(hours=1), None, None) == 3600
    assert overlap_s(H, H + timedelta(hours=1), H + timedelta(minutes=45), None) == 900
    assert overlap_s(H, H + timedelta(hours=1), None, H - timedelta(seconds=1)) == 0


def test_full_hour_fully_allocated_and_half_busy():
    row, departments, _ = rollup_node_hour(
        hour=H,
        node=NODE,
        totals=totals(8 * 3600, 4 * 3600, count=480),
        allocations=[Allocation(department_id=10, gpus=8, start=H - timedelta(hours=2), end=None)],
        now=LATER,
    )
    assert row.available_gpu_s == 28_800
    assert row.allocated_gpu_s == 28_800
    assert row.busy_gpu_s == 14_400
    assert [(d.department_id, d.allocated_gpu_s, d.busy_gpu_s) for d in departments] == [(10, 28_800, 14_400)]


def test_job_that_starts_at_quarter_past_and_ends_at_half_past():
    # 4 GPUs x 15 min = 3,600 GPU-s allocated of 28,800 available: 12.5%.
    row, departments, _ = rollup_node_hour(
        hour=H,
        node=NODE,
        totals=totals(28_800, 3_000),
        allocations=[Allocation(11, 4, H + timedelta(minutes=15), H + timedelta(minutes=30))],
        now=LATER,
    )
    assert row.allocated_gpu_s == 3_600
    assert departments[0].busy_gpu_s == 3_000


def test_current_hour_counts_only_up_to_now():
    now = H + timedelta(minutes=20)
    row, _, _ = rollup_node_hour(hour=H, node=NODE, totals=None, allocations=[], now=now)
    assert row.available_gpu_s == 8 * 1200


def test_node_retired_mid_hour_and_node_added_mid_hour():
    retired = NodeWindow(2, 8, None, in_service_until=H + timedelta(minutes=30))
    added = NodeWindow(3, 8, None, in_service_from=H + timedelta(minutes=45))
    assert (
        rollup_node_hour(hour=H, node=retired, totals=None, allocations=[], now=LATER)[0].available_gpu_s
        == 14_400
    )
    assert (
        rollup_node_hour(hour=H, node=added, totals=None, allocations=[], now=LATER)[0].available_gpu_s
        == 7_200
    )


def test_missing_samples_are_no_coverage_not_zero_utilization():
    row, _, _ = rollup_node_hour(hour=H, node=NODE, totals=totals(7_200, 3_600), allocations=[], now=LATER)
    assert row.sampled_gpu_s == 7_200  # a quarter of the hour covered
    assert row.busy_gpu_s == 3_600  # 50% busy where covered, not 12.5% of the hour


def test_busy_split_by_held_share_and_capped_at_what_each_held():
    # Dept 10 holds 6 GPUs all hour, dept 11 holds 2 GPUs for 30 min: held 21,600 and 3,600.
    row, departments, _ = rollup_node_hour(
        hour=H,
        node=NODE,
        totals=totals(28_800, 25_200),
        allocations=[
            Allocation(10, 6, H, None),
            Allocation(11, 2, H, H + timedelta(minutes=30)),
        ],
        now=LATER,
    )
    split = {d.department_id: (d.allocated_gpu_s, round(d.busy_gpu_s, 6)) for d in departments}
    assert row.allocated_gpu_s == 25_200
    assert split == {10: (21_600, 21_600.0), 11: (3_600, 3_600.0)}


def test_busy_without_any_job_stays_unattributed():
    row, departments, _ = rollup_node_hour(
        hour=H, node=NODE, totals=totals(28_800, 10_000), allocations=[], now=LATER
    )
    assert row.busy_gpu_s == 10_000
    assert departments == []


def test_overcommitted_scheduler_data_is_scaled_to_capacity():
    row, departments, _ = rollup_node_hour(
        hour=H,
        node=NODE,
        totals=None,
        allocations=[Allocation(10, 8, H, None), Allocation(11, 8, H, None)],
        now=LATER,
    )
    assert row.allocated_gpu_s == 28_800
    assert [d.allocated_gpu_s for d in departments] == [14_400, 14_400]


def test_samples_claiming_more_than_capacity_are_scaled_down_keeping_their_utilization():
    # 40,000 GPU-s sampled on 8 GPUs x 3,600 s = 28,800 available: scale 0.72, so busy
    # 39,000 x 0.72 = 28,080 and utilization stays 39,000 / 40,000 = 97.5 %.
    row, _, _ = rollup_node_hour(hour=H, node=NODE, totals=totals(40_000, 39_000), allocations=[], now=LATER)
    assert row.sampled_gpu_s == 28_800
    assert row.busy_gpu_s == pytest.approx(28_080)


def test_twice_covered_half_busy_hour_stays_half_busy():
    # Two scrape jobs of the same exporter: every sample twice, 57,600 GPU-s of samples half busy.
    # Capping only the sampled time made this hour 100 % busy (28,800 / 28,800).
    row, _, _ = rollup_node_hour(
        hour=H, node=NODE, totals=totals(57_600, 28_800, util=28_800, sm=14_400), allocations=[], now=LATER
    )
    assert row.sampled_gpu_s == 28_800
    assert row.busy_gpu_s == pytest.approx(14_400)
    assert row.gpu_util_busy_gpu_s == pytest.approx(14_400)
    assert row.sm_active_busy_gpu_s == pytest.approx(7_200)


@pytest.mark.parametrize("gpus", [0, -1])
def test_allocations_without_gpus_are_ignored(gpus):
    row, departments, _ = rollup_node_hour(
        hour=H, node=NODE, totals=None, allocations=[Allocation(10, gpus, H, None)], now=LATER
    )
    assert row.allocated_gpu_s == 0
    assert departments == []


def test_each_job_gets_its_share_of_busy_time():
    # Job 1 holds 8 GPUs for 30 min, job 2 holds 8 GPUs for the other 30 min; busy 7,200 GPU-s.
    result = rollup_node_hour(
        hour=H,
        node=NODE,
        totals=totals(28_800, 7_200),
        allocations=[
            Allocation(10, 8, H, H + timedelta(minutes=30), job_id=1),
            Allocation(10, 8, H + timedelta(minutes=30), None, job_id=2),
        ],
        now=LATER,
    )
    assert [(j.job_id, j.allocated_gpu_s, j.busy_gpu_s) for j in result.jobs] == [
        (1, 14_400, 3_600),
        (2, 14_400, 3_600),
    ]


DAY = date(2026, 11, 2)


def part(node_id, day, owner, last_hour, available=28_800.0):
    return DayPart(node_id, day, owner, last_hour, available, available / 2, available, available / 4)


def test_node_day_sums_the_parts_of_each_owner_and_goes_to_the_owner_of_its_last_hour():
    late, early = datetime(2026, 11, 2, 20, tzinfo=UTC), datetime(2026, 11, 2, 3, tzinfo=UTC)
    (row,) = rollup_node_days([part(1, DAY, 11, late), part(1, DAY, 10, early, available=3600.0)])
    assert row.owner_department_id == 11
    assert (row.available_gpu_s, row.allocated_gpu_s, row.busy_gpu_s) == (32_400, 16_200, 8_100)
    # The same parts in the other order: the same owner.
    (again,) = rollup_node_days([part(1, DAY, 10, early), part(1, DAY, 11, late)])
    assert again.owner_department_id == 11


def test_a_node_given_back_to_the_shared_pool_during_the_day_is_in_the_pool_that_day():
    late, early = datetime(2026, 11, 2, 20, tzinfo=UTC), datetime(2026, 11, 2, 3, tzinfo=UTC)
    (row,) = rollup_node_days([part(1, DAY, 10, early), part(1, DAY, None, late)])
    assert row.owner_department_id is None


def test_node_days_come_out_one_per_node_and_day_sorted():
    rows = rollup_node_days(
        [part(node, DAY + timedelta(days=offset), 10, H) for node in (2, 1) for offset in (1, 0)]
    )
    assert [(row.node_id, row.day) for row in rows] == [
        (1, DAY), (1, DAY + timedelta(days=1)), (2, DAY), (2, DAY + timedelta(days=1))
    ]  # fmt: skip
