"""How long incidents spend in each phase: the distribution, not only a mean MTTR.

detect = occurred → detected; locate = detected → located; restart = located → restart
requested; recover = restart requested (else located, else detected) → recovered. A phase an
incident has not reached, or whose timestamps run backwards, is left out of that phase.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from efficiency.analysis.stats import percentile_sorted

PHASES = ("detect", "locate", "restart", "recover")


@dataclass(frozen=True, slots=True)
class IncidentTimes:
    occurred_at: datetime
    detected_at: datetime | None = None
    located_at: datetime | None = None
    restart_requested_at: datetime | None = None
    recovered_at: datetime | None = None


def _span(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None or end < start:
        return None
    return (end - start).total_seconds()


def phase_durations(times: IncidentTimes) -> dict[str, float | None]:
    before_recover = times.restart_requested_at or times.located_at or times.detected_at
    return {
        "detect": _span(times.occurred_at, times.detected_at),
        "locate": _span(times.detected_at, times.located_at),
        "restart": _span(times.located_at, times.restart_requested_at),
        "recover": _span(before_recover, times.recovered_at),
    }


def distribution(values: list[float]) -> dict:
    ordered = sorted(values)
    if not ordered:
        return {"p50": None, "p90": None, "max": None, "n": 0}
    return {
        "p50": round(percentile_sorted(ordered, 50), 3),
        "p90": round(percentile_sorted(ordered, 90), 3),
        "max": round(ordered[-1], 3),
        "n": len(ordered),
    }


def phase_distributions(incidents: Iterable[IncidentTimes]) -> dict[str, dict]:
    """p50, p90, max and count of each phase's duration (seconds)."""
    values: dict[str, list[float]] = {phase: [] for phase in PHASES}
    for times in incidents:
        for phase, seconds in phase_durations(times).items():
            if seconds is not None:
                values[phase].append(seconds)
    return {phase: distribution(values[phase]) for phase in PHASES}
