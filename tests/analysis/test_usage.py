"""Usage definitions with hand-worked numbers."""

import pytest

from efficiency.analysis.usage import UsageTotals, change_points, percent


def test_rates_on_a_fully_covered_day_of_one_node():
    # 8 GPUs x 24 h available; jobs held 6 GPUs for 20 h; GPUs busy 72 GPU-hours.
    totals = UsageTotals(available_gpu_s=8 * 24 * 3600, allocated_gpu_s=6 * 20 * 3600,
                         sampled_gpu_s=8 * 24 * 3600, busy_gpu_s=72 * 3600)  # fmt: skip
    assert totals.available_gpu_hours == 192
    assert totals.allocation_rate == pytest.approx(120 / 192)
    assert totals.utilization == pytest.approx(72 / 192)
    assert totals.coverage == 1


def test_missing_samples_lower_coverage_not_utilization():
    # Half the day has no samples; the observed half was 50% busy.
    totals = UsageTotals(available_gpu_s=192 * 3600, sampled_gpu_s=96 * 3600, busy_gpu_s=48 * 3600)
    assert totals.coverage == 0.5
    assert totals.utilization == 0.5  # not 0.25


def test_nothing_sampled_is_unknown_not_zero():
    totals = UsageTotals(available_gpu_s=3600.0)
    assert totals.utilization is None
    assert totals.coverage == 0
    assert UsageTotals().allocation_rate is None


def test_totals_add_up_across_nodes_and_hours():
    a = UsageTotals(3600, 1800, 3600, 900)
    b = UsageTotals(7200, 7200, 3600, 3600)
    total = a + b
    assert total == UsageTotals(10800, 9000, 7200, 4500)
    assert total.utilization == pytest.approx(4500 / 7200)


def test_percent_and_change_points():
    assert percent(0.31234) == 31.2
    assert percent(None) is None
    assert change_points(0.45, 0.30) == 15.0
    assert change_points(0.45, None) is None
