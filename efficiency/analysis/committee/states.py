"""GPU-hours of each hour by state: busy, allocated but idle, unallocated, down.

Every hour's capacity (the GPU-hours available) is split into four parts that add up to it
exactly: the sums are done in whole milli-GPU-hours (integers), so rounding never leaves a
remainder, and the floats given out are those integers / 1000.

* busy = min(busy, allocated): activity beyond what jobs held is not counted;
* allocated_idle = allocated - busy;
* down = GPU-hours of nodes isolated or in an incident within the hour, at most what was not
  allocated (a job that ran on a node counts as allocated, not down);
* unallocated = capacity - allocated - down.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

MILLI = 1000
STATES = ("busy", "allocated_idle", "unallocated", "down")


def to_milli(gpu_hours: float) -> int:
    """GPU-hours as whole milli-GPU-hours (negative and non-finite values count as 0)."""
    if not gpu_hours or gpu_hours != gpu_hours or gpu_hours < 0 or gpu_hours == float("inf"):
        return 0
    return round(gpu_hours * MILLI)


@dataclass(frozen=True, slots=True)
class HourStates:
    """One hour's capacity and its four parts, in milli-GPU-hours."""

    capacity: int
    busy: int
    allocated_idle: int
    unallocated: int
    down: int

    def gpu_hours(self, state: str) -> float:
        return getattr(self, state) / MILLI


def hour_states(*, capacity: float, allocated: float, busy: float, down: float) -> HourStates:
    """Split one hour's ``capacity`` (GPU-hours); the other figures are clamped into it."""
    cap = to_milli(capacity)
    alloc = min(to_milli(allocated), cap)
    used = min(to_milli(busy), alloc)
    unallocated = cap - alloc
    off = min(to_milli(down), unallocated)
    return HourStates(cap, used, alloc - used, unallocated - off, off)


@dataclass(frozen=True)
class StateSeries:
    hours: list[HourStates]

    def series(self, state: str) -> list[float]:
        return [hour.gpu_hours(state) for hour in self.hours]

    def total(self, state: str) -> float:
        return sum(getattr(hour, state) for hour in self.hours) / MILLI

    @property
    def capacity(self) -> float:
        return sum(hour.capacity for hour in self.hours) / MILLI


def state_series(
    *,
    capacity: Sequence[float],
    allocated: Sequence[float],
    busy: Sequence[float],
    down: Sequence[float],
) -> StateSeries:
    """``hour_states`` of each hour; the four sequences are aligned on the same hours."""
    if not len(capacity) == len(allocated) == len(busy) == len(down):
        raise ValueError("the series must have one value per hour each")
    return StateSeries(
        [
            hour_states(capacity=c, allocated=a, busy=b, down=d)
            for c, a, b, d in zip(capacity, allocated, busy, down, strict=True)
        ]
    )


@dataclass(frozen=True, slots=True)
class DownInterval:
    """A node out of service (isolated, or hit by an incident) from ``start`` to ``end``."""

    gpus: int
    start: datetime
    end: datetime


def down_per_hour(intervals: Sequence[DownInterval], hours: Sequence[datetime]) -> list[float]:
    """GPU-hours lost to ``intervals`` in each hour of ``hours`` (hour starts, one hour long).
    Overlapping intervals of one node are the caller's to merge (``merge_intervals``)."""
    if not hours:
        return []
    index = {hour: position for position, hour in enumerate(hours)}
    first, hour = hours[0], timedelta(hours=1)
    down = [0.0] * len(hours)
    for interval in intervals:
        start, end = max(interval.start, first), min(interval.end, hours[-1] + hour)
        if end <= start:
            continue
        cursor = first + hour * int((start - first) // hour)
        while cursor < end:
            overlap = (min(end, cursor + hour) - max(start, cursor)).total_seconds()
            if overlap > 0 and cursor in index:
                down[index[cursor]] += interval.gpus * overlap / 3600
            cursor += hour
    return down


def merge_intervals(intervals: Sequence[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Overlapping or touching intervals merged (one node's incidents must not count twice)."""
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
