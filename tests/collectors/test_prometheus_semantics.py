"""Exact Prometheus semantics on a real trace: the portal's utilization is the mean of the samples written.

Five pods of the Alibaba GenAI serving trace (tests/fixtures/prometheus/SOURCES.md: 57 s samples, gaps,
a pod that stops, one that lives 14 minutes) are written as dcgm-exporter series into a real Prometheus
and collected through a Prometheus source into an empty inventory: the nodes (one per pod) and
their GPUs are discovered from the series' labels alone. A plain ``query_range`` would repeat each
sample into the next steps for up to 5 minutes (gaps filled, a tail after a series stops) and drop the
second sample of a minute that holds two; the portal must do neither.

Skipped when ``/usr/bin/prometheus`` is missing (see ``tests/prometheus_server.py``).
"""

import csv
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from efficiency.choices import NodeState, RunStatus, SourceKind
from efficiency.models import DataSource, Gpu, GpuSample, Node, NodeHour
from efficiency.services.rollups import rollups_refresh
from efficiency.services.sources import source_collect
from tests.factories import ClusterFactory
from tests.prometheus_server import running_prometheus

FIXTURE = Path(__file__).parent.parent / "fixtures" / "prometheus" / "genai_duty_cycle_8h.csv"
TRACE_START_S = 1662858720  # the slice's first anonymised timestamp, a whole minute
HOURS = 8
# Hand-checked per-sample means (SOURCES.md), in %.
EXPECTED_MEANS = {
    "2a2ad10c": 34.3677,
    "2e6ae913": 32.8011,
    "cbfb6b40": 9.7988,
    "0b6beb4d": 17.8189,
    "4529d04b": 7.0300,
}
EXPECTED_OVERALL = 22.1003


def _trace() -> dict[str, list[tuple[int, float]]]:
    """(seconds since the slice start, duty cycle %) per pod, from the fixture."""
    samples: dict[str, list[tuple[int, float]]] = defaultdict(list)
    with FIXTURE.open(newline="") as handle:
        for row in csv.DictReader(handle):
            samples[row["container_ip"][:8]].append(
                (int(row["timestamp_anon"]) - TRACE_START_S, float(row["value"]))
            )
    return {pod: sorted(points) for pod, points in samples.items()}


def _openmetrics(trace: dict[str, list[tuple[int, float]]], start_s: int) -> str:
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for pod, points in sorted(trace.items()):
        labels = f'Hostname="genai-{pod}",gpu="0",UUID="GPU-{pod}",modelName="NVIDIA A10"'
        lines += [
            f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {value!r} {start_s + offset}" for offset, value in points
        ]
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture
def collected(tmp_path, transactional_db):
    """The trace in a real Prometheus, collected by a Prometheus source and rolled up."""
    trace = _trace()
    # The slice ends 2 h ago: clear of the server's head block; a whole minute, as in the trace.
    start = (datetime.now(UTC) - timedelta(hours=HOURS + 2)).replace(minute=0, second=0, microsecond=0)
    start_s = int(start.timestamp())
    cluster = ClusterFactory(slug="genai")  # no nodes: the labels say which there are
    with running_prometheus(tmp_path, openmetrics_text=_openmetrics(trace, start_s)) as base_url:
        source = DataSource.objects.create(
            cluster=cluster,
            kind=SourceKind.PROMETHEUS,
            name="prometheus",
            config={"base_url": base_url, "lag_s": 0, "max_points": 120},
            watermark=start,
        )
        end = start + timedelta(hours=HOURS)
        run = source_collect(source_id=source.pk, now=end)
        assert run.status == RunStatus.OK, run.message
        assert run.rejected == 0, run.rejects
    rollups_refresh(now=end + timedelta(hours=1))
    return trace, start


def test_utilization_per_gpu_and_overall_is_the_mean_of_the_samples_written(collected):
    trace, _start = collected

    busy: dict[str, float] = defaultdict(float)
    sampled: dict[str, float] = defaultdict(float)
    for hostname, busy_s, sampled_s in NodeHour.objects.values_list(
        "node__hostname", "busy_gpu_s", "sampled_gpu_s"
    ):
        pod = hostname.removeprefix("genai-")
        busy[pod] += busy_s
        sampled[pod] += sampled_s

    for pod, points in trace.items():
        independent = sum(value for _, value in points) / len(points)
        assert independent == pytest.approx(EXPECTED_MEANS[pod], abs=5e-5)
        assert 100 * busy[pod] / sampled[pod] == pytest.approx(independent, abs=0.05), pod
    everything = [value for points in trace.values() for _, value in points]
    assert sum(everything) / len(everything) == pytest.approx(EXPECTED_OVERALL, abs=5e-5)
    assert 100 * sum(busy.values()) / sum(sampled.values()) == pytest.approx(EXPECTED_OVERALL, abs=0.05)
    # The time covered is the samples x 56 s (57 s apart; an hour holds up to 64 of them), never more
    # than the time in service: a discovered node is in service from its first reading, and where the
    # first minutes of a pod hold samples closer than 56 s, that partial hour is capped (88 s in all).
    claimed = len(everything) * 56
    assert claimed - 2 * 56 <= sum(sampled.values()) <= claimed


def test_the_nodes_and_gpus_are_discovered_from_the_labels_alone(collected):
    trace, _start = collected
    nodes = {node.hostname: node for node in Node.objects.all()}
    assert set(nodes) == {f"genai-{pod}" for pod in trace}
    assert {node.state for node in nodes.values()} == {NodeState.DISCOVERED}  # for an admin to confirm
    assert {(node.gpu_count, node.gpu_model) for node in nodes.values()} == {(1, "NVIDIA A10")}
    gpus = set(Gpu.objects.values_list("node__hostname", "index", "uuid"))
    assert gpus == {(f"genai-{pod}", 0, f"GPU-{pod}") for pod in trace}


def test_a_step_without_samples_has_no_reading_and_nothing_follows_the_last_sample(collected):
    trace, start = collected
    start_s = int(start.timestamp())

    for pod, points in trace.items():
        stored = {
            int(ts.timestamp())
            for ts in GpuSample.objects.filter(node__hostname=f"genai-{pod}").values_list("ts", flat=True)
        }
        # One reading per minute that holds a sample, stamped with the minute's start: no gap filled,
        # no tail after the last sample, nothing before the first.
        minutes_with_samples = {start_s + offset // 60 * 60 for offset, _ in points}
        assert stored == minutes_with_samples, pod
        assert max(stored) <= start_s + points[-1][0]
