"""Server time of the utilization pages at production size, beside the raw SQL aggregate they need.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal \
        .venv/bin/python bench/usage_pages.py [--nodes 1250] [--days 90] [--repeat 20]

Creates a throw-away test database and COPYs hourly rollups into it: NODES x 8 GPUs x DAYS of
``NodeHour`` (one row per node and hour), ``DepartmentHour`` (one row per node-hour in which the
owner's jobs held GPUs), ``Job`` / ``JobHour`` (whole-node jobs of 6 hours to 10 days, one at a
time per node) and ``NodeClassification`` (two-week cycles). Nodes follow DESIGN.md's mix: ~20%
idle, ~20% hot, ~30% fluctuating, the rest steady; cluster utilization ~30%, allocation ~50%,
full metric coverage except short outages and the odd partly scraped hour.

Then, in one process and against the same data, times with the Django test client:

  page : /usage/?range=... (cluster overview, as a committee member) and
         /departments/<code>/?range=... (as that department's head), and the two parts that page
         loads with htmx right after: /departments/<code>/heatmap/ and /departments/<code>/jobs/
  raw  : the single SQL aggregate each page needs at minimum: the four NodeHour sums over the
         range (for the department page restricted to the department's nodes)

and prints p50 / p95 of each, the page p95 / raw p95 ratio, and the 150 ms target. Each page is
timed twice: "cold", with every cluster's rollup version moved on before each request (as a
rollup run's commit does, untimed), so the page builds everything from the rollups; and "warm",
repeated requests of an unchanged page, which read what the pages' cache kept
(``efficiency.selectors.rollup_cache``) and only what is read per request. Each page
request's own SQL time is summed too (every query it runs, timed around the driver), so a page is
also held to its own cost: server p95 <= its SQL p95 + 50 ms (issue 19: a page costs its query,
plus a fixed allowance for Python, template and charts). The whole run is repeated on a quarter
of the nodes to show how page time grows with the cluster, and at 7 days to show how it grows
with the range. One more request per page under
``CaptureQueriesContext`` and one under cProfile list where the time goes (SQL count and time,
slowest queries, own time per library, the portal's costliest functions); the baselines' plans
and the rollup tables' sizes are printed too.
Targets (issues): p95 <= 150 ms per page at 1,250 nodes x 90 days; p95 <= the page's SQL p95 +
50 ms at 312 and 1,250 nodes, 7 and 90 days.
"""

import argparse
import gc
import io
import itertools
import math
import os
import random
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

TARGET_P95_MS = 150.0
# What a page may cost beyond its own SQL (p95 against p95): selectors' Python, template, charts.
PYTHON_ALLOWANCE_MS = 50.0
# Not test_portal (pytest --reuse-db keeps it), and one per process: two runs at once must not
# drop each other's database.
TEST_DB_NAME = f"test_portal_bench_usage_{os.getpid()}"
GPU_INTERVAL_S = 60  # one sample per GPU and minute: sample_count = sampled_gpu_s / 60

# Job length is log-uniform between these, so most jobs run hours to a few days.
JOB_MIN_H, JOB_MAX_H = 6.0, 240.0
JOB_MEAN_H = (JOB_MAX_H - JOB_MIN_H) / math.log(JOB_MAX_H / JOB_MIN_H)
JOB_GPUS = (8, 8, 8, 4, 4, 2)  # GPUs of a job on a node that is not hot


@dataclass(frozen=True)
class Profile:
    """How a class of node behaves: share of nodes, time a job holds it, how busy jobs keep it."""

    share: float
    occupancy: float  # fraction of the time some job holds the node
    busy_share: float  # busy / allocated of a typical job
    spread: float  # hour-to-hour standard deviation of busy / allocated
    whole_node: bool = False


PROFILES = {
    "idle": Profile(0.20, 0.05, 0.05, 0.02),
    "hot": Profile(0.20, 0.95, 0.90, 0.05, whole_node=True),
    "fluctuating": Profile(0.30, 0.80, 0.50, 0.35),
    "steady": Profile(0.30, 0.75, 0.35, 0.05),
}

NODEHOUR_COLUMNS = (
    "node_id, hour, cluster_id, owner_department_id, gpu_count, available_gpu_s, allocated_gpu_s, "
    "sampled_gpu_s, busy_gpu_s, gpu_util_busy_gpu_s, sm_active_busy_gpu_s, fb_used_mib_avg, "
    "power_w_avg, temp_c_max, sample_count"
)
JOB_COLUMNS = (
    "id, cluster_id, source, external_id, department_id, account, user_name, name, state, gpu_count, "
    "gpu_milli, gpu_model, node_count, submitted_at, started_at, ended_at, framework, config, updated_at"
)

RAW_CLUSTER_SQL = (
    "SELECT sum(available_gpu_s), sum(allocated_gpu_s), sum(sampled_gpu_s), sum(busy_gpu_s) "
    "FROM efficiency_nodehour WHERE hour >= %s AND hour < %s"
)
RAW_DEPARTMENT_SQL = RAW_CLUSTER_SQL + " AND owner_department_id = %s"


def _clamp(value: float) -> float:
    return 0.0 if value < 0.0 else 1.0 if value > 1.0 else value


@dataclass
class Generated:
    nodes: int
    node_hours: int
    department_hours: int
    jobs: int
    job_hours: int
    classifications: int
    seconds: float
    analyze_s: float
    available_gpu_s: float
    allocated_gpu_s: float
    sampled_gpu_s: float
    busy_gpu_s: float


class RollupGenerator:
    """Writes plausible rollups for one cluster, node by node, as COPY text."""

    def __init__(self, *, cluster_id: int, days: int, now: datetime, seed: int) -> None:
        self.cluster_id = cluster_id
        self.rng = random.Random(seed)
        self.hour_count = days * 24
        # As the range presets: whole hours ending with the current, partial one.
        current_hour = now.replace(minute=0, second=0, microsecond=0)
        self.first_hour = current_hour - timedelta(hours=self.hour_count - 1)
        self.now_h = (now - self.first_hour).total_seconds() / 3600
        self.now = now
        self.hour_texts = [(self.first_hour + timedelta(hours=h)).isoformat() for h in range(self.hour_count)]
        self.job_ids = itertools.count(1)
        self.department_rows = io.StringIO()
        self.job_rows = io.StringIO()
        self.job_node_rows = io.StringIO()
        self.job_hour_rows = io.StringIO()
        self.counts = {"node_hours": 0, "department_hours": 0, "jobs": 0, "job_hours": 0}
        self.totals = [0.0, 0.0, 0.0, 0.0]
        self.classifications: list[tuple[int, int, str, list[float], list[float]]] = []

    def node(self, *, node_id: int, gpus: int, gpu_model: str, department: tuple[int, str]) -> str:
        """NodeHour COPY text of one node; its department, job and job-hour rows are buffered."""
        rng, hours, now_h = self.rng, self.hour_count, self.now_h
        profile_name = rng.choices(list(PROFILES), weights=[p.share for p in PROFILES.values()])[0]
        profile = PROFILES[profile_name]
        department_id, department_code = department

        available = [gpus * 3600.0] * hours
        available[-1] = gpus * 3600.0 * (now_h - (hours - 1))
        coverage = [1.0] * hours
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):  # exporter or scrape outages
            start = rng.randrange(hours)
            for h in range(start, min(hours, start + rng.randint(1, 12))):
                coverage[h] = 0.0
        for _ in range(hours // 50):  # hours in which some scrapes went missing
            h = rng.randrange(hours)
            coverage[h] = min(coverage[h], rng.uniform(0.5, 0.98))

        allocated = [0.0] * hours
        busy = [0.0] * hours
        job_count = [0] * hours
        gap_mean_h = JOB_MEAN_H * (1 - profile.occupancy) / profile.occupancy
        log_min, log_max = math.log(JOB_MIN_H), math.log(JOB_MAX_H)
        t = -rng.uniform(0, JOB_MAX_H)  # a job may already run when the window opens
        while True:
            t += rng.expovariate(1 / gap_mean_h)
            if t >= now_h:
                break
            start, end = t, t + math.exp(rng.uniform(log_min, log_max))
            t = end
            if end <= 0:
                continue
            job_gpus = gpus if profile.whole_node else min(gpus, rng.choice(JOB_GPUS))
            job_share = _clamp(profile.busy_share + rng.gauss(0, 0.1))
            job_id = next(self.job_ids)
            stop = min(end, now_h)
            for h in range(max(0, int(start)), math.ceil(stop)):
                held = job_gpus * (min(stop, h + 1) - max(start, h)) * 3600.0
                if held <= 0:
                    continue
                used = held * _clamp(job_share + rng.gauss(0, profile.spread)) * coverage[h]
                allocated[h] += held
                busy[h] += used
                job_count[h] += 1
                self.job_hour_rows.write(
                    f"{job_id}\t{self.hour_texts[h]}\t{department_id}\t{held:.1f}\t{used:.1f}\t"
                    f"{used * 0.7:.1f}\n"
                )
                self.counts["job_hours"] += 1
            self._job(job_id, node_id, department_id, department_code, job_gpus, gpu_model, start, end)

        lines = []
        utilization = [0.0] * hours
        hour_texts, prefix = self.hour_texts, f"{node_id}\t"
        suffix = f"\t{self.cluster_id}\t{department_id}\t{gpus}\t"
        for h in range(hours):
            avail, held, used = available[h], allocated[h], busy[h]
            sampled = avail * coverage[h]
            if sampled > 0:
                util = used / sampled
                utilization[h] = util
                gpu_util = min(sampled, used * 1.25 + held * coverage[h] * 0.05)
                held_share = held / avail
                averages = (
                    f"{held_share * (12000 + 50000 * util) + 600:.1f}\t{60 + 560 * util:.1f}\t"
                    f"{33 + 45 * util + 4 * rng.random():.1f}\t{round(sampled / GPU_INTERVAL_S)}"
                )
            else:
                utilization[h] = -1.0  # not observed
                gpu_util = 0.0
                averages = "\\N\t\\N\t\\N\t0"
            lines.append(
                f"{prefix}{hour_texts[h]}{suffix}{avail:.1f}\t{held:.1f}\t{sampled:.1f}\t{used:.1f}\t"
                f"{gpu_util:.1f}\t{used * 0.7:.1f}\t{averages}\n"
            )
            if held > 0:
                self.department_rows.write(
                    f"{node_id}\t{hour_texts[h]}\t{department_id}\t{held:.1f}\t{used:.1f}\t{job_count[h]}\n"
                )
                self.counts["department_hours"] += 1
        self.counts["node_hours"] += hours
        self.totals[0] += sum(available)
        self.totals[1] += sum(allocated)
        self.totals[2] += sum(a * c for a, c in zip(available, coverage, strict=True))
        self.totals[3] += sum(busy)
        self.classifications.append((node_id, hours, profile_name, utilization, available))
        return "".join(lines)

    def _job(
        self,
        job_id: int,
        node_id: int,
        department_id: int,
        department_code: str,
        gpus: int,
        gpu_model: str,
        start_h: float,
        end_h: float,
    ) -> None:
        rng = self.rng
        started = self.first_hour + timedelta(hours=start_h)
        submitted = started - timedelta(minutes=rng.uniform(0, 120))
        if end_h > self.now_h:
            state, ended = "running", "\\N"
        else:
            state = rng.choices(("completed", "failed", "cancelled"), weights=(90, 7, 3))[0]
            ended = (self.first_hour + timedelta(hours=end_h)).isoformat()
        self.job_rows.write(
            f"{job_id}\t{self.cluster_id}\tslurm\t{job_id}\t{department_id}\t{department_code}\t"
            f"u{rng.randrange(200):03d}\ttrain-{department_code}-{job_id}\t{state}\t{gpus}\t{gpus * 1000}\t"
            f"{gpu_model}\t1\t"
            f"{submitted.isoformat()}\t{started.isoformat()}\t{ended}\tpytorch\t{{}}\t{self.now.isoformat()}\n"
        )
        self.job_node_rows.write(f"{job_id}\t{node_id}\n")
        self.counts["jobs"] += 1

    def classification_rows(self, cycle_days: int = 14) -> list:
        """NodeClassification rows for each whole two-week cycle ending with the window."""
        from efficiency.analysis.node_classes import REASONS
        from efficiency.models import NodeClassification

        cycle_h = cycle_days * 24
        window_end = self.first_hour + timedelta(hours=self.hour_count)
        rows = []
        for node_id, hours, node_class, utilization, _ in self.classifications:
            for cycle in range(hours // cycle_h):
                last = hours - cycle * cycle_h
                seen = [u for u in utilization[last - cycle_h : last] if u >= 0]
                mean = sum(seen) / len(seen) if seen else 0.0
                variance = sum((u - mean) ** 2 for u in seen) / len(seen) if seen else 0.0
                rows.append(
                    NodeClassification(
                        node_id=node_id,
                        cycle_start=window_end - timedelta(hours=(cycle + 1) * cycle_h),
                        cycle_end=window_end - timedelta(hours=cycle * cycle_h),
                        node_class=node_class,
                        covered_hours=len(seen),
                        mean_util_pct=round(mean * 100, 1),
                        idle_hour_share=sum(u < 0.01 for u in seen) / max(len(seen), 1),
                        hot_hour_share=sum(u > 0.8 for u in seen) / max(len(seen), 1),
                        stddev_pct=round(math.sqrt(variance) * 100, 1),
                        reason=REASONS[node_class],
                        day_zone=settings.TIME_ZONE,
                        computed_at=window_end - timedelta(hours=cycle * cycle_h),
                    )
                )
        return rows


_SUMS = "sum(available_gpu_s), sum(allocated_gpu_s), sum(sampled_gpu_s), sum(busy_gpu_s)"
_SCOPE_HOUR_SQL = f"""
INSERT INTO efficiency_scopehour
    (cluster_id, hour, department_id, available_gpu_s, allocated_gpu_s, sampled_gpu_s, busy_gpu_s)
SELECT cluster_id, hour, NULL, {_SUMS} FROM efficiency_nodehour GROUP BY cluster_id, hour
UNION ALL
SELECT coalesce(o.cluster_id, u.cluster_id), coalesce(o.hour, u.hour),
       coalesce(o.department_id, u.department_id),
       coalesce(o.available, 0), coalesce(u.allocated, 0), coalesce(o.sampled, 0), coalesce(u.busy, 0)
FROM (SELECT cluster_id, hour, owner_department_id AS department_id,
             sum(available_gpu_s) AS available, sum(sampled_gpu_s) AS sampled
      FROM efficiency_nodehour WHERE owner_department_id IS NOT NULL
      GROUP BY cluster_id, hour, owner_department_id) o
FULL OUTER JOIN
     (SELECT n.cluster_id, d.hour, d.department_id,
             sum(d.allocated_gpu_s) AS allocated, sum(d.busy_gpu_s) AS busy
      FROM efficiency_departmenthour d JOIN efficiency_node n ON n.id = d.node_id
      GROUP BY n.cluster_id, d.hour, d.department_id) u
  ON o.cluster_id = u.cluster_id AND o.hour = u.hour AND o.department_id = u.department_id
"""
_NODE_DAY_SQL = f"""
INSERT INTO efficiency_nodeday
    (node_id, day, day_zone, cluster_id, owner_department_id,
     available_gpu_s, allocated_gpu_s, sampled_gpu_s, busy_gpu_s)
SELECT node_id, (hour AT TIME ZONE %s)::date AS day, %s, min(cluster_id), min(owner_department_id), {_SUMS}
FROM efficiency_nodehour GROUP BY node_id, day
"""


def _copy(cursor, sql: str, data: io.StringIO) -> None:
    with cursor.copy(sql) as copy:
        copy.write(data.getvalue())


def dataset_generate(
    *, cluster, departments: dict[str, int], node_count: int, days: int, now: datetime
) -> Generated:
    """Replace the inventory and rollups with NODE_COUNT nodes x DAYS of hourly rollups."""
    from efficiency.models import Gpu, Node, NodeClassification
    from efficiency.services.rollups import rollup_version_bump
    from efficiency.simulator.scenario import gpu_uuid, reference_nodes

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE efficiency_nodehour, efficiency_departmenthour, efficiency_jobhour, "
            "efficiency_nodeclassification, efficiency_job_nodes, efficiency_job, efficiency_gpu, "
            "efficiency_node, efficiency_scopehour, efficiency_nodeday RESTART IDENTITY CASCADE"
        )
    started = time.perf_counter()
    specs = reference_nodes(scale=math.ceil(node_count / 64))[:node_count]
    nodes = Node.objects.bulk_create(
        Node(
            cluster=cluster,
            hostname=spec.hostname,
            gpu_model=spec.gpu_model,
            gpu_count=spec.gpu_count,
            rdma_capable=spec.rdma_capable,
            fault_domain=spec.fault_domain,
            owner_department_id=departments[spec.owner],
        )
        for spec in specs
    )
    Gpu.objects.bulk_create(
        (
            Gpu(node=node, index=i, uuid=gpu_uuid(spec.hostname, i), model=spec.gpu_model, memory_mib=81_920)
            for node, spec in zip(nodes, specs, strict=True)
            for i in range(spec.gpu_count)
        ),
        batch_size=5000,
    )
    generator = RollupGenerator(cluster_id=cluster.pk, days=days, now=now, seed=node_count)
    with connection.cursor() as cursor:
        # Every row references rows made just above: skip the foreign-key triggers, which would
        # more than double the time (the test database is thrown away afterwards).
        cursor.execute("SET session_replication_role = replica")
        try:
            # NodeHour streams while it is generated; the other tables follow from buffers.
            with cursor.copy(f"COPY efficiency_nodehour ({NODEHOUR_COLUMNS}) FROM STDIN") as copy:
                for node, spec in zip(nodes, specs, strict=True):
                    copy.write(
                        generator.node(
                            node_id=node.pk,
                            gpus=spec.gpu_count,
                            gpu_model=spec.gpu_model,
                            department=(departments[spec.owner], spec.owner),
                        )
                    )
            _copy(cursor, f"COPY efficiency_job ({JOB_COLUMNS}) FROM STDIN", generator.job_rows)
            _copy(cursor, "COPY efficiency_job_nodes (job_id, node_id) FROM STDIN", generator.job_node_rows)
            _copy(
                cursor,
                "COPY efficiency_departmenthour "
                "(node_id, hour, department_id, allocated_gpu_s, busy_gpu_s, job_count) FROM STDIN",
                generator.department_rows,
            )
            _copy(
                cursor,
                "COPY efficiency_jobhour "
                "(job_id, hour, department_id, allocated_gpu_s, busy_gpu_s, sm_active_busy_gpu_s) "
                "FROM STDIN",
                generator.job_hour_rows,
            )
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('efficiency_job', 'id'), "
            "(SELECT coalesce(max(id), 1) FROM efficiency_job))"
        )
    classifications = generator.classification_rows()
    NodeClassification.objects.bulk_create(classifications, batch_size=5000)
    with connection.cursor() as cursor:
        # The rollups of rollups the pages read (efficiency.services.rollups writes the same
        # rows hour by hour): cluster and department totals per hour, node totals per day.
        cursor.execute(_SCOPE_HOUR_SQL)
        cursor.execute(_NODE_DAY_SQL, [settings.TIME_ZONE, settings.TIME_ZONE])
    # As a rollup run's commit does: the pages' cache must not serve the previous data set.
    rollup_version_bump(cluster.pk)
    seconds = time.perf_counter() - started

    started = time.perf_counter()
    with connection.cursor() as cursor:
        # As autovacuum would by the time anyone looks: planner statistics and a visibility map
        # (index-only scans), so that autovacuum does not start in the middle of the timings.
        for table in (
            "nodehour",
            "departmenthour",
            "jobhour",
            "job",
            "job_nodes",
            "node",
            "nodeclassification",
            "scopehour",
            "nodeday",
        ):
            cursor.execute(f"VACUUM ANALYZE efficiency_{table}")
    analyze_s = time.perf_counter() - started
    return Generated(
        nodes=len(nodes),
        classifications=len(classifications),
        seconds=seconds,
        analyze_s=analyze_s,
        available_gpu_s=generator.totals[0],
        allocated_gpu_s=generator.totals[1],
        sampled_gpu_s=generator.totals[2],
        busy_gpu_s=generator.totals[3],
        **generator.counts,
    )


def plan_summary(sql: str, params: tuple) -> str:
    """The plan's node types, outermost first (e.g. Aggregate > Gather > Aggregate > Seq Scan)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0][0]["Plan"]
    names = []
    while plan:
        parallel = " (parallel)" if plan.get("Parallel Aware") else ""
        names.append(plan["Node Type"] + parallel)
        plan = (plan.get("Plans") or [None])[0]
    return " > ".join(names)


def table_sizes() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_size_pretty(pg_relation_size('efficiency_nodehour')), "
            "pg_size_pretty(pg_relation_size('efficiency_departmenthour')), "
            "pg_size_pretty(pg_relation_size('efficiency_jobhour')), current_setting('shared_buffers')"
        )
        node, department, job, shared_buffers = cursor.fetchone()
    return (
        f"heap NodeHour {node}, DepartmentHour {department}, JobHour {job} (shared_buffers {shared_buffers})"
    )


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (p95 of 20 samples is the 19th fastest)."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def timings_ms(call: Callable[[], None], *, repeat: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


class PageError(Exception):
    pass


def page_call(client, url: str) -> Callable[[], None]:
    def call() -> None:
        response = client.get(url)
        if response.status_code != 200:
            raise PageError(f"GET {url} answered {response.status_code}")

    return call


def raw_call(sql: str, params: tuple) -> Callable[[], None]:
    def call() -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            cursor.fetchone()

    return call


@dataclass
class Measure:
    label: str
    url: str
    page_ms: list[float] | None
    raw_ms: list[float]
    error: str = ""
    # Per page request: the time its own queries took (sum), and the process CPU time it used.
    sql_ms: list[float] | None = None
    cpu_ms: list[float] | None = None


class SqlClock:
    """Sums the time of every query run while installed (``connection.execute_wrapper``)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - started


def page_timings(
    call: Callable[[], None], *, repeat: int, warmup: int, before: Callable[[], None] | None = None
) -> tuple[list[float], list[float], list[float]]:
    """Wall time of each request, the SQL time within it, and the CPU time of this process;
    ``before`` runs ahead of each request, untimed (``rollups_changed``: a cold request)."""
    for _ in range(warmup):
        if before:
            before()
        call()
    page_ms, sql_ms, cpu_ms = [], [], []
    for _ in range(repeat):
        if before:
            before()
        clock = SqlClock()
        with connection.execute_wrapper(clock):
            cpu_started, started = time.process_time(), time.perf_counter()
            call()
            page_ms.append((time.perf_counter() - started) * 1000)
            cpu_ms.append((time.process_time() - cpu_started) * 1000)
        sql_ms.append(clock.seconds * 1000)
    return page_ms, sql_ms, cpu_ms


def rollups_changed() -> None:
    """What a rollup run's commit does to the pages' cache: every cluster's rollup version moves
    on, so the next request of each page builds it from the rollups again (a cold request)."""
    from efficiency.models import Cluster
    from efficiency.services.rollups import rollup_version_bump

    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        rollup_version_bump(cluster_id)


def page_measure(
    *,
    label: str,
    client,
    url: str,
    raw: Callable[[], None],
    repeat: int,
    warmup: int,
    cold: bool = False,
) -> Measure:
    """The page's timings: warm (repeated requests: from the pages' cache, as most are), or
    cold (``cold``: the rollups changed before each request, so it builds everything)."""
    # Interleave nothing: the page's runs, then the baseline's, on the same warm connection.
    raw_ms = timings_ms(raw, repeat=repeat, warmup=warmup)
    try:
        page_ms, sql_ms, cpu_ms = page_timings(
            page_call(client, url), repeat=repeat, warmup=warmup, before=rollups_changed if cold else None
        )
    except Exception:
        # The innermost frames of the last exception are enough to hand to the page's author.
        return Measure(label, url, None, raw_ms, traceback.format_exc(limit=-12, chain=False))
    return Measure(label, url, page_ms, raw_ms, sql_ms=sql_ms, cpu_ms=cpu_ms)


def query_profile(client, url: str, top: int = 4) -> str:
    """One more request with its SQL captured: count, SQL time against page time, slowest ones."""
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        started = time.perf_counter()
        response = client.get(url)
        page_ms = (time.perf_counter() - started) * 1000
    queries = sorted(captured.captured_queries, key=lambda q: float(q["time"]), reverse=True)
    sql_ms = sum(float(q["time"]) for q in queries) * 1000
    lines = [
        f"  {url}: HTTP {response.status_code}, {len(queries)} queries, SQL {sql_ms:.0f} ms "
        f"of {page_ms:.0f} ms page time (the rest is Python: selectors, template, charts)"
    ]
    for query in queries[:top]:
        sql = " ".join(query["sql"].split())
        lines.append(f"    {float(query['time']) * 1000:7.1f} ms  {sql[:220]}{'…' if len(sql) > 220 else ''}")
    return "\n".join(lines)


def growth(before: Measure | None, after: Measure | None) -> str:
    if before is None or after is None or before is after or not before.page_ms or not after.page_ms:
        return "n/a"
    page = percentile(after.page_ms, 95) / percentile(before.page_ms, 95)
    raw = percentile(after.raw_ms, 95) / percentile(before.raw_ms, 95)
    return f"x{page:.1f} (x{raw:.1f})"


def python_profile(client, url: str, top: int = 6) -> str:
    """One more request under cProfile (which inflates it): own time per library, and the
    portal's functions with the most cumulative time."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    client.get(url)
    profiler.disable()
    profiled_ms = (time.perf_counter() - started) * 1000
    stats = pstats.Stats(profiler).stats  # (file, line, function) -> (cc, nc, tottime, cumtime, callers)
    buckets = {"plotly": 0.0, "django/template": 0.0, "django/db + psycopg": 0.0, "other": 0.0}
    own = []
    root = str(Path(__file__).resolve().parent.parent / "efficiency")
    for (filename, line, function), (_, calls, tottime, cumtime, _) in stats.items():
        if "/plotly/" in filename or "/_plotly_utils/" in filename:
            buckets["plotly"] += tottime
        elif "/django/template/" in filename:
            buckets["django/template"] += tottime
        elif "/django/db/" in filename or "/psycopg/" in filename:
            buckets["django/db + psycopg"] += tottime
        else:
            buckets["other"] += tottime
        if filename.startswith(root):
            own.append(
                (cumtime, f"{Path(filename).relative_to(root.rsplit('/', 1)[0])}:{line} {function}", calls)
            )
    lines = [
        f"    under cProfile {profiled_ms:.0f} ms; own time by library: "
        + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in buckets.items())
    ]
    for cumtime, where, calls in sorted(own, reverse=True)[:top]:
        lines.append(f"    {cumtime * 1000:7.1f} ms cumulative  {where} ({calls} calls)")
    return "\n".join(lines)


def report_line(node_count: int, days: int, measure: Measure) -> str:
    raw_p95 = percentile(measure.raw_ms, 95)
    head = f"{node_count:>5} nodes {days:>2}d  {measure.label:<18}"
    if measure.page_ms is None:
        what = "ERROR (traceback below)" if measure.error.startswith("Traceback") else "page not timed"
        raw_p50 = percentile(measure.raw_ms, 50)
        return f"{head} {what:<33} raw aggregate p50 {raw_p50:6.1f} ms  p95 {raw_p95:6.1f} ms"
    p50, p95 = percentile(measure.page_ms, 50), percentile(measure.page_ms, 95)
    verdict = "OK" if p95 <= TARGET_P95_MS else "MISSED"
    return (
        f"{head} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms   raw aggregate p95 {raw_p95:6.1f} ms   "
        f"ratio {p95 / raw_p95:6.1f}   target p95 <= {TARGET_P95_MS:.0f} ms: {verdict}"
    )


def own_sql_line(node_count: int, days: int, measure: Measure) -> str:
    """The page against its own SQL: server p50/p95, SQL p50/p95, their difference, the verdict."""
    head = f"{node_count:>5} nodes {days:>2}d  {measure.label:<18}"
    if measure.page_ms is None or not measure.sql_ms:
        return f"{head} not timed"
    p50, p95 = percentile(measure.page_ms, 50), percentile(measure.page_ms, 95)
    sql50, sql95 = percentile(measure.sql_ms, 50), percentile(measure.sql_ms, 95)
    cpu95 = percentile(measure.cpu_ms, 95) if measure.cpu_ms else float("nan")
    verdict = "OK" if p95 <= sql95 + PYTHON_ALLOWANCE_MS else "MISSED"
    return (
        f"{head} {p50:7.1f} {p95:7.1f}   {sql50:6.1f} {sql95:6.1f}   {p95 - sql95:+7.1f}   "
        f"{cpu95:7.1f}   {percentile(measure.raw_ms, 95):6.1f}   {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1250)
    parser.add_argument("--days", type=int, default=90, choices=[7, 14, 30, 90], help="a range preset")
    parser.add_argument(
        "--history-days",
        type=int,
        default=None,
        help="days of rollups to generate (default: --days); more puts rows in the previous period too",
    )
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--department", default="e2e", help="department code for the department page")
    parser.add_argument("--no-pages", action="store_true", help="generate and time the raw SQL only")
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="do not gc.freeze() before the pages are timed (portal/wsgi.py freezes the web processes)",
    )
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("Run this on PostgreSQL: set DATABASE_URL=postgres://...")

    connection.settings_dict["TEST"]["NAME"] = TEST_DB_NAME
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        run(args)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def run(args: argparse.Namespace) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from efficiency.choices import Role
    from efficiency.models import Cluster, Department
    from efficiency.services.organisation import user_role_assign
    from efficiency.simulator.scenario import REFERENCE_DEPARTMENTS

    cluster = Cluster.objects.create(name="bench", slug="bench")
    departments = {
        spec.code: Department.objects.create(code=spec.code, name=spec.name).pk
        for spec in REFERENCE_DEPARTMENTS
    }
    user_model = get_user_model()
    committee = user_model.objects.create(username="bench-committee")
    user_role_assign(user=committee, role=Role.COMMITTEE)
    head = user_model.objects.create(username=f"bench-head-{args.department}")
    user_role_assign(user=head, role=Role.DEPARTMENT_HEAD, department_codes=(args.department,))
    committee_client = Client(HTTP_HOST="localhost")
    committee_client.force_login(committee)
    head_client = Client(HTTP_HOST="localhost")
    head_client.force_login(head)

    results: dict[tuple[int, int, str], Measure] = {}
    profiles: list[str] = []
    lines: list[str] = []
    sizes = [max(1, args.nodes // 4), args.nodes]
    for node_count in sizes:
        now = datetime.now(tz=UTC)
        history_days = max(args.history_days or args.days, args.days)
        generated = dataset_generate(
            cluster=cluster, departments=departments, node_count=node_count, days=history_days, now=now
        )
        department_nodes = cluster.nodes.filter(owner_department__code=args.department).count()
        rows = generated.node_hours + generated.department_hours + generated.jobs + generated.job_hours
        print(
            f"\n{node_count} nodes x 8 GPUs x {history_days} days: {generated.node_hours:,} NodeHour, "
            f"{generated.department_hours:,} DepartmentHour, {generated.jobs:,} jobs, "
            f"{generated.job_hours:,} JobHour, {generated.classifications:,} NodeClassification rows"
        )
        print(
            f"  generated + COPYed in {generated.seconds:.1f} s ({rows / generated.seconds:,.0f} rows/s), "
            f"VACUUM ANALYZE {generated.analyze_s:.1f} s; allocation "
            f"{generated.allocated_gpu_s / generated.available_gpu_s:.0%}, utilization "
            f"{generated.busy_gpu_s / generated.sampled_gpu_s:.0%}, coverage "
            f"{generated.sampled_gpu_s / generated.available_gpu_s:.1%}; "
            f"department {args.department!r} owns {department_nodes} nodes",
        )
        print(f"  {table_sizes()}", flush=True)
        department_id = departments[args.department]
        if not args.no_gc_freeze:
            # As portal/wsgi.py does at start-up: what exists now is never rescanned by the
            # collector, so a full collection costs what the requests allocate, not the process.
            gc.collect()
            gc.freeze()
        for days in sorted({7, args.days}, reverse=True):
            end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
            start = end - timedelta(days=days)
            pages = [
                ("overview", committee_client, f"/usage/?range={days}d", RAW_CLUSTER_SQL, (start, end)),
                (
                    "department",
                    head_client,
                    f"/departments/{args.department}/?range={days}d",
                    RAW_DEPARTMENT_SQL,
                    (start, end, department_id),
                ),
                # The department page fetches these two parts with htmx right after it is shown:
                # the user waits for them too, so they are measured like pages.
                (
                    "dept heatmap",
                    head_client,
                    f"/departments/{args.department}/heatmap/?range={days}d",
                    RAW_DEPARTMENT_SQL,
                    (start, end, department_id),
                ),
                (
                    "dept jobs",
                    head_client,
                    f"/departments/{args.department}/jobs/?range={days}d",
                    RAW_DEPARTMENT_SQL,
                    (start, end, department_id),
                ),
            ]
            for label, client, url, sql, params in pages:
                print(f"  raw aggregate for {label} {days}d: {plan_summary(sql, params)}")
                raw = raw_call(sql, params)
                if args.no_pages:
                    measure = Measure(
                        label, url, None, timings_ms(raw, repeat=args.repeat, warmup=args.warmup)
                    )
                    measure.error = "pages not measured (--no-pages)"
                    results[(node_count, days, label)] = measure
                    lines.append(report_line(node_count, days, measure))
                    print(lines[-1], flush=True)
                    continue
                for cold in (True, False):
                    name = f"{label} {'cold' if cold else 'warm'}"
                    measure = page_measure(
                        label=name,
                        client=client,
                        url=url,
                        raw=raw,
                        repeat=args.repeat,
                        warmup=args.warmup,
                        cold=cold,
                    )
                    if measure.page_ms is not None and node_count == args.nodes:
                        if cold:
                            rollups_changed()
                            profiles.append(query_profile(client, url) + " [cold]")
                            rollups_changed()
                        profiles.append(python_profile(client, url) + (" [cold]" if cold else " [warm]"))
                    results[(node_count, days, name)] = measure
                    lines.append(report_line(node_count, days, measure))
                    print(lines[-1], flush=True)
                    print(f"  own SQL: {own_sql_line(node_count, days, measure).strip()}", flush=True)

    print(f"\nServer time (Django test client, {args.repeat} runs after {args.warmup} warm-ups), PostgreSQL:")
    for line in lines:
        print(line)
    print(
        f"\nEach page against its own SQL (target: server p95 <= SQL p95 + {PYTHON_ALLOWANCE_MS:.0f} ms; "
        "CPU: this process's CPU time per request; raw: the single aggregate, same run), ms:"
    )
    print(
        f"{'':>5}       {'':>2}   {'page':<18} {'srv p50':>7} {'srv p95':>7}   {'sql50':>6} {'sql95':>6}   "
        f"{'p95-sql':>7}   {'cpu p95':>7}   {'raw95':>6}   verdict"
    )
    for (node_count, days, _label), measure in sorted(results.items(), key=lambda item: item[0][:2]):
        print(own_sql_line(node_count, days, measure))
    print("\nGrowth of page p95 (raw aggregate p95 in brackets):")
    small, large = sizes
    for label in [
        f"{page} {state}"
        for page in ("overview", "department", "dept heatmap", "dept jobs")
        for state in ("cold", "warm")
    ]:
        by_nodes = growth(results.get((small, args.days, label)), results.get((large, args.days, label)))
        by_range = growth(results.get((large, 7, label)), results.get((large, args.days, label)))
        print(
            f"  {label:<18} x{large / small:.0f} nodes ({args.days}d): {by_nodes}   "
            f"x{args.days / 7:.1f} range ({large} nodes): {by_range}"
        )
    if profiles:
        print(
            f"\nWhere the page time goes at {args.nodes} nodes "
            "(one request with its SQL captured, one under cProfile):"
        )
        for profile in profiles:
            print(profile)
    failed = {m.url: m.error for m in results.values() if m.page_ms is None and not args.no_pages}
    for url, error in list(failed.items())[:2]:
        print(f"\n{url} failed:\n{error}")


if __name__ == "__main__":
    main()
