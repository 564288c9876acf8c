"""A worker killed with SIGKILL half-way through a rollup: after a restart the rollups are those of
an uninterrupted run.

The rollup of many hours runs in batches. The test holds a row lock that the second batch needs,
so the worker is stopped exactly between "first batch written" and "second batch written" (no
sleeping and hoping), then kills it and restarts a worker, as an OOM kill and systemd would.
"""

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection

from efficiency.collectors.records import GpuReading
from efficiency.models import NodeHour, RollupDirtyHour
from efficiency.services.ingest import dirty_hours_mark, gpu_readings_ingest
from efficiency.services.rollups import HOURS_PER_BATCH, rollups_refresh
from tests.factories import ClusterFactory, NodeFactory
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

HOURS = HOURS_PER_BATCH + 12  # two batches: the kill falls between them


def _readings(start: datetime, minutes: range) -> list[GpuReading]:
    """One GPU's samples at the given minutes of every hour, activity varying by the minute."""
    return [
        GpuReading(
            hostname="gpu-k01",
            gpu_index=0,
            timestamp_ms=int((start + timedelta(hours=hour, minutes=minute)).timestamp() * 1000),
            gr_engine_active_pct=float((hour * 7 + minute) % 101),
        )
        for hour in range(HOURS)
        for minute in minutes
    ]


def _rollups() -> dict:
    return {
        row["hour"]: row
        for row in NodeHour.objects.values(
            "hour", "sample_count", "sampled_gpu_s", "busy_gpu_s", "available_gpu_s", "allocated_gpu_s"
        )
    }


def _lock_waiters(dsn: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchall()
    return [pid for (pid,) in rows]


def _alive(dsn: str, pid: int) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0] > 0


def test_a_worker_killed_half_way_through_a_rollup_leaves_no_hour_stale(transactional_db, tmp_path):
    require_postgresql()
    now = datetime.now(tz=UTC).replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(hours=HOURS + 2)
    cluster = ClusterFactory(slug="killed-rollup")
    node = NodeFactory(cluster=cluster, hostname="gpu-k01", gpu_count=1)
    # The first half of every hour arrives and is rolled up; then the second half arrives late,
    # which marks every hour dirty again.
    gpu_readings_ingest(cluster=cluster, readings=_readings(start, range(30)), interval_s=60, now=now)
    rollups_refresh(now=now)
    gpu_readings_ingest(cluster=cluster, readings=_readings(start, range(30, 60)), interval_s=60, now=now)
    assert RollupDirtyHour.objects.count() == HOURS

    dsn = database_url_for_processes()
    env = worker_env(dsn, tmp_path / "var")
    queue = new_queue("rollup-kill")
    client = Client(env, queue)
    blocked_hour = start + timedelta(hours=HOURS_PER_BATCH + 5)  # in the second batch
    with psycopg.connect(dsn) as holder:
        holder.execute(
            "SELECT 1 FROM efficiency_nodehour WHERE node_id = %s AND hour = %s FOR UPDATE",
            [node.pk, blocked_hour],
        )
        with worker_process(env, queue) as worker:
            client.send("rollups_refresh_task")
            # The first batch is written; the second waits for our lock. Kill the worker there.
            waiter = wait_for(lambda: _lock_waiters(dsn), what="the rollup to reach the second batch")[0]
            first_batch = NodeHour.objects.filter(hour__lt=start + timedelta(hours=HOURS_PER_BATCH))
            assert all(row.sample_count == 60 for row in first_batch)
            sigkill(worker)
        holder.rollback()
    wait_for(lambda: not _alive(dsn, waiter), what="the killed worker's database session to end")

    # A new worker; beat sends the rollup task again within a minute (sent here at once).
    with worker_process(env, queue):
        client.call("rollups_refresh_task")
    recovered = _rollups()
    stale = sorted(hour for hour, row in recovered.items() if row["sample_count"] != 60)
    assert stale == [], f"{len(stale)} hours still rolled up from half their samples, first {stale[:1]}"

    # The same hours rolled up again without interruption give the same rows.
    dirty_hours_mark(cluster=cluster, hours=list(recovered), now=now)
    rollups_refresh(now=now)
    assert _rollups() == recovered
    assert connection.vendor == "postgresql"
