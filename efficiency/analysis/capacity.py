"""Capacity checks: is a GPU model's shared pool running out, and will demand pass capacity?

* **Pool exhausted**: in each of the last ``sustained_hours`` hours the departments borrowed
  (nearly) all of the shared pool and some job had been waiting longer than the wait threshold.
* **Demand trend**: a least-squares line through the daily peaks of demand (P95 of the hourly
  demand of each day) reaches capacity within the horizon.

How many GPUs are needed is answered by the backtest: the fewest GPUs added to the shared pool
(in steps of a node) with which last cycle's jobs would have waited under the P95 target.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from efficiency.analysis.stats import percentile

DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class PoolHour:
    """One hour of one GPU model: GPUs borrowed from the shared pool (mean) and the longest wait
    of a job still waiting at the end of the hour."""

    borrowed_gpus: float
    longest_wait_s: float


def pool_exhausted(
    hours: Sequence[PoolHour],
    *,
    shared_pool_gpus: int,
    wait_threshold_s: float,
    sustained_hours: int,
    tolerance_gpus: float = 1.0,
) -> bool:
    """True when the last ``sustained_hours`` hours all had the pool used up and jobs waiting long."""
    if sustained_hours <= 0 or len(hours) < sustained_hours:
        return False
    return all(
        hour.borrowed_gpus >= shared_pool_gpus - tolerance_gpus and hour.longest_wait_s > wait_threshold_s
        for hour in hours[-sustained_hours:]
    )


def pool_hours(
    jobs: Sequence, use: Mapping[object, Sequence[float]], guarantees: Mapping, *, start_s: float, hours: int
) -> list[PoolHour]:
    """Each of ``hours`` hours from ``start_s``: GPUs borrowed beyond the guarantees, and the
    longest wait of a job still waiting at the hour's end.

    ``use`` maps a (department, model) key to its GPUs in use hour by hour; ``jobs`` have
    ``submit_s``, ``start_s`` and ``end_s`` (None while not started / not ended), epoch seconds.
    """
    result = []
    for h in range(hours):
        hour_end_s = start_s + (h + 1) * 3600.0
        borrowed = sum(max(0.0, series[h] - guarantees.get(key, 0)) for key, series in use.items())
        waits = [
            hour_end_s - job.submit_s
            for job in jobs
            if job.submit_s < hour_end_s
            and (job.start_s is None or job.start_s > hour_end_s)
            and (job.end_s is None or job.end_s > hour_end_s)
        ]
        result.append(PoolHour(borrowed, max(waits, default=0.0)))
    return result


def daily_peaks(hourly: Sequence[float]) -> tuple[list[float], list[float]]:
    """(day numbers, P95 of the day's hourly demand) for every whole day with any demand.

    ``hourly`` starts at a midnight; a day with no demand at all (no data) is left out rather
    than pulling the trend down.
    """
    days, peaks = [], []
    for day in range(len(hourly) // 24):
        hours = hourly[day * 24 : (day + 1) * 24]
        if any(hours):
            days.append(float(day))
            peaks.append(percentile(hours, 95))
    return days, peaks


@dataclass(frozen=True, slots=True)
class Trend:
    slope_per_day: float
    intercept: float  # value at day 0

    def at(self, day: float) -> float:
        return self.intercept + self.slope_per_day * day


def linear_trend(days: Sequence[float], values: Sequence[float]) -> Trend | None:
    """Least-squares line through (day, value); None with fewer than two distinct days."""
    n = len(days)
    if n < 2 or len(values) != n:
        return None
    mean_x = sum(days) / n
    mean_y = sum(values) / n
    sxx = sum((x - mean_x) ** 2 for x in days)
    if sxx == 0:
        return None
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(days, values, strict=True))
    slope = sxy / sxx
    return Trend(slope, mean_y - slope * mean_x)


def days_until_crossing(trend: Trend, *, today: float, capacity: float) -> float | None:
    """Days from ``today`` until the trend reaches ``capacity``; 0 if it already has; None if never."""
    if trend.at(today) >= capacity:
        return 0.0
    if trend.slope_per_day <= 0:
        return None
    return (capacity - trend.at(today)) / trend.slope_per_day


def fewest_sufficient(meets_target: Callable[[int], bool], *, step: int, upper: int) -> int | None:
    """The smallest multiple of ``step`` in [0, upper] for which ``meets_target`` holds.

    ``meets_target`` must be monotone (more GPUs never make waits longer), so a binary search
    over the multiples finds it in log2(upper / step) calls. None when not even ``upper`` helps.
    """
    if step <= 0:
        raise ValueError("step must be positive")
    if meets_target(0):
        return 0
    high = math.ceil(upper / step)
    if high == 0 or not meets_target(high * step):
        return None
    low = 0  # fails at low, holds at high
    while high - low > 1:
        middle = (low + high) // 2
        if meets_target(middle * step):
            high = middle
        else:
            low = middle
    return high * step
