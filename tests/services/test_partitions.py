"""Raw samples and log chunks partitioned by UTC day on PostgreSQL (issue 19, migration 0029).

What an operator relies on: each day's rows sit in that day's partition (so retention can drop
it whole), retention removes exactly the days past the window and never the rows of a day still
in it, rows that met no partition are moved into the day's partition when it is made, two
deliveries of the same log chunk at once are stored once, and the migration keeps every row both
ways. On SQLite (the embedded default) nothing is partitioned and retention deletes rows.
"""

import threading
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection, connections
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.collectors.records import GpuReading, LogLines
from efficiency.models import GpuSample, LogChunk
from efficiency.services import partitions
from efficiency.services.ingest import gpu_readings_ingest, log_chunks_ingest
from efficiency.services.rollups import retention_prune
from tests.factories import ClusterFactory, DataSourceFactory, NodeFactory
from tests.migrations import around, migrate

postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="declarative partitioning is PostgreSQL's; SQLite is unpartitioned",
)
NOW = datetime(2026, 12, 3, 9, 30, tzinfo=UTC)


def readings(moments, *, hostname="gpu-001", gpus=2):
    return [
        GpuReading(hostname, gpu, int(moment.timestamp() * 1000), util_pct=50.0, power_w=300.0)
        for moment in moments
        for gpu in range(gpus)
    ]


def where_rows_are(table: str) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text, count(*) FROM {table} GROUP BY 1")
        return dict(cursor.fetchall())


@pytest.fixture
def node(db):
    partitions.known_forget()
    cluster = ClusterFactory(slug="p1")
    return NodeFactory(cluster=cluster, hostname="gpu-001", gpu_count=8)


@postgresql
def test_the_raw_tables_are_partitioned_by_day_with_a_default_partition(db):
    assert partitions.partitioning_active()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_partkeydef(c.oid) FROM pg_partitioned_table p "
            "JOIN pg_class c ON c.oid = p.partrelid ORDER BY 1"
        )
        assert cursor.fetchall() == [
            ("efficiency_gpusample", "RANGE (ts)"),
            ("efficiency_logchunk", "RANGE (received_at)"),
        ]
        for table in partitions.PARTITIONED:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{table}_default"])
            assert cursor.fetchone()[0]


@postgresql
def test_ingest_writes_each_days_samples_into_that_days_partition(node):
    late_evening = datetime(2026, 12, 2, 23, 59, 45, tzinfo=UTC)
    moments = [late_evening, late_evening + timedelta(seconds=15), late_evening + timedelta(seconds=30)]
    result = gpu_readings_ingest(cluster=node.cluster, readings=readings(moments), interval_s=15, now=NOW)
    assert result.stored == 6
    assert where_rows_are("efficiency_gpusample") == {
        "efficiency_gpusample_p20261202": 2,
        "efficiency_gpusample_p20261203": 4,
    }


@postgresql
def test_retention_drops_the_days_past_the_window_and_keeps_the_rest(node, settings):
    settings.PORTAL_RAW_RETENTION_DAYS = 2
    days = [NOW - timedelta(days=back) for back in (2, 1, 0)]  # 1, 2 and 3 December
    gpu_readings_ingest(cluster=node.cluster, readings=readings(days), interval_s=60, now=NOW)
    later = NOW + timedelta(days=1)  # cutoff: 2 December 09:30
    pruned = retention_prune(now=later)
    # 1 December ended before the cutoff: its partition went whole. 2 December is partly inside
    # the window and is kept whole (retention is whole days).
    assert (pruned["sample_days_dropped"], pruned["samples"]) == (1, 0)
    kept = sorted({ts.date() for ts in GpuSample.objects.values_list("ts", flat=True)})
    assert kept == [date(2026, 12, 2), date(2026, 12, 3)]
    names = {partition.name for partition in partitions.partitions_list("efficiency_gpusample")}
    assert "efficiency_gpusample_p20261201" not in names
    # ... and it made the partitions of the days ahead.
    assert {f"efficiency_gpusample_p202612{day:02d}" for day in range(4, 8)} <= names


@postgresql
def test_rows_that_met_no_partition_move_into_it_when_it_is_made(node):
    # A row written by another path than ingest, for a day without a partition, lands in the
    # default partition; making the day's partition later moves it there, none lost.
    old = datetime(2025, 6, 1, 12, tzinfo=UTC)
    GpuSample.objects.bulk_create(
        [GpuSample(node=node, gpu_index=gpu, ts=old, interval_s=60, util_pct=10.0) for gpu in range(3)]
    )
    assert where_rows_are("efficiency_gpusample") == {"efficiency_gpusample_default": 3}
    assert partitions.partitions_ensure("efficiency_gpusample", [old.date()]) == [
        "efficiency_gpusample_p20250601"
    ]
    assert where_rows_are("efficiency_gpusample") == {"efficiency_gpusample_p20250601": 3}
    assert partitions.partitions_ensure("efficiency_gpusample", [old.date()]) == []  # made once


@postgresql
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    offsets=st.lists(
        st.integers(min_value=0, max_value=10 * 24 * 3600), min_size=1, max_size=25, unique=True
    ),
    retention_days=st.integers(min_value=1, max_value=8),
)
def test_retention_keeps_exactly_the_days_not_wholly_past_the_window(node, offsets, retention_days):
    """For any samples over ten days and any window: after ingest every row is in the partition
    named for its UTC day; after retention a row is gone iff its whole UTC day ended at or before
    the cutoff."""
    GpuSample.objects.all().delete()
    start = datetime(2026, 11, 20, tzinfo=UTC)
    moments = [start + timedelta(seconds=offset) for offset in offsets]
    now = start + timedelta(days=11)
    with override_settings(PORTAL_RAW_RETENTION_DAYS=40):
        gpu_readings_ingest(cluster=node.cluster, readings=readings(moments, gpus=1), interval_s=15, now=now)
    for name, count in where_rows_are("efficiency_gpusample").items():
        assert name != "efficiency_gpusample_default", count
    cutoff = now - timedelta(days=retention_days)
    with override_settings(PORTAL_RAW_RETENTION_DAYS=retention_days):
        retention_prune(now=now)
    expected = sorted(
        m
        for m in moments
        if datetime.combine(m.date(), datetime.min.time(), UTC) + timedelta(days=1) > cutoff
    )
    assert sorted(GpuSample.objects.values_list("ts", flat=True)) == expected


@postgresql
@pytest.mark.django_db(transaction=True)
def test_the_same_log_chunk_delivered_twice_at_once_is_stored_once():
    """A shipper's retry racing its first delivery: two connections ingest the same chunks at the
    same moment; the per-source lock lets one store them and the other count duplicates."""
    source = DataSourceFactory(name="push")
    chunks = [LogLines("rank-0.log", "f1", n * 10, n * 10 + 10, f"line {n}\n", 1) for n in range(50)]
    barrier, results, errors = threading.Barrier(2), [], []

    def deliver():
        try:
            barrier.wait()
            results.append(log_chunks_ingest(source=source, chunks=chunks, now=timezone.now()))
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert sorted((result.stored, result.duplicates) for result in results) == [(0, 50), (50, 0)]
    assert LogChunk.objects.filter(source=source).count() == 50


@postgresql
def test_log_chunks_go_to_the_partition_of_the_day_they_were_received(db):
    partitions.known_forget()
    source = DataSourceFactory(name="files")
    chunk = LogLines("rank-0.log", "f1", 0, 7, "hello\n", 1)
    log_chunks_ingest(source=source, chunks=[chunk], now=datetime(2026, 12, 1, 8, tzinfo=UTC))
    assert where_rows_are("efficiency_logchunk") == {"efficiency_logchunk_p20261201": 1}


def test_without_partitions_retention_deletes_the_rows(node, settings):
    """SQLite (and PostgreSQL before migration 0029): rows older than the window are deleted."""
    if partitions.partitioning_active():
        pytest.skip("this database is partitioned: the tests above cover it")
    settings.PORTAL_RAW_RETENTION_DAYS = 1
    gpu_readings_ingest(cluster=node.cluster, readings=readings([NOW]), interval_s=60, now=NOW)
    assert retention_prune(now=NOW + timedelta(days=1, minutes=1))["samples"] == 2
    assert not GpuSample.objects.exists()


@postgresql
@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_row_both_ways():
    """Back to unpartitioned tables and forward again: every sample and chunk is kept, each in
    its day's partition, and new chunks continue the id sequence."""
    partitions.known_forget()
    node = NodeFactory(cluster=ClusterFactory(slug="m1"), hostname="gpu-001", gpu_count=8)
    source = DataSourceFactory(cluster=node.cluster, name="files")
    moments = [datetime(2026, 11, 29, 23, 59, tzinfo=UTC), datetime(2026, 11, 30, 0, 1, tzinfo=UTC)]
    with override_settings(PORTAL_RAW_RETENTION_DAYS=40):
        gpu_readings_ingest(cluster=node.cluster, readings=readings(moments), interval_s=60, now=NOW)
    log_chunks_ingest(source=source, chunks=[LogLines("s", "f", 0, 3, "ab\n", 1)], now=moments[0])
    samples = sorted(GpuSample.objects.values_list("node_id", "gpu_index", "ts", "util_pct"))
    chunk_ids = list(LogChunk.objects.values_list("pk", flat=True))
    before, latest = around("_raw_partitions")
    migrate(before)
    assert not partitions.partitioning_active()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM efficiency_gpusample")
        assert cursor.fetchone()[0] == len(samples)
    migrate(latest)
    partitions.known_forget()
    assert partitions.partitioning_active()
    assert sorted(GpuSample.objects.values_list("node_id", "gpu_index", "ts", "util_pct")) == samples
    assert where_rows_are("efficiency_gpusample") == {
        "efficiency_gpusample_p20261129": 2,
        "efficiency_gpusample_p20261130": 2,
    }
    log_chunks_ingest(source=source, chunks=[LogLines("s", "f", 3, 6, "cd\n", 1)], now=NOW)
    assert LogChunk.objects.latest("pk").pk > max(chunk_ids)
