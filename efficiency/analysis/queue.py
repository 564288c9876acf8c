"""Why a pending job waits, and the queue summed up (plain Python, no Django).

A job waits for one of these reasons, decided in this order:

1. **the scheduler's own reason**, when the job record carries one (Slurm's squeue ``%r``, kept
   as ``config["pending_reason"]``): ``QOSGrp*``, ``QOSMax*``, ``AssocGrp*``, ``AssocMax*``,
   ``Max*PerAccount`` and ``AccountingPolicy`` are *quota*; ``Resources`` and
   ``ReqNodeNotAvail`` are *capacity*; ``Priority``, ``Dependency`` and the holds
   (``JobHeld*``, ``BeginTime``) are their own reasons; any other code is shown as the
   scheduler wrote it (*scheduler*). Slurm's ``None`` means it has not looked at the job yet;
2. **quota**: the department's jobs already hold ``used_gpus`` of the job's GPU model, and this
   job's GPUs on top would pass the limit in force (guarantee + borrowing limit; under the
   fixed partition, the GPUs it owns). A department at or above its limit waits for quota
   whatever it asks for;
3. **capacity**: within its quota, but fewer GPUs of that model are free than it asks for (the
   shared pool, or its own nodes, are used up);
4. **queued**: within quota with enough GPUs free: the scheduler has not started it yet
   (its next pass, placement on whole nodes, or a reason the scheduler did not report).

A department's queue for a GPU model is served oldest first (``classify_queue``), so a job is
judged as if the jobs ahead of it had started: ten jobs that each fit alone do not all fit.

GPUs are counted, not placed: a job asking for two whole nodes may wait for "capacity" while
16 GPUs are free on four half-busy nodes; such a job shows as *queued*.
"""

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

QUOTA = "quota"
CAPACITY = "capacity"
PRIORITY = "priority"
DEPENDENCY = "dependency"
HELD = "held"
SCHEDULER = "scheduler"  # a scheduler reason not grouped above, shown as given
QUEUED = "queued"
WAIT_REASONS = (QUOTA, CAPACITY, PRIORITY, DEPENDENCY, HELD, SCHEDULER, QUEUED)

# Slurm job reason codes (https://slurm.schedmd.com/job_reason_codes.html) by prefix.
_SLURM_PREFIXES = (
    (
        ("QOSGrp", "QOSMax", "AssocGrp", "AssocMax", "AccountingPolicy", "QOSJobLimit", "QOSResourceLimit"),
        QUOTA,
    ),
    (("Resources", "ReqNodeNotAvail"), CAPACITY),
    (("Priority",), PRIORITY),
    (("Dependency",), DEPENDENCY),
    (("JobHeld", "BeginTime"), HELD),
)


def scheduler_wait_reason(reason: str) -> str | None:
    """The group of a scheduler's pending reason; ``None`` when it gave none."""
    code = reason.strip()
    if not code or code == "None":
        return None
    for prefixes, group in _SLURM_PREFIXES:
        if code.startswith(prefixes):
            return group
    if code.startswith("Max") and "PerAccount" in code:  # MaxGRESPerAccount, MaxJobsPerAccount
        return QUOTA
    return SCHEDULER


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """What one department may still get of one GPU model, at one moment.

    ``used_gpus``: what its running jobs hold; ``limit_gpus``: the most it may hold (guarantee +
    borrowing limit, or what it owns under the fixed partition), ``None`` when it may borrow
    without limit; ``free_gpus``: GPUs of that model that nobody holds and it could be given.
    """

    used_gpus: float
    limit_gpus: float | None
    free_gpus: float


def classify_wait(*, gpus: float, limits: QueueLimits, scheduler_reason: str = "") -> str:
    """Why a pending job asking for ``gpus`` waits (one of ``WAIT_REASONS``; see the module)."""
    given = scheduler_wait_reason(scheduler_reason)
    if given is not None:
        return given
    if limits.limit_gpus is not None and limits.used_gpus + gpus > limits.limit_gpus:
        return QUOTA
    if limits.free_gpus < gpus:
        return CAPACITY
    return QUEUED


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A pending job as its queue sees it: ``queue`` is its (department, GPU model)."""

    queue: Hashable
    gpus: float
    scheduler_reason: str = ""


@dataclass(frozen=True, slots=True)
class JobWait:
    """Why one job waits, and what it was judged against: its queue's limits and the GPUs
    asked for by the jobs ahead of it in that queue."""

    reason: str
    limits: QueueLimits
    ahead_gpus: float


_NOT_COMPETING = {HELD, DEPENDENCY}  # they do not ask for GPUs until released


def classify_queue(jobs: Sequence[PendingJob], limits: Mapping[Hashable, QueueLimits]) -> list[JobWait]:
    """Why each pending job waits; ``jobs`` in queue order (oldest first).

    A queue is served in order, so each job is judged as if the jobs ahead of it in the same
    queue had started: their GPUs count as used and are no longer free. A job that is held or
    waits for a dependency does not stand ahead of the others. A queue with no limits known
    has nothing free.
    """
    ahead: dict[Hashable, float] = defaultdict(float)
    waits = []
    for job in jobs:
        base = limits.get(job.queue, QueueLimits(used_gpus=0, limit_gpus=None, free_gpus=0))
        before = ahead[job.queue]
        seen = QueueLimits(base.used_gpus + before, base.limit_gpus, max(0, base.free_gpus - before))
        reason = classify_wait(gpus=job.gpus, limits=seen, scheduler_reason=job.scheduler_reason)
        if reason not in _NOT_COMPETING:
            ahead[job.queue] += job.gpus
        waits.append(JobWait(reason, base, before))
    return waits


@dataclass(frozen=True, slots=True)
class WaitingJob:
    gpus: float
    wait_s: float  # so far: now - submitted
    reason: str


@dataclass(frozen=True)
class QueueTotals:
    """A queue summed up: jobs, GPUs asked for, the longest wait so far, and per reason
    ``(jobs, GPUs)``, in ``WAIT_REASONS`` order."""

    jobs: int = 0
    gpus: float = 0
    longest_wait_s: float | None = None
    by_reason: dict[str, tuple[int, float]] = field(default_factory=dict)


def summarize_queue(jobs: Iterable[WaitingJob]) -> QueueTotals:
    """Count the waiting jobs and their GPUs, in total and per reason, and the longest wait."""
    count, held, longest = 0, 0, None  # whole GPUs stay whole numbers
    by_reason: dict[str, list] = {}
    for job in jobs:
        count += 1
        held += job.gpus
        longest = job.wait_s if longest is None else max(longest, job.wait_s)
        tally = by_reason.setdefault(job.reason, [0, 0])
        tally[0] += 1
        tally[1] += job.gpus
    order = {reason: position for position, reason in enumerate(WAIT_REASONS)}
    return QueueTotals(
        jobs=count,
        gpus=held,
        longest_wait_s=longest,
        by_reason={
            reason: (int(tally[0]), tally[1])
            for reason, tally in sorted(by_reason.items(), key=lambda kv: order.get(kv[0], len(order)))
        },
    )
