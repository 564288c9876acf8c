"""Pareto tables: the few causes that make most of a total, largest first."""

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ParetoRow:
    key: tuple
    value: float
    share: float  # of the total, 0-1
    cumulative: float  # share of this row and every larger one


def pareto(items: Iterable[tuple[tuple, float]], *, drop_zero: bool = True) -> list[ParetoRow]:
    """(key, value) pairs sorted by value descending (ties by key), with shares of the total."""
    rows = sorted(
        ((key, value) for key, value in items if value > 0 or not drop_zero), key=lambda kv: (-kv[1], kv[0])
    )
    total = sum(value for _, value in rows)
    out, running = [], 0.0
    for key, value in rows:
        running += value
        out.append(
            ParetoRow(key, value, value / total if total > 0 else 0.0, running / total if total > 0 else 0.0)
        )
    return out


def idle_pareto(idle: Iterable[tuple[str, float, float]]) -> list[dict]:
    """Idle GPU-hours by department and cause, from (code, unused guarantee, allocated idle)."""
    items = []
    for code, unused, allocated_idle in idle:
        items.append(((code, "unused_guarantee"), unused))
        items.append(((code, "allocated_idle"), allocated_idle))
    return [
        {"department": row.key[0], "cause": row.key[1], "gpu_hours": round(row.value, 3)}
        for row in pareto(items)
    ]
