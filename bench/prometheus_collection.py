"""Prometheus collection: accuracy and speed of the collector beside a raw ``query_range`` over HTTP.

Writes the GenAI trace slice of ``tests/fixtures/prometheus/`` (five pods, 8 h, 57 s samples with gaps;
CC BY 4.0, see SOURCES.md there) into a real Prometheus as dcgm-exporter series, copied onto ``--copies``
hosts each, and prints for the five pods:

- accuracy: each pod's per-sample mean beside (a) the collector's readings weighted as the portal stores
  them, (b) the old way, a plain ``query_range`` of ``DCGM_FI_DEV_GPU_UTIL`` (last sample within the
  5-minute lookback) and (c) ``avg_over_time`` without weights (the mean of the minute means);
- speed: readings per second of ``fetch_chunks`` (all default queries, sample counts and the interval
  probe, parsed into readings) beside one raw ``query_range`` of the bare metric over HTTP, decoded JSON
  only, for the same window.

Needs /usr/bin/prometheus and promtool; no database:

    .venv/bin/python bench/prometheus_collection.py [--copies 40]
"""

import argparse
import csv
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

# Run as a script from the repository root or from bench/: make the project importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests

from efficiency.collectors.prometheus import PrometheusConfig, fetch_chunks
from tests.prometheus_server import running_prometheus

FIXTURE = Path(__file__).resolve().parent.parent / "tests/fixtures/prometheus/genai_duty_cycle_8h.csv"
TRACE_START_S = 1662858720
HOURS = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=40, help="hosts per pod (5 pods)")
    args = parser.parse_args()

    trace: dict[str, list[tuple[int, float]]] = defaultdict(list)
    with FIXTURE.open(newline="") as handle:
        for row in csv.DictReader(handle):
            trace[row["container_ip"][:8]].append(
                (int(row["timestamp_anon"]) - TRACE_START_S, float(row["value"]))
            )
    start = (datetime.now(UTC) - timedelta(hours=HOURS + 2)).replace(minute=0, second=0, microsecond=0)
    start_s = int(start.timestamp())
    end = start + timedelta(hours=HOURS)
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for pod, points in sorted(trace.items()):
        for copy in range(args.copies):
            labels = f'Hostname="genai-{pod}-{copy}",gpu="0",UUID="GPU-{pod}-{copy}",modelName="NVIDIA A10"'
            lines += [
                f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {value!r} {start_s + offset}"
                for offset, value in sorted(points)
            ]
    text = "\n".join(lines) + "\n# EOF\n"
    samples = sum(len(points) for points in trace.values()) * args.copies

    with tempfile.TemporaryDirectory() as tmp, running_prometheus(Path(tmp), openmetrics_text=text) as url:
        config = PrometheusConfig(base_url=url, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"})
        began = time.perf_counter()
        weighted: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        readings = 0
        for chunk in fetch_chunks(config, start, end):
            for reading, seconds in zip(chunk.outcome.records, chunk.interval_s, strict=True):
                readings += 1
                if reading.util_pct is not None:
                    totals = weighted[reading.hostname]
                    totals[0] += reading.util_pct * seconds
                    totals[1] += seconds
        ours_s = time.perf_counter() - began

        def matrix(query: str) -> list[dict]:
            params = {
                "query": query,
                "start": str(start_s),
                "end": str(start_s + HOURS * 3600 - 60),
                "step": "60",
            }
            return requests.get(f"{url}/api/v1/query_range", params=params, timeout=300).json()["data"][
                "result"
            ]

        began = time.perf_counter()
        raw = matrix("DCGM_FI_DEV_GPU_UTIL")
        raw_s = time.perf_counter() - began
        raw_points = sum(len(series["values"]) for series in raw)
        unweighted = matrix("avg_over_time(DCGM_FI_DEV_GPU_UTIL[59999ms])")

    def means(result: list[dict]) -> dict[str, float]:
        return {
            series["metric"]["Hostname"]: sum(float(v) for _, v in series["values"]) / len(series["values"])
            for series in result
        }

    old, plain = means(raw), means(unweighted)
    print(f"accuracy: {len(trace)} pods of the GenAI trace, {HOURS} h, utilization %")
    header = ("pod", "samples", "per-sample", "portal", "query_range", "avg unweighted")
    print(f"{header[0]:<10} {header[1]:>8} {header[2]:>11} {header[3]:>8} {header[4]:>12} {header[5]:>15}")
    for pod, points in sorted(trace.items()):
        host = f"genai-{pod}-0"
        truth = sum(value for _, value in points) / len(points)
        ours = weighted[host][0] / weighted[host][1]
        print(
            f"{pod:<10} {len(points):>8} {truth:>11.4f} {ours:>8.4f} {old[host]:>12.4f} {plain[host]:>15.4f}"
        )
    print()
    print(
        f"speed: {samples:,} samples on {len(trace) * args.copies} GPUs, one {HOURS} h window at a 60 s step"
    )
    print(f"  fetch_chunks (readings, counts, probe): {readings:>9,} readings in {ours_s:6.2f} s", end="")
    print(f" = {readings / ours_s:>9,.0f}/s")
    print(f"  raw query_range of the bare metric:     {raw_points:>9,} points   in {raw_s:6.2f} s", end="")
    print(f" = {raw_points / raw_s:>9,.0f}/s")
    print(f"  ratio: {ours_s / raw_s:.1f}x the raw request's time")


if __name__ == "__main__":
    main()
