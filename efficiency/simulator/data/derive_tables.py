"""Derive the simulator's calibration tables from the public traces (run by hand, never at run time).

Usage: ``python efficiency/simulator/data/derive_tables.py <traces-folder>``, where the folder holds
``alibaba_gpu_v2023/``, ``philly_runtime_via_alibaba/``, ``acme/`` and ``alibaba_genai_v2026/`` as
described in ``README.md`` next to this file. The tables it writes are small and committed; the
simulator reads only them.
"""

import csv
import io
import sys
import tarfile
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
PERCENTILES = range(101)


def _quantile(ordered: list[float], fraction: float) -> float:
    """The value below which ``fraction`` of the sorted sample lies (nearest rank)."""
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def _cdf_rows(path: Path) -> list[tuple[float, float]]:
    with path.open() as handle:
        return [(float(row["value"]), float(row["cdf_percent"])) for row in csv.DictReader(handle)]


def _cdf_quantile(rows: list[tuple[float, float]], percent: float) -> float:
    """Invert a published CDF table (value, cdf_percent) at ``percent``."""
    for value, cdf in rows:
        if cdf >= percent:
            return value
    return rows[-1][0]


def _zero_share(rows: list[tuple[float, float]]) -> float:
    return max((cdf for value, cdf in rows if value <= 0.0), default=0.0)


def job_gpu_counts(traces: Path) -> None:
    """GPU count per pod in Alibaba's 2023 GPU trace (the default and the multigpu50 workloads)."""
    counts: dict[str, Counter[int]] = {}
    for workload in ("default", "multigpu50"):
        with (traces / "alibaba_gpu_v2023" / f"openb_pod_list_{workload}.csv").open() as handle:
            counts[workload] = Counter(int(row["num_gpu"]) for row in csv.DictReader(handle))
    sizes = sorted(set(counts["default"]) | set(counts["multigpu50"]))
    with (HERE / "job_gpu_counts.csv").open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["num_gpu", "pods_default", "pods_multigpu50"])
        for size in sizes:
            writer.writerow([size, counts["default"][size], counts["multigpu50"][size]])


def philly_runtimes(traces: Path) -> None:
    """Quantiles of the 83,154 Philly job runtimes, every half percent."""
    with (traces / "philly_runtime_via_alibaba" / "philly_runtime.csv").open() as handle:
        runtimes = sorted(float(row["runtime"]) for row in csv.DictReader(handle))
    with (HERE / "philly_runtime_quantiles.csv").open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["quantile", "runtime_s"])
        for step in range(201):
            writer.writerow([f"{step / 200:.3f}", f"{_quantile(runtimes, step / 200):.0f}"])


ACME_SERIES = (
    ("seren_gpu_util_pct", "util_gpu_seren__gpu_util_pct.csv"),
    ("seren_sm_active_pct", "util_gpu_seren__sm_active_pct.csv"),
    ("seren_fb_used_pct", "util_gpu_seren__fb_used_pct_of_80GiB.csv"),
    ("kalos_gpu_util_pct", "util_gpu_kalos_full__gpu_util_pct.csv"),
    ("kalos_sm_active_pct", "util_gpu_kalos_full__sm_active_pct.csv"),
    ("kalos_fb_used_pct", "util_gpu_kalos_full__fb_used_pct_of_80GiB.csv"),
    ("seren_power_w", "gpu_power_seren__gpu_power_w.csv"),
    ("kalos_power_w", "gpu_power_kalos__gpu_power_w.csv"),
    ("seren_temp_c", "gpu_temp_seren__gpu_temp_c.csv"),
    ("kalos_temp_c", "gpu_temp_kalos__gpu_temp_c.csv"),
)
BUSY_SERIES = ACME_SERIES[:6]


def acme_quantiles(traces: Path) -> None:
    """Percentiles of Acme's DCGM sample CDFs: over all samples, and over busy (> 0) samples."""
    tables = {name: _cdf_rows(traces / "acme" / "util_cdf" / file) for name, file in ACME_SERIES}
    with (HERE / "acme_gpu_quantiles.csv").open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["percentile", *(name for name, _ in ACME_SERIES)])
        for percent in PERCENTILES:
            writer.writerow(
                [percent, *(f"{_cdf_quantile(tables[name], percent):.2f}" for name, _ in ACME_SERIES)]
            )
    with (HERE / "acme_busy_quantiles.csv").open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["percentile", *(name for name, _ in BUSY_SERIES)])
        for percent in PERCENTILES:
            row: list[object] = [percent]
            for name, _ in BUSY_SERIES:
                zero = _zero_share(tables[name])
                # Conditional on > 0: rescale the percentile into the part of the CDF above zero.
                busy_percent = min(100.0, zero + (100.0 - zero) * percent / 100 + 1e-9)
                row.append(f"{max(_cdf_quantile(tables[name], busy_percent), 0.01):.2f}")
            writer.writerow(row)


def genai_duty_cycle(traces: Path) -> None:
    """Per-minute GPU duty cycle of 143 serving pods: zero share per pod, non-zero duty values."""
    archive = traces / "alibaba_genai_v2026" / "pod_gpu_duty_cycle_anon.tar.gz"
    by_pod: dict[str, list[float]] = defaultdict(list)
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(".csv"))
        extracted = tar.extractfile(member)
        if extracted is None:
            raise SystemExit(f"cannot read {member.name} in {archive}")
        for row in csv.DictReader(io.TextIOWrapper(extracted)):
            by_pod[row["container_ip"]].append(float(row["value"]))
    nonzero = sorted(v for values in by_pod.values() for v in values if v > 0)
    zero_shares = sorted(sum(v == 0 for v in values) / len(values) for values in by_pod.values())
    with (HERE / "genai_duty_cycle_quantiles.csv").open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["percentile", "nonzero_duty_pct", "pod_zero_share"])
        for percent in PERCENTILES:
            writer.writerow(
                [
                    percent,
                    f"{_quantile(nonzero, percent / 100):.2f}",
                    f"{_quantile(zero_shares, percent / 100):.4f}",
                ]
            )


def acme_summary(traces: Path) -> None:
    """The per-cluster job summary, copied as is (final-state shares, queue and run times)."""
    text = (traces / "acme" / "cluster_summary.csv").read_text()
    (HERE / "acme_cluster_summary.csv").write_text(text)


def pending_cancels(traces: Path) -> None:
    """Pods deleted before they were ever scheduled in Alibaba's 2023 GPU trace (default workload):
    the pod count per phase (``Pending`` at deletion means cancelled before it started), and the
    percentiles of how long those pods had waited when they were deleted."""
    with (traces / "alibaba_gpu_v2023" / "openb_pod_list_default.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    phases = Counter(row["pod_phase"] for row in rows)
    waits = sorted(
        float(row["deletion_time"]) - float(row["creation_time"])
        for row in rows
        if row["pod_phase"] == "Pending" and row["deletion_time"]
    )
    with (HERE / "alibaba_pod_phases.csv").open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["pod_phase", "pods"])
        for phase, count in sorted(phases.items()):
            writer.writerow([phase, count])
    with (HERE / "alibaba_pending_cancel_waits.csv").open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["percentile", "wait_s"])
        for percent in PERCENTILES:
            writer.writerow([percent, f"{_quantile(waits, percent / 100):.0f}"])


def main(argv: list[str]) -> None:
    """Write every table from the trace folder given as the only argument."""
    if len(argv) != 2:
        raise SystemExit(__doc__)
    traces = Path(argv[1])
    job_gpu_counts(traces)
    philly_runtimes(traces)
    acme_quantiles(traces)
    genai_duty_cycle(traces)
    acme_summary(traces)
    pending_cancels(traces)


if __name__ == "__main__":
    main(sys.argv)
