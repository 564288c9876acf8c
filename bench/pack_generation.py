"""Time and peak memory of sealing one committee review pack at production size.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
        .venv/bin/python bench/pack_generation.py [--nodes 1250] [--departments 100] [--days 14] \
        [--db bench18]

Creates a throw-away database (``--db``, dropped at the end) and fills one cluster with NODES x 8
GPUs (H100 and A100 nodes, 4:1) owned by DEPARTMENTS departments, and DAYS of hourly rollups
COPYed in: ``NodeHour`` (every node and hour), ``DepartmentHour`` (the owner's jobs, and in some
hours another department borrowing part of the node), ``ScopeHour`` (the cluster's and each
department's totals, summed in SQL as the rollups do); an approved quota cycle guaranteeing each
department 80% of what it owns, a rate card, node classifications, ~1 incident per 6 nodes
(some isolating their node for hours) and ~3 tickets per department.

Then times ``pack_generate`` for the period once as the worker runs it, and once more under
``tracemalloc`` (a correction, version 2) for Python's peak allocation; ``ru_maxrss`` is the
process's peak resident size over everything (data generation included). Prints one line:

    pack generation 10,000 GPUs × 100 departments × 336 h: 41.2 s, peak 310 MiB (...)

Target (issue): finishes in a worker within minutes; the limit quoted is 300 s.
"""

import argparse
import io
import os
import random
import resource
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django

django.setup()

from django.db import connection  # noqa: E402

LIMIT_S = 300.0
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
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


def populate(*, nodes: int, departments: int, start: datetime, hours: int, seed: int = 18) -> dict:
    from efficiency.choices import IncidentStatus, QuotaCycleOrigin, QuotaCycleStatus
    from efficiency.models import (
        Cluster,
        Department,
        Incident,
        Node,
        NodeClassification,
        Quota,
        QuotaCycle,
        RateCard,
        Ticket,
    )

    rng = random.Random(seed)
    began = time.perf_counter()
    cluster = Cluster.objects.create(slug="bench", name="Bench cluster")
    depts = Department.objects.bulk_create(
        Department(code=f"dept{i:03d}", name=f"Department {i:03d}") for i in range(departments)
    )
    node_rows = Node.objects.bulk_create(
        Node(
            cluster=cluster,
            hostname=f"gpu-{i:05d}",
            gpu_model=A100 if i % 5 == 4 else H100,
            gpu_count=8,
            fault_domain=f"rack-{i // 16:03d}",
            owner_department=depts[i % departments],
        )
        for i in range(nodes)
    )
    # Per node: how much of the time jobs hold it, and how busy they keep it.
    profile = {node.pk: (rng.choice((0.05, 0.5, 0.8, 0.95)), rng.uniform(0.05, 0.9)) for node in node_rows}
    node_buf, dept_buf = io.StringIO(), io.StringIO()
    totals = [0, 0]
    for node in node_rows:
        occupancy, busy_share = profile[node.pk]
        owner = node.owner_department_id
        for h in range(hours):
            hour = (start + timedelta(hours=h)).isoformat()
            held = 8 if rng.random() < occupancy else rng.choice((0, 0, 2, 4))
            sampled = 8 * 3600.0 if rng.random() > 0.01 else 4 * 3600.0
            busy = min(held * 3600.0 * max(0.0, rng.gauss(busy_share, 0.1)), sampled)
            node_buf.write(
                f"{node.pk}\t{hour}\t{cluster.pk}\t{owner}\t8\t28800.0\t{held * 3600.0}\t{sampled}\t{busy}"
                f"\t{busy}\t{busy * 0.7}\t40000\t400\t60\t{int(sampled / 60)}\n"
            )
            totals[0] += 1
            if held:
                borrower = depts[rng.randrange(departments)].pk if held <= 4 and rng.random() < 0.3 else owner
                dept_buf.write(f"{node.pk}\t{hour}\t{borrower}\t{held * 3600.0}\t{busy}\t1\n")
                totals[1] += 1
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            with cursor.copy(
                "COPY efficiency_nodehour (node_id, hour, cluster_id, owner_department_id, gpu_count, "
                "available_gpu_s, allocated_gpu_s, sampled_gpu_s, busy_gpu_s, gpu_util_busy_gpu_s, "
                "sm_active_busy_gpu_s, fb_used_mib_avg, power_w_avg, temp_c_max, sample_count) FROM STDIN"
            ) as copy:
                copy.write(node_buf.getvalue())
            with cursor.copy(
                "COPY efficiency_departmenthour (node_id, hour, department_id, allocated_gpu_s, "
                "busy_gpu_s, job_count) FROM STDIN"
            ) as copy:
                copy.write(dept_buf.getvalue())
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")
        cursor.execute(_SCOPE_HOUR_SQL)
    end = start + timedelta(hours=hours)
    cycle = QuotaCycle.objects.create(
        cluster=cluster,
        start=start,
        end=end,
        status=QuotaCycleStatus.APPROVED,
        origin=QuotaCycleOrigin.PROPOSAL,
        capacity={
            H100: sum(8 for n in node_rows if n.gpu_model == H100),
            A100: sum(8 for n in node_rows if n.gpu_model == A100),
        },
        created_at=start - timedelta(days=3),
    )
    owned: dict[tuple[int, str], int] = {}
    for node in node_rows:
        key = (node.owner_department_id, node.gpu_model)
        owned[key] = owned.get(key, 0) + 8
    Quota.objects.bulk_create(
        Quota(cycle=cycle, department_id=dept, gpu_model=model, guaranteed_gpus=int(gpus * 0.8))
        for (dept, model), gpus in owned.items()
    )
    RateCard.objects.create(
        version=1,
        effective_from=start - timedelta(days=30),
        currency="CNY",
        rates={H100: "18.50", A100: "9.80"},
        created_at=start - timedelta(days=30),
    )
    NodeClassification.objects.bulk_create(
        NodeClassification(
            node=node,
            cycle_start=start,
            cycle_end=end,
            day_zone="Asia/Shanghai",
            node_class=rng.choice(("idle", "hot", "fluctuating", "steady")),
            covered_hours=hours,
            reason="bench",
            computed_at=end,
        )
        for node in node_rows
    )
    incidents = []
    for i in range(nodes // 6):
        node = node_rows[rng.randrange(nodes)]
        occurred = start + timedelta(seconds=rng.uniform(0, hours * 3600 - 7200))
        detected = occurred + timedelta(seconds=rng.uniform(10, 600))
        located = detected + timedelta(seconds=rng.uniform(10, 1800))
        recovered = located + timedelta(seconds=rng.uniform(600, 6 * 3600)) if i % 7 else None
        incidents.append(
            Incident(
                cluster=cluster,
                department_id=node.owner_department_id,
                node=node,
                category=rng.choice(("hardware_gpu", "nvlink", "network_rdma", "application")),
                severity="critical",
                code="79",
                root_signature_id="xid-79",
                status=IncidentStatus.RESOLVED if recovered else IncidentStatus.OPEN,
                occurred_at=occurred,
                detected_at=detected,
                located_at=located,
                recovered_at=recovered,
                gpu_count=8,
                gpu_hours_lost=rng.uniform(1, 40),
            )
        )
    Incident.objects.bulk_create(incidents)
    Ticket.objects.bulk_create(
        Ticket(
            title=f"Ticket {i}",
            origin="manual",
            department=depts[i % departments],
            severity="high",
            state=rng.choice(("open", "in_progress", "resolved", "closed")),
            created_at=start + timedelta(hours=rng.uniform(0, hours)),
            updated_at=end,
            due_at=start + timedelta(hours=rng.uniform(0, hours * 2)),
        )
        for i in range(departments * 3)
    )
    with connection.cursor() as cursor:
        for table in ("nodehour", "departmenthour", "scopehour", "node", "incident", "ticket"):
            cursor.execute(f"VACUUM ANALYZE efficiency_{table}")
    return {
        "cluster": cluster,
        "end": end,
        "node_hours": totals[0],
        "department_hours": totals[1],
        "seconds": time.perf_counter() - began,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1250)
    parser.add_argument("--departments", type=int, default=100)
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--db", default="bench18", help="the throw-away database (dropped at the end)")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("Run this on PostgreSQL: set DATABASE_URL=postgres://...")
    connection.settings_dict["TEST"]["NAME"] = args.db
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        run(args)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def run(args: argparse.Namespace) -> None:
    from efficiency.services.committee.pack import pack_generate

    hours = args.days * 24
    start = datetime(2026, 11, 1, 16, 0, tzinfo=UTC)
    data = populate(nodes=args.nodes, departments=args.departments, start=start, hours=hours)
    print(
        f"populated {args.nodes:,} nodes, {data['node_hours']:,} node-hours, "
        f"{data['department_hours']:,} department-hours in {data['seconds']:.1f} s"
    )
    began = time.perf_counter()
    pack = pack_generate(cluster=data["cluster"], start=start, end=data["end"])
    seconds = time.perf_counter() - began

    tracemalloc.start()
    began = time.perf_counter()
    again = pack_generate(
        cluster=data["cluster"], start=start, end=data["end"], supersedes=pack, reason="bench"
    )
    traced_s = time.perf_counter() - began
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    content = again.content
    heatmap = content["cluster_section"]["heatmap"]
    print(
        f"pack: {len(pack.content_json) / 2**20:.1f} MiB of JSON, sha256 {pack.content_hash[:12]}…, "
        f"heatmap {len(heatmap['rows'])} × {len(heatmap['columns'])} "
        f"(row block {heatmap['row_block']} nodes, {heatmap['column_hours']} h columns), "
        f"{len(content['departments'])} departments, "
        f"{len(content['reliability']['incidents'])} incidents; under tracemalloc {traced_s:.1f} s"
    )
    print(
        f"pack generation {args.nodes * 8:,} GPUs × {args.departments} departments × {hours} h: "
        f"{seconds:.1f} s, peak {peak / 2**20:.0f} MiB (tracemalloc; ru_maxrss {maxrss_mib:.0f} MiB) "
        f"(limit: minutes in a worker; ratio to limit {seconds / LIMIT_S:.2f} of {LIMIT_S:.0f} s)"
    )


if __name__ == "__main__":
    main()
