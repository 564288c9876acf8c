"""The summary's KPI rows: this period's value, the previous pack's, and the target."""

from collections.abc import Mapping

# key -> (unit, which direction is better)
KPI_DEFINITIONS: dict[str, tuple[str, str]] = {
    "utilization": ("ratio", "higher"),
    "allocation_rate": ("ratio", "higher"),
    "idle_gpu_hours": ("gpu_hours", "lower"),
    "mttr_s": ("seconds", "lower"),
    "ettr": ("ratio", "higher"),
    "overdue_tickets": ("count", "lower"),
}
_DIGITS = {"ratio": 6, "gpu_hours": 3, "seconds": 3, "count": 0}


def _round(value: float | int | None, unit: str) -> float | int | None:
    if value is None:
        return None
    if unit == "count":
        return int(value)
    return round(float(value), _DIGITS[unit])


def previous_values(previous_content: Mapping | None) -> dict[str, float | int | None]:
    """The KPI values of a previous pack's content (empty without one)."""
    if not previous_content:
        return {}
    rows = previous_content.get("summary", {}).get("kpis", [])
    return {row["key"]: row.get("value") for row in rows if isinstance(row, Mapping) and "key" in row}


def kpi_rows(
    values: Mapping[str, float | int | None],
    *,
    previous: Mapping[str, float | int | None] | None = None,
    targets: Mapping[str, float | int | None] | None = None,
) -> list[dict]:
    """One row per KPI, in ``KPI_DEFINITIONS`` order."""
    previous, targets = previous or {}, targets or {}
    rows = []
    for key, (unit, better) in KPI_DEFINITIONS.items():
        rows.append(
            {
                "key": key,
                "value": _round(values.get(key), unit),
                "previous": _round(previous.get(key), unit),
                "target": _round(targets.get(key), unit),
                "unit": unit,
                "better": better,
            }
        )
    return rows


def on_target(row: Mapping) -> bool | None:
    """Whether a KPI row meets its target (None without a value or a target)."""
    if row.get("value") is None or row.get("target") is None:
        return None
    if row["better"] == "higher":
        return row["value"] >= row["target"]
    return row["value"] <= row["target"]
