"""Small statistics shared by the analysis modules (plain Python, no numpy)."""

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], pct: float) -> float | None:
    """The ``pct``-th percentile (0-100) of ``values``, interpolating linearly between ranks.

    The same definition as numpy's default and ``statistics.quantiles(method="inclusive")``:
    the minimum at 0, the maximum at 100. ``None`` for no values.
    """
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile must be between 0 and 100, not {pct}")
    if not values:
        return None
    ordered = sorted(values)
    return percentile_sorted(ordered, pct)


def percentile_sorted(ordered: Sequence[float], pct: float) -> float | None:
    """``percentile`` of values already sorted ascending (to take several from one sort)."""
    if not ordered:
        return None
    position = (len(ordered) - 1) * pct / 100
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    fraction = position - lower
    return ordered[lower] + (ordered[upper] - ordered[lower]) * fraction
