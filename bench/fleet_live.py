"""A live fleet: the simulated cluster's dcgm-exporter scraped by N Celery workers, per N.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/7 \
        .venv/bin/python bench/fleet_live.py [--nodes 1250] [--workers 1,2,4] [--minutes 15]
                                             [--sources 10] [--interval 15]

Creates a throw-away test database with ``--nodes`` nodes x 8 GPUs, and starts:

- one process serving the simulator's ``/metrics`` (efficiency.simulator.exporter: real
  dcgm-exporter text, computed for the moment of each request);
- ``--sources`` dcgm sources, each with its share of the nodes as ``/metrics?node=<hostname>``
  URLs (one URL per node, as one exporter per node), collected every ``--interval`` seconds. A
  source is collected by one worker at a time (its lease), so several sources let N workers share;
- then, for each N in ``--workers``: N Celery worker processes (``--pool solo``, all the portal's
  queues) and one ``celery beat`` (the portal's own schedule: due sources every 15 s, rollups
  every minute, ...), on the broker of ``CELERY_BROKER_URL`` (Redis) and PostgreSQL, for
  ``--minutes``. Workers and beat stop and the queues are emptied between runs; the database
  grows on.

Printed per N: GPU samples stored per second (one row per GPU per scrape) beside the offered load
(GPUs / interval) and the ideal linear scaling (N x the N=1 figure); the lag from a scrape to the
rollup that counts it (NodeHour.sample_count reaching the scrape's rows, polled every 5 s); CPU
seconds of each worker; PostgreSQL size growth; source runs done against those due, late runs
(more than 1.5 intervals after the previous one), targets down and the queue left behind.
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

POLL_S = 5.0
SIM_SEED = 11


def serve_exporter(nodes: int, port: int, start: str) -> None:
    """The ``--serve-exporter`` mode: the simulator's exporter for the bench's nodes (no Django)."""
    from efficiency.simulator.exporter import make_server
    from efficiency.simulator.model import ClusterSimulator
    from efficiency.simulator.scenario import reference_nodes

    sim = ClusterSimulator(fleet_nodes(nodes), seed=SIM_SEED, start=datetime.fromisoformat(start))
    sim.exposition(datetime.now(tz=UTC), nodes=[reference_nodes()[0].hostname])  # simulate up to now
    server = make_server(sim, "127.0.0.1", port)
    print("ready", flush=True)
    server.serve_forever()


def fleet_nodes(count: int):
    from efficiency.simulator.scenario import reference_nodes

    return reference_nodes(scale=math.ceil(count / 64))[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1250)
    parser.add_argument("--workers", default="1,2,4", help="worker counts to run, comma-separated")
    parser.add_argument("--minutes", type=float, default=15.0, help="run time per worker count")
    parser.add_argument("--sources", type=int, default=10, help="dcgm sources the nodes are split over")
    parser.add_argument("--interval", type=int, default=15, help="each source's interval, seconds")
    parser.add_argument("--serve-exporter", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--start", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_exporter:
        serve_exporter(args.nodes, args.serve_exporter, args.start)
        return

    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test.utils import setup_test_environment

    if connection.vendor != "postgresql":
        sys.exit("Run this on PostgreSQL: set DATABASE_URL=postgres://...")
    if not settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        sys.exit("Run this on Redis: set CELERY_BROKER_URL=redis://127.0.0.1:6379/<db>")
    counts = [int(n) for n in args.workers.split(",") if n.strip()]
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        Fleet(args, counts).run()
    finally:
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)


@dataclass
class Phase:
    workers: int
    seconds: float = 0.0
    rows: int = 0
    lags_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    db_growth_bytes: int = 0
    runs: int = 0
    runs_due: int = 0
    runs_failed: int = 0
    runs_late: int = 0
    targets_down: int = 0
    queued_left: int = 0

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


class Fleet:
    def __init__(self, args, counts: list[int]) -> None:
        self.args = args
        self.counts = counts
        self.var = Path(tempfile.mkdtemp(prefix="fleet-live-"))
        self.port = _free_port()

    # --- set-up ----------------------------------------------------------------------------------

    def run(self) -> None:
        from django.db import connection

        start = (datetime.now(tz=UTC) - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
        exporter = subprocess.Popen(
            [sys.executable, __file__, "--serve-exporter", str(self.port), "--nodes", str(self.args.nodes),
             "--start", start.isoformat()],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            hostnames = self._inventory()
            self._sources(hostnames)
            if exporter.stdout.readline().strip() != "ready":
                sys.exit("the simulated exporter did not start")
            self.env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("PORTAL_")},
                "DATABASE_URL": _database_url(connection.settings_dict),
                "PORTAL_VAR_DIR": str(self.var),
                "DJANGO_SETTINGS_MODULE": "portal.settings",
            }
            phases = [self._phase(n) for n in self.counts]
        finally:
            exporter.terminate()
            exporter.wait(timeout=20)
        self._report(phases)

    def _inventory(self) -> list[str]:
        from efficiency.models import Cluster, Node

        cluster = Cluster.objects.create(name="fleet", slug="fleet")
        nodes = fleet_nodes(self.args.nodes)
        Node.objects.bulk_create(
            Node(cluster=cluster, hostname=n.hostname, gpu_model=n.gpu_model, gpu_count=n.gpu_count)
            for n in nodes
        )
        self.cluster = cluster
        return [n.hostname for n in nodes]

    def _sources(self, hostnames: list[str]) -> None:
        from efficiency.choices import SourceKind
        from efficiency.models import DataSource

        share = math.ceil(len(hostnames) / self.args.sources)
        for number, first in enumerate(range(0, len(hostnames), share), start=1):
            urls = [
                f"http://127.0.0.1:{self.port}/metrics?node={host}"
                for host in hostnames[first : first + share]
            ]
            DataSource.objects.create(
                cluster=self.cluster,
                name=f"dcgm-{number:02d}",
                kind=SourceKind.DCGM_SCRAPE,
                config={"urls": urls},
                interval_s=self.args.interval,
            )
        self.gpus = len(hostnames) * 8

    # --- one worker count ----------------------------------------------------------------------------

    def _phase(self, workers: int) -> Phase:
        import psutil
        from django.db import connection

        from efficiency.models import DataSource, SourceRun

        phase = Phase(workers)
        print(f"--- {workers} worker(s), {self.args.minutes:g} min", flush=True)
        self._purge()
        # The first run of each source must be due at once, as on a fresh start.
        DataSource.objects.update(last_attempt_at=None, running_since=None)
        queues = ",".join(self._queues())
        procs = [self._celery("worker", "--pool", "solo", "-Q", queues, "-n", f"fleet{workers}-{i}@%h",
                              "--without-gossip", "--without-mingle")
                 for i in range(workers)]  # fmt: skip
        self._wait_ready(procs)
        cpu_start = [_cpu_s(psutil.Process(p.pid)) for p in procs]
        size_start = _db_size()
        launched = datetime.now(tz=UTC)
        beat = self._celery("beat", "-s", str(self.var / f"beat-{workers}"))
        # The clock starts with beat's first tick (its first source run), not with its start-up.
        while not (
            first := SourceRun.objects.filter(started_at__gte=launched).order_by("started_at").first()
        ):
            if beat.poll() is not None or datetime.now(tz=UTC) - launched > timedelta(minutes=5):
                sys.exit(f"beat queued no collection:\n{beat.stdout.read()[-3000:]}")
            time.sleep(0.5)
        began = first.started_at
        lag = LagWatch(began)
        stop = threading.Event()
        watcher = threading.Thread(target=lag.poll_until, args=(stop,), daemon=True)
        watcher.start()
        deadline = time.monotonic() + self.args.minutes * 60 - (datetime.now(tz=UTC) - began).total_seconds()
        try:
            while time.monotonic() < deadline:
                time.sleep(min(10.0, max(0.0, deadline - time.monotonic())))
                dead = [p for p in [*procs, beat] if p.poll() is not None]
                if dead:
                    sys.exit(f"a worker or beat exited early:\n{dead[0].stdout.read()[-3000:]}")
        finally:
            ended = datetime.now(tz=UTC)
            beat.terminate()
            beat.wait(timeout=30)
            phase.queued_left = self._queue_length()
            cpu_end = [_cpu_s(psutil.Process(p.pid)) for p in procs]
            for proc in procs:
                proc.terminate()  # warm shutdown: a task in progress finishes
            for proc in procs:
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
            stop.set()
            watcher.join(timeout=60)
            connection.close()
        phase.seconds = (ended - began).total_seconds()
        phase.cpu_s = [end - start for start, end in zip(cpu_start, cpu_end, strict=True)]
        phase.db_growth_bytes = _db_size() - size_start
        lag.poll_once()  # rollups that finished during shut-down still count for their scrapes
        phase.rows = lag.rows_between(began, ended)
        phase.lags_s = lag.lags()
        runs = list(SourceRun.objects.filter(started_at__gte=began, started_at__lt=ended).values_list(
            "source_id", "started_at", "status"))  # fmt: skip
        phase.runs = len(runs)
        phase.runs_failed = sum(status == "failed" for _, _, status in runs)
        phase.runs_due = self.args.sources * int(phase.seconds // self.args.interval)
        by_source = defaultdict(list)
        for source_id, started_at, _ in runs:
            by_source[source_id].append(started_at)
        for starts in by_source.values():
            starts.sort()
            phase.runs_late += sum(
                (b - a).total_seconds() > 1.5 * self.args.interval for a, b in pairwise(starts)
            )
        for state in DataSource.objects.values_list("state", flat=True):
            targets = (state or {}).get("targets", {})
            phase.targets_down += sum(t.get("health") == "down" for t in targets.values())
        return phase

    def _wait_ready(self, procs: list[subprocess.Popen]) -> None:
        """Until every worker answers a ping: the run's clock starts with all of them consuming."""
        from portal.celery import app

        deadline = time.monotonic() + 300
        while len(app.control.ping(timeout=2.0) or []) < len(procs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                sys.exit("the workers did not start")

    def _celery(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", *args, "--loglevel", "WARNING"],
            cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

    def _queues(self) -> list[str]:
        """Every queue the portal routes to (CELERY_TASK_ROUTES, where settings have it) and the default."""
        from django.conf import settings

        queues = [getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery")]
        routes = getattr(settings, "CELERY_TASK_ROUTES", None) or {}
        for route in routes.values() if isinstance(routes, dict) else []:
            queue = route.get("queue") if isinstance(route, dict) else None
            if queue and queue not in queues:
                queues.append(queue)
        for queue in getattr(settings, "CELERY_TASK_QUEUES", None) or []:
            name = getattr(queue, "name", queue)
            if isinstance(name, str) and name not in queues:
                queues.append(name)
        return queues

    def _purge(self) -> None:
        from portal.celery import app

        with app.connection_for_write() as conn:
            for queue in self._queues():
                with suppress(Exception):  # a queue never declared has nothing to purge
                    conn.default_channel.queue_purge(queue)

    def _queue_length(self) -> int:
        from portal.celery import app

        total = 0
        with app.connection_for_write() as conn:
            for queue in self._queues():
                with suppress(Exception):  # not a Redis channel: not counted
                    total += conn.default_channel.client.llen(queue)
        return total

    # --- report ----------------------------------------------------------------------------------------

    def _report(self, phases: list[Phase]) -> None:
        offered = self.gpus / self.args.interval
        base = phases[0].rows_per_s / phases[0].workers if phases else 0.0
        print()
        print(
            f"{self.args.nodes:,} nodes x 8 GPUs ({self.gpus:,} GPUs), {self.args.sources} dcgm sources, "
            f"every {self.args.interval} s: offered load {offered:,.0f} GPU samples/s"
        )
        header = (
            f"{'workers':>7} {'samples/s':>10} {'ideal':>9} {'ratio':>6} {'lag p50':>8} {'lag p95':>8} "
            f"{'lag max':>8} {'CPU s/worker':>22} {'DB growth':>10} {'runs/due':>10} {'failed':>6} "
            f"{'late':>5} {'down':>5} {'queued':>6}"
        )
        print(header)
        for phase in phases:
            ideal = min(base * phase.workers, offered) if base else 0.0
            lags = sorted(phase.lags_s)
            cpu = " ".join(f"{c:.0f}" for c in phase.cpu_s)
            print(
                f"{phase.workers:>7} {phase.rows_per_s:>10,.0f} {ideal:>9,.0f} "
                f"{(phase.rows_per_s / ideal if ideal else 0):>6.2f} {_q(lags, 0.5):>8} {_q(lags, 0.95):>8} "
                f"{_q(lags, 1.0):>8} {cpu:>22} {phase.db_growth_bytes / 2**20:>7.1f} MB "
                f"{phase.runs:>4}/{phase.runs_due:<5} {phase.runs_failed:>6} {phase.runs_late:>5} "
                f"{phase.targets_down:>5} {phase.queued_left:>6}"
            )
        print(
            "ideal: N x the 1-worker figure (per worker), capped at the offered load; lag: seconds "
            f"from a scrape to the rollup counting it (polled every {POLL_S:g} s); CPU per worker over "
            "the run; late: runs more than 1.5 intervals after the source's previous one; down: "
            "targets down at the end; queued: tasks left in the queues."
        )


class LagWatch:
    """Polls stored rows per scrape instant and rolled-up rows per hour, to time each scrape's rollup."""

    def __init__(self, since: datetime) -> None:
        from django.db import connection

        self.since = since
        self.hour = since.replace(minute=0, second=0, microsecond=0)
        with connection.cursor() as cursor:  # rows of this hour stored by earlier runs
            cursor.execute(
                "SELECT count(*) FROM efficiency_gpusample WHERE ts >= %s AND ts < %s", [self.hour, since]
            )
            self.earlier = cursor.fetchone()[0]
        self.rows_at: dict[datetime, int] = {}  # scrape instant -> rows stored (as last seen)
        self.first_rolled: dict[datetime, float] = {}  # scrape instant -> when first counted by a rollup

    def poll_until(self, stop: threading.Event) -> None:
        from django.db import connection

        try:
            while not stop.wait(POLL_S):
                self.poll_once()
        finally:
            connection.close()

    def poll_once(self) -> None:
        from django.db import connection

        seen = time.time()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT ts, count(*) FROM efficiency_gpusample WHERE ts >= %s GROUP BY ts", [self.since]
            )
            self.rows_at.update(cursor.fetchall())
            cursor.execute(
                "SELECT hour, sum(sample_count) FROM efficiency_nodehour WHERE hour >= %s GROUP BY hour",
                [self.hour],
            )
            rolled = dict(cursor.fetchall())
        # Within an hour, rows are counted by the rollups in the order of their instants (rows
        # stored before this phase are subtracted first): an instant is rolled up once the hour's
        # rollups count all rows up to and including it.
        by_hour: dict[datetime, list[datetime]] = defaultdict(list)
        for ts in self.rows_at:
            by_hour[ts.replace(minute=0, second=0, microsecond=0)].append(ts)
        for hour, instants in by_hour.items():
            instants.sort()
            counted = rolled.get(hour, 0) - (self.earlier if hour == self.hour else 0)
            running = 0
            for ts in instants:
                running += self.rows_at[ts]
                if running > counted:
                    break
                self.first_rolled.setdefault(ts, seen)

    def rows_between(self, start: datetime, end: datetime) -> int:
        return sum(n for ts, n in self.rows_at.items() if start <= ts < end)

    def lags(self) -> list[float]:
        return [seen - ts.timestamp() for ts, seen in self.first_rolled.items()]


def _q(values: list[float], q: float) -> str:
    if not values:
        return "-"
    return f"{values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]:.0f} s"


def _cpu_s(process) -> float:
    times = process.cpu_times()
    return times.user + times.system + times.children_user + times.children_system


def _db_size() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        return cursor.fetchone()[0]


def _database_url(settings_dict: dict) -> str:
    """The URL of the bench's test database, for the worker and beat processes."""
    user = settings_dict["USER"] or "postgres"
    password = f":{settings_dict['PASSWORD']}" if settings_dict["PASSWORD"] else ""
    host = f"{settings_dict['HOST'] or '127.0.0.1'}:{settings_dict['PORT'] or 5432}"
    return f"postgres://{user}{password}@{host}/{settings_dict['NAME']}"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    main()
