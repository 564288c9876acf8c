"""Fault detectors over training progress: stragglers, slowdowns, hangs, flat GPUs, loss anomalies.

Plain functions over plain data (iteration times per worker, progress parsed from job logs by
``progress.parse_progress``, per-GPU activity samples); "now" and every threshold are arguments.
Each result carries its evidence (which workers or ranks, which steps, the ratios) so that an
incident can show why it was opened.

Runs of slow steps (stragglers, slowdowns) are counted in *observed* steps, one per progress
report, whatever the logging interval, and may bridge ``max_gap`` normal-looking steps: a slow
worker's times are noisy, and one fast step in the middle of a slow stretch does not end it.
"""

import math
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import median

# Median absolute deviation x 1.4826 estimates the standard deviation of normal noise.
MAD_TO_SIGMA = 1.4826
# A perfectly flat loss has MAD 0: the spread is floored at this share of the median, so that
# rounding noise on a flat series is not a spike.
MIN_RELATIVE_SPREAD = 1e-3

NAN = "nan"
INF = "inf"
SPIKE = "spike"


def _runs(flags: Sequence[bool], max_gap: int) -> list[tuple[int, int]]:
    """(first, last) index of each run of True values, bridging up to ``max_gap`` False values."""
    runs = []
    start = last = -1
    for index, flag in enumerate(flags):
        if not flag:
            continue
        if start >= 0 and index - last - 1 <= max_gap:
            last = index
            continue
        if start >= 0:
            runs.append((start, last))
        start = last = index
    if start >= 0:
        runs.append((start, last))
    return runs


# ------------------------------------------------------------------------------------------------
# Stragglers


@dataclass(frozen=True, slots=True)
class WorkerIteration:
    """One worker's (rank's) time for one training step.

    ``duration`` is in seconds from logs; any unit works, as only ratios between workers are used.
    """

    worker: str | int
    step: int
    duration: float


@dataclass(frozen=True, slots=True)
class StragglerRun:
    """A sustained stretch of steps in which one worker was clearly slower than its peers.

    Ratios are the worker's *slowness*: its time over its peers' median time at the same step,
    after each worker's stable speed offset is taken out (1.0 = as fast as usual, relative to the
    others). ``baseline_ratio`` is that offset as measured, before it is capped.
    """

    worker: str | int
    start_step: int
    end_step: int  # the last slow step of the run (inclusive)
    slow_steps: int  # steps at or above the ratio within the run
    median_ratio: float  # over the slow steps
    peak_ratio: float
    peak_step: int
    baseline_ratio: float
    ongoing: bool  # not closed before the worker's last observed step


def _peer_medians(values: Mapping[str | int, float]) -> dict[str | int, float]:
    """Each worker's peers' median: the median of all the other values (one sort per step)."""
    ordered = sorted(values.items(), key=lambda item: item[1])
    count = len(ordered) - 1  # peers per worker
    upper = count // 2
    lower = upper if count % 2 else upper - 1
    result = {}
    for skip, (worker, _) in enumerate(ordered):
        low = ordered[lower if lower < skip else lower + 1][1]
        high = ordered[upper if upper < skip else upper + 1][1]
        result[worker] = (low + high) / 2
    return result


def _worker_order(worker: str | int) -> tuple[int, int, str]:
    return (0, worker, "") if isinstance(worker, int) else (1, 0, worker)


def detect_stragglers(
    iterations: Sequence[WorkerIteration],
    *,
    ratio: float = 1.2,
    min_run: int = 5,
    max_gap: int = 2,
    baseline_steps: int = 20,
    max_offset: float = 1.25,
    min_peers: int = 2,
) -> list[StragglerRun]:
    """Workers that became clearly slower than their peers for a sustained run of steps.

    Workers of one job are rarely equally fast, even when healthy: a slower GPU model, a busier
    host or a shared GPU keep one worker 10-20% behind the others for the whole run (the AntMan
    trace's job 2). That is heterogeneity, not a fault, so each worker is first measured against
    itself:

    1. At every step with at least ``min_peers`` other workers, a worker's raw ratio is its time
       over the median of its peers' times (robust to the stragglers among those peers).
    2. Its *offset* is the median raw ratio over its first ``baseline_steps`` observed steps,
       capped to [1 / ``max_offset``, ``max_offset``]: a stable difference up to ``max_offset``
       is accepted as the worker's own speed; a worker already far slower than its peers from
       the start is a straggler from the start (flagged once it is ``max_offset`` x ``ratio``
       slower), not heterogeneity.
    3. Every time is divided by its worker's offset, and the worker's *slowness* at a step is its
       normalised time over its peers' median normalised time.
    4. Steps with slowness >= ``ratio`` form runs (bridging ``max_gap`` normal steps); a run
       needs ``min_run`` slow steps to count.

    The peers' median assumes that at any step most workers are healthy: when half or more of a
    job's workers slow down together the median moves with them, and the detector sees a job
    slowdown (``detect_slowdown``) rather than stragglers. Result: ordered by start step, worker.
    """
    by_step: dict[int, dict[str | int, float]] = {}
    for item in iterations:
        if item.duration > 0 and math.isfinite(item.duration):
            by_step.setdefault(item.step, {})[item.worker] = item.duration
    steps = [step for step in sorted(by_step) if len(by_step[step]) > min_peers]

    raw: dict[str | int, list[float]] = {}
    for step in steps:
        durations = by_step[step]
        pending = [worker for worker in durations if len(raw.get(worker, ())) < baseline_steps]
        if not pending:
            continue
        peers = _peer_medians(durations)
        for worker in pending:
            raw.setdefault(worker, []).append(durations[worker] / peers[worker])
    baseline = {worker: median(ratios) for worker, ratios in raw.items()}
    offset = {worker: min(max(value, 1 / max_offset), max_offset) for worker, value in baseline.items()}

    series: dict[str | int, list[tuple[int, float]]] = {}
    for step in steps:
        normalised = {worker: value / offset[worker] for worker, value in by_step[step].items()}
        peers = _peer_medians(normalised)
        for worker, value in normalised.items():
            series.setdefault(worker, []).append((step, value / peers[worker]))

    found = []
    for worker, points in series.items():
        flags = [slowness >= ratio for _, slowness in points]
        for first, last in _runs(flags, max_gap):
            slow = [(slowness, step) for step, slowness in points[first : last + 1] if slowness >= ratio]
            if len(slow) < min_run:
                continue
            peak_ratio, peak_step = max(slow, key=lambda point: point[0])  # the first, on ties
            found.append(
                StragglerRun(
                    worker=worker,
                    start_step=points[first][0],
                    end_step=points[last][0],
                    slow_steps=len(slow),
                    median_ratio=median(slowness for slowness, _ in slow),
                    peak_ratio=peak_ratio,
                    peak_step=peak_step,
                    baseline_ratio=baseline[worker],
                    ongoing=len(points) - 1 - last <= max_gap,
                )
            )
    return sorted(found, key=lambda run: (run.start_step, _worker_order(run.worker)))


def straggler_by_activity(
    activity_by_worker: Mapping[Hashable, Sequence[tuple[datetime, float]]],
    *,
    since: datetime,
    bucket_s: float = 60.0,
    min_run: int = 3,
    baseline_steps: int = 20,
) -> Hashable | None:
    """The worker (a node) that straggles from ``since`` on, judged by its GPUs' activity.

    A job that slows down as a whole says, in its iteration lines, *that* it slowed, not *where*.
    In synchronous training every step takes every worker the same wall time, and the healthy
    workers spend the straggler's extra time waiting in the collective with their SMs idle: a
    worker's share of active SM time is its compute time per step, in units of the step. So the
    activity samples (time, SM active %) are cut into ``bucket_s`` steps, each worker's mean in a
    step is its "duration", and ``detect_stragglers`` does the rest: each worker is measured
    against its own baseline (the first ``baseline_steps`` steps: pass samples from before the
    slowdown) and its peers' median. The answer is the worker of the strongest run still under
    way at or after ``since``; None when no worker stands out (or there are fewer than three).
    """
    iterations = []
    for worker, samples in activity_by_worker.items():
        steps: dict[int, list[float]] = {}
        for at, pct in samples:
            if math.isfinite(pct) and pct > 0:
                steps.setdefault(int(at.timestamp() // bucket_s), []).append(pct)
        iterations += [WorkerIteration(worker, step, sum(v) / len(v)) for step, v in steps.items()]
    first_step = int(since.timestamp() // bucket_s)
    runs = [
        run
        for run in detect_stragglers(iterations, min_run=min_run, baseline_steps=baseline_steps)
        if run.end_step >= first_step
    ]
    if not runs:
        return None
    return max(runs, key=lambda run: (run.median_ratio, run.slow_steps)).worker


# ------------------------------------------------------------------------------------------------
# Slowdowns


@dataclass(frozen=True, slots=True)
class Slowdown:
    """A sustained stretch of steps slower than the job's own baseline (times in seconds)."""

    start_step: int
    end_step: int  # the last slow step (inclusive)
    slow_steps: int
    baseline_s: float
    median_s: float  # over the slow steps
    peak_s: float
    ratio: float  # median_s / baseline_s
    ongoing: bool  # not closed before the last sample


def detect_slowdown(
    samples: Sequence[tuple[int, float]],
    *,
    baseline_steps: int = 20,
    threshold_pct: float = 20.0,
    sustained_steps: int = 5,
    max_gap: int = 2,
) -> list[Slowdown]:
    """Stretches where the iteration time stayed ``threshold_pct``% or more above the baseline.

    ``samples`` are (step, iteration time). The baseline is the median of the first
    ``baseline_steps`` samples: the job's own normal speed, taken once. A rolling baseline would
    slowly absorb a slowdown that lasts (a throttled node, a degraded link) and stop reporting it;
    a fixed one keeps reporting until the job is restarted. Every sample is judged, those of the
    baseline window included (the median ignores a few slow ones among them). A run needs
    ``sustained_steps`` slow samples. Empty when there are fewer samples than ``baseline_steps``.
    """
    ordered = sorted((step, value) for step, value in samples if math.isfinite(value) and value > 0)
    if len(ordered) < max(1, baseline_steps):
        return []
    baseline = median(value for _, value in ordered[: max(1, baseline_steps)])
    limit = baseline * (1 + threshold_pct / 100)
    flags = [value >= limit for _, value in ordered]
    found = []
    for first, last in _runs(flags, max_gap):
        slow = [value for _, value in ordered[first : last + 1] if value >= limit]
        if len(slow) < sustained_steps:
            continue
        middle = median(slow)
        found.append(
            Slowdown(
                start_step=ordered[first][0],
                end_step=ordered[last][0],
                slow_steps=len(slow),
                baseline_s=baseline,
                median_s=middle,
                peak_s=max(slow),
                ratio=middle / baseline,
                ongoing=len(ordered) - 1 - last <= max_gap,
            )
        )
    return found


# ------------------------------------------------------------------------------------------------
# Hangs


@dataclass(frozen=True, slots=True)
class Hang:
    """No rank of a job has made progress for much longer than an iteration takes.

    ``first_stopped_ranks`` are the ranks whose last progress is the earliest (within the
    tolerance): the suspects. When every rank stopped together it lists them all and
    ``lead_s`` is 0: the logs alone cannot tell which rank got stuck first.
    """

    since: datetime  # the job's last progress, any rank
    silent_s: float
    threshold_s: float
    first_stopped_ranks: tuple[int, ...]
    first_stopped_at: datetime
    lead_s: float  # how long before the other ranks' last progress the suspects stopped
    ranks: int


def detect_hang(
    progress_by_rank: Mapping[int, datetime],
    *,
    now: datetime,
    median_iteration_s: float,
    k: float = 10.0,
    min_silence_s: float = 300.0,
    tolerance_s: float | None = None,
) -> Hang | None:
    """A hang when every rank has been silent for ``k`` median iterations (at least ``min_silence_s``).

    ``progress_by_rank`` is each rank's last progress time. ``median_iteration_s`` is the job's
    median time between progress reports: the iteration time, times the logging interval when
    progress is logged every N iterations. ``min_silence_s`` keeps checkpoint saves and
    evaluation, which pause progress for minutes, from reading as hangs. Ranks whose last
    progress lies within ``tolerance_s`` (default: half an iteration) of the earliest one
    stopped first: in synchronous training the others block in the next collective and stop
    about one iteration later.
    """
    if median_iteration_s <= 0:
        raise ValueError(f"median_iteration_s must be positive, not {median_iteration_s}")
    if not progress_by_rank:
        return None
    threshold_s = max(k * median_iteration_s, min_silence_s)
    since = max(progress_by_rank.values())
    silent_s = (now - since).total_seconds()
    if silent_s < threshold_s:
        return None
    tolerance = median_iteration_s / 2 if tolerance_s is None else tolerance_s
    earliest = min(progress_by_rank.values())
    first = sorted(
        rank for rank, at in progress_by_rank.items() if (at - earliest).total_seconds() <= tolerance
    )
    others = [at for rank, at in progress_by_rank.items() if rank not in first]
    suspects_last = max(progress_by_rank[rank] for rank in first)
    lead_s = (min(others) - suspects_last).total_seconds() if others else 0.0
    return Hang(
        since=since,
        silent_s=silent_s,
        threshold_s=threshold_s,
        first_stopped_ranks=tuple(first),
        first_stopped_at=earliest,
        lead_s=lead_s,
        ranks=len(progress_by_rank),
    )


@dataclass(frozen=True, slots=True)
class FlatGpus:
    """Every GPU of a job has shown (almost) no activity for the whole window."""

    since: datetime  # when the last of the GPUs went flat (its first flat sample)
    flat_s: float
    gpus: tuple[Hashable, ...]
    peak_pct: float  # the highest activity any of them showed while flat


def detect_flat_gpus(
    activity_by_gpu: Mapping[Hashable, Sequence[tuple[datetime, float]]],
    *,
    now: datetime,
    window_s: float,
    flat_below_pct: float = 1.0,
) -> FlatGpus | None:
    """All of a job's GPUs below ``flat_below_pct``% activity for at least ``window_s`` up to ``now``.

    Each GPU's samples are (time, activity %). Its flat stretch is the trailing run of samples
    below the threshold; the job is flat when every GPU's stretch began at or before
    ``now - window_s`` and every GPU has a sample inside the window (so stale data never counts
    as flat). A missing value (NaN) breaks a stretch. Feed SM_ACTIVE where present: in an NCCL
    hang the waiting ranks spin in a kernel that keeps GPU_UTIL and GR_ENGINE_ACTIVE near 100%
    while SM_ACTIVE drops to a few percent.
    """
    if not activity_by_gpu:
        return None
    window_start = now.timestamp() - window_s
    starts = []
    peak = 0.0
    for samples in activity_by_gpu.values():
        ordered = sorted((at, pct) for at, pct in samples if at <= now)
        if not ordered or ordered[-1][0].timestamp() < window_start:
            return None
        flat_from = None
        for at, pct in reversed(ordered):
            if not pct < flat_below_pct:
                break
            flat_from = at
            peak = max(peak, pct)
        if flat_from is None or flat_from.timestamp() > window_start:
            return None
        starts.append(flat_from)
    since = max(starts)
    return FlatGpus(
        since=since,
        flat_s=(now - since).total_seconds(),
        gpus=tuple(activity_by_gpu),
        peak_pct=peak,
    )


# ------------------------------------------------------------------------------------------------
# Loss


@dataclass(frozen=True, slots=True)
class LossAnomaly:
    """Consecutive points whose loss went NaN, infinite, or spiked above the robust limit."""

    kind: str  # NAN | INF | SPIKE
    first_step: int
    last_step: int
    points: int
    peak_loss: float  # the highest loss of a spike; nan or inf for those kinds
    median: float | None  # rolling median of the normal points before the first one
    threshold: float | None  # the loss above which a point was a spike there


def detect_loss_anomalies(
    points: Sequence[tuple[int, float]],
    *,
    window: int = 50,
    k: float = 6.0,
    min_history: int = 10,
) -> list[LossAnomaly]:
    """NaN / Inf losses and spikes, each run of consecutive points of one kind reported once.

    A finite loss is a spike when it exceeds median + ``k`` x 1.4826 x MAD of the last ``window``
    normal points before it (the median absolute deviation, scaled to estimate a standard
    deviation; floored at 0.1% of the median). Only upward jumps count, so the steep early
    decrease of a healthy run never does, and the limit is only drawn once ``min_history``
    normal points exist. Spikes and non-finite points are kept out of the history, so a loss
    that stays up keeps being reported as one growing run instead of becoming the new normal.
    """
    history: deque[float] = deque(maxlen=window)
    found: list[LossAnomaly] = []
    current: LossAnomaly | None = None
    for step, loss in sorted(points, key=lambda point: point[0]):
        kind = None
        middle = limit = None
        if math.isnan(loss):
            kind = NAN
        elif math.isinf(loss):
            kind = INF
        elif len(history) >= min_history:
            middle = median(history)
            spread = median(abs(value - middle) for value in history) * MAD_TO_SIGMA
            limit = middle + k * max(spread, MIN_RELATIVE_SPREAD * abs(middle))
            if loss > limit:
                kind = SPIKE
        if kind is None:
            history.append(loss)
            if current is not None:
                found.append(current)
                current = None
            continue
        if current is not None and current.kind == kind:
            peak = max(current.peak_loss, loss) if kind == SPIKE else current.peak_loss
            current = LossAnomaly(
                kind, current.first_step, step, current.points + 1, peak, current.median, current.threshold
            )
            continue
        if current is not None:
            found.append(current)
        current = LossAnomaly(kind, step, step, 1, loss, middle, limit)
    if current is not None:
        found.append(current)
    return found
