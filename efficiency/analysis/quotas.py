"""Quota planning: hourly demand per department and GPU model, and next cycle's proposal.

**Demand** in an hour is the GPUs a department's jobs held *or waited for*: a job demands its
GPUs from submission until it ends (or until now, when it has not), so a department whose queue
is long shows the demand it could not place, not only what its fixed partition let it run.

**Proposal**, per (department, GPU model), from the last cycle's hourly demand, in five steps that
are stored with the quota so that anyone can redo the arithmetic:

1. *percentile*: the chosen percentile of hourly demand, rounded up to whole GPUs (the target);
2. *bound*: at most ``max_change_pct`` above or below the current guarantee (a queue without a
   current guarantee is not bounded);
3. *floor*: at least ``floor_gpus`` for every queue that has demand or a current guarantee;
4. *share*: Σ guaranteed of a GPU model ≤ capacity × ``guaranteed_share`` (the budget; the rest
   of the capacity is the shared pool). When the numbers after step 3 add up to more, GPUs are
   taken in this order, each stage only when the ones before it could not free enough:

   a. *surplus*: from departments that keep more than they need (their target, or the floor),
      down to what they need — a department the bound held above its demand loses more than the
      bound here, because the share wins over the bound;
   b. *growth*: from departments above their current guarantee, down to it (no one is cut yet);
   c. *within the bound*: cuts, down to the bound's lower end (or the floor);
   d. *beyond the bound*: cuts, down to the floor;
   e. *floors*: only when the floors alone exceed the budget, the floors themselves.

   Within a stage GPUs are taken by water-filling, weighted by each department's current
   guarantee (its bounded number when it has none): a level λ is found such that every
   department keeps at most λ × weight above the stage's minimum, and the total meets the budget.
   So a department short of GPUs (demand above its guarantee) is never cut while another keeps
   more than it needs, and no one is cut while another still grows.
5. *rounding*: the stage's exact numbers are rounded down to whole GPUs, and the GPUs left to
   reach the budget go one each to the largest remainders (ties: the larger number, then the
   department code).

When the bound and the share conflict, the share wins: the budget is never exceeded.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from efficiency.analysis.stats import percentile_sorted

HOUR_S = 3600.0

Key = tuple[str, str]  # (department code, GPU model)


@dataclass(frozen=True, slots=True)
class GpuInterval:
    """``gpus`` GPUs held or asked for by ``key`` over [begin_s, end_s)."""

    key: Key
    gpus: float  # fractions of shared GPUs included
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
    """Which rule decided a proposed number (the last step that changed it)."""

    NONE = "none"  # the percentile target itself
    MAX_INCREASE = "max_increase"
    MAX_DECREASE = "max_decrease"
    FLOOR = "floor"
    CAPACITY = "capacity"  # the guaranteed share (step 4)


class ShareStage:
    """The stages of fitting a GPU model's guarantees into its guaranteed share, in order."""

    SURPLUS = "surplus"
    GROWTH = "growth"
    WITHIN_BOUND = "within_bound"
    BEYOND_BOUND = "beyond_bound"
    FLOORS = "floors"

    ORDER = (SURPLUS, GROWTH, WITHIN_BOUND, BEYOND_BOUND, FLOORS)


@dataclass(frozen=True, slots=True)
class DemandStats:
    hours: int
    mean_gpus: float
    p50_gpus: float
    percentile_gpus: float
    peak_gpus: float


@dataclass(frozen=True)
class QuotaProposal:
    """One proposed guarantee and the steps that produced it (see the module doc).

    ``steps`` are plain dicts (stored as JSON with the quota): each names its ``step`` and holds
    the numbers it used and its result in ``gpus``.
    """

    department: str
    gpu_model: str
    current_gpus: int | None
    proposed_gpus: int
    target_gpus: int  # the percentile, rounded up
    bound: str  # Bound.*
    stats: DemandStats
    steps: tuple[dict, ...] = ()
    lower_gpus: int | None = None  # the change band around the current guarantee
    upper_gpus: int | None = None
    percentile: float = 75.0

    def explanation(self) -> dict:
        """The steps behind the proposal and a summary of them, as stored with the quota (JSON)."""
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
            "steps": [dict(step) for step in self.steps],
        }


@dataclass
class _Draft:
    key: Key
    current: int | None
    stats: DemandStats
    target: int
    value: int  # the number so far: after the bound, then the floor, then the share
    bound: str
    need: int  # the target, or the floor for a queue that asks for GPUs
    floor: int  # the floor that applies (0 for a queue without demand or guarantee)
    lower: int | None = None
    upper: int | None = None
    bounded: int = 0  # after step 2
    floored: int = 0  # after step 3
    # Set when the share decided the number: the stage, its minimum and the allowance above it.
    stage: str | None = None
    keep: int = 0
    allowed: Fraction | None = None
    exact: Fraction | None = None
    rounded_up: bool = False

    @property
    def weight(self) -> int:
        return self.current or max(self.value, 1)

    @property
    def asks(self) -> bool:
        return bool(self.current) or self.stats.peak_gpus > 0


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
    """Next cycle's guaranteed GPUs per (department, GPU model), each with its steps (module doc).

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
        draft = _Draft(key, current.get(key), stats, target, target, Bound.NONE, need=target, floor=0)
        if draft.current:
            change = settings.max_change_pct / 100
            draft.lower = math.ceil(round(draft.current * (1 - change), 6))
            draft.upper = math.floor(round(draft.current * (1 + change), 6))
            if draft.value > draft.upper:
                draft.value, draft.bound = draft.upper, Bound.MAX_INCREASE
            elif draft.value < draft.lower:
                draft.value, draft.bound = draft.lower, Bound.MAX_DECREASE
        draft.bounded = draft.value
        if draft.asks:
            draft.floor = settings.floor_gpus
            draft.need = max(target, draft.floor)
            if draft.value < draft.floor:
                draft.value, draft.bound = draft.floor, Bound.FLOOR
        draft.floored = draft.value
        drafts.append(draft)

    budgets, asked = {}, {}
    for model, gpus in capacity.items():
        budgets[model] = math.floor(round(gpus * settings.guaranteed_share, 6))
        of_model = [d for d in drafts if d.key[1] == model]
        asked[model] = sum(d.floored for d in of_model)
        _fit_to_budget(of_model, budgets[model])
    return [
        _proposal(
            d, settings, capacity_gpus=capacity[d.key[1]], budget=budgets[d.key[1]], asked=asked[d.key[1]]
        )
        for d in drafts
    ]


def _stage_minimum(draft: _Draft, stage: str, value: int) -> int | None:
    """The least ``draft`` keeps in ``stage`` (None: the stage does not touch it)."""
    if stage == ShareStage.SURPLUS:
        return draft.need if value > draft.need else None
    if stage == ShareStage.GROWTH:
        base = max(draft.current or 0, draft.floor)
        return base if value > base else None
    if stage == ShareStage.WITHIN_BOUND:
        return max(draft.lower or 0, draft.floor) if draft.lower is not None else draft.floor
    if stage == ShareStage.BEYOND_BOUND:
        return draft.floor
    return 0


def _fit_to_budget(drafts: list[_Draft], budget: int) -> None:
    """Step 4 and 5 of the module doc for one GPU model: take GPUs stage by stage until the
    guarantees fit ``budget``, then round to whole GPUs with the budget met exactly."""
    values = {id(d): Fraction(d.value) for d in drafts}
    excess = sum(values.values()) - budget
    if excess <= 0:
        return
    for stage in ShareStage.ORDER:
        items = []
        for d in drafts:
            minimum = _stage_minimum(d, stage, int(values[id(d)]))
            if minimum is not None and values[id(d)] > minimum:
                items.append((d, Fraction(minimum)))
        room = sum(values[id(d)] - minimum for d, minimum in items)
        if not items or room <= 0:
            continue
        if room <= excess:
            # The whole stage gives all it can: every department in it keeps its minimum.
            for d, minimum in items:
                values[id(d)] = minimum
                d.stage, d.keep, d.allowed, d.exact = stage, int(minimum), Fraction(0), minimum
            excess -= room
            if excess == 0:
                break
            continue
        level = _water_level(
            [(values[id(d)] - minimum, Fraction(d.weight)) for d, minimum in items], room - excess
        )
        for d, minimum in items:
            allowed = level * d.weight
            if values[id(d)] - minimum > allowed:
                values[id(d)] = minimum + allowed
                d.stage, d.keep, d.allowed, d.exact = stage, int(minimum), allowed, minimum + allowed
        break
    _round_to_budget(drafts, values, budget)


def _water_level(items: list[tuple[Fraction, Fraction]], total: Fraction) -> Fraction:
    """The level λ with Σ min(room, λ × weight) = ``total`` over (room, weight) items.

    ``total`` is less than Σ room, so at least one item is held at its allowance λ × weight.
    """
    remaining = total
    open_weight = sum(weight for _, weight in items)
    for room, weight in sorted(items, key=lambda item: item[0] / item[1]):
        # Below this item's breakpoint every open item is held at λ × weight.
        if room / weight * open_weight >= remaining:
            break
        remaining -= room
        open_weight -= weight
    return remaining / open_weight


def _round_to_budget(drafts: list[_Draft], values: dict[int, Fraction], budget: int) -> None:
    """Whole GPUs: round down, then one more to the largest remainders until the budget is met."""
    whole = {id(d): math.floor(values[id(d)]) for d in drafts}
    left = budget - sum(whole.values())
    fractional = [d for d in drafts if values[id(d)] != whole[id(d)]]
    fractional.sort(key=lambda d: (-(values[id(d)] - whole[id(d)]), -values[id(d)], d.key))
    for d in fractional[: max(left, 0)]:
        whole[id(d)] += 1
        d.rounded_up = True
    for d in drafts:
        if whole[id(d)] != d.value:
            d.value, d.bound = whole[id(d)], Bound.CAPACITY


def _proposal(
    d: _Draft, settings: ProposalSettings, *, capacity_gpus: int, budget: int, asked: int
) -> QuotaProposal:
    exact = d.exact if d.stage is not None and d.exact is not None else Fraction(d.floored)
    steps = (
        {
            "step": "percentile",
            "percentile": settings.percentile,
            "hours": d.stats.hours,
            "mean_gpus": round(d.stats.mean_gpus, 2),
            "p50_gpus": round(d.stats.p50_gpus, 2),
            "peak_gpus": round(d.stats.peak_gpus, 2),
            "percentile_gpus": round(d.stats.percentile_gpus, 6),
            "gpus": d.target,
        },
        {
            "step": "bound",
            "current_gpus": d.current,
            "max_change_pct": settings.max_change_pct,
            "lower_gpus": d.lower,
            "upper_gpus": d.upper,
            "gpus": d.bounded,
        },
        {"step": "floor", "floor_gpus": d.floor, "gpus": d.floored},
        {
            "step": "share",
            "gpu_model": d.key[1],
            "capacity_gpus": capacity_gpus,
            "guaranteed_share": settings.guaranteed_share,
            "budget_gpus": budget,
            "asked_gpus": asked,
            "stage": d.stage,
            "keep_gpus": d.keep if d.stage is not None else None,
            "allowed_gpus": float(d.allowed) if d.allowed is not None else None,
            "gpus": float(exact),
        },
        {"step": "rounding", "exact_gpus": float(exact), "rounded_up": d.rounded_up, "gpus": d.value},
    )
    return QuotaProposal(
        department=d.key[0],
        gpu_model=d.key[1],
        current_gpus=d.current,
        proposed_gpus=d.value,
        target_gpus=d.target,
        bound=d.bound,
        stats=d.stats,
        steps=steps,
        lower_gpus=d.lower,
        upper_gpus=d.upper,
        percentile=settings.percentile,
    )


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
