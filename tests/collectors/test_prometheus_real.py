"""The Prometheus collector against a real Prometheus server backfilled with known DCGM series.

Skipped when ``/usr/bin/prometheus`` is missing (see ``tests/prometheus_server.py``).
"""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from efficiency.collectors.prometheus import PrometheusConfig, PrometheusQueryError, fetch_range
from efficiency.collectors.records import GpuReading
from tests.prometheus_server import running_prometheus

HOSTS = ("gpu-a01", "gpu-a02")
GPUS = (0, 1)
MINUTES = 120
MODEL = "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True)
class Backfilled:
    """A running Prometheus holding ``expected`` for [start, end)."""

    base_url: str
    start: datetime
    end: datetime
    expected: list[GpuReading]


def _text(value: float) -> str:
    # repr is the shortest text that reads back as the same float, in Go as in Python.
    return repr(value)


def _gauges(minute: int, host: int, gpu: int) -> dict[str, float]:
    """The values written for one GPU at one minute, by metric name (DCGM units)."""
    return {
        "DCGM_FI_DEV_GPU_UTIL": float((minute + 10 * gpu + 20 * host) % 100),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ((minute * 7 + gpu) % 101) / 100,
        "DCGM_FI_PROF_SM_ACTIVE": ((minute * 3 + host) % 101) / 200,
        "DCGM_FI_DEV_FB_USED": float(1000 + 10 * minute + gpu),
        "DCGM_FI_DEV_POWER_USAGE": 100.5 + minute + 0.25 * gpu,
        "DCGM_FI_DEV_GPU_TEMP": float(40 + minute % 30),
        "DCGM_FI_DEV_XID_ERRORS": 79.0 if (minute, host, gpu) == (90, 1, 1) else 0.0,
    }


def _labels(host: int, gpu: int) -> dict[str, str]:
    labels = {
        "Hostname": HOSTS[host],
        "UUID": f"GPU-{host:04d}{gpu:04d}-0000-0000-0000-000000000000",
        "gpu": str(gpu),
        "instance": f"10.0.0.{host + 1}:9400",
        "job": "dcgm-exporter",
        "modelName": MODEL,
    }
    if gpu == 0:  # GPU 1 of each host is idle: no pod labels, as dcgm-exporter writes it
        labels |= {"namespace": "vision", "pod": f"bev-train-{host}"}
    return labels


def _openmetrics(start_s: int) -> str:
    lines = []
    for metric in _gauges(0, 0, 0):
        lines += [f"# HELP {metric} DCGM field.", f"# TYPE {metric} gauge"]
        for host in range(len(HOSTS)):
            for gpu in GPUS:
                labels = ",".join(f'{key}="{value}"' for key, value in _labels(host, gpu).items())
                for minute in range(MINUTES):
                    value = _gauges(minute, host, gpu)[metric]
                    lines.append(f"{metric}{{{labels}}} {_text(value)} {start_s + 60 * minute}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _expected(start_s: int) -> list[GpuReading]:
    readings = []
    for host in range(len(HOSTS)):
        for gpu in GPUS:
            labels = _labels(host, gpu)
            for minute in range(MINUTES):
                values = _gauges(minute, host, gpu)
                readings.append(
                    GpuReading(
                        hostname=HOSTS[host],
                        gpu_index=gpu,
                        timestamp_ms=(start_s + 60 * minute) * 1000,
                        uuid=labels["UUID"],
                        model=MODEL,
                        namespace=labels.get("namespace", ""),
                        pod=labels.get("pod", ""),
                        util_pct=values["DCGM_FI_DEV_GPU_UTIL"],
                        # Same IEEE arithmetic as PromQL's "* 100", so equality is exact.
                        gr_engine_active_pct=values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] * 100,
                        sm_active_pct=values["DCGM_FI_PROF_SM_ACTIVE"] * 100,
                        fb_used_mib=values["DCGM_FI_DEV_FB_USED"],
                        power_w=values["DCGM_FI_DEV_POWER_USAGE"],
                        temp_c=values["DCGM_FI_DEV_GPU_TEMP"],
                        xid_last=int(values["DCGM_FI_DEV_XID_ERRORS"]),
                    )
                )
    return readings


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backfilled]:
    # 6 h to 4 h ago: clear of the head block of the server we start, well inside its 30 d retention.
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now - timedelta(hours=6)
    start_s = int(start.timestamp())
    with running_prometheus(
        tmp_path_factory.mktemp("prometheus"), openmetrics_text=_openmetrics(start_s)
    ) as url:
        yield Backfilled(url, start, start + timedelta(minutes=MINUTES), _expected(start_s))


def test_every_backfilled_value_comes_back_exactly(backfilled):
    outcome = fetch_range(PrometheusConfig(base_url=backfilled.base_url), backfilled.start, backfilled.end)

    assert outcome.rejected == []
    assert len(outcome.records) == len(HOSTS) * len(GPUS) * MINUTES
    assert outcome.records == backfilled.expected


def test_many_small_chunks_give_the_same_readings(backfilled):
    config = PrometheusConfig(base_url=backfilled.base_url, max_points=7)  # 120 minutes → 18 chunks

    outcome = fetch_range(config, backfilled.start, backfilled.end)

    assert outcome.rejected == []
    assert (
        sorted(outcome.records, key=lambda r: (r.hostname, r.gpu_index, r.timestamp_ms))
        == backfilled.expected
    )


def test_invalid_promql_fails_with_prometheus_own_message(backfilled):
    config = PrometheusConfig(base_url=backfilled.base_url, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL{"})

    with pytest.raises(PrometheusQueryError) as info:
        fetch_range(config, backfilled.start, backfilled.end)

    message = str(info.value)
    assert "rejected the query: HTTP 400 (bad_data: " in message
    assert "parse error: unexpected end of input inside braces" in message
    assert "query util_pct = 'DCGM_FI_DEV_GPU_UTIL{'" in message
    assert info.value.completed_until == backfilled.start
    assert info.value.partial.records == []
