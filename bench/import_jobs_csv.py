"""``import_jobs`` of a large jobs CSV into PostgreSQL, beside a raw COPY of the same file.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal \
        .venv/bin/python bench/import_jobs_csv.py [--rows 1000000] [--batch 5000]

Creates a throw-away test database and a CSV of ROWS jobs in the documented format
(docs/jobs-csv-format.md: nine departments, 1 to 64 GPUs, jobs of minutes to two days over
90 days, one row in 10,000 bad), written to a temporary file as a stream. Then, in one process:

  portal : the import_jobs command (detect encoding -> parse -> check -> upsert, in batches)
  COPY   : PostgreSQL's COPY ... FROM STDIN (FORMAT csv, HEADER) of the same file into a table
           of text columns (no parsing of values, no checks, no upsert)

and prints rows/s for both, their ratio, and the process's peak RSS before and after the import
(the generator streams, so the first is Django's own footprint). Issue 12 measured the import
before streaming at 6 min and 3 GB for 1M rows.
"""

import argparse
import io
import os
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

HEADER = "job_id,department,account,user,name,gpus,nodes,submit_time,start_time,end_time,state,node_names\n"
DEPARTMENTS = ("vision", "radar", "data", "bev", "mapping", "sim", "pnc", "e2e", "cabin")
GPUS = (1, 1, 1, 2, 4, 8, 8, 16, 32, 64)


def write_csv(path: Path, rows: int) -> int:
    start = datetime(2026, 8, 1, tzinfo=UTC)
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write(HEADER)
        for i in range(rows):
            department = DEPARTMENTS[i % len(DEPARTMENTS)]
            gpus = GPUS[(i * 7) % len(GPUS)]
            submit = start + timedelta(seconds=(i * 7919) % (90 * 86400))
            begin = submit + timedelta(seconds=(i * 31) % 3600)
            end = begin + timedelta(seconds=300 + (i * 104729) % (2 * 86400))
            node = f"gpu-{(i % 512):04d}"
            gpus_cell = "x" if i % 10_000 == 9_999 else gpus  # one bad row in 10,000
            out.write(
                f"job-{i},{department},acct-{department},user{i % 500},train-{department}-{i},{gpus_cell},"
                f"{max(1, gpus // 8)},{submit.isoformat()},{begin.isoformat()},{end.isoformat()},"
                f"completed,{node}\n"
            )
    return path.stat().st_size


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=5000)
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("Run this on PostgreSQL: set DATABASE_URL=postgres://...")
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        with tempfile.TemporaryDirectory() as folder:
            run(Path(folder) / "jobs.csv", args.rows, args.batch)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def run(path: Path, rows: int, batch: int) -> None:
    from efficiency.models import Cluster, Department, Job, Node

    cluster = Cluster.objects.create(name="bench", slug="bench")
    Department.objects.bulk_create(Department(code=code, name=code) for code in DEPARTMENTS)
    Node.objects.bulk_create(
        Node(cluster=cluster, hostname=f"gpu-{i:04d}", gpu_model="H100", gpu_count=8) for i in range(512)
    )
    size = write_csv(path, rows)
    rss_before = peak_rss_mib()

    out = io.StringIO()
    started = time.perf_counter()
    call_command("import_jobs", str(path), "--cluster", "bench", "--batch", str(batch), stdout=out)
    portal_s = time.perf_counter() - started
    rss_after = peak_rss_mib()
    stored = Job.objects.filter(cluster=cluster).count()
    progress_lines = sum(1 for line in out.getvalue().splitlines() if "rows read," in line)

    with connection.cursor() as cursor:
        columns = ", ".join(f'"{name}" text' for name in HEADER.strip().split(","))
        cursor.execute(f"CREATE TEMP TABLE raw_jobs ({columns})")
        started = time.perf_counter()
        with path.open("rb") as data, cursor.copy("COPY raw_jobs FROM STDIN (FORMAT csv, HEADER)") as copy:
            while chunk := data.read(1 << 20):
                copy.write(chunk)
        copy_s = time.perf_counter() - started

    portal_rate, copy_rate = rows / portal_s, rows / copy_s
    print(f"{rows:,} rows ({size / 2**20:,.0f} MiB CSV), batches of {batch}: {stored:,} jobs stored")
    print(
        f"portal import_jobs (detect, parse, check, upsert): {portal_rate:>10,.0f} rows/s  ({portal_s:.1f} s)"
    )
    print(f"raw PostgreSQL COPY of the same file:             {copy_rate:>10,.0f} rows/s  ({copy_s:.1f} s)")
    print(f"ratio portal / raw COPY: {portal_rate / copy_rate:.3f}")
    print(f"peak RSS: {rss_before:,.0f} MiB before the import, {rss_after:,.0f} MiB after it")
    print(f"progress lines printed: {progress_lines}")


if __name__ == "__main__":
    main()
