"""The nightly recommendation run over a 10,000-GPU fleet, beside reading its rows with one query each.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal \
        .venv/bin/python bench/recommendations.py [--gpus 10000] [--jobs 100000] [--keep] [--profile]

Creates a test database and fills it by COPY (ids given, constraints as migrated):

  fleet : GPUS/8 nodes of 8 H100 (90% RDMA-capable, 32 per rack, owned by 20 departments, one
          node in ten unowned), one node classification each for the last 14-day cycle (15% idle,
          15% hot), and an infrastructure incident per 700 jobs (so the checkpoint rule has an MTBF)
  jobs  : JOBS jobs started over the 14 days before NOW (the rest still running at NOW), drawn
          from JOBS/20 families (department / user / name pattern, Zipf-weighted): 55% 1-GPU, 35%
          8-GPU single-node, 10% on 2-16 nodes, 5 minutes to 16 hours. Their config snapshots are
          the simulator's (efficiency.simulator.model._job_config: NCCL env, image, mounts,
          storage_cache_mode, launcher args); 20% of families are misconfigured with one of
          NCCL_IB_DISABLE=1 / IB not found on multi-node RDMA jobs, storage_cache_mode
          metadata-only, or a stock pytorch/pytorch image, and run slower for it
  rows  : the job-node links, one JobHour per hour each job ran (allocated, engine-busy and
          SM-busy GPU-seconds; some jobs hold their GPUs idle for 2-5 hours, some families run
          below 25%), and JobLogFacts for about a quarter of the jobs: ``LogFacts.to_dict()`` of
          real NCCL / Megatron / Hugging Face lines fed through ``LogFactsBuilder`` (IB channels
          with GDRDMA, NET/Socket channels for the misconfigured multi-node ones, P2P, argument
          dumps, timed checkpoint saves)

With ``--keep`` the database is named test_portal_bench_recommendations and kept: a later run
with ``--keep`` and the same sizes reuses it (recommendations are emptied first, so the first
run always starts from none). Then, in one process:

  engine : ``recommendations_refresh(now=NOW, full=True)``, twice: the first run creates every
           recommendation, the second is the nightly run in its steady state (every one exists,
           updated). Each prints its seconds, the SQL statements it sent and their time, and
           its peak RSS: the kernel's high-water mark (``ru_maxrss``), reset through
           /proc/self/clear_refs just before the run, beside the RSS before it. A third,
           steady-state run under tracemalloc gives the peak of Python allocations (slower: not
           timed).
  raw    : the rows the engine reads, one query each, fetchall through the same connection (JSON
           decoded, as psycopg would): the window's jobs with their config, the window's JobHour
           sums per job, their log facts, and their node links with each node's RDMA flag.

and prints a table: rows read, engine seconds, peak MiB, raw-read seconds, engine / raw ratio.
``--profile`` adds a steady-state run under cProfile: the functions with most own and cumulative
time, and the SQL statements with most total time.
"""

import argparse
import bisect
import cProfile
import gc
import io
import itertools
import json
import math
import os
import pstats
import random
import re
import resource
import sys
import time
import tracemalloc
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from efficiency.analysis.recommendations.logfacts import LogFactsBuilder  # noqa: E402
from efficiency.simulator.model import _job_config  # noqa: E402

KEPT_DB_NAME = "test_portal_bench_recommendations"
# One per process: two runs at once must not drop each other's database.
TEST_DB_NAME = f"test_portal_bench_recommendations_{os.getpid()}"
NOW = datetime(2026, 3, 2, 2, 30, tzinfo=UTC)  # the nightly run
DAYS = 14
GPUS_PER_NODE = 8
GPU_MODEL, NODE_GPU_MODEL = "H100", "NVIDIA H100 80GB HBM3"
DEPARTMENTS = (
    "vision", "radar", "lidar", "bev", "mapping", "sim", "pnc", "e2e", "cabin", "voice",
    "nlp", "llm", "rec", "search", "ads", "speech", "robotics", "infra", "research", "data",
)  # fmt: skip
STEMS = (
    "pretrain", "finetune", "sft", "distill", "eval", "ablation", "detector", "segmenter", "tokenizer",
    "rlhf", "dpo", "encoder", "world-model", "occupancy", "planner", "reranker", "asr", "vlm",
)  # fmt: skip
KINDS = (("1gpu", 0.55), ("8gpu", 0.35), ("multi", 0.10))
MULTI_NODES = (2, 2, 2, 4, 4, 4, 8, 8, 16)
DOTS = "." * 40  # Megatron's argument dump: "  bf16 ........ True"
MIN_RUN_S, MAX_RUN_S = 300.0, 16 * 3600.0
JOB_BATCH = 5000
ENDED_STATES = ("completed", "failed", "cancelled", "timeout")
INFRASTRUCTURE = ("hardware_gpu", "hardware_memory_ecc", "nvlink", "network_rdma", "nccl_timeout_hang")

JOB_COLUMNS = (
    "id, cluster_id, source, external_id, department_id, account, user_name, name, state, gpu_count, "
    "gpu_milli, gpu_model, node_count, submitted_at, started_at, ended_at, framework, config, updated_at"
)
WINDOW = (
    "j.started_at IS NOT NULL AND j.started_at < %(now)s AND (j.ended_at IS NULL OR j.ended_at >= %(start)s)"
)
RAW_QUERIES = {
    "jobs + config": (
        "SELECT j.id, j.external_id, j.name, j.user_name, j.department_id, j.cluster_id, j.gpu_count, "
        "j.gpu_milli, j.node_count, j.gpu_model, j.config, j.framework, j.started_at, j.ended_at "
        f"FROM efficiency_job j WHERE {WINDOW}",
        10,  # the JSON column, decoded
    ),
    "JobHour sums": (
        "SELECT job_id, sum(allocated_gpu_s), sum(busy_gpu_s), sum(sm_active_busy_gpu_s) "
        "FROM efficiency_jobhour WHERE hour >= %(start)s GROUP BY job_id",
        None,
    ),
    "log facts": (
        "SELECT f.job_id, f.facts FROM efficiency_joblogfacts f "
        f"JOIN efficiency_job j ON j.id = f.job_id WHERE {WINDOW}",
        1,
    ),
    "node links": (
        "SELECT l.job_id, n.rdma_capable, n.gpu_count FROM efficiency_job_nodes l "
        "JOIN efficiency_node n ON n.id = l.node_id "
        f"JOIN efficiency_job j ON j.id = l.job_id WHERE {WINDOW}",
        None,
    ),
}


# --- Log facts -------------------------------------------------------------------------------


def _facts_template(kind: str, nodes: int, rng: random.Random) -> str:
    """``LogFacts.to_dict()`` as JSON of a log of this kind, its file named ``@FILE@``."""
    host = "gpu-0001:40213:40213 [0] NCCL INFO "
    lines = [host + "NCCL version 2.21.5+cuda12.4"]
    if kind in ("ib", "socket-env", "socket-nodev"):
        lines.append(host + "NCCL_SOCKET_IFNAME set by environment to eth0")
        if kind == "socket-env":
            lines.append(host + "NCCL_IB_DISABLE set by environment to 1.")
        if kind == "socket-nodev":
            lines.append(host + "NET/IB : No device found.")
        if kind == "ib":
            lines.append(host + "NCCL_IB_HCA set by environment to mlx5_0,mlx5_1,mlx5_2,mlx5_3")
            devices = " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(4))
            lines.append(host + f"NET/IB : Using {devices} ; OOB eth0:10.8.0.1<0>")
            lines.append(host + "Using network IB")
            via = "NET/IB/0/GDRDMA"
        else:
            lines.append(host + "NET/Socket : Using [0]eth0:10.8.0.1<0>")
            lines.append(host + "Using network Socket")
            via = "NET/Socket/0"
        for channel in range(4):
            lines.append(host + f"Channel {channel:02d}/0 : {GPUS_PER_NODE}[0] -> 0[0] [receive] via {via}")
            lines.append(host + f"Channel {channel:02d}/0 : 0[0] -> {GPUS_PER_NODE}[0] [send] via {via}")
        lines.append(
            host + f"comm 0x55d1c0 rank 0 nRanks {nodes * GPUS_PER_NODE} nNodes {nodes} localRanks 8"
        )
        lines.append(host + "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read")
        # Megatron's argument dump, and timestamped checkpoint saves every 30 minutes.
        lines += [
            f"  bf16 {DOTS} True",
            f"  fp16 {DOTS} False",
            f"  num_workers {DOTS} {rng.choice((2, 4, 8))}",
        ]
        start = datetime(2026, 2, 20, 8, 0, tzinfo=UTC)
        for save in range(6):
            at = start + timedelta(minutes=30 * save)
            stamp = at.strftime("%Y-%m-%d %H:%M:%S")
            iteration = 500 * (save + 1)
            lines.append(
                f"[{stamp}] saving checkpoint at iteration {iteration:7d} to /mnt/pfs/checkpoints/run"
            )
            fastest, slowest = rng.uniform(35e3, 60e3), rng.uniform(60e3, 90e3)  # ms over the ranks
            lines.append(f"    save-checkpoint {DOTS}: ({fastest:.2f}, {slowest:.2f})")
    elif kind == "p2p":
        for channel in range(4):
            lines.append(host + f"Channel {channel:02d}/0 : 0[0] -> 1[1] via P2P/CUMEM/read")
        lines.append(host + "comm 0x55d1c0 rank 0 nRanks 8 nNodes 1 localRanks 8")
        lines += [f"  bf16 {DOTS} True", f"  num_workers {DOTS} {rng.choice((4, 8))}"]
    else:  # a Hugging Face script on one GPU
        workers = 0 if kind == "hf-no-workers" else rng.choice((2, 4, 8))
        lines += ["TrainingArguments(", "bf16=True,", f"dataloader_num_workers={workers},",
                  "dataloader_pin_memory=True,", "fp16=False,", ")",
                  "Saving model checkpoint to /mnt/pfs/checkpoints/run/checkpoint-500"]  # fmt: skip
    builder = LogFactsBuilder()
    for number, line in enumerate(lines, start=1):
        builder.feed("@FILE@", number * 37, line)
    return json.dumps(builder.facts().to_dict())


# --- The fleet -------------------------------------------------------------------------------


@dataclass
class Family:
    department_id: int
    user: str
    stem: str
    kind: str  # 1gpu, 8gpu, multi
    nodes: int
    misconfig: str  # "", nccl_socket, storage_metadata_only, stock_framework
    interactive: bool
    activity: float  # engine busy / allocated of a typical job
    sm_ratio: float  # SM activity / engine activity
    log_share: float  # share of its jobs with log facts
    log_kind: str
    variant: float  # the simulator's: below 0.5 an nccl_socket family sets NCCL_IB_DISABLE=1


def _families(count: int, departments: list[int], rng: random.Random) -> dict[str, list[Family]]:
    per_department = max(3, count // len(departments) // 8)
    users = {d: [f"u{i:02d}{k:02d}" for k in range(per_department)] for i, d in enumerate(departments)}
    by_kind: dict[str, list[Family]] = defaultdict(list)
    weights = [share for _, share in KINDS]
    for index in range(count):
        kind = rng.choices([k for k, _ in KINDS], weights)[0]
        department = rng.choice(departments)
        nodes = rng.choice(MULTI_NODES) if kind == "multi" else 1
        misconfig = ""
        if rng.random() < 0.20:
            options = (
                ("nccl_socket", "nccl_socket", "storage_metadata_only", "stock_framework")
                if kind == "multi"
                else ("storage_metadata_only", "stock_framework")
            )
            misconfig = rng.choice(options)
        interactive = kind == "1gpu" and not misconfig and rng.random() < 0.10
        if interactive:
            activity = rng.uniform(0.02, 0.15)
        elif misconfig == "storage_metadata_only":
            activity = rng.uniform(0.12, 0.30)
        elif misconfig == "nccl_socket":
            activity = rng.uniform(0.30, 0.55)
        elif rng.random() < 0.10:
            activity = rng.uniform(0.05, 0.22)  # a family that wastes its GPUs
        else:
            activity = rng.triangular(0.35, 0.95, 0.70)
        variant = rng.random()
        if kind == "multi":
            log_share = 0.8 if misconfig == "nccl_socket" else 0.6
            log_kind = (
                ("socket-env" if variant < 0.5 else "socket-nodev") if misconfig == "nccl_socket" else "ib"
            )
        elif kind == "8gpu":
            log_share, log_kind = 0.25, "p2p"
        else:
            log_share, log_kind = 0.15, "hf-no-workers" if rng.random() < 0.15 else "hf"
        by_kind[kind].append(
            Family(
                department_id=department,
                user=rng.choice(users[department]),
                stem=f"{rng.choice(STEMS)}-{chr(97 + index % 26)}{chr(97 + index // 26 % 26)}",
                kind=kind,
                nodes=nodes,
                misconfig=misconfig,
                interactive=interactive,
                activity=activity,
                sm_ratio=rng.uniform(0.45, 0.8),
                log_share=log_share,
                log_kind=log_kind,
                variant=variant,
            )
        )
    return by_kind


def _clamp(value: float) -> float:
    return 0.0 if value < 0.0 else 1.0 if value > 1.0 else value


def build(args: argparse.Namespace) -> dict:
    """Fill the database; returns counts of what was written."""
    from efficiency.models import (
        Cluster,
        Department,
        Incident,
        Job,
        JobHour,
        JobLogFacts,
        Node,
        NodeClassification,
    )

    rng = random.Random(args.seed)
    started = time.perf_counter()
    cluster = Cluster.objects.create(name="bench", slug="bench")  # signed when complete (--keep)
    departments = [Department.objects.create(code=code, name=code.title()).pk for code in DEPARTMENTS]
    node_count = max(16, args.gpus // GPUS_PER_NODE)
    rdma_nodes = int(node_count * 0.9)
    nodes = Node.objects.bulk_create(
        Node(
            cluster=cluster,
            hostname=f"gpu-{i + 1:04d}",
            gpu_model=NODE_GPU_MODEL,
            gpu_count=GPUS_PER_NODE,
            rdma_capable=i < rdma_nodes,
            fault_domain=f"rack-{i // 32:02d}",
            owner_department_id=None if i % 10 == 9 else departments[i * len(departments) // node_count],
            last_seen_at=NOW,
        )
        for i in range(node_count)
    )
    node_ids = [node.pk for node in nodes]
    cycle_end = NOW.replace(hour=0, minute=0)
    classes = rng.choices(("idle", "hot", "fluctuating", "steady"), (0.15, 0.15, 0.35, 0.35), k=node_count)
    utilization = {
        "idle": (0.5, 4.0),
        "hot": (88.0, 99.0),
        "fluctuating": (20.0, 70.0),
        "steady": (25.0, 45.0),
    }
    NodeClassification.objects.bulk_create(
        NodeClassification(
            node_id=node_id,
            cycle_start=cycle_end - timedelta(days=DAYS),
            cycle_end=cycle_end,
            day_zone="UTC",
            node_class=node_class,
            covered_hours=DAYS * 24,
            mean_util_pct=rng.uniform(*utilization[node_class]),
            reason="bench",
            computed_at=cycle_end,
        )
        for node_id, node_class in zip(node_ids, classes, strict=True)
    )

    families = _families(max(10, args.jobs // 20), departments, rng)
    kinds = [k for k, _ in KINDS]
    cumulative = {
        kind: list(itertools.accumulate(1.0 / (rank + 1) ** 0.8 for rank in range(len(families[kind]))))
        for kind in kinds
    }
    templates: dict[tuple[str, int], list[str]] = {}
    window_start = NOW - timedelta(days=DAYS)
    first_hour = window_start.replace(minute=0, second=0, microsecond=0)
    h0, now_s, start_s = first_hour.timestamp(), NOW.timestamp(), window_start.timestamp()
    hour_texts = [(first_hour + timedelta(hours=h)).isoformat() for h in range(DAYS * 24 + 2)]
    log_min, log_max = math.log(MIN_RUN_S), math.log(MAX_RUN_S)
    counts = defaultdict(int)
    multi_jobs: list[tuple[int, int, float, float, int]] = []
    job_table = Job._meta.db_table
    link_table = Job.nodes.through._meta.db_table
    hour_table, facts_table = JobHour._meta.db_table, JobLogFacts._meta.db_table

    job_id = 0
    while job_id < args.jobs:
        job_rows, fact_rows = [], []
        links, hours = io.StringIO(), io.StringIO()
        for _ in range(min(JOB_BATCH, args.jobs - job_id)):
            job_id += 1
            kind = rng.choices(kinds, [share for _, share in KINDS])[0]
            weights = cumulative[kind]
            family = families[kind][bisect.bisect(weights, rng.random() * weights[-1])]
            gpus_per_node = 1 if kind == "1gpu" else GPUS_PER_NODE
            gpus = gpus_per_node * family.nodes
            begin = rng.uniform(start_s, now_s)
            end = begin + math.exp(rng.uniform(log_min, log_max))
            running = end >= now_s
            external_id = str(5_000_000 + job_id)
            name = f"{family.stem}-v{rng.randint(1, 9)}-run{rng.randint(1, 400)}"
            config = _job_config(
                kind="interactive" if family.interactive else "finetune",
                rdma=True,
                misconfig=family.misconfig,
                nodes=family.nodes,
                gpus_per_node=gpus_per_node,
                name=name,
                global_batch=rng.choice((256, 512, 1024)),
                train_iters=rng.choice((5000, 20000, 100000)),
                variant=family.variant,
            )
            state = "running" if running else rng.choices(ENDED_STATES, (0.82, 0.10, 0.05, 0.03))[0]
            begin_at = datetime.fromtimestamp(begin, UTC)
            job_rows.append(
                (
                    job_id, cluster.pk, "slurm", external_id, family.department_id,
                    f"acct-{family.department_id}", family.user, name, state, gpus, gpus * 1000, GPU_MODEL,
                    family.nodes,
                    begin_at - timedelta(seconds=rng.expovariate(1 / 1800)), begin_at,
                    None if running else datetime.fromtimestamp(end, UTC),
                    "pytorch" if family.misconfig == "stock_framework" else "accelerated",
                    json.dumps(config), NOW,
                )
            )  # fmt: skip
            if kind == "multi":
                first = rng.randrange(rdma_nodes - family.nodes + 1)
                placed = node_ids[first : first + family.nodes]
                multi_jobs.append((job_id, placed[0], begin, min(end, now_s), gpus))
            else:
                placed = [rng.choice(node_ids)]
            for node_id in placed:
                links.write(f"{job_id}\t{node_id}\n")
            counts["links"] += len(placed)

            # One JobHour per hour it ran; some jobs hold their GPUs idle for a few hours.
            activity = _clamp(family.activity + rng.gauss(0, 0.08))
            stop = min(end, now_s)
            first_h, last_h = int((begin - h0) // 3600), int((stop - h0 - 1e-6) // 3600)
            idle_from = idle_to = -1
            if rng.random() < (0.5 if family.interactive else 0.03) and last_h - first_h >= 3:
                idle_from = rng.randint(first_h + 1, last_h - 2)
                idle_to = min(last_h - 1, idle_from + rng.randint(2, 5))
            for h in range(first_h, last_h + 1):
                hour_start = h0 + h * 3600
                held = gpus * (min(stop, hour_start + 3600) - max(begin, hour_start))
                if held <= 0:
                    continue
                busy = held * (0.002 if idle_from <= h < idle_to else _clamp(activity + rng.gauss(0, 0.05)))
                hours.write(
                    f"{job_id}\t{hour_texts[h]}\t{family.department_id}\t{held:.1f}\t{busy:.1f}\t"
                    f"{busy * family.sm_ratio:.1f}\n"
                )
                counts["job_hours"] += 1
                if hour_start >= start_s:
                    counts["job_hours_in_window"] += 1

            if rng.random() < family.log_share:
                key = (family.log_kind, family.nodes)
                variants = templates.setdefault(key, [])
                if len(variants) < 4:
                    variants.append(_facts_template(family.log_kind, family.nodes, rng))
                text = rng.choice(variants).replace("@FILE@", f"slurm-{external_id}.out")
                fact_rows.append(f"{job_id}\t{_copy_text(text)}\t0\t{NOW.isoformat()}\n")
        with connection.cursor() as cursor:
            with cursor.cursor.copy(f"COPY {job_table} ({JOB_COLUMNS}) FROM STDIN") as copy:
                for row in job_rows:
                    copy.write_row(row)
            with cursor.cursor.copy(f"COPY {link_table} (job_id, node_id) FROM STDIN") as copy:
                copy.write(links.getvalue())
            with cursor.cursor.copy(
                f"COPY {hour_table} (job_id, hour, department_id, allocated_gpu_s, busy_gpu_s, "
                "sm_active_busy_gpu_s) FROM STDIN"
            ) as copy:
                copy.write(hours.getvalue())
            with cursor.cursor.copy(
                f"COPY {facts_table} (job_id, facts, last_chunk_id, updated_at) FROM STDIN"
            ) as copy:
                copy.write("".join(fact_rows))
        counts["facts"] += len(fact_rows)
        if job_id % 25_000 < JOB_BATCH:
            print(f"  {job_id:,} jobs written ({time.perf_counter() - started:.0f} s)", flush=True)

    # Infrastructure failures on multi-node jobs over the month: the checkpoint rule's MTBF.
    incidents = []
    for job, node_id, begin, stop, gpus in rng.sample(
        multi_jobs, min(len(multi_jobs), max(1, args.jobs // 700))
    ):
        occurred = datetime.fromtimestamp(rng.uniform(begin, stop), UTC)
        incidents.append(
            Incident(
                cluster=cluster, job_id=job, node_id=node_id, category=rng.choice(INFRASTRUCTURE),
                severity="error", code="bench", root_signature_id="bench.xid-79", occurred_at=occurred,
                detected_at=occurred + timedelta(seconds=40), gpu_count=gpus,
            )
        )  # fmt: skip
    Incident.objects.bulk_create(incidents)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{job_table}', 'id'), %s)", [job_id])
        cursor.execute("ANALYZE")
    Cluster.objects.filter(pk=cluster.pk).update(description=_signature(args))
    counts.update(jobs=job_id, nodes=node_count, families=sum(len(f) for f in families.values()))
    counts["incidents"] = len(incidents)
    counts["seconds"] = time.perf_counter() - started
    return counts


def _copy_text(value: str) -> str:
    """A value in COPY's text format."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _signature(args: argparse.Namespace) -> str:
    return (
        f"bench/recommendations.py jobs={args.jobs} gpus={args.gpus} seed={args.seed} now={NOW.isoformat()}"
    )


# --- Measuring -------------------------------------------------------------------------------


class SqlCounter:
    """``connection.execute_wrapper``: statements sent and seconds spent in them, per statement shape."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.by_sql: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            took = time.perf_counter() - started
            self.count += 1
            self.seconds += took
            shape = self.by_sql[re.sub(r"(%s, )+%s", "%s, …", sql)[:160]]
            shape[0] += 1
            shape[1] += took


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        return int(re.search(r"VmRSS:\s+(\d+)", status.read())[1]) / 1024


def _reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark (ru_maxrss) to the current RSS (Linux ≥ 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def _recommendations_empty() -> None:
    from efficiency.models import Recommendation

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {Recommendation._meta.db_table} CASCADE")


def time_engine(label: str, *, trace: bool = False, profile: cProfile.Profile | None = None) -> dict:
    from efficiency.services.recommendations import recommendations_refresh

    gc.collect()
    counter = SqlCounter()
    reset = _reset_peak_rss()
    rss_before = _rss_mib()
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    with connection.execute_wrapper(counter):
        if profile is not None:
            summary = profile.runcall(recommendations_refresh, now=NOW, full=True)
        else:
            summary = recommendations_refresh(now=NOW, full=True)
    seconds = time.perf_counter() - started
    result = {
        "label": label,
        "seconds": seconds,
        "summary": summary,
        "queries": counter.count,
        "sql_s": counter.seconds,
        "by_sql": counter.by_sql,
        "rss_before": rss_before,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_reset": reset,
        "maxrss_before": maxrss_before,
    }
    if trace:
        result["peak_alloc"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return result


def time_raw() -> tuple[dict[str, tuple[int, float]], float]:
    """Each of RAW_QUERIES once: rows and seconds (fetchall, JSON columns decoded)."""
    params = {"now": NOW, "start": NOW - timedelta(days=settings.PORTAL_RECOMMENDATION_WINDOW_DAYS)}
    results = {}
    with connection.cursor() as cursor:
        for label, (sql, json_column) in RAW_QUERIES.items():
            started = time.perf_counter()
            cursor.execute(sql, params)
            rows = cursor.fetchall()
            if json_column is not None:  # Django hands jsonb over as text; psycopg alone decodes it
                decoded = [json.loads(row[json_column]) for row in rows if isinstance(row[json_column], str)]
                del decoded
            results[label] = (len(rows), time.perf_counter() - started)
            del rows
    return results, sum(seconds for _, seconds in results.values())


def _print_engine(result: dict) -> None:
    s = result["summary"]
    growth = result["peak_rss"] - result["rss_before"]
    print(
        f"{result['label']:<22} {result['seconds']:7.1f} s   {result['queries']:>6,} SQL statements "
        f"({result['sql_s']:.1f} s in the database)   peak RSS {result['peak_rss']:,.0f} MiB "
        f"(+{growth:,.0f} over {result['rss_before']:,.0f})"
        + ("" if result["peak_reset"] else "  [could not reset ru_maxrss: the process's peak]")
    )
    print(
        f"{'':<22} {s.jobs:,} jobs, {s.families:,} families, {s.facts_read:,} facts read; created "
        f"{s.created:,}, updated {s.updated:,}, reopened {s.reopened:,}, closed {s.closed:,}"
    )


def _print_profile(profile: cProfile.Profile, result: dict) -> None:
    root = str(Path(__file__).resolve().parent.parent) + "/"
    stream = io.StringIO()
    stats = pstats.Stats(profile, stream=stream)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(r"efficiency", 30)
    print(stream.getvalue().replace(root, ""))
    print("SQL statements with most total time (count, seconds, statement):")
    for sql, (count, seconds) in sorted(result["by_sql"].items(), key=lambda item: -item[1][1])[:15]:
        print(f"  {count:>6,} {seconds:7.2f} s  {sql}")


def run(args: argparse.Namespace, *, reuse: bool) -> None:
    from efficiency.models import Job

    if reuse:
        print(f"reusing the kept database {KEPT_DB_NAME} ({_signature(args)})")
    else:
        print(
            f"building: {args.gpus:,} GPUs, {args.jobs:,} jobs over {DAYS} days before {NOW:%Y-%m-%d %H:%M}"
        )
        counts = build(args)
        print(
            f"built in {counts['seconds']:.0f} s: {counts['nodes']:,} nodes, {counts['families']:,} "
            f"families, {counts['jobs']:,} jobs, {counts['links']:,} job-node links, "
            f"{counts['job_hours']:,} JobHour rows "
            f"({counts['job_hours_in_window']:,} from the window's start), {counts['facts']:,} JobLogFacts, "
            f"{counts['incidents']:,} incidents"
        )
    assert Job.objects.exists(), "the database holds no jobs"
    _recommendations_empty()
    window = settings.PORTAL_RECOMMENDATION_WINDOW_DAYS
    print(f"\nrecommendations_refresh(now={NOW.isoformat()}, full=True), window {window} days:")
    first = time_engine("first run (creates)")
    _print_engine(first)
    steady = time_engine("nightly (steady state)")
    _print_engine(steady)
    traced = time_engine("under tracemalloc", trace=True)
    print(
        f"{'under tracemalloc':<22} peak Python allocation {traced['peak_alloc']:,.0f} MiB "
        f"({traced['seconds']:.1f} s, not counted)"
    )
    by_rule = ", ".join(
        f"{rule} {n:,}" for rule, n in sorted(first["summary"].rules.items(), key=lambda r: -r[1])
    )
    print(f"drafts by rule: {by_rule}")
    from efficiency.models import Recommendation

    stored = Recommendation.objects.count()
    print(f"recommendations stored: {stored:,}")

    time_raw()  # warm-up, as the engine's first run warmed the page cache
    raw, raw_s = min((time_raw() for _ in range(2)), key=lambda r: r[1])
    print("\nraw reads, one query each (best of 2):")
    for label, (rows, seconds) in raw.items():
        print(f"  {label:<14} {rows:>10,} rows {seconds:7.2f} s")
    rows_read = sum(rows for rows, _ in raw.values())

    print(
        f"\n{'':<24} {'rows read':>10} {'engine s':>9} {'SQL':>7} {'peak RSS MiB':>13} {'(+MiB)':>7} "
        f"{'peak alloc MiB':>15} | {'raw s':>6} | engine/raw"
    )
    for result in (first, steady):
        print(
            f"{result['label']:<24} {rows_read:>10,} {result['seconds']:>9.1f} {result['queries']:>7,} "
            f"{result['peak_rss']:>13,.0f} {result['peak_rss'] - result['rss_before']:>7,.0f} "
            f"{traced['peak_alloc']:>15,.0f} | {raw_s:>6.2f} | {result['seconds'] / raw_s:>9.1f}x"
        )
    print(f"{stored:,} recommendations; rows read = jobs + JobHour sums + log facts + node links.")

    if args.profile:
        profile = cProfile.Profile()
        profiled = time_engine("under cProfile", profile=profile)
        print(f"\nunder cProfile: {profiled['seconds']:.1f} s, {profiled['queries']:,} SQL statements")
        _print_profile(profile, profiled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=10_000, help="GPUs, 8 per node")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--keep",
        action="store_true",
        help=f"keep the database ({KEPT_DB_NAME}) and reuse it when the sizes match",
    )
    parser.add_argument("--profile", action="store_true", help="one more run under cProfile")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("Run this on PostgreSQL: set DATABASE_URL=postgres://...")
    connection.settings_dict["TEST"]["NAME"] = KEPT_DB_NAME if args.keep else TEST_DB_NAME
    old_name = connection.creation.create_test_db(
        verbosity=0, autoclobber=True, serialize=False, keepdb=args.keep
    )
    reuse = False
    if args.keep:
        from efficiency.models import Cluster

        kept = Cluster.objects.filter(slug="bench").values_list("description", flat=True).first()
        reuse = kept == _signature(args)
        if kept is not None and not reuse:
            print(f"the kept database was built for another size ({kept}): building it again")
            connection.creation.destroy_test_db(old_name, verbosity=0)
            connection.settings_dict["TEST"]["NAME"] = KEPT_DB_NAME
            old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        run(args, reuse=reuse)
    finally:
        if not args.keep:
            connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
