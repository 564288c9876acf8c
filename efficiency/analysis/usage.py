"""The portal's usage definitions, in one place (DESIGN.md, "Definitions").

Every page, export and API endpoint computes its numbers with these functions:

* **allocation rate** = allocated GPU-hours / available GPU-hours;
* **coverage** = GPU-hours with an activity sample / available GPU-hours;
* **utilization** = busy GPU-hours / GPU-hours with an activity sample. Missing data is not 0%:
  the share of GPU time we could not observe is reported as coverage, not counted as idle. At
  full coverage this is exactly DESIGN.md's busy / available.

Busy time comes from the activity metric: GR_ENGINE_ACTIVE where the exporter reports it, else
GPU_UTIL. A department's available time is what it owns (fixed partition) — later its guaranteed
quota; its allocated and busy time are its own jobs'.
"""

from dataclasses import dataclass

HOUR_S = 3600.0


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """GPU-seconds over some scope and period (cluster, department, node, job; hour or range)."""

    available_gpu_s: float = 0.0
    allocated_gpu_s: float = 0.0
    sampled_gpu_s: float = 0.0
    busy_gpu_s: float = 0.0

    def __add__(self, other: "UsageTotals") -> "UsageTotals":
        return UsageTotals(
            self.available_gpu_s + other.available_gpu_s,
            self.allocated_gpu_s + other.allocated_gpu_s,
            self.sampled_gpu_s + other.sampled_gpu_s,
            self.busy_gpu_s + other.busy_gpu_s,
        )

    @property
    def available_gpu_hours(self) -> float:
        return self.available_gpu_s / HOUR_S

    @property
    def allocated_gpu_hours(self) -> float:
        return self.allocated_gpu_s / HOUR_S

    @property
    def busy_gpu_hours(self) -> float:
        return self.busy_gpu_s / HOUR_S

    @property
    def sampled_gpu_hours(self) -> float:
        return self.sampled_gpu_s / HOUR_S

    @property
    def allocation_rate(self) -> float | None:
        """Allocated / available (0-1); None when nothing was available."""
        return _ratio(self.allocated_gpu_s, self.available_gpu_s)

    @property
    def coverage(self) -> float | None:
        """Sampled / available (0-1): how much of the GPU time the metrics cover."""
        return _ratio(self.sampled_gpu_s, self.available_gpu_s)

    @property
    def utilization(self) -> float | None:
        """Busy / sampled (0-1); None when nothing was sampled (unknown, not zero)."""
        return _ratio(self.busy_gpu_s, self.sampled_gpu_s)


def _ratio(part: float, whole: float) -> float | None:
    if whole <= 0:
        return None
    return min(part / whole, 1.0)


def percent(value: float | None, digits: int = 1) -> float | None:
    """A 0-1 ratio as a rounded percentage (None stays None)."""
    return None if value is None else round(value * 100, digits)


def change_points(current: float | None, previous: float | None) -> float | None:
    """Change of a 0-1 ratio between two periods, in percentage points."""
    if current is None or previous is None:
        return None
    return round((current - previous) * 100, 1)
