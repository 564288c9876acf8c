"""Verification of a resolved ticket's gain: matched windows of one job family, before and after.

A resolved ticket stays *verifying* until the window after the fix holds enough data, then becomes
*verified_gain*, *no_gain* or *regressed*, with the numbers beside the gain the recommendation
expected. The caller matches the windows (same job family, comparable length) and reads the series;
this module only decides.

**Metrics.** Each window carries what the portal knows of the family's jobs in it:

- ``iteration_s``: seconds per iteration, one value per log line (Megatron's ``elapsed time per
  iteration``, tqdm's ``s/it``; rates such as ``it/s`` or ``samples/sec`` at a fixed batch enter as
  their inverse, as ``ThroughputTracker`` reads them). Lower is better.
- ``sm_activity``: SM activity, 0–1, one value per job-hour. Higher is better.
- ``wait_share``: the share of each hour the GPUs waited on input, 0–1. Lower is better; shown, never
  decisive (a fix may rightly leave the input path alone).
- ``gpu_hours`` / ``work_units``: GPU-hours held per unit of work (iterations × global batch, or
  samples), one number per window. Lower is better.

**Gain share** is the share of GPU time the change saves, the unit of the recommendations'
``gain_share`` (``1 - 1/speedup``): ``1 - after/before`` for a time or a cost, ``1 - before/after``
for an activity (at a fixed amount of work, time falls as activity rises). Twice as fast is 0.5.

**Primary metric**, the one that decides: iteration time when both windows have enough iteration
lines; else GPU-hours per unit of work when both windows know their work; else SM activity when
both have enough hours. Iteration time comes first because it measures the job's speed directly and
is immune to the node's other tenants; activity last because a busier GPU is not always a faster job.
Where the before window has iteration lines enough but the after window not yet, the ticket waits
for them rather than judge from a weaker metric.

**Enough data.** The after window must hold ``min_after_gpu_h`` GPU-hours and the primary metric's
minimum (``min_after_iterations`` lines, ``min_activity_hours`` hours). Short of it the verdict is
*verifying* and ``shortfalls`` says which minimum is not met, what there is and what is needed.

**Noise.** Iteration times carry checkpoint saves, evaluations and a slow start; hourly activity
varies with the data. Both are compared by their medians, and the uncertainty of the median ratio
comes from a percentile bootstrap: each window is resampled with replacement ``bootstrap_rounds``
times (numpy's generator, seeded from ``seed``: the same input always gives the same verdict), the
gain share is computed from each pair of resampled medians, and the ``confidence`` interval is read
from those gain shares. The windows are independent samples, so each side is resampled on its own.

- *verified_gain*: the interval's lower end is above ``min_relative_change`` (it excludes 0 and
  clears the noise band that a family's run-to-run variation alone produces).
- *regressed*: the interval's upper end is below ``-regression_threshold``.
- *no_gain*: anything else, including a gain too small or too uncertain to tell.

GPU-hours per unit of work is one number per window, with no spread to resample: its interval is
the point itself, and only the noise band guards it.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

VERIFYING, VERIFIED_GAIN, NO_GAIN, REGRESSED = "verifying", "verified_gain", "no_gain", "regressed"
OUTCOMES = (VERIFYING, VERIFIED_GAIN, NO_GAIN, REGRESSED)

ITERATION_S, GPU_H_PER_UNIT = "iteration_s", "gpu_h_per_unit"
SM_ACTIVITY, WAIT_SHARE = "sm_activity", "wait_share"

# Metric → index for its own random stream, so one metric's resamples do not depend on which
# other metrics a window happens to carry.
_STREAM = {ITERATION_S: 1, SM_ACTIVITY: 2, WAIT_SHARE: 3}
# Bootstrap work per chunk (resamples × sample size), to bound memory on long windows.
_CHUNK_VALUES = 2_000_000
# A gain share where the after value is 0 and the before is not: a floor instead of -inf.
_FLOOR = -1e6


@dataclass(frozen=True, slots=True)
class Window:
    """One job family's samples over one window (before or after the fix)."""

    iteration_s: Sequence[float] = ()  # seconds per iteration, one per log line
    sm_activity: Sequence[float] = ()  # SM activity 0–1, one per job-hour
    wait_share: Sequence[float] = ()  # share of the hour waiting on input 0–1, one per job-hour
    gpu_hours: float = 0.0  # GPU-hours the family held in the window
    work_units: float | None = None  # iterations × global batch, or samples; None where unknown

    @property
    def gpu_h_per_unit(self) -> float | None:
        """GPU-hours per unit of work, where both are known and positive."""
        if self.work_units is None or not _positive(self.work_units) or not _positive(self.gpu_hours):
            return None
        return self.gpu_hours / self.work_units


@dataclass(frozen=True, slots=True)
class VerificationSettings:
    """Thresholds a deployment may tune (settings.PORTAL_TICKETS)."""

    min_after_iterations: int = 200  # iteration lines the after window needs for iteration time
    min_before_iterations: int = 50  # … and the before window, for iteration time to be primary
    min_after_gpu_h: float = 8.0  # GPU-hours the after window must hold before any verdict
    min_activity_hours: int = 6  # hourly activity samples each side needs for activity to decide
    min_relative_change: float = 0.05  # the noise band: a gain must clear it to count
    regression_threshold: float = 0.05  # a loss beyond this (gain share below its negative) regresses
    confidence: float = 0.95  # of the bootstrap interval
    bootstrap_rounds: int = 2000
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Comparison:
    """One metric, both windows: medians, relative change, and the gain share with its interval."""

    metric: str
    before: float
    after: float
    before_n: int  # samples (1 for GPU-hours per unit of work)
    after_n: int
    relative_change: float  # after / before - 1 (None-free: before is never 0 here)
    gain_share: float | None  # share of GPU time saved; None for the wait share
    gain_low: float | None  # the bootstrap interval of the gain share
    gain_high: float | None

    def as_json(self) -> dict:
        return {
            "metric": self.metric,
            "before": self.before,
            "after": self.after,
            "before_n": self.before_n,
            "after_n": self.after_n,
            "relative_change": self.relative_change,
            "gain_share": self.gain_share,
            "gain_low": self.gain_low,
            "gain_high": self.gain_high,
        }


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A minimum the after window does not meet yet: what it is, what there is, what is needed."""

    what: str  # "gpu_hours", "iterations", "activity_hours", or "before_metric" (nothing to compare)
    have: float
    need: float

    @property
    def missing(self) -> float:
        return max(0.0, self.need - self.have)

    def as_json(self) -> dict:
        return {"what": self.what, "have": self.have, "need": self.need, "missing": self.missing}


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome, the metric that decided it and the numbers beside the expected gain."""

    outcome: str
    primary: str | None  # the deciding metric; None while nothing can decide
    measured_gain_share: float | None
    gain_low: float | None
    gain_high: float | None
    expected_gain_share: float | None
    comparisons: tuple[Comparison, ...] = ()
    shortfalls: tuple[Shortfall, ...] = ()  # non-empty exactly when verifying
    confidence: float = 0.95
    noise_band: float = 0.05

    @property
    def share_of_expected(self) -> float | None:
        """Measured gain / expected gain: 1.0 is the gain the recommendation promised."""
        if self.measured_gain_share is None or not self.expected_gain_share:
            return None
        return self.measured_gain_share / self.expected_gain_share

    def comparison(self, metric: str) -> Comparison | None:
        return next((c for c in self.comparisons if c.metric == metric), None)

    def as_json(self) -> dict:
        return {
            "outcome": self.outcome,
            "primary": self.primary,
            "measured_gain_share": self.measured_gain_share,
            "gain_low": self.gain_low,
            "gain_high": self.gain_high,
            "expected_gain_share": self.expected_gain_share,
            "share_of_expected": self.share_of_expected,
            "confidence": self.confidence,
            "noise_band": self.noise_band,
            "comparisons": [c.as_json() for c in self.comparisons],
            "shortfalls": [s.as_json() for s in self.shortfalls],
        }


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _clean(values: Sequence[float], *, positive: bool) -> np.ndarray:
    """Finite values only (and positive ones where 0 means a broken line, as for iteration times)."""
    array = np.asarray([float(v) for v in values], dtype=float)
    keep = np.isfinite(array) & ((array > 0) if positive else (array >= 0))
    return array[keep]


def _gain(before: np.ndarray | float, after: np.ndarray | float, *, higher_is_better: bool):
    """Share of GPU time saved, elementwise; 0 where both sides are 0, a floor instead of -inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = 1.0 - (np.divide(before, after) if higher_is_better else np.divide(after, before))
    return np.nan_to_num(share, nan=0.0, neginf=_FLOOR, posinf=1.0)


def _resampled_medians(values: np.ndarray, rounds: int, rng: np.random.Generator) -> np.ndarray:
    size = len(values)
    medians = np.empty(rounds)
    step = max(1, _CHUNK_VALUES // size)
    for start in range(0, rounds, step):
        count = min(step, rounds - start)
        medians[start : start + count] = np.median(values[rng.integers(0, size, (count, size))], axis=1)
    return medians


def _compare(
    metric: str,
    before: np.ndarray,
    after: np.ndarray,
    settings: VerificationSettings,
    *,
    higher_is_better: bool | None,
) -> Comparison | None:
    """Medians and the bootstrap interval of the gain share; ``higher_is_better=None``: no gain share."""
    if not len(before) or not len(after):
        return None
    before_median, after_median = float(np.median(before)), float(np.median(after))
    if before_median <= 0:
        return None  # nothing to be relative to
    gain = low = high = None
    if higher_is_better is not None:
        gain = float(_gain(before_median, after_median, higher_is_better=higher_is_better))
        rng = np.random.default_rng([settings.seed, _STREAM[metric]])
        rounds = max(1, settings.bootstrap_rounds)
        shares = _gain(
            _resampled_medians(before, rounds, rng),
            _resampled_medians(after, rounds, rng),
            higher_is_better=higher_is_better,
        )
        tail = (1.0 - settings.confidence) / 2 * 100
        low, high = (float(v) for v in np.percentile(shares, [tail, 100 - tail]))
    return Comparison(
        metric=metric,
        before=before_median,
        after=after_median,
        before_n=len(before),
        after_n=len(after),
        relative_change=after_median / before_median - 1.0,
        gain_share=gain,
        gain_low=low,
        gain_high=high,
    )


def _cost_comparison(before: Window, after: Window) -> Comparison | None:
    before_cost, after_cost = before.gpu_h_per_unit, after.gpu_h_per_unit
    if before_cost is None or after_cost is None:
        return None
    gain = float(_gain(before_cost, after_cost, higher_is_better=False))
    return Comparison(
        metric=GPU_H_PER_UNIT,
        before=before_cost,
        after=after_cost,
        before_n=1,
        after_n=1,
        relative_change=after_cost / before_cost - 1.0,
        gain_share=gain,
        gain_low=gain,
        gain_high=gain,
    )


def _primary_and_shortfalls(
    before: Window,
    after: Window,
    iterations: tuple[np.ndarray, np.ndarray],
    activity: tuple[np.ndarray, np.ndarray],
    settings: VerificationSettings,
) -> tuple[str | None, list[Shortfall]]:
    """The metric that will decide, and what the after window still lacks for it."""
    shortfalls = []
    after_gpu_h = after.gpu_hours if math.isfinite(after.gpu_hours) else 0.0
    if after_gpu_h < settings.min_after_gpu_h:
        shortfalls.append(Shortfall("gpu_hours", max(0.0, after_gpu_h), settings.min_after_gpu_h))
    if len(iterations[0]) >= settings.min_before_iterations:
        if len(iterations[1]) < settings.min_after_iterations:
            shortfalls.append(Shortfall("iterations", len(iterations[1]), settings.min_after_iterations))
        return ITERATION_S, shortfalls
    if before.gpu_h_per_unit is not None and after.gpu_h_per_unit is not None:
        return GPU_H_PER_UNIT, shortfalls
    if len(activity[0]) >= settings.min_activity_hours:
        if len(activity[1]) < settings.min_activity_hours:
            shortfalls.append(Shortfall("activity_hours", len(activity[1]), settings.min_activity_hours))
        return SM_ACTIVITY, shortfalls
    # The before window has no metric the after window could be held against (yet: the after
    # window may still gain its work count, the before one nothing).
    shortfalls.append(Shortfall("before_metric", 0, 1))
    return None, shortfalls


def verify(
    before: Window,
    after: Window,
    *,
    expected_gain_share: float | None,
    settings: VerificationSettings,
) -> Verdict:
    """Judge the gain of a fix from matched windows before and after it (method: module docstring)."""
    iterations = (_clean(before.iteration_s, positive=True), _clean(after.iteration_s, positive=True))
    activity = (_clean(before.sm_activity, positive=False), _clean(after.sm_activity, positive=False))
    waits = (_clean(before.wait_share, positive=False), _clean(after.wait_share, positive=False))
    comparisons = [
        c
        for c in (
            _compare(ITERATION_S, *iterations, settings, higher_is_better=False),
            _cost_comparison(before, after),
            _compare(SM_ACTIVITY, *activity, settings, higher_is_better=True),
            _compare(WAIT_SHARE, *waits, settings, higher_is_better=None),
        )
        if c is not None
    ]
    primary, shortfalls = _primary_and_shortfalls(before, after, iterations, activity, settings)
    deciding = next((c for c in comparisons if c.metric == primary), None)
    common = {
        "primary": primary,
        "expected_gain_share": expected_gain_share,
        "comparisons": tuple(comparisons),
        "confidence": settings.confidence,
        "noise_band": settings.min_relative_change,
    }
    if shortfalls or deciding is None or deciding.gain_low is None or deciding.gain_high is None:
        gain = deciding.gain_share if deciding is not None else None
        low = deciding.gain_low if deciding is not None else None
        high = deciding.gain_high if deciding is not None else None
        return Verdict(
            outcome=VERIFYING,
            measured_gain_share=gain,
            gain_low=low,
            gain_high=high,
            shortfalls=tuple(shortfalls) or (Shortfall("before_metric", 0, 1),),
            **common,
        )
    if deciding.gain_low > settings.min_relative_change:
        outcome = VERIFIED_GAIN
    elif deciding.gain_high < -settings.regression_threshold:
        outcome = REGRESSED
    else:
        outcome = NO_GAIN
    return Verdict(
        outcome=outcome,
        measured_gain_share=deciding.gain_share,
        gain_low=deciding.gain_low,
        gain_high=deciding.gain_high,
        **common,
    )
