"""Idle allocations: stretches of hours in which a job held GPUs that did (almost) nothing."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class IdleHour:
    """An hour in which a job's GPUs stayed below the idle threshold."""

    job_id: int
    hour: datetime
    allocated_gpu_s: float


@dataclass(frozen=True, slots=True)
class IdleStretch:
    job_id: int
    start: datetime
    end: datetime  # exclusive
    hours: int
    allocated_gpu_s: float  # held while idle: the waste


def find_idle_stretches(hours: Iterable[IdleHour], *, min_hours: int) -> list[IdleStretch]:
    """Consecutive idle hours of each job, kept when at least ``min_hours`` long.

    ``hours`` must be ordered by job, then hour. A gap of one missing hour ends a stretch (the
    job was busy, or not running, then). Result: most wasted GPU-hours first.
    """
    stretches = []
    current: list[IdleHour] = []

    def close() -> None:
        if len(current) >= min_hours:
            stretches.append(
                IdleStretch(
                    job_id=current[0].job_id,
                    start=current[0].hour,
                    end=current[-1].hour + HOUR,
                    hours=len(current),
                    allocated_gpu_s=sum(hour.allocated_gpu_s for hour in current),
                )
            )

    for hour in hours:
        if current and (hour.job_id != current[-1].job_id or hour.hour != current[-1].hour + HOUR):
            close()
            current = []
        current.append(hour)
    if current:
        close()
    return sorted(stretches, key=lambda s: (-s.allocated_gpu_s, s.job_id, s.start))
