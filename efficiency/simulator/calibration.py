"""Calibration tables for the simulator, read from the small CSV files in ``data/``.

The tables were derived once from public traces (see ``data/README.md`` for sources, licence and
how each was computed); the simulator never reads the traces themselves. Each table is exposed
as a ``QuantileTable``: a sorted list of values at evenly spaced quantiles, sampled by inverse
transform with a uniform number the caller supplies, so every draw stays reproducible.
"""

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True, slots=True)
class QuantileTable:
    """Values at evenly spaced quantiles 0..1 (first = minimum, last = maximum)."""

    values: tuple[float, ...]

    def at(self, u: float) -> float:
        """The value at quantile ``u`` (0-1), interpolating linearly between table points."""
        position = min(max(u, 0.0), 1.0) * (len(self.values) - 1)
        index = int(position)
        if index >= len(self.values) - 1:
            return self.values[-1]
        low = self.values[index]
        return low + (self.values[index + 1] - low) * (position - index)

    def window(self, u: float, low_q: float, high_q: float) -> float:
        """The value at quantile ``low_q + u * (high_q - low_q)``: a draw from a slice of the table."""
        return self.at(low_q + u * (high_q - low_q))

    def mean(self, low_q: float = 0.0, high_q: float = 1.0, steps: int = 2000) -> float:
        """Mean of ``window`` over uniform ``u`` (midpoint rule), i.e. the expected draw."""
        return sum(self.window((i + 0.5) / steps, low_q, high_q) for i in range(steps)) / steps


def _read(name: str) -> list[dict[str, str]]:
    with (DATA_DIR / name).open(newline="") as handle:
        return list(csv.DictReader(handle))


def _column(rows: list[dict[str, str]], column: str) -> QuantileTable:
    return QuantileTable(tuple(sorted(float(row[column]) for row in rows)))


@dataclass(frozen=True, slots=True)
class Calibration:
    """Every calibration input the simulator uses, already parsed."""

    # Alibaba cluster-trace-gpu-v2023: GPUs per pod -> pod count (multigpu50 and default workloads).
    gpu_count_weights_multigpu: tuple[tuple[int, int], ...]
    gpu_count_weights_default: tuple[tuple[int, int], ...]
    # Philly job runtimes (s) at quantiles 0, 0.005, ..., 1.
    runtime_s: QuantileTable
    # Acme (Seren, Kalos): busy-sample (> 0) percentiles of GPU_UTIL, SM_ACTIVE and FB used (%).
    busy_gpu_util_pct: QuantileTable
    busy_sm_active_pct: QuantileTable
    busy_fb_used_pct: QuantileTable
    # Acme over all samples: power (W) and GPU temperature (C) percentiles, Seren and Kalos pooled.
    power_w: QuantileTable
    temp_c: QuantileTable
    # Alibaba GenAI serving pods: non-zero duty cycle (%) and each pod's share of zero samples.
    serving_duty_pct: QuantileTable
    serving_zero_share: QuantileTable
    # Acme Kalos (an LLM cluster) and Seren: mean GPUs per job and final-state shares of GPU jobs.
    kalos_mean_gpus: float
    seren_mean_gpus: float
    final_state_shares: tuple[tuple[str, float], ...]
    # Alibaba gpu-v2023: share of pods deleted while still pending (cancelled before they started),
    # and how long those had waited (s) at percentiles 0..100.
    pending_cancel_share: float
    pending_cancel_wait_s: QuantileTable


def _pooled(rows: list[dict[str, str]], columns: tuple[str, ...]) -> QuantileTable:
    return QuantileTable(tuple(sorted(float(row[column]) for row in rows for column in columns)))


@cache
def calibration() -> Calibration:
    """Load and cache the calibration tables (a few kilobytes, read once per process)."""
    counts = _read("job_gpu_counts.csv")
    runtimes = _read("philly_runtime_quantiles.csv")
    busy = _read("acme_busy_quantiles.csv")
    overall = _read("acme_gpu_quantiles.csv")
    serving = _read("genai_duty_cycle_quantiles.csv")
    summary = {row["id"]: row for row in _read("acme_cluster_summary.csv")}
    kalos = summary["Kalos"]
    phases = {row["pod_phase"]: int(row["pods"]) for row in _read("alibaba_pod_phases.csv")}
    return Calibration(
        gpu_count_weights_multigpu=tuple(
            (int(row["num_gpu"]), int(row["pods_multigpu50"])) for row in counts if int(row["num_gpu"]) > 0
        ),
        gpu_count_weights_default=tuple(
            (int(row["num_gpu"]), int(row["pods_default"])) for row in counts if int(row["num_gpu"]) > 0
        ),
        runtime_s=_column(runtimes, "runtime_s"),
        busy_gpu_util_pct=_pooled(busy, ("seren_gpu_util_pct", "kalos_gpu_util_pct")),
        busy_sm_active_pct=_pooled(busy, ("seren_sm_active_pct", "kalos_sm_active_pct")),
        busy_fb_used_pct=_pooled(busy, ("seren_fb_used_pct", "kalos_fb_used_pct")),
        power_w=_pooled(overall, ("seren_power_w", "kalos_power_w")),
        temp_c=_pooled(overall, ("seren_temp_c", "kalos_temp_c")),
        serving_duty_pct=_column(serving, "nonzero_duty_pct"),
        serving_zero_share=_column(serving, "pod_zero_share"),
        kalos_mean_gpus=float(kalos["avg_gpu_num"]),
        seren_mean_gpus=float(summary["Seren"]["avg_gpu_num"]),
        final_state_shares=(
            ("COMPLETED", float(kalos["complete_rate_gpu"])),
            ("CANCELLED", float(kalos["cancel_rate_gpu"])),
            ("FAILED", float(kalos["fail_rate_gpu"])),
        ),
        pending_cancel_share=phases["Pending"] / sum(phases.values()),
        pending_cancel_wait_s=_column(_read("alibaba_pending_cancel_waits.csv"), "wait_s"),
    )
