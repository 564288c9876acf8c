"""Hourly rollup of one node: capacity, allocation, coverage and activity in GPU-seconds; and
node-hours summed into portal days.

Definitions (DESIGN.md): allocation rate = allocated / available GPU-hours; utilization =
busy / available GPU-hours, busy from the activity metric. Everything here is in GPU-seconds so
that partial hours, nodes added or retired mid-hour and jobs that start or end mid-hour add up
exactly.
"""

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import NamedTuple

HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class NodeWindow:
    """A node as the rollup needs it; ``None`` bounds mean "since/until forever"."""

    node_id: int
    gpu_count: int
    owner_department_id: int | None
    in_service_from: datetime | None = None
    in_service_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class Allocation:
    """GPUs of this node that one job held from ``start`` to ``end`` (``None``: still holds)."""

    department_id: int | None
    gpus: float
    start: datetime
    end: datetime | None
    job_id: int | None = None


@dataclass(frozen=True, slots=True)
class SampleTotals:
    """Raw samples of one node-hour, already summed (by the database)."""

    sampled_gpu_s: float  # GPU-seconds covered by an activity value
    busy_gpu_s: float  # sum of activity fraction x interval (GR_ENGINE_ACTIVE, else GPU_UTIL)
    gpu_util_busy_gpu_s: float  # the same from GPU_UTIL alone, to show how much it overstates
    sm_active_busy_gpu_s: float
    sample_count: int
    fb_used_mib_avg: float | None = None
    power_w_avg: float | None = None
    temp_c_max: float | None = None


@dataclass(frozen=True, slots=True)
class NodeHourRow:
    node_id: int
    hour: datetime
    owner_department_id: int | None
    gpu_count: int
    available_gpu_s: float
    allocated_gpu_s: float
    sampled_gpu_s: float
    busy_gpu_s: float
    gpu_util_busy_gpu_s: float
    sm_active_busy_gpu_s: float
    sample_count: int
    fb_used_mib_avg: float | None
    power_w_avg: float | None
    temp_c_max: float | None


@dataclass(frozen=True, slots=True)
class DepartmentHourRow:
    node_id: int
    hour: datetime
    department_id: int
    allocated_gpu_s: float
    busy_gpu_s: float
    job_count: int


@dataclass(frozen=True, slots=True)
class JobHourRow:
    """One job's share of one node-hour (summed over its nodes by the caller)."""

    job_id: int
    node_id: int
    hour: datetime
    allocated_gpu_s: float
    busy_gpu_s: float
    sm_active_busy_gpu_s: float = 0.0


class NodeHourRollup(NamedTuple):
    node: NodeHourRow
    departments: list[DepartmentHourRow]
    jobs: list[JobHourRow]


def overlap_s(
    start: datetime, end: datetime, other_start: datetime | None, other_end: datetime | None
) -> float:
    """Seconds that [start, end) and [other_start, other_end) share; ``None`` is unbounded."""
    lo = start if other_start is None else max(start, other_start)
    hi = end if other_end is None else min(end, other_end)
    return max(0.0, (hi - lo).total_seconds())


def rollup_node_hour(
    *,
    hour: datetime,
    node: NodeWindow,
    totals: SampleTotals | None,
    allocations: Sequence[Allocation],
    now: datetime,
) -> NodeHourRollup:
    """Roll up one node for the hour starting at ``hour`` (UTC, on the hour).

    - available: GPUs x the seconds of the hour the node was in service, up to ``now``;
    - allocated: each job's GPUs on this node x the seconds it held them in the hour (a job
      still running holds them up to ``now``); if the scheduler data claims more than is
      available, every allocation is scaled down to fit;
    - busy and coverage come from the samples; samples claiming more than is available are
      scaled down to it as a whole, keeping their utilization;
    - a department's busy time is the node's busy time split by allocated share, and never more
      than the department held; busy time without any allocation stays unattributed;
    - each job's busy time is split the same way (exact when a job has the node to itself).
    """
    hour_end = min(hour + HOUR, max(now, hour))
    available = node.gpu_count * overlap_s(hour, hour_end, node.in_service_from, node.in_service_until)

    held: dict[int | None, float] = defaultdict(float)
    jobs: dict[int | None, int] = defaultdict(int)
    held_by_job: dict[int, float] = defaultdict(float)
    for allocation in allocations:
        seconds = overlap_s(hour, hour_end, allocation.start, allocation.end)
        if seconds > 0 and allocation.gpus > 0:
            held[allocation.department_id] += allocation.gpus * seconds
            jobs[allocation.department_id] += 1
            if allocation.job_id is not None:
                held_by_job[allocation.job_id] += allocation.gpus * seconds
    allocated = sum(held.values())
    if allocated > available > 0 or (available == 0 and allocated > 0):
        scale = available / allocated if allocated else 0.0
        held = defaultdict(float, {dept: value * scale for dept, value in held.items()})
        held_by_job = defaultdict(float, {job: value * scale for job, value in held_by_job.items()})
        allocated = available

    if totals is None:
        totals = SampleTotals(0.0, 0.0, 0.0, 0.0, 0)
    sampled = min(totals.sampled_gpu_s, available)
    # Samples claiming more time than the hour holds (overlapping scrapes, a sample interval
    # rounded up) are scaled down as a whole, so the hour keeps the utilization they report:
    # capping only the sampled time would count the excess as busy.
    scale = sampled / totals.sampled_gpu_s if totals.sampled_gpu_s > sampled else 1.0
    busy = min(totals.busy_gpu_s * scale, sampled)
    sm_busy = min(totals.sm_active_busy_gpu_s * scale, sampled)

    department_rows = []
    for department_id, held_s in sorted(held.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        if department_id is None:
            continue  # jobs of no known department: allocated, but nobody to show it to
        share = busy * held_s / allocated if allocated else 0.0
        department_rows.append(
            DepartmentHourRow(
                node_id=node.node_id,
                hour=hour,
                department_id=department_id,
                allocated_gpu_s=held_s,
                busy_gpu_s=min(share, held_s),
                job_count=jobs[department_id],
            )
        )
    job_rows = [
        JobHourRow(
            job_id=job_id,
            node_id=node.node_id,
            hour=hour,
            allocated_gpu_s=held_s,
            busy_gpu_s=min(busy * held_s / allocated, held_s) if allocated else 0.0,
            sm_active_busy_gpu_s=min(sm_busy * held_s / allocated, held_s) if allocated else 0.0,
        )
        for job_id, held_s in sorted(held_by_job.items())
    ]
    node_row = NodeHourRow(
        node_id=node.node_id,
        hour=hour,
        owner_department_id=node.owner_department_id,
        gpu_count=node.gpu_count,
        available_gpu_s=available,
        allocated_gpu_s=allocated,
        sampled_gpu_s=sampled,
        busy_gpu_s=busy,
        gpu_util_busy_gpu_s=min(totals.gpu_util_busy_gpu_s * scale, sampled),
        sm_active_busy_gpu_s=sm_busy,
        sample_count=totals.sample_count,
        fb_used_mib_avg=totals.fb_used_mib_avg,
        power_w_avg=totals.power_w_avg,
        temp_c_max=totals.temp_c_max,
    )
    return NodeHourRollup(node_row, department_rows, job_rows)


@dataclass(frozen=True, slots=True)
class UnplacedHourRow:
    """GPU-seconds one job held in one hour on nodes nobody recorded (placement unknown)."""

    job_id: int | None
    department_id: int | None
    hour: datetime
    allocated_gpu_s: float


def rollup_unplaced_hours(
    *, hours: Sequence[datetime], allocations: Iterable[Allocation], now: datetime
) -> list[UnplacedHourRow]:
    """What jobs without node placement held in each of ``hours`` (UTC, on the hour).

    A job's department, GPUs and run time are enough for allocation by department and cluster:
    GPUs (fractions included) x the seconds it held them in the hour, a running job up to
    ``now``. No node row gets any of it, so nothing is scaled to a node's capacity and no busy
    time is attributed (which node's samples would it be?). Each allocation only visits the
    hours it overlaps, so a job running for months costs its own hours, not all of them.
    """
    hours = sorted(set(hours))
    rows = []
    for allocation in allocations:
        if allocation.gpus <= 0:
            continue
        end = allocation.end if allocation.end is not None else now
        first = bisect.bisect_right(hours, allocation.start - HOUR)
        for hour in hours[first:]:
            if hour >= end:
                break
            hour_end = min(hour + HOUR, max(now, hour))
            seconds = overlap_s(hour, hour_end, allocation.start, allocation.end)
            if seconds > 0:
                rows.append(
                    UnplacedHourRow(
                        allocation.job_id, allocation.department_id, hour, allocation.gpus * seconds
                    )
                )
    return rows


class DayPart(NamedTuple):
    """Node-hours of one node, portal day and owner, summed (by the database); ``last_hour`` is
    the latest of them, which decides the day's owner."""

    node_id: int
    day: date
    owner_department_id: int | None
    last_hour: datetime
    available_gpu_s: float
    allocated_gpu_s: float
    sampled_gpu_s: float
    busy_gpu_s: float


@dataclass(slots=True)
class NodeDayRow:
    node_id: int
    day: date
    owner_department_id: int | None
    available_gpu_s: float
    allocated_gpu_s: float
    sampled_gpu_s: float
    busy_gpu_s: float


def rollup_node_days(parts: Iterable[DayPart]) -> list[NodeDayRow]:
    """One row per node and portal day from its parts (one per owner the node had that day).

    A day has as many hours as the clock gives it (23 or 25 on a daylight-saving change: the
    parts carry whatever hours their day had). A node whose owner changed within a day is
    counted under the owner of its last hour that day. Rows come out sorted by node and day.
    """
    merged: dict[tuple[int, date], NodeDayRow] = {}
    last_hour: dict[tuple[int, date], datetime] = {}
    for part in parts:
        key = (part.node_id, part.day)
        total = merged.get(key)
        if total is None:
            total = merged[key] = NodeDayRow(part.node_id, part.day, None, 0.0, 0.0, 0.0, 0.0)
        if key not in last_hour or part.last_hour > last_hour[key]:
            total.owner_department_id = part.owner_department_id
            last_hour[key] = part.last_hour
        total.available_gpu_s += part.available_gpu_s
        total.allocated_gpu_s += part.allocated_gpu_s
        total.sampled_gpu_s += part.sampled_gpu_s
        total.busy_gpu_s += part.busy_gpu_s
    return [merged[key] for key in sorted(merged)]
