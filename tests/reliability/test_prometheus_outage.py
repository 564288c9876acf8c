"""Prometheus stopped for a while: the runs during the outage fail with the reason and keep the
watermark; when it is back, the next run backfills the gap from the watermark, once.

Prometheus is a real process, really stopped and restarted on its own port and TSDB. The portal's
clock is simulated: the outage covers 10 minutes of the portal's time (two failed runs, as the
5-minute collection interval would make), while Prometheus is down for the few seconds the test
takes, so the test stays short.
"""

from datetime import UTC, datetime, timedelta

import pytest

from efficiency.choices import RunStatus, SourceKind
from efficiency.models import GpuSample
from efficiency.services.sources import SourceUnavailable, source_collect
from tests.factories import ClusterFactory, DataSourceFactory, NodeFactory
from tests.prometheus_server import _config_yaml, _start, _stop, _wait_ready, backfill, require_prometheus
from tests.workers import free_port

HOSTS = ("gpu-p01",)
GPUS = 2
MINUTES = 60


def _openmetrics(start: datetime) -> str:
    lines = ["# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge"]
    for host in HOSTS:
        for gpu in range(GPUS):
            labels = f'gpu="{gpu}",UUID="GPU-{host}-{gpu}",modelName="H100",Hostname="{host}"'
            for minute in range(MINUTES):
                ts = int((start + timedelta(minutes=minute)).timestamp())
                lines.append(f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} {(minute % 10) / 10!r} {ts}")
    return "\n".join(lines) + "\n# EOF\n"


def test_the_gap_of_a_prometheus_outage_is_backfilled_from_the_watermark_once(transactional_db, tmp_path):
    require_prometheus()
    start = (datetime.now(tz=UTC) - timedelta(hours=6)).replace(minute=0, second=0, microsecond=0)
    data_dir = tmp_path / "prometheus-data"
    data_dir.mkdir()
    backfill(tmp_path, data_dir, _openmetrics(start))
    config_file = tmp_path / "prometheus.yml"
    config_file.write_text(_config_yaml([]))
    port, log_file = free_port(), tmp_path / "prometheus.log"
    base_url = f"http://127.0.0.1:{port}"

    cluster = ClusterFactory(slug="outage")
    for host in HOSTS:
        NodeFactory(cluster=cluster, hostname=host, gpu_count=GPUS)
    source = DataSourceFactory(
        cluster=cluster,
        kind=SourceKind.PROMETHEUS,
        name="prometheus",
        interval_s=300,
        config={"base_url": base_url, "step_s": 60, "lag_s": 0, "max_points": 30, "timeout_s": 2},
        watermark=start,
    )
    prometheus = _start(config_file, data_dir, port, log_file)
    try:
        _wait_ready(prometheus, base_url, log_file)
        assert source_collect(source_id=source.pk, now=start + timedelta(minutes=20)).status == RunStatus.OK
        _stop(prometheus)

        # Down for 10 minutes of the portal's time: each run fails, names the reason, keeps the watermark.
        for minutes in (25, 30):
            with pytest.raises(SourceUnavailable):
                source_collect(source_id=source.pk, now=start + timedelta(minutes=minutes))
            source.refresh_from_db()
            assert source.watermark == start + timedelta(minutes=20)
        failed = source.runs.filter(status=RunStatus.FAILED)
        assert failed.count() == 2
        assert "ConnectionError" in failed.first().message or "refused" in failed.first().message.lower()
        assert source.consecutive_failures == 2

        prometheus = _start(config_file, data_dir, port, log_file)  # the same port and TSDB
        _wait_ready(prometheus, base_url, log_file)
        back = source_collect(source_id=source.pk, now=start + timedelta(minutes=MINUTES))
    finally:
        _stop(prometheus)
    assert back.status == RunStatus.OK, back.message
    assert (back.window_start, back.duplicates) == (start + timedelta(minutes=20), 0)
    stored = sorted(GpuSample.objects.values_list("gpu_index", "ts"))
    expected = sorted(
        (gpu, start + timedelta(minutes=minute)) for gpu in range(GPUS) for minute in range(MINUTES)
    )
    assert stored == expected  # every minute of the hour, the outage's included, once
    source.refresh_from_db()
    assert (source.watermark, source.consecutive_failures) == (start + timedelta(minutes=MINUTES), 0)
