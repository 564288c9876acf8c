"""The job list's CSV export (``/jobs/?export=csv``) at a million jobs, beside PostgreSQL's COPY.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal \
        .venv/bin/python bench/csv_export.py [--jobs 1000000]

Creates a throw-away test database and COPYs ``--jobs`` finished jobs into it (10 departments,
realistic names, users and times). Then, in one process:

  export : GET /jobs/?export=csv as a platform admin through the Django test client, reading the
           streamed body chunk by chunk as a client would (nothing kept): time to the first
           chunk, total time, rows/s, and the peak of Python memory allocated meanwhile
           (tracemalloc) and the process's peak RSS growth
  COPY   : ``COPY (SELECT the same columns, joined the same way) TO STDOUT WITH CSV`` through
           psycopg, read the same way: the floor for producing these rows as CSV

and prints both side by side with the ratio. The peak memory is measured at --jobs and at a
tenth of it: a streamed export's peak does not grow with the rows.
"""

import argparse
import gc
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

TEST_DB_NAME = f"test_portal_bench_csv_{os.getpid()}"
JOB_COLUMNS = (
    "cluster_id, source, external_id, department_id, account, user_name, name, state, gpu_count, "
    "gpu_model, node_count, submitted_at, started_at, ended_at, framework, config, updated_at"
)
COPY_SQL = """
COPY (
  SELECT j.external_id, j.name, d.code, j.user_name, j.state, j.gpu_count,
         j.submitted_at, j.started_at, j.ended_at,
         extract(epoch FROM j.started_at - j.submitted_at),
         extract(epoch FROM j.ended_at - j.started_at)
  FROM efficiency_job j LEFT JOIN efficiency_department d ON d.id = j.department_id
  WHERE j.id < %s
  ORDER BY j.submitted_at DESC, j.id DESC
) TO STDOUT WITH CSV HEADER
"""


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_jobs(count: int, cluster_id: int, departments: list[int]) -> None:
    rng = random.Random(12)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY efficiency_job ({JOB_COLUMNS}) FROM STDIN") as copy,
    ):
        for i in range(count):
            submitted = start + timedelta(seconds=i * 30)
            started = submitted + timedelta(seconds=rng.randint(0, 7200))
            ended = started + timedelta(seconds=rng.randint(600, 3 * 86400))
            copy.write_row(
                (
                    cluster_id, "slurm", str(1_000_000 + i), rng.choice(departments), "acct",
                    f"user{rng.randint(1, 400)}", f"train-resnet50-lr{rng.randint(1, 9)}e-4-run{i}",
                    "completed", rng.choice((1, 2, 4, 8, 8, 16, 64)), "H100", 1,
                    submitted, started, ended, "pytorch", "{}", ended,
                )
            )  # fmt: skip


def read_streamed(response) -> tuple[int, float]:
    """Bytes read and seconds to the first chunk, keeping nothing (as a client writing to disk)."""
    started = time.perf_counter()
    first = None
    size = 0
    for chunk in response.streaming_content:
        if first is None:
            first = time.perf_counter() - started
        size += len(chunk)
    return size, first or 0.0


def time_export(client, rows: int, *, trace_memory: bool) -> dict:
    """One export read to the end; with ``trace_memory`` under tracemalloc (slower: a separate pass)."""
    gc.collect()
    if trace_memory:
        tracemalloc.start()
    rss_before = _rss_mib()
    started = time.perf_counter()
    response = client.get("/jobs/", {"export": "csv", "submitted_before": _cutoff(rows)})
    assert response.status_code == 200, response.content.decode()[-3000:]
    assert response.streaming
    size, first_s = read_streamed(response)
    total_s = time.perf_counter() - started
    result = {
        "seconds": total_s,
        "first_chunk_s": first_s,
        "rows_per_s": rows / total_s,
        "mib": size / 2**20,
        "rss_growth_mib": _rss_mib() - rss_before,
    }
    if trace_memory:
        result["peak_alloc_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return result


CUTOFFS: dict[int, str] = {}


def _cutoff(rows: int) -> str:
    return CUTOFFS[rows]


def time_copy(rows: int, last_id: int) -> dict:
    started = time.perf_counter()
    size = 0
    with connection.cursor() as cursor, cursor.cursor.copy(COPY_SQL, (last_id,)) as copy:
        for block in copy:
            size += len(block)
    total_s = time.perf_counter() - started
    return {"seconds": total_s, "rows_per_s": rows / total_s, "mib": size / 2**20}


def run(args: argparse.Namespace) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from efficiency.choices import Role
    from efficiency.models import Cluster, Department, Job
    from efficiency.services.organisation import user_role_assign

    cluster = Cluster.objects.create(name="bench", slug="bench")
    departments = [Department.objects.create(code=f"d{i}", name=f"Department {i}").pk for i in range(10)]
    t0 = time.perf_counter()
    load_jobs(args.jobs, cluster.pk, departments)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE efficiency_job")
    print(f"loaded {args.jobs:,} jobs in {time.perf_counter() - t0:.0f} s")

    admin = get_user_model().objects.create_user("bench-admin")
    user_role_assign(user=admin, role=Role.PLATFORM_ADMIN)
    client = Client(HTTP_HOST="localhost")
    client.force_login(admin)

    sizes = sorted({max(1, args.jobs // 10), args.jobs})
    first_id = Job.objects.order_by("pk").values_list("pk", flat=True).first()
    for rows in sizes:
        # The first `rows` jobs by id were submitted first: "submitted before" the next one's time.
        following = Job.objects.filter(pk=first_id + rows).values_list("submitted_at", flat=True).first()
        CUTOFFS[rows] = (following or datetime(2100, 1, 1, tzinfo=UTC)).isoformat()

    print(
        f"\n{'rows':>10} {'export s':>9} {'rows/s':>10} {'1st chunk s':>11} {'MiB':>7} "
        f"{'peak alloc MiB':>14} {'RSS +MiB':>9} | {'COPY s':>7} {'rows/s':>10} | export/COPY"
    )
    time_export(client, min(sizes), trace_memory=False)  # warm-up: URL conf, templates, translations
    for rows in sizes:
        export = time_export(client, rows, trace_memory=False)
        export["peak_alloc_mib"] = time_export(client, rows, trace_memory=True)["peak_alloc_mib"]
        copy = time_copy(rows, first_id + rows)
        print(
            f"{rows:>10,} {export['seconds']:>9.1f} {export['rows_per_s']:>10,.0f} "
            f"{export['first_chunk_s']:>11.3f} {export['mib']:>7.1f} {export['peak_alloc_mib']:>14.1f} "
            f"{export['rss_growth_mib']:>9.1f} | {copy['seconds']:>7.1f} {copy['rows_per_s']:>10,.0f} | "
            f"{export['seconds'] / copy['seconds']:>10.1f}x"
        )
    print("\nGunicorn's default timeout is 30 s: a streamed export keeps the worker busy but answering;")
    print("its memory peak must not grow with the rows (compare the two lines).")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1_000_000)
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("Run this on PostgreSQL: set DATABASE_URL=postgres://...")
    connection.settings_dict["TEST"]["NAME"] = TEST_DB_NAME
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        run(args)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
