"""Quota planning: hourly demand per department and GPU model, and next cycle's proposal.

**Demand** in an hour is the GPUs a department's jobs held *or waited for*: a job demands its
GPUs from submission until it ends (or until now, when it has not), so a department whose queue
is long shows the demand it could not place, not only what its fixed partition let it run.

**Proposal**, per (department, GPU model), from the last cycle's hourly demand:

1. *target* = the chosen percentile of hourly demand, rounded up to whole GPUs;
2. *change bound*: at most ``max_change_pct`` above or below the current guarantee
   (a queue without a current guarantee is not bounded);
3. *floor*: at least ``floor_gpus`` for every queue that has demand or a current guarantee;
4. *capacity*: Σ guaranteed of a GPU model ≤ capacity × ``guaranteed_share``; when the sum is
   over, the part of every guarantee above its floor is scaled down by one factor (largest
   remainder rounding, so the budget is met exactly). The rest of the capacity is the shared
   pool, scheduled on demand.

Each number keeps the statistics behind it and the bound that decided it, which is what a
department head asks in the review meeting: "why did my quota change?".
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from efficiency.analysis.stats import percentile_sorted

HOUR_S = 3600.0

Key = tuple[str, str]  # (department code, GPU model)


@dataclass(frozen=True, slots=True)
class GpuInterval:
    """``gpus`` GPUs held or asked for by ``key`` over [begin_s, end_s)."""

    key: Key
    gpus: int
    begin_s: float
    end_s: float


def hour_count(start_s: float, end_s: float) -> int:
    return max(0, math.ceil((end_s - start_s) / HOUR_S))


def hourly_mean_gpus(
    intervals: Iterable[GpuInterval], *, start_s: float, end_s: float
) -> dict[Key, list[float]]:
    """Mean GPUs per key in each hour of [start_s, end_s) (the last hour may be partial).

    Whole hours inside an interval go through a difference array, so the cost is one step per
    interval plus one per hour and key, however long the intervals are.
    """
    hours = hour_count(start_s, end_s)
    seconds: dict[Key, list[float]] = {}
    steps: dict[Key, list[float]] = {}
    for interval in intervals:
        begin = max(interval.begin_s, start_s)
        end = min(interval.end_s, end_s)
        if end <= begin or interval.gpus <= 0:
            continue
        row = seconds.get(interval.key)
        if row is None:
            row = seconds[interval.key] = [0.0] * hours
            steps[interval.key] = [0.0] * (hours + 1)
        first = int((begin - start_s) // HOUR_S)
        last = int((end - start_s) // HOUR_S)
        if first == last:
            row[first] += interval.gpus * (end - begin)
            continue
        row[first] += interval.gpus * (start_s + (first + 1) * HOUR_S - begin)
        if last < hours:
            row[last] += interval.gpus * (end - (start_s + last * HOUR_S))
        step = steps[interval.key]
        step[first + 1] += interval.gpus * HOUR_S
        step[min(last, hours)] -= interval.gpus * HOUR_S
    lengths = [min(HOUR_S, end_s - (start_s + h * HOUR_S)) for h in range(hours)]
    means: dict[Key, list[float]] = {}
    for key, row in seconds.items():
        running = 0.0
        step = steps[key]
        means[key] = [(row[h] + (running := running + step[h])) / lengths[h] for h in range(hours)]
    return means


@dataclass(frozen=True)
class ProposalSettings:
    """The committee's knobs for the proposal (stored on each cycle with its numbers)."""

    percentile: float = 75.0
    max_change_pct: float = 25.0
    floor_gpus: int = 0
    guaranteed_share: float = 0.8

    def __post_init__(self) -> None:
        if not 0 < self.percentile <= 100:
            raise ValueError(f"percentile must be in (0, 100], not {self.percentile}")
        if self.max_change_pct < 0:
            raise ValueError(f"max_change_pct must be 0 or more, not {self.max_change_pct}")
        if self.floor_gpus < 0:
            raise ValueError(f"floor_gpus must be 0 or more, not {self.floor_gpus}")
        if not 0 < self.guaranteed_share <= 1:
            raise ValueError(f"guaranteed_share must be in (0, 1], not {self.guaranteed_share}")


class Bound:
    """Which rule decided a proposed number."""

    NONE = "none"  # the percentile target itself
    MAX_INCREASE = "max_increase"
    MAX_DECREASE = "max_decrease"
    FLOOR = "floor"
    CAPACITY = "capacity"


@dataclass(frozen=True, slots=True)
class DemandStats:
    hours: int
    mean_gpus: float
    p50_gpus: float
    percentile_gpus: float
    peak_gpus: float


@dataclass(frozen=True)
class QuotaProposal:
    department: str
    gpu_model: str
    current_gpus: int | None
    proposed_gpus: int
    target_gpus: int  # the percentile, rounded up
    bound: str  # Bound.*
    stats: DemandStats
    lower_gpus: int | None = None  # the change band around the current guarantee
    upper_gpus: int | None = None
    capacity_factor: float | None = None  # set when the capacity cap scaled this model down
    percentile: float = 75.0

    @property
    def change_gpus(self) -> int | None:
        return None if self.current_gpus is None else self.proposed_gpus - self.current_gpus

    def explanation(self) -> dict:
        """The numbers behind the proposal, as stored with the quota (JSON)."""
        return {
            "percentile": self.percentile,
            "hours": self.stats.hours,
            "mean_gpus": round(self.stats.mean_gpus, 2),
            "p50_gpus": round(self.stats.p50_gpus, 2),
            "percentile_gpus": round(self.stats.percentile_gpus, 2),
            "peak_gpus": round(self.stats.peak_gpus, 2),
            "target_gpus": self.target_gpus,
            "current_gpus": self.current_gpus,
            "bound": self.bound,
            "lower_gpus": self.lower_gpus,
            "upper_gpus": self.upper_gpus,
            "capacity_factor": None if self.capacity_factor is None else round(self.capacity_factor, 4),
        }


@dataclass
class _Draft:
    key: Key
    current: int | None
    stats: DemandStats
    target: int
    value: int
    bound: str
    lower: int | None = None
    upper: int | None = None
    floor: int = 0
    factor: float | None = None


def demand_stats(series: Sequence[float], pct: float) -> DemandStats:
    if not series:
        return DemandStats(0, 0.0, 0.0, 0.0, 0.0)
    ordered = sorted(series)
    return DemandStats(
        hours=len(ordered),
        mean_gpus=sum(ordered) / len(ordered),
        p50_gpus=percentile_sorted(ordered, 50),
        percentile_gpus=percentile_sorted(ordered, pct),
        peak_gpus=ordered[-1],
    )


def propose_quotas(
    demand: Mapping[Key, Sequence[float]],
    current: Mapping[Key, int],
    capacity: Mapping[str, int],
    settings: ProposalSettings,
) -> list[QuotaProposal]:
    """Next cycle's guaranteed GPUs per (department, GPU model), each with why (module doc).

    Keys whose GPU model is not in ``capacity`` are left out: there is nothing to guarantee.
    """
    hours = max((len(series) for series in demand.values()), default=0)
    drafts: list[_Draft] = []
    for key in sorted(set(demand) | set(current)):
        if key[1] not in capacity:
            continue
        series = list(demand.get(key, ()))
        series += [0.0] * (hours - len(series))
        stats = demand_stats(series, settings.percentile)
        target = math.ceil(round(stats.percentile_gpus, 6))
        draft = _Draft(key, current.get(key), stats, target, target, Bound.NONE)
        if draft.current:
            change = settings.max_change_pct / 100
            draft.lower = math.ceil(round(draft.current * (1 - change), 6))
            draft.upper = math.floor(round(draft.current * (1 + change), 6))
            if draft.value > draft.upper:
                draft.value, draft.bound = draft.upper, Bound.MAX_INCREASE
            elif draft.value < draft.lower:
                draft.value, draft.bound = draft.lower, Bound.MAX_DECREASE
        if (draft.current or stats.peak_gpus > 0) and draft.value < settings.floor_gpus:
            draft.value, draft.bound = settings.floor_gpus, Bound.FLOOR
        draft.floor = min(draft.value, settings.floor_gpus) if (draft.current or stats.peak_gpus > 0) else 0
        drafts.append(draft)

    for model, gpus in capacity.items():
        _cap_to_budget([d for d in drafts if d.key[1] == model], math.floor(gpus * settings.guaranteed_share))

    return [
        QuotaProposal(
            department=d.key[0],
            gpu_model=d.key[1],
            current_gpus=d.current,
            proposed_gpus=d.value,
            target_gpus=d.target,
            bound=d.bound,
            stats=d.stats,
            lower_gpus=d.lower,
            upper_gpus=d.upper,
            capacity_factor=d.factor,
            percentile=settings.percentile,
        )
        for d in drafts
    ]


def _cap_to_budget(drafts: list[_Draft], budget: int) -> None:
    """Scale the part above the floors down so that the guarantees add up to ``budget``."""
    total = sum(d.value for d in drafts)
    if total <= budget:
        return
    floors = sum(d.floor for d in drafts)
    if floors >= budget:
        # Not even the floors fit: scale everything, floors included.
        base = {id(d): 0 for d in drafts}
        scalable = {id(d): d.value for d in drafts}
        room = budget
    else:
        base = {id(d): d.floor for d in drafts}
        scalable = {id(d): d.value - d.floor for d in drafts}
        room = budget - floors
    factor = room / sum(scalable.values())
    exact = {id(d): scalable[id(d)] * factor for d in drafts}
    whole = {key: math.floor(value) for key, value in exact.items()}
    left = room - sum(whole.values())
    # Largest remainder; ties go to the bigger queue, then in key order (deterministic).
    for d in sorted(drafts, key=lambda d: (-(exact[id(d)] - whole[id(d)]), -d.value, d.key))[:left]:
        whole[id(d)] += 1
    for d in drafts:
        new_value = base[id(d)] + whole[id(d)]
        if new_value != d.value:
            d.value, d.bound = new_value, Bound.CAPACITY
        d.factor = factor


def shared_pool_gpus(capacity: Mapping[str, int], guaranteed: Mapping[Key, int]) -> dict[str, int]:
    """Capacity left over per GPU model once every guarantee is served: the shared pool."""
    pool = dict(capacity)
    for (_, model), gpus in guaranteed.items():
        if model in pool:
            pool[model] -= gpus
    return pool


def resolve_gpu_model(job_model: str, node_models: Sequence[str], fallback: str) -> str:
    """The inventory's spelling of a job's GPU model.

    Schedulers name GPU types briefly ("h100" in Slurm's gres) while the inventory keeps the
    product name ("NVIDIA H100 80GB HBM3"). A blank or unknown name falls back to ``fallback``
    (the model of the job's nodes or its department's).
    """
    if not job_model:
        return fallback
    wanted = _words(job_model).removeprefix("nvidia ")
    for model in node_models:
        if model.lower() == job_model.lower():
            return model
    for model in node_models:
        if f" {wanted} " in f" {_words(model)} ":
            return model
    return fallback


def _words(name: str) -> str:
    return " ".join(name.lower().replace("-", " ").replace("_", " ").split())
