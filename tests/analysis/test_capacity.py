import pytest

from efficiency.analysis.capacity import (
    PoolHour,
    days_until_crossing,
    fewest_sufficient,
    linear_trend,
    pool_exhausted,
)


def test_pool_is_exhausted_only_when_every_recent_hour_was_full_and_jobs_waited_long():
    full_and_waiting = PoolHour(borrowed_gpus=63.5, longest_wait_s=7200)
    hours = [PoolHour(10, 0)] + [full_and_waiting] * 3
    assert pool_exhausted(hours, shared_pool_gpus=64, wait_threshold_s=3600, sustained_hours=3)
    # One hour with room in the pool breaks the run.
    assert not pool_exhausted(
        [*hours[:-1], PoolHour(40, 7200)], shared_pool_gpus=64, wait_threshold_s=3600, sustained_hours=3
    )
    # A full pool with nobody waiting long is just a well-used pool.
    assert not pool_exhausted(
        [PoolHour(64, 600)] * 3, shared_pool_gpus=64, wait_threshold_s=3600, sustained_hours=3
    )
    assert not pool_exhausted(
        [full_and_waiting] * 2, shared_pool_gpus=64, wait_threshold_s=3600, sustained_hours=3
    )


def test_linear_trend_and_crossing_day():
    # Demand peaks 100, 110, 120, 130 on days 0-3: 10 GPUs a day, at 130 on day 3.
    trend = linear_trend([0, 1, 2, 3], [100, 110, 120, 130])
    assert trend.slope_per_day == pytest.approx(10)
    assert trend.intercept == pytest.approx(100)
    # Capacity 200 is 70 GPUs above day 3: 7 days away.
    assert days_until_crossing(trend, today=3, capacity=200) == pytest.approx(7)
    assert days_until_crossing(trend, today=3, capacity=120) == 0
    assert days_until_crossing(linear_trend([0, 1], [50, 40]), today=1, capacity=100) is None
    assert linear_trend([1, 1], [3, 4]) is None


def test_fewest_sufficient_finds_the_smallest_step_with_few_calls():
    calls = []

    def meets(gpus):
        calls.append(gpus)
        return gpus >= 37

    assert fewest_sufficient(meets, step=8, upper=512) == 40
    assert len(calls) <= 9
    assert fewest_sufficient(lambda gpus: True, step=8, upper=512) == 0
    assert fewest_sufficient(lambda gpus: False, step=8, upper=512) is None
