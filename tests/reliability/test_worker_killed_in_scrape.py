"""A worker killed with SIGKILL in the middle of ingesting a Prometheus scrape: after a restart not
one sample is lost or stored twice, and the rollups equal those of an uninterrupted run.

A small proxy in front of a real Prometheus lets the first hour of a backfill through and holds
the request for the second hour, so the worker is killed with part of the window stored and the
rest not (its watermark still at the start, its source still marked as running).
"""

import contextlib
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from efficiency.choices import SourceKind
from efficiency.models import DataSource, GpuSample, NodeHour, SourceRun
from efficiency.services.rollups import rollups_refresh
from efficiency.services.sources import source_collect
from tests.factories import ClusterFactory, DataSourceFactory, NodeFactory
from tests.prometheus_server import running_prometheus
from tests.reliability.processes import (
    Client,
    new_queue,
    require_postgresql,
    sigkill,
    wait_for,
    worker_process,
)
from tests.workers import database_url_for_processes, worker_env

pytestmark = pytest.mark.broker

HOSTS = ("gpu-s01", "gpu-s02")
GPUS = 4
MINUTES = 120


def _activity(minute: int, host: int, gpu: int) -> float:
    return ((minute * 7 + gpu * 3 + host * 11) % 101) / 100


def _openmetrics(start: datetime) -> str:
    lines = ["# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge"]
    for host_index, host in enumerate(HOSTS):
        for gpu in range(GPUS):
            labels = f'gpu="{gpu}",UUID="GPU-{host_index}-{gpu}",modelName="H100",Hostname="{host}"'
            for minute in range(MINUTES):
                ts = int((start + timedelta(minutes=minute)).timestamp())
                lines.append(
                    f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} {_activity(minute, host_index, gpu)!r} {ts}"
                )
    return "\n".join(lines) + "\n# EOF\n"


class HoldingProxy:
    """Forwards to Prometheus, but holds every range query starting at or after ``hold_from``."""

    def __init__(self, upstream: str, hold_from: datetime) -> None:
        self.upstream, self.hold_from = upstream, hold_from.timestamp()
        self.holding, self.released = threading.Event(), threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                query = parse_qs(urlsplit(self.path).query)
                if float(query.get("start", ["0"])[0]) >= proxy.hold_from:
                    proxy.holding.set()
                    proxy.released.wait(timeout=120)
                answer = requests.get(proxy.upstream + self.path, timeout=30)
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the worker was killed while we held its request
                    self.wfile.write(answer.content)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()


def _source(slug: str, base_url: str, watermark: datetime) -> DataSource:
    cluster = ClusterFactory(slug=slug)
    for host in HOSTS:
        NodeFactory(cluster=cluster, hostname=host, gpu_count=GPUS)
    return DataSourceFactory(
        cluster=cluster,
        kind=SourceKind.PROMETHEUS,
        name="prometheus",
        config={"base_url": base_url, "step_s": 60, "lag_s": 0, "max_points": 30},
        watermark=watermark,
    )


def _samples(source: DataSource) -> list[tuple]:
    return sorted(
        GpuSample.objects.filter(node__cluster=source.cluster).values_list(
            "node__hostname", "gpu_index", "ts", "gr_engine_active_pct"
        )
    )


def _rollups(source: DataSource) -> list[tuple]:
    """The hours' sums, to the microsecond: PostgreSQL adds a float column in whatever order it
    reads the rows, and a rerun stores the same samples in another order (6931.800000000001 and
    6931.8 are the same busy seconds)."""
    return sorted(
        (host, hour, count, round(sampled, 6), round(busy, 6))
        for host, hour, count, sampled, busy in NodeHour.objects.filter(
            node__cluster=source.cluster
        ).values_list("node__hostname", "hour", "sample_count", "sampled_gpu_s", "busy_gpu_s")
    )


def test_a_worker_killed_in_the_middle_of_a_scrape_loses_and_doubles_nothing(transactional_db, tmp_path):
    require_postgresql()
    start = (datetime.now(tz=UTC) - timedelta(hours=6)).replace(minute=0, second=0, microsecond=0)
    with running_prometheus(tmp_path, openmetrics_text=_openmetrics(start)) as prometheus_url:
        # What an uninterrupted collection stores, for comparison.
        clean = _source("scrape-clean", prometheus_url, start)
        # (Prometheus answers for five minutes past the last sample: its lookback.)
        total = source_collect(source_id=clean.pk).stored
        assert total >= len(HOSTS) * GPUS * MINUTES

        proxy = HoldingProxy(prometheus_url, hold_from=start + timedelta(hours=1))
        faulted = _source("scrape-killed", proxy.url, start)
        env = worker_env(database_url_for_processes(), tmp_path / "var")
        queue = new_queue("scrape-kill")
        client = Client(env, queue)
        try:
            with worker_process(env, queue) as worker:
                client.send("collect_source_task", faulted.pk)
                wait_for(proxy.holding.is_set, what="the worker to ask for the second hour")
                stored_before_kill = GpuSample.objects.filter(node__cluster=faulted.cluster).count()
                assert 0 < stored_before_kill < total  # the first hour is in, the second not
                sigkill(worker)
            proxy.released.set()
            faulted.refresh_from_db()
            assert faulted.running_since is not None  # the killed run could not say it ended
            assert faulted.watermark == start

            # A new worker; beat sends the collection again within 15 s (sent here at once).
            with worker_process(env, queue):
                summary = client.call("collect_source_task", faulted.pk)
        finally:
            proxy.close()
    assert summary.get("status") == "ok", f"the restarted worker did not collect: {summary}"
    # The rerun starts again from the watermark: what the killed run stored comes back as
    # duplicates and is not stored again.
    rerun = SourceRun.objects.get(pk=summary["run"])
    assert (rerun.stored, rerun.duplicates) == (total - stored_before_kill, stored_before_kill)
    assert _samples(faulted) == [(host, *rest) for host, *rest in _samples(clean)]
    faulted.refresh_from_db()
    assert faulted.running_since is None
    assert faulted.watermark > start + timedelta(minutes=MINUTES)

    rollups_refresh()
    assert _rollups(faulted) == _rollups(clean)
    assert len(_rollups(clean)) >= len(HOSTS) * MINUTES // 60
