"""Disk per GPU per day of the raw tables, measured on PostgreSQL's daily partitions.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal \
        .venv/bin/python bench/raw_disk.py [--gpus 200] [--step 15] [--chunks 20000]

In a throw-away test database (migrated, so the raw tables are partitioned by day), stores one
full UTC day of samples for ``--gpus`` GPUs at a ``--step`` s scrape through the portal's own
write path (``gpu_readings_ingest``: every column a dcgm-exporter with profiling metrics fills),
and ``--chunks`` log chunks of a real-looking training log. It then VACUUMs and reads the
day's partition size (table + indexes + TOAST), and prints bytes per GPU per day, bytes per
sample row beside the row's payload (the columns' own bytes), and the disk a fleet needs per
retention setting (PORTAL_RAW_RETENTION_DAYS + the one whole day retention may keep beyond it,
+ the partitions made ahead, which are empty).
"""

import argparse
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import override_settings, setup_test_environment  # noqa: E402

# One row's payload: node_id 8, gpu_index 2, ts 8, interval_s 4, 8 float8/int4 values (7 x 8 + 4).
PAYLOAD_BYTES = 8 + 2 + 8 + 4 + 7 * 8 + 4
LOG_LINE = (
    "[2026-12-01 10:{m:02d}:{s:02d}] iteration {i:>8}/  500000 | consumed samples: {c:>12} | "
    "elapsed time per iteration (ms): 1043.2 | learning rate: 1.500E-04 | global batch size: 1024 | "
    "lm loss: 2.104E+00 | loss scale: 65536.0 | grad norm: 0.812 | number of skipped iterations: 0 |\n"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=200)
    parser.add_argument("--step", type=int, default=15)
    parser.add_argument("--chunks", type=int, default=20_000)
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("Run this on PostgreSQL: set DATABASE_URL=postgres://...")
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        with override_settings(PORTAL_RAW_RETENTION_DAYS=3650):
            run(args.gpus, args.step, args.chunks)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def size_of(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f'VACUUM ANALYZE "{name}"')
        cursor.execute("SELECT pg_total_relation_size(%s)", [name])
        return cursor.fetchone()[0]


def run(gpus: int, step: int, chunk_count: int) -> None:
    from efficiency.collectors.records import GpuReading, LogLines
    from efficiency.models import Cluster, DataSource, Node
    from efficiency.services.ingest import gpu_readings_ingest, log_chunks_ingest

    day = datetime(2026, 11, 30, tzinfo=UTC)
    cluster = Cluster.objects.create(name="bench", slug="bench")
    nodes = (gpus + 7) // 8
    Node.objects.bulk_create(
        Node(cluster=cluster, hostname=f"node-{i:05d}", gpu_model="H100", gpu_count=8) for i in range(nodes)
    )
    scrapes = 86_400 // step
    started = time.perf_counter()
    per_call = 40  # scrapes per ingest call (as a collection of several targets would store them)
    for first in range(0, scrapes, per_call):
        readings = [
            GpuReading(
                f"node-{g // 8:05d}",
                g % 8,
                int((day + timedelta(seconds=n * step)).timestamp() * 1000),
                util_pct=float((g * 7 + n) % 101),
                gr_engine_active_pct=((g * 3 + n) % 100) / 1.0,
                sm_active_pct=((g * 5 + n) % 90) / 1.0,
                fb_used_mib=float(1000 + (g * 13 + n) % 70000),
                power_w=80 + (g + n) % 600 + 0.125,
                temp_c=float(30 + (g + n) % 50),
                ecc_dbe_total=0.0,
                xid_last=0,
            )
            for n in range(first, min(first + per_call, scrapes))
            for g in range(gpus)
        ]
        gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=step, now=day + timedelta(days=1))
    ingest_s = time.perf_counter() - started
    rows = scrapes * gpus
    sample_bytes = size_of("efficiency_gpusample_p20261130")

    source = DataSource.objects.create(cluster=cluster, kind="log_files", name="logs")
    text_bytes, offset, batch = 0, 0, []
    for n in range(chunk_count):
        text = "".join(
            LOG_LINE.format(m=(n // 60) % 60, s=n % 60, i=n * 8 + k, c=(n * 8 + k) * 1024) for k in range(8)
        )
        size = len(text.encode())
        batch.append(
            LogLines(
                f"job-{n % 50}/rank-0.log", "f1", offset, offset + size, text, 8, job_external_id=str(n % 50)
            )
        )
        offset += size
        text_bytes += size
        if len(batch) == 500:
            log_chunks_ingest(source=source, chunks=batch, now=day + timedelta(hours=12))
            batch = []
    if batch:
        log_chunks_ingest(source=source, chunks=batch, now=day + timedelta(hours=12))
    chunk_bytes = size_of("efficiency_logchunk_p20261130")

    per_gpu_day = sample_bytes / gpus * (86_400 / (scrapes * step))
    print(f"{gpus} GPUs x {scrapes} scrapes ({step} s) on one day: {rows:,} rows stored in {ingest_s:.1f} s")
    print(f"sample partition of the day: {sample_bytes / 2**20:,.1f} MiB (table + indexes)")
    print(
        f"bytes per sample row: {sample_bytes / rows:,.0f}  beside the row's payload {PAYLOAD_BYTES} B "
        f"(ratio {sample_bytes / rows / PAYLOAD_BYTES:.2f}: tuple headers, alignment, 2 indexes)"
    )
    print(f"disk per GPU per day at a {step} s scrape: {per_gpu_day / 2**20:,.2f} MiB")
    print(
        f"log chunks: {chunk_count:,} chunks, {text_bytes / 2**20:,.1f} MiB of log text -> "
        f"{chunk_bytes / 2**20:,.1f} MiB on disk "
        f"(ratio {chunk_bytes / text_bytes:.2f} of the text; TOAST compresses)"
    )
    print()
    print("raw samples on disk by fleet size and retention (retention days + 1 whole day kept at most):")
    retentions = (7, 14, 35, 90)
    print("GPUs      " + "".join(f"{f'{days} d':>12}" for days in retentions))
    for fleet in (1_000, 10_000, 50_000):
        cells = "".join(f"{per_gpu_day * fleet * (days + 1) / 2**30:>10,.0f} GiB" for days in retentions)
        print(f"{fleet:<10,}{cells}")


if __name__ == "__main__":
    main()
