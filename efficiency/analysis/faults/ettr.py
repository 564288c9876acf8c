"""Effective training time ratio (ETTR), plain Python.

**ETTR** of a job = productive training time / wall time, where wall time is from its start
until it ended (or now), and each fault costs the job the work since its last checkpoint
(redone after the restart) plus the time it then held its GPUs without progress (until the
job ended or recovered). Overlapping losses are counted once.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class FaultLoss:
    occurred: datetime
    rollback_s: float  # work since the last checkpoint, redone after the restart
    until: datetime | None  # when the job made progress again or stopped holding GPUs


def ettr(start: datetime, end: datetime, losses: Sequence[FaultLoss]) -> float | None:
    """Productive share (0-1) of the wall time [start, end); None for no wall time."""
    wall_s = (end - start).total_seconds()
    if wall_s <= 0:
        return None
    lost = []
    for loss in losses:
        begin = max(start.timestamp(), loss.occurred.timestamp() - max(0.0, loss.rollback_s))
        stop = min(end.timestamp(), (loss.until or end).timestamp())
        if stop > begin:
            lost.append((begin, stop))
    lost.sort()
    lost_s = 0.0
    current_begin = current_end = None
    for begin, stop in lost:
        if current_end is None or begin > current_end:
            if current_end is not None:
                lost_s += current_end - current_begin
            current_begin, current_end = begin, stop
        else:
            current_end = max(current_end, stop)
    if current_end is not None:
        lost_s += current_end - current_begin
    return max(0.0, wall_s - lost_s) / wall_s
