"""Several worker processes share the work with nothing done twice and nothing skipped.

Real Celery worker processes (solo pool, each a separate process) on a Redis of the test's own
and the test's PostgreSQL database, consuming the portal's routed queues:

* collection: 40 dcgm sources, each a real HTTP exporter, are collected in one round by three
  workers, with the due pass sent twice at once (as when a backed-up queue gets a second pass):
  every source has exactly one run and the samples of a single worker's round;
* rollups: 720 dirty hours rolled up by three workers at once give exactly the rows of a
  single-process run, and each hour is counted by exactly one worker.
"""

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from efficiency.choices import RunStatus, SourceKind
from efficiency.collectors.records import GpuReading
from efficiency.models import (
    DataSource,
    DepartmentHour,
    GpuSample,
    NodeDay,
    NodeHour,
    RollupDirtyHour,
    ScopeHour,
    SourceRun,
)
from efficiency.services.ingest import dirty_hours_mark, gpu_readings_ingest
from efficiency.services.rollups import rollups_refresh
from tests.factories import ClusterFactory, DepartmentFactory, NodeFactory
from tests.reliability.processes import RedisServer, require_redis_server, wait_for
from tests.workers import celery_workers, database_url_for_processes, free_port, portal_python, worker_env

pytestmark = pytest.mark.broker

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "dcgm" / "dcgm_exporter_issue363_rtx_a5000.txt"
SOURCES = 40
WORKERS = 3


@pytest.fixture
def redis_server(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip(
            "needs PostgreSQL (DATABASE_URL=postgres://...): worker processes share the test database"
        )
    require_redis_server()
    server = RedisServer(tmp_path / "redis", free_port())
    server.start()
    yield server
    server.stop()


def _env(tmp_path: Path, redis_server: RedisServer) -> dict[str, str]:
    env = worker_env(database_url_for_processes(), tmp_path / "var")
    env["CELERY_BROKER_URL"] = redis_server.url  # the test's own: its queues hold nothing else
    return env


class _Exporter(BaseHTTPRequestHandler):
    """``/<hostname>/metrics``: a captured dcgm-exporter page, after 50 ms, counted per host."""

    page = FIXTURE.read_text()
    served: dict[str, int] = {}
    lock = threading.Lock()

    def do_GET(self):
        time.sleep(0.05)
        hostname = self.path.split("/")[1]
        with self.lock:
            self.served[hostname] = self.served.get(hostname, 0) + 1
        body = self.page.replace('Hostname="k8s-gpu1"', f'Hostname="{hostname}"').encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def exporter():
    _Exporter.served = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _sources(slug: str, base: str) -> list[DataSource]:
    cluster = ClusterFactory(slug=slug)
    department = DepartmentFactory()
    sources = []
    for i in range(SOURCES):
        hostname = f"{slug}-{i:02d}"
        NodeFactory(cluster=cluster, owner_department=department, hostname=hostname, gpu_count=1)
        sources.append(
            DataSource.objects.create(
                cluster=cluster,
                kind=SourceKind.DCGM_SCRAPE,
                name=hostname,
                interval_s=3600,  # one round in this test: due again only in an hour
                config={"urls": [f"{base}/{hostname}/metrics"]},
            )
        )
    return sources


def _round(env: dict[str, str], workers: int, sources: list[DataSource]) -> float:
    """Start ``workers`` collection workers, send the due pass twice at once, wait for the round."""
    started = time.monotonic()
    with celery_workers(env, settings.PORTAL_QUEUE_COLLECTION, workers):
        sent = portal_python(
            env,
            "from efficiency.tasks import collect_due_sources_task as t; t.delay(); t.delay()",
        )
        assert sent.returncode == 0, sent.stderr[-3000:]
        ids = [source.pk for source in sources]
        runs = SourceRun.objects.filter(source_id__in=ids, finished_at__isnull=False)
        wait_for(lambda: runs.count() >= len(ids), what=f"{len(ids)} finished runs", timeout_s=120)
        elapsed_s = time.monotonic() - started
        # Both passes queued every source: wait until the collection queue is worked through
        # (nothing queued, nothing running) before counting.
        redis = _redis(env)
        wait_for(
            lambda: redis.llen(settings.PORTAL_QUEUE_COLLECTION) == 0
            and not DataSource.objects.filter(pk__in=ids, running_since__isnull=False).exists(),
            what="an empty collection queue",
        )
        time.sleep(2)  # a duplicate taken just before the queue emptied has finished by now
    return elapsed_s


def _redis(env: dict[str, str]):
    import redis

    return redis.Redis.from_url(env["CELERY_BROKER_URL"])


def test_three_workers_collect_every_source_exactly_once_as_one_worker_does(
    transactional_db, tmp_path, redis_server, exporter
):
    env = _env(tmp_path, redis_server)
    one = _sources("one", exporter)
    one_s = _round(env, 1, one)
    many = _sources("many", exporter)
    many_s = _round(env, WORKERS, many)

    for label, sources in (("one worker", one), (f"{WORKERS} workers", many)):
        runs = SourceRun.objects.filter(source__in=sources)
        per_source = {source.pk: 0 for source in sources}
        for run in runs:
            per_source[run.source_id] += 1
        assert set(per_source.values()) == {1}, f"{label}: runs per source {per_source}"
        assert set(runs.values_list("status", flat=True)) == {RunStatus.OK}
        # Each exporter was asked once: the second pass's message found its source collected.
        assert all(_Exporter.served[source.name] == 1 for source in sources), label
    samples = {slug: GpuSample.objects.filter(node__cluster__slug=slug).count() for slug in ("one", "many")}
    assert samples["many"] == samples["one"] == SOURCES  # one GPU per exporter, stored once
    hosts = set(SourceRun.objects.filter(source__in=many).values_list("source__name", flat=True).distinct())
    assert len(hosts) == SOURCES
    print(
        f"{SOURCES} sources, due pass sent twice: a round with 1 worker {one_s:.1f} s, "
        f"with {WORKERS} workers "
        f"{many_s:.1f} s (worker start-up included)"
    )


# --- rollups ---------------------------------------------------------------------------------------

DAYS = 30  # 720 hours: 15 batches of 48 for the workers to share
NODES = 6


def _rollup_rows() -> dict[str, set]:
    """Every rollup row's content (no ids, no computation times; sums to a millisecond, as the
    database may add a day's hours in another order)."""
    rows = {
        "node hours": set(
            NodeHour.objects.values_list(
                "node__hostname", "hour", "sample_count", "sampled_gpu_s", "busy_gpu_s", "available_gpu_s"
            )
        ),
        "department hours": set(
            DepartmentHour.objects.values_list(
                "node__hostname", "hour", "department_id", "allocated_gpu_s", "busy_gpu_s"
            )
        ),
        "scope hours": set(
            ScopeHour.objects.values_list("hour", "department_id", "available_gpu_s", "busy_gpu_s")
        ),
        "node days": set(
            NodeDay.objects.values_list(
                "node__hostname", "day", "available_gpu_s", "busy_gpu_s", "sampled_gpu_s"
            )
        ),
    }
    return {
        name: {tuple(round(v, 3) if isinstance(v, float) else v for v in row) for row in values}
        for name, values in rows.items()
    }


def test_three_workers_roll_up_every_dirty_hour_once_with_a_single_runs_result(
    transactional_db, tmp_path, redis_server
):
    env = _env(tmp_path, redis_server)
    now = datetime.now(tz=UTC).replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(days=DAYS)
    cluster = ClusterFactory(slug="rollups")
    department = DepartmentFactory()
    for n in range(NODES):
        NodeFactory(cluster=cluster, owner_department=department, hostname=f"r-{n}", gpu_count=1)
    readings = [
        GpuReading(
            hostname=f"r-{n}",
            gpu_index=0,
            timestamp_ms=int((start + timedelta(minutes=minute)).timestamp() * 1000),
            gr_engine_active_pct=float((n * 13 + minute) % 101),
        )
        for n in range(NODES)
        for minute in range(0, DAYS * 24 * 60, 15)
    ]
    gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=900, now=now)
    dirty = list(RollupDirtyHour.objects.values_list("cluster_id", "hour"))
    assert len(dirty) >= DAYS * 24

    single_done = rollups_refresh(now=now)  # the single process's run
    single = _rollup_rows()
    assert single_done == len(dirty)
    assert single["node hours"]
    assert single["node days"]

    # The same hours dirty again, their rollups gone: three workers now share them.
    for model in (NodeHour, DepartmentHour, ScopeHour, NodeDay):
        model.objects.all().delete()
    dirty_hours_mark(cluster=cluster, hours={hour for _, hour in dirty}, now=now)
    with celery_workers(env, settings.PORTAL_QUEUE_ANALYSIS, WORKERS):
        code = (
            "import json; from efficiency.tasks import rollups_refresh_task as t; "
            f"sent = [t.delay() for _ in range({WORKERS})]; "
            "print(json.dumps([r.get(timeout=300) for r in sent]))"
        )
        client = portal_python(env, code)
    assert client.returncode == 0, client.stderr[-3000:]
    per_worker = [result["hours"] for result in json.loads(client.stdout.strip().splitlines()[-1])]

    print(f"{len(dirty)} dirty hours rolled up by {WORKERS} workers: {per_worker} hours each")
    assert sum(per_worker) == len(dirty)  # each hour claimed by exactly one worker
    assert sum(1 for hours in per_worker if hours) >= 2, "one worker did everything: nothing was shared"
    assert not RollupDirtyHour.objects.exists()
    assert _rollup_rows() == single
