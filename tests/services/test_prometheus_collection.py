"""Real Prometheus → Prometheus source → raw samples → hourly rollups, on the real database.

The rollups must equal what was written into Prometheus, hour by hour, and an outage must be
backfilled from the watermark without counting anything twice.
"""

from datetime import UTC, datetime, timedelta

import pytest

from efficiency.choices import RunStatus, SourceKind
from efficiency.models import DataSource, GpuSample, NodeHour
from efficiency.services.rollups import rollups_refresh
from efficiency.services.sources import source_collect
from tests.factories import ClusterFactory, NodeFactory
from tests.prometheus_server import running_prometheus

HOSTS = ("gpu-001", "gpu-002")
GPUS = 8


def _activity(minute: int, host: int, gpu: int) -> float:
    """GR_ENGINE_ACTIVE written for one GPU-minute (ratio 0-1, as DCGM reports it)."""
    return ((minute * 7 + gpu * 3 + host * 11) % 101) / 100


def _openmetrics(start: datetime, minutes: int) -> str:
    """OpenMetrics for promtool: one TYPE line per family, then its samples in time order."""
    lines = []
    for metric in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"):
        lines.append(f"# TYPE {metric} gauge")
        for host_index, host in enumerate(HOSTS):
            for gpu in range(GPUS):
                labels = f'gpu="{gpu}",UUID="GPU-{host_index}-{gpu}",modelName="H100",Hostname="{host}"'
                for minute in range(minutes):
                    ts = int((start + timedelta(minutes=minute)).timestamp())
                    value = _activity(minute, host_index, gpu) if "GR_ENGINE" in metric else 100.0
                    lines.append(f"{metric}{{{labels}}} {value!r} {ts}")
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture
def backfilled(tmp_path, transactional_db):
    start = (datetime.now(tz=UTC) - timedelta(hours=6)).replace(minute=0, second=0, microsecond=0)
    with running_prometheus(tmp_path, openmetrics_text=_openmetrics(start, 120)) as base_url:
        yield base_url, start


def test_rollups_equal_what_prometheus_holds_and_an_outage_is_backfilled_once(backfilled):
    base_url, start = backfilled
    cluster = ClusterFactory(slug="prom")
    for host in HOSTS:
        NodeFactory(cluster=cluster, hostname=host, gpu_count=GPUS)
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.PROMETHEUS,
        name="prometheus",
        config={"base_url": base_url, "step_s": 60, "lag_s": 0, "max_points": 30},
        watermark=start,
    )
    # First run: only the first hour has happened yet.
    first = source_collect(source_id=source.pk, now=start + timedelta(hours=1))
    assert first.status == RunStatus.OK, first.message
    # The collector is down for an hour; the next run catches up from the watermark.
    second = source_collect(source_id=source.pk, now=start + timedelta(hours=2))
    assert second.status == RunStatus.OK, second.message
    # A replay of the whole window (watermark reset by an admin) stores nothing new.
    DataSource.objects.filter(pk=source.pk).update(watermark=start)
    replay = source_collect(source_id=source.pk, now=start + timedelta(hours=2))
    assert (replay.stored, replay.duplicates) == (0, replay.received)

    assert GpuSample.objects.count() == len(HOSTS) * GPUS * 120
    rollups_refresh(now=start + timedelta(hours=3))
    for hour in (0, 1):
        for host_index, host in enumerate(HOSTS):
            row = NodeHour.objects.get(node__hostname=host, hour=start + timedelta(hours=hour))
            expected_busy = sum(
                _activity(minute, host_index, gpu) * 60
                for gpu in range(GPUS)
                for minute in range(hour * 60, hour * 60 + 60)
            )
            assert row.sampled_gpu_s == GPUS * 3600
            assert row.busy_gpu_s == pytest.approx(expected_busy, rel=1e-9)
            assert row.gpu_util_busy_gpu_s == GPUS * 3600  # GPU_UTIL said 100% throughout
    assert DataSource.objects.get(pk=source.pk).watermark == start + timedelta(hours=2)


def test_prometheus_down_is_a_failed_run_with_a_clear_message_and_the_watermark_stays(transactional_db):
    cluster = ClusterFactory(slug="prom-down")
    watermark = datetime.now(tz=UTC) - timedelta(hours=1)
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.PROMETHEUS,
        name="prometheus",
        config={"base_url": "http://127.0.0.1:1", "timeout_s": 2},
        watermark=watermark,
    )
    from efficiency.services.sources import SourceUnavailable

    with pytest.raises(SourceUnavailable):
        source_collect(source_id=source.pk)
    source.refresh_from_db()
    run = source.runs.get()
    assert run.status == RunStatus.FAILED
    assert "127.0.0.1:1" in run.message
    assert source.watermark == watermark
    assert source.consecutive_failures == 1
    assert source.running_since is None  # the lease is released for the retry
