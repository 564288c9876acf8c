"""Showback: who is charged for which GPU-hours, and what they cost by the rate card.

Per department, GPU model and hour, with G the guarantee in force that hour (GPUs, so GPU-hours
in one hour) and A the GPU-hours its jobs held:

* within = min(A, G); borrowed = max(A - G, 0); unused_guarantee = G - within;
* lent: the part of the unused guarantee that other departments' borrowing used. Which idle GPU
  a borrower got is not recorded, so it is approximated: in each hour and model the borrowing
  of all departments, B, is spread over the unused guarantees, U, in proportion to them, and
  each department lent ``unused × min(B, U) / U`` (in whole milli-GPU-hours that add up to
  ``min(B, U)``: the units rounding leaves go to the largest remainders);
* charged = guaranteed + borrowed - lent: the department pays for its reservation and for what
  it borrowed; a GPU it lent is paid by the borrower, so no GPU-hour is charged twice;
* central = capacity - everything charged: the unallocated idle time no guarantee covers, and
  downtime (and jobs of no known department), kept by the platform.

So the charged GPU-hours of all departments and the central ones add up to the capacity,
exactly: the arithmetic is in whole milli-GPU-hours (``states.to_milli``). A guarantee larger
than the capacity (overcommitted quotas) shows as a negative central figure, not hidden.

Cost = charged GPU-hours × the model's rate (``Decimal``, rounded half up to the cent); a model
the rate card does not price (and no default rate) is listed in ``unpriced_models`` at cost 0.
Cost per effective GPU-hour = cost / busy GPU-hours of the department (None when nothing ran).
"""

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from efficiency.analysis.committee.states import MILLI, to_milli

CENT = Decimal("0.01")
Key = tuple[str, str]  # (department code, GPU model)


@dataclass(frozen=True)
class RateCardValue:
    """The rate card as plain values: price per GPU-hour by model, and for other models."""

    version: int
    currency: str
    rates: Mapping[str, str]
    default_rate: str = ""

    def rate(self, gpu_model: str) -> Decimal | None:
        text = self.rates.get(gpu_model, self.default_rate)
        if text in (None, ""):
            return None
        try:
            return Decimal(str(text))
        except InvalidOperation:
            return None


@dataclass
class DepartmentShow:
    code: str
    hours: int
    guarantee: list[int] = field(default_factory=list)  # milli-GPU-hours per hour, all models
    within: list[int] = field(default_factory=list)
    borrowed: list[int] = field(default_factory=list)
    unused: list[int] = field(default_factory=list)
    lent: list[int] = field(default_factory=list)
    charged_by_model: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("guarantee", "within", "borrowed", "unused", "lent"):
            if not getattr(self, name):
                setattr(self, name, [0] * self.hours)

    @property
    def charged(self) -> int:
        return sum(self.charged_by_model.values())

    def total(self, name: str) -> float:
        return sum(getattr(self, name)) / MILLI

    def series(self, name: str) -> list[float]:
        return [value / MILLI for value in getattr(self, name)]


@dataclass(frozen=True)
class Showback:
    departments: dict[str, DepartmentShow]
    capacity_by_model: dict[str, int]  # milli-GPU-hours over the period
    central_by_model: dict[str, int]

    @property
    def capacity(self) -> int:
        return sum(self.capacity_by_model.values())

    @property
    def central(self) -> int:
        return sum(self.central_by_model.values())

    @property
    def charged(self) -> int:
        return sum(show.charged for show in self.departments.values())


def showback(
    *,
    hours: int,
    capacity: Mapping[str, Sequence[float]],
    guarantees: Mapping[Key, Sequence[float]],
    allocated: Mapping[Key, Sequence[float]],
    departments: Sequence[str] = (),
) -> Showback:
    """Split the period's GPU-hours between the departments and the platform.

    ``capacity``: GPU-hours per hour by model; ``guarantees``: GPUs guaranteed per hour by
    (department, model); ``allocated``: GPU-hours held per hour by (department, model).
    ``departments`` lists codes to include even without any row.
    """
    shows = {code: DepartmentShow(code, hours) for code in departments}
    models = set(capacity) | {model for _, model in guarantees} | {model for _, model in allocated}
    capacity_by_model: dict[str, int] = {}
    central_by_model: dict[str, int] = {}
    for model in sorted(models):
        keys = sorted({key for key in (*guarantees, *allocated) if key[1] == model})
        charged_model = 0
        per_key: dict[Key, list[tuple[int, int, int, int]]] = {}
        for key in keys:
            g_series, a_series = guarantees.get(key, ()), allocated.get(key, ())
            rows = []
            for hour in range(hours):
                g = to_milli(g_series[hour] if hour < len(g_series) else 0.0)
                a = to_milli(a_series[hour] if hour < len(a_series) else 0.0)
                within = min(a, g)
                rows.append((g, within, a - within, g - within))
            per_key[key] = rows
        lent: dict[Key, list[int]] = {key: [0] * hours for key in keys}
        for hour in range(hours):
            borrowed_all = sum(per_key[key][hour][2] for key in keys)
            unused_all = sum(per_key[key][hour][3] for key in keys)
            covered = min(borrowed_all, unused_all)
            if covered <= 0:
                continue
            for key, share in zip(
                keys, _shares(covered, [per_key[key][hour][3] for key in keys]), strict=True
            ):
                lent[key][hour] = share
        for key in keys:
            code = key[0]
            show = shows.setdefault(code, DepartmentShow(code, hours))
            charged = 0
            for hour, (g, within, borrowed, unused) in enumerate(per_key[key]):
                show.guarantee[hour] += g
                show.within[hour] += within
                show.borrowed[hour] += borrowed
                show.unused[hour] += unused
                show.lent[hour] += lent[key][hour]
                charged += g + borrowed - lent[key][hour]
            show.charged_by_model[model] = show.charged_by_model.get(model, 0) + charged
            charged_model += charged
        cap = sum(to_milli(value) for value in capacity.get(model, ())[:hours])
        capacity_by_model[model] = cap
        central_by_model[model] = cap - charged_model
    return Showback(shows, capacity_by_model, central_by_model)


def _shares(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights``, in whole units that add up to ``total``
    exactly: each gets its floor, and the units left go to the largest remainders (the first of
    equal ones). Floors alone lost up to a unit per lender, so the charged hours came out above
    capacity (a negative central figure with every guarantee inside it)."""
    whole = sum(weights)
    floors = [weight * total // whole for weight in weights]
    left = total - sum(floors)
    by_remainder = sorted(range(len(weights)), key=lambda i: -(weights[i] * total % whole))
    for index in by_remainder[:left]:
        floors[index] += 1
    return floors


def cost(milli_gpu_hours: int, rate: Decimal | None) -> Decimal:
    """Cost of milli-GPU-hours at ``rate`` per GPU-hour, to the cent (0 when unpriced)."""
    if rate is None:
        return Decimal("0.00")
    return (Decimal(milli_gpu_hours) / MILLI * rate).quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class DepartmentCost:
    code: str
    charged_gpu_hours: float
    cost: Decimal
    by_model: list[dict]
    busy_gpu_hours: float
    cost_per_effective_gpu_hour: Decimal | None


def department_costs(
    result: Showback, card: RateCardValue | None, busy_gpu_hours: Mapping[str, float]
) -> tuple[list[DepartmentCost], Decimal, list[str]]:
    """Each department's cost by model, the central cost, and the models nobody priced."""
    unpriced: set[str] = set()

    def rate(model: str) -> Decimal | None:
        value = card.rate(model) if card is not None else None
        if value is None:
            unpriced.add(model)
        return value

    costs = []
    for code in sorted(result.departments):
        show = result.departments[code]
        rows, total = [], Decimal("0.00")
        for model in sorted(show.charged_by_model):
            charged = show.charged_by_model[model]
            price = rate(model)
            amount = cost(charged, price)
            total += amount
            rows.append(
                {
                    "gpu_model": model,
                    "charged_gpu_hours": charged / MILLI,
                    "rate": None if price is None else float(price),
                    "cost": float(amount),
                }
            )
        busy = busy_gpu_hours.get(code, 0.0)
        per_effective = (total / Decimal(str(round(busy, 3)))).quantize(CENT) if busy > 0.0005 else None
        costs.append(DepartmentCost(code, show.charged / MILLI, total, rows, busy, per_effective))
    central = sum(
        (cost(milli, rate(model)) for model, milli in result.central_by_model.items()), Decimal("0.00")
    )
    return costs, central, sorted(unpriced)


def merge_series(series: Mapping[Key, Sequence[float]]) -> dict[str, list[float]]:
    """Sum (department, model) series over models, per department (for charts)."""
    out: dict[str, list[float]] = defaultdict(list)
    for (code, _model), values in series.items():
        current = out[code]
        if len(current) < len(values):
            current.extend([0.0] * (len(values) - len(current)))
        for index, value in enumerate(values):
            current[index] += value
    return dict(out)
