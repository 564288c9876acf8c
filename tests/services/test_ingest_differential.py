"""GPU reading ingest, proven against plain statements of its rules, rows in the database included.

Run on SQLite (the default) and on PostgreSQL (``DATABASE_URL=postgres://...``), where the rows go
through the binary COPY and, on a replay, through its conflict-safe fallback.

- ``gpu_readings_ingest`` checks and maps readings in one loop over the batch and asks
  ``nodes_seen_mark`` only about nodes whose ``last_seen_at`` would move: the first test states
  the rules reading by reading, as the ingest applied them before, and compares everything it
  returns and stores;
- a dcgm page read by the single pass and by the general parser stores the same rows, nodes and
  dirty hours (the second test), unknown hostnames discovered included.
"""

from collections import defaultdict
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from django.conf import settings as django_settings
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.collectors.dcgm import gpu_readings_from_exposition, gpu_readings_from_samples
from efficiency.collectors.exposition import parse_exposition
from efficiency.collectors.records import MAX_STORED_INT, GpuReading
from efficiency.models import GpuSample, Node, RollupDirtyHour
from efficiency.services.discovery import LAST_SEEN_RESOLUTION
from efficiency.services.ingest import SAMPLE_COLUMNS, _mean_values, gpu_readings_ingest
from tests.collectors.test_dcgm_single_pass import family_pages
from tests.factories import ClusterFactory, NodeFactory

NOW = datetime(2026, 11, 30, 8, 30, tzinfo=UTC)
T0 = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)
GPUS = {"gpu-001": 4, "gpu-002": 4}
DB_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class _RolledBack(Exception):
    """Raised to undo one example's writes, so that the next one starts from the same state."""


def _stored() -> dict:
    """The rows ingest writes, nodes named by hostname: PostgreSQL does not give back the ids a
    rolled-back discovery took, so the same node can have another id in the next example."""
    return {
        "samples": sorted(GpuSample.objects.values_list("node__hostname", *SAMPLE_COLUMNS[1:])),
        "nodes": sorted(Node.objects.values_list("hostname", "gpu_count", "state", "last_seen_at")),
        "dirty": sorted(RollupDirtyHour.objects.values_list("cluster__slug", "hour")),
    }


@contextmanager
def _undone():
    """Whatever the block writes is rolled back: every example starts from the same database."""
    try:
        with transaction.atomic():
            yield
            raise _RolledBack
    except _RolledBack:
        pass


def _ingest_undone(cluster, batches: list[list[GpuReading]]) -> tuple[list, dict]:
    """Ingest the batches one after another: what each returned and what was stored, then undone."""
    with _undone():
        results = [
            gpu_readings_ingest(cluster=cluster, readings=batch, interval_s=60, now=NOW) for batch in batches
        ]
        hostnames = dict(Node.objects.values_list("pk", "hostname"))
        for result in results:  # named by hostname too
            result.xid_counts = [(hostnames[count.node_id], *count[1:]) for count in result.xid_counts]
        stored = _stored()
    return results, stored


# --- readings against the rules, reading by reading ---------------------------------------------

values = st.one_of(st.none(), st.floats(0, 100, allow_nan=False))
moments = st.sampled_from(
    [T0, T0 + timedelta(minutes=1), NOW + timedelta(minutes=6), NOW - timedelta(days=40), NOW]
)
readings = st.builds(
    GpuReading,
    hostname=st.sampled_from(list(GPUS)),
    gpu_index=st.integers(-1, 5),
    timestamp_ms=moments.map(ms),
    mig_instance=st.sampled_from(["", "", "1", "2"]),
    util_pct=values,
    sm_active_pct=values,
    power_w=values,
    ecc_dbe_total=values,
    xid_last=st.one_of(st.none(), st.sampled_from([0, 79, -1, 2**31])),
    xid_counts=st.lists(
        st.tuples(st.sampled_from([79, 48, -3]), st.sampled_from([0.0, 2.0])), max_size=2
    ).map(tuple),
)
# Around the resolution below the readings' instants too: last_seen_at moves only past it.
seen_before = st.sampled_from(
    [
        None,
        T0 - timedelta(minutes=2),
        T0 - timedelta(hours=1),
        NOW,
        T0 - LAST_SEEN_RESOLUTION,
        T0 - LAST_SEEN_RESOLUTION - timedelta(seconds=30),
        T0 + timedelta(minutes=1) - LAST_SEEN_RESOLUTION - timedelta(milliseconds=1),
    ]
)


def _by_the_rules(batch: list[GpuReading], nodes: dict[str, Node], seen: dict[str, datetime | None]):
    """What ingesting ``batch`` into an empty sample table returns and stores, rule by rule."""
    oldest = ms(NOW - timedelta(days=django_settings.PORTAL_RAW_RETENTION_DAYS))
    newest = ms(NOW + timedelta(minutes=5))
    rejected, xid_counts, whole, mig, duplicates, latest = [], [], {}, defaultdict(list), 0, {}
    for reading in batch:
        node = nodes[reading.hostname]
        if not 0 <= reading.gpu_index < node.gpu_count:
            rejected.append("does not exist")
            continue
        if not oldest <= reading.timestamp_ms <= newest:
            rejected.append("sample at")
            continue
        xid_last = reading.xid_last
        if xid_last is not None and not 0 <= xid_last <= MAX_STORED_INT:
            rejected.append("Xid code")
            xid_last = None
        row = (
            reading.util_pct,
            reading.gr_engine_active_pct,
            reading.sm_active_pct,
            reading.fb_used_mib,
            reading.power_w,
            reading.temp_c,
            reading.ecc_dbe_total,
            xid_last,
        )
        xid_counts += [
            (reading.hostname, reading.gpu_index, xid, reading.timestamp_ms)
            for xid, count in reading.xid_counts
            if count > 0 and 0 <= xid <= MAX_STORED_INT
        ]
        latest[reading.hostname] = max(latest.get(reading.hostname, 0), reading.timestamp_ms)
        key = (reading.hostname, reading.gpu_index, reading.timestamp_ms)
        if reading.mig_instance:
            mig[key].append(row)
        elif key in whole:
            duplicates += 1
        else:
            whole[key] = row
    for key, instances in mig.items():
        whole.setdefault(key, _mean_values(instances))
    last_seen = {}
    for hostname, before in seen.items():
        moment = datetime.fromtimestamp(latest[hostname] / 1000, tz=UTC) if hostname in latest else None
        moved = moment is not None and (before is None or before < moment - LAST_SEEN_RESOLUTION)
        last_seen[hostname] = moment if moved else before
    samples = sorted(
        (hostname, gpu, datetime.fromtimestamp(ts_ms / 1000, tz=UTC), 60, *row)
        for (hostname, gpu, ts_ms), row in whole.items()
    )
    return rejected, xid_counts, duplicates, samples, last_seen


@DB_SETTINGS
@given(batch=st.lists(readings, max_size=30), seen=st.tuples(seen_before, seen_before))
def test_ingest_returns_and_stores_what_the_rules_say_reading_by_reading(db, batch, seen):
    with _undone():
        _check_against_the_rules(batch, seen)


def _check_against_the_rules(batch: list[GpuReading], seen: tuple) -> None:
    cluster = ClusterFactory(slug="rules")
    nodes = {
        hostname: NodeFactory(cluster=cluster, hostname=hostname, gpu_count=gpus, last_seen_at=before)
        for (hostname, gpus), before in zip(GPUS.items(), seen, strict=True)
    }
    rejected, xid_counts, duplicates, samples, last_seen = _by_the_rules(
        batch, nodes, dict(zip(GPUS, seen, strict=True))
    )

    (first, replay), stored = _ingest_undone(cluster, [batch, batch])

    assert [next(part for part in ("does not exist", "sample at", "Xid code") if part in r.reason)
            for r in first.rejected] == rejected  # fmt: skip
    assert (first.received, first.stored, first.duplicates) == (len(batch), len(samples), duplicates)
    assert first.xid_counts == xid_counts
    assert (replay.stored, replay.duplicates) == (0, len(samples) + duplicates)
    assert stored["samples"] == samples
    assert {hostname: seen_at for hostname, _, _, seen_at in stored["nodes"]} == last_seen
    hours = {sample[2].replace(minute=0) for sample in samples}
    assert stored["dirty"] == sorted((cluster.slug, hour) for hour in hours)


# --- a page through the single pass and through the general parser -----------------------------


def _general_readings(text: str, scrape_time_ms: int) -> list[GpuReading]:
    parsed = parse_exposition(text)
    return gpu_readings_from_samples(parsed.records, scrape_time_ms=scrape_time_ms).records


@DB_SETTINGS
@given(text=family_pages(), known=st.sampled_from([["node-0"], ["node-0", "node-1"]]))
def test_a_page_stores_the_same_through_the_single_pass_and_the_general_parser(db, text, known):
    with _undone():
        cluster = ClusterFactory(slug="pages")
        for hostname in known:
            NodeFactory(cluster=cluster, hostname=hostname, gpu_count=8, last_seen_at=None)
        scrape_ms = ms(T0)
        fast = gpu_readings_from_exposition(text, scrape_time_ms=scrape_ms).records
        general = _general_readings(text, scrape_ms)
        fast_results, fast_stored = _ingest_undone(cluster, [fast, fast])
        general_results, general_stored = _ingest_undone(cluster, [general, general])

        assert fast_results == general_results
        assert fast_stored == general_stored
