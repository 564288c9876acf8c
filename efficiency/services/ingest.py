"""Storing what collectors return: GPU readings, job records and log chunks.

Every function here is idempotent: the same input delivered twice (a retry, overlapping windows,
a replayed cursor) is stored once and counted as duplicates the second time. Bad records are
rejected one by one with a reason; the rest is stored.
"""

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from efficiency.choices import JobState, MappingKind, SourceKind
from efficiency.collectors.exposition import gc_paused
from efficiency.collectors.nodes import observed_nodes_from_readings
from efficiency.collectors.records import (
    MAX_STORED_INT,
    GpuReading,
    JobRecord,
    LogLines,
    Rejected,
    excerpt,
    job_record_check,
)
from efficiency.models import (
    Cluster,
    DataSource,
    Department,
    DepartmentMapping,
    Job,
    LogChunk,
    PrunedLogSpan,
    RollupDirtyHour,
)
from efficiency.models.functions import EpochSeconds
from efficiency.models.jobs import MILLI_PER_GPU
from efficiency.redaction import config_redact
from efficiency.services.discovery import LAST_SEEN_RESOLUTION, nodes_discover, nodes_seen_mark
from efficiency.services.locks import transaction_lock
from efficiency.services.partitions import partitions_for_rows

SAMPLE_COLUMNS = (
    "node_id",
    "gpu_index",
    "ts",
    "interval_s",
    "util_pct",
    "gr_engine_active_pct",
    "sm_active_pct",
    "fb_used_mib",
    "power_w",
    "temp_c",
    "ecc_dbe_total",
    "xid_last",
)
MAX_FUTURE_SKEW = timedelta(minutes=5)
LOG_CHUNK_LOCK_SPACE = 0x4C4F47  # first key of the per-source advisory lock of log chunk writes


class XidCount(NamedTuple):
    """An Xid the exporter counted on a GPU in its window (``DCGM_EXP_XID_ERRORS_COUNT``)."""

    node_id: int
    gpu_index: int
    xid: int
    timestamp_ms: int


@dataclass
class IngestResult:
    """Counts of one ingest call, and the input it could not use (``warnings``: stored anyway).

    ``xid_counts``: the Xid events the readings carried. Ingest stores samples only; the caller
    decides whether they become fault signals (``sources.gpu_readings_store`` records them).
    """

    received: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: list[Rejected] = field(default_factory=list)
    warnings: list[Rejected] = field(default_factory=list)
    xid_counts: list[XidCount] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)  # hostnames the readings added to the inventory

    def reject(self, reason: str, raw: str = "") -> None:
        self.rejected.append(Rejected(reason=reason, excerpt=excerpt(raw)))


def _hour(ts: datetime) -> datetime:
    return ts.replace(minute=0, second=0, microsecond=0)


def dirty_hours_mark(*, cluster: Cluster, hours: Iterable[datetime], now: datetime | None = None) -> None:
    """Queue hours of a cluster for (re)computing their rollups; marking twice is harmless."""
    now = now or timezone.now()
    rows = [RollupDirtyHour(cluster=cluster, hour=hour, marked_at=now) for hour in sorted(set(hours))]
    RollupDirtyHour.objects.bulk_create(rows, ignore_conflicts=True, batch_size=2000)


# --- GPU samples --------------------------------------------------------------------------------


def gpu_readings_ingest(
    *,
    cluster: Cluster,
    readings: Iterable[GpuReading],
    interval_s: int,
    now: datetime | None = None,
    source: DataSource | None = None,
) -> IngestResult:
    """Map readings to nodes and GPUs and store them as raw samples.

    Readings from a hostname the inventory does not know yet discover it from their labels
    (``services.discovery``: a ``discovered`` node with the GPUs they show, ``source`` its
    discoverer) and are stored; ``discovered`` lists those hostnames. Nodes that reported get
    ``last_seen_at`` moved to their latest reading.

    Rejected: readings of a hostname discovery refuses (its reason), GPU indexes beyond the
    node's GPU count, timestamps more than five minutes in the future (clock skew) or older than
    the raw retention window. MIG instances of one GPU are averaged into that GPU; a whole-GPU
    reading wins over them. The Xid counts the readings carry are returned in ``xid_counts``,
    not recorded as faults here.
    """
    # The cyclic collector rescanned the readings and the rows made from them every few hundred
    # allocations, a tenth of an ingest of 10,000 GPUs; what is made here is acyclic.
    with gc_paused():
        return _readings_ingest(cluster, readings, interval_s, now or timezone.now(), source)


def _readings_ingest(
    cluster: Cluster,
    readings: Iterable[GpuReading],
    interval_s: int,
    now: datetime,
    source: DataSource | None,
) -> IngestResult:
    """``gpu_readings_ingest`` with the cyclic collector paused."""
    result = IngestResult()
    nodes: dict[str, tuple[int, int]] = {}  # hostname → (node id, GPU count)
    seen_s: dict[int, float | None] = {}  # node id → its last_seen_at in seconds, as read here
    _nodes_read(cluster.nodes.all(), nodes, seen_s)
    oldest = now - timedelta(days=settings.PORTAL_RAW_RETENTION_DAYS)
    newest = now + MAX_FUTURE_SKEW
    oldest_ms, newest_ms = oldest.timestamp() * 1000, newest.timestamp() * 1000
    whole: dict[tuple[int, int, int], tuple] = {}
    mig: dict[tuple[int, int, int], list[tuple]] = defaultdict(list)
    last_seen_ms: dict[int, int] = {}

    def take(batch: Iterable[GpuReading]) -> list[GpuReading]:
        """Check and map the readings of known nodes; returns the others, in their order.

        One loop over the whole batch rather than a call per reading: a scrape of 10,000 GPUs
        passes here 10,000 times.
        """
        not_known = []
        nodes_get, last_seen_get, values_of = nodes.get, last_seen_ms.get, _READING_VALUES
        for reading in batch:
            node = nodes_get(reading.hostname)
            if node is None:
                not_known.append(reading)
                continue
            node_id, gpu_count = node
            gpu_index, timestamp_ms = reading.gpu_index, reading.timestamp_ms
            if not 0 <= gpu_index < gpu_count:
                result.reject(f"GPU {gpu_index} does not exist on {reading.hostname} ({gpu_count} GPUs)")
                continue
            if not oldest_ms <= timestamp_ms <= newest_ms:
                reason = "in the future (clock skew?)" if timestamp_ms > newest_ms else "older than retention"
                result.reject(
                    f"sample at {moment_text(timestamp_ms)} is {reason}",
                    f"{reading.hostname} gpu {gpu_index}",
                )
                continue
            xid_last = reading.xid_last
            if xid_last is not None and not 0 <= xid_last <= MAX_STORED_INT:
                # The rest of the reading is good: only the code that does not fit is dropped.
                result.reject(
                    f"Xid code {xid_last} is outside 0..{MAX_STORED_INT}; the reading is kept without it",
                    f"{reading.hostname} gpu {gpu_index}",
                )
                reading.xid_last = xid_last = None
            values = values_of(reading)
            if reading.xid_counts:
                result.xid_counts += [
                    XidCount(node_id, gpu_index, xid, timestamp_ms)
                    for xid, count in reading.xid_counts
                    if count > 0 and 0 <= xid <= MAX_STORED_INT
                ]
            if timestamp_ms > last_seen_get(node_id, -1):
                last_seen_ms[node_id] = timestamp_ms
            key = (node_id, gpu_index, timestamp_ms)
            if reading.mig_instance:
                mig[key].append(values)
            elif key in whole:
                result.duplicates += 1
            else:
                whole[key] = values
        return not_known

    readings = readings if isinstance(readings, list) else list(readings)
    result.received = len(readings)
    unknown = take(readings)
    if unknown:
        # Discovery from the readings' own labels (Hostname, gpu, UUID, modelName, pci_bus_id).
        discovery = nodes_discover(
            cluster=cluster, observed=observed_nodes_from_readings(unknown), source=source, now=now
        )
        result.discovered = discovery.created
        refused = {item.excerpt: item.reason for item in discovery.rejected}
        _nodes_read(
            cluster.nodes.filter(hostname__in={reading.hostname for reading in unknown}), nodes, seen_s
        )
        not_taken: dict[str, int] = defaultdict(int)
        for reading in take(unknown):
            not_taken[reading.hostname] += 1
        for hostname, count in not_taken.items():
            reason = refused.get(excerpt(hostname), "not a GPU node")
            result.reject(f"node {hostname!r} ({count} readings) cannot be discovered: {reason}", hostname)
    for key, instances in mig.items():
        if key not in whole:
            whole[key] = _mean_values(instances)
    rows = [(*key, values) for key, values in whole.items()]
    stored = gpu_samples_write(rows, interval_s=interval_s)
    result.stored += stored
    result.duplicates += len(rows) - stored
    instants = {ts_ms for _, _, ts_ms, _ in rows}  # a scrape has one instant for all its rows
    hours = {_hour(datetime.fromtimestamp(ts_ms / 1000, tz=UTC)) for ts_ms in instants}
    if hours:
        dirty_hours_mark(cluster=cluster, hours=hours, now=now)
    if moved := _seen_moved(last_seen_ms, seen_s):
        nodes_seen_mark(node_last_seen=moved)
    return result


# A reading's values in SAMPLE_COLUMNS's order (util_pct .. xid_last), in one call.
_READING_VALUES = attrgetter(*SAMPLE_COLUMNS[4:])


def _nodes_read(queryset, nodes: dict[str, tuple[int, int]], seen_s: dict[int, float | None]) -> None:
    """Add the queryset's nodes to ``nodes`` (hostname → id, GPU count) and ``seen_s``."""
    for pk, hostname, gpus, last_seen_s in queryset.values_list(
        "pk", "hostname", "gpu_count", EpochSeconds("last_seen_at")
    ):
        nodes[hostname] = (pk, gpus)
        seen_s[pk] = last_seen_s


def _seen_moved(last_seen_ms: dict[int, int], seen_s: dict[int, float | None]) -> dict[int, datetime]:
    """The nodes whose ``last_seen_at`` ``nodes_seen_mark`` would move, and where to.

    It moves only those seen more than ``LAST_SEEN_RESOLUTION`` after their stored value (read
    with the nodes, in seconds): asking it about the others was an UPDATE of a thousand keys that
    changed nothing, four scrapes in five.
    """
    resolution_s = LAST_SEEN_RESOLUTION.total_seconds()
    moments: dict[int, tuple[datetime, float]] = {}  # a scrape has one instant for all its nodes
    moved = {}
    for node_id, ts_ms in last_seen_ms.items():
        if ts_ms not in moments:
            moments[ts_ms] = (datetime.fromtimestamp(ts_ms / 1000, tz=UTC), ts_ms / 1000 - resolution_s)
        moment, unless_after = moments[ts_ms]
        stored = seen_s[node_id]
        if stored is None or stored < unless_after:
            moved[node_id] = moment
    return moved


def moment_text(timestamp_ms: float) -> str:
    """A sample's timestamp for a message: ISO 8601, or the raw number when no date can hold it."""
    try:
        return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return f"{timestamp_ms} ms since the epoch"


def _mean_values(instances: list[tuple]) -> tuple:
    columns = list(zip(*instances, strict=True))
    means = []
    for position, column in enumerate(columns):
        present = [value for value in column if value is not None]
        if position >= len(columns) - 2:  # the ECC counter and the last Xid code: not averaged
            means.append(max(present) if present else None)
        else:
            means.append(sum(present) / len(present) if present else None)
    return tuple(means)


def gpu_samples_write(rows: list[tuple[int, int, int, tuple]], *, interval_s: int) -> int:
    """Write (node_id, gpu_index, timestamp_ms, values) rows; returns how many were new.

    PostgreSQL: binary COPY (``_samples_copy``) into the day's partition, made first when
    missing. SQLite: batched INSERT OR IGNORE.
    """
    if not rows:
        return 0
    if connection.vendor == "postgresql":
        return _samples_copy(rows, interval_s)
    return _samples_insert(rows, interval_s)


# PostgreSQL types of SAMPLE_COLUMNS, in order, for the binary COPY.
_SAMPLE_COPY_TYPES = (
    "bigint",
    "smallint",
    "timestamptz",
    "integer",
    *["double precision"] * 7,  # util_pct .. ecc_dbe_total
    "integer",  # xid_last
)


def _samples_copy(rows, interval_s: int) -> int:
    """COPY the rows in binary, straight into the table when none of them can be there yet.

    A scrape's rows share one instant, so one indexed look-up at those instants for these nodes
    tells whether any row may already be stored (a retry, a replay). When none is, the rows are
    COPYed into the table itself; otherwise, or when a concurrent writer stored some in between
    (the COPY then fails on the primary key and is rolled back), they go through a temporary
    table and ``INSERT ... ON CONFLICT DO NOTHING``. Binary COPY sends floats and timestamps as
    they are, with no text formatting here and no parsing in the server.
    """
    instants: dict[int, datetime] = {}
    for _, _, ts_ms, _ in rows:
        if ts_ms not in instants:
            instants[ts_ms] = datetime.fromtimestamp(ts_ms / 1000, tz=UTC)
    # Each UTC day's rows go to that day's partition: make it first when it is missing.
    partitions_for_rows("efficiency_gpusample", instants.values())
    columns = ", ".join(SAMPLE_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM efficiency_gpusample WHERE ts = ANY(%s) AND node_id = ANY(%s))",
            [list(instants.values()), list({row[0] for row in rows})],
        )
        (may_exist,) = cursor.fetchone()
    if not may_exist:
        try:
            with transaction.atomic(), connection.wrap_database_errors, connection.cursor() as cursor:
                _rows_copy(cursor, "efficiency_gpusample", rows, instants, interval_s)
            return len(rows)
        except IntegrityError:
            pass  # stored meanwhile by another writer: rolled back, take the conflict-safe route
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS _gpusample_in "
            "(LIKE efficiency_gpusample INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
        )
        # Inside a caller's transaction this block is a savepoint and nothing is committed, so the
        # rows of earlier calls would still be there (and be inserted again, call after call).
        cursor.execute("TRUNCATE _gpusample_in")
        _rows_copy(cursor, "_gpusample_in", rows, instants, interval_s)
        cursor.execute(
            f"INSERT INTO efficiency_gpusample ({columns}) SELECT {columns} FROM _gpusample_in "  # noqa: S608 -- constant column names
            "ON CONFLICT DO NOTHING"
        )
        return cursor.rowcount


def _rows_copy(cursor, table: str, rows, instants: dict[int, datetime], interval_s: int) -> None:
    """Binary COPY of (node_id, gpu_index, timestamp_ms, values) rows into ``table``."""
    with cursor.copy(f"COPY {table} ({', '.join(SAMPLE_COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(_SAMPLE_COPY_TYPES)
        write_row = copy.write_row
        for node_id, gpu_index, ts_ms, values in rows:
            write_row((node_id, gpu_index, instants[ts_ms], interval_s, *values))


def _samples_insert(rows, interval_s: int) -> int:
    adapt = connection.ops.adapt_datetimefield_value
    ts_cache: dict[int, str] = {}
    params = []
    for node_id, gpu_index, ts_ms, values in rows:
        ts = ts_cache.get(ts_ms)
        if ts is None:
            ts = ts_cache[ts_ms] = adapt(datetime.fromtimestamp(ts_ms / 1000, tz=UTC))
        params.append((node_id, gpu_index, ts, interval_s, *values))
    placeholders = ", ".join(["%s"] * len(SAMPLE_COLUMNS))
    sql = f"INSERT OR IGNORE INTO efficiency_gpusample ({', '.join(SAMPLE_COLUMNS)}) VALUES ({placeholders})"  # noqa: S608
    stored = 0
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(params), 5000):
            cursor.executemany(sql, params[start : start + 5000])
            stored += cursor.rowcount
    return stored


# --- Jobs ---------------------------------------------------------------------------------------

_MAPPING_KIND = {
    SourceKind.SLURM: [MappingKind.SLURM_ACCOUNT],
    SourceKind.KUBERNETES: [MappingKind.K8S_NAMESPACE],
}
_ALLOCATION_FIELDS = ("department_id", "gpu_count", "gpu_milli", "node_count", "started_at", "ended_at")
_JOB_FIELDS = (
    "department_id",
    "account",
    "user_name",
    "name",
    "state",
    "gpu_count",
    "gpu_milli",
    "gpu_model",
    "node_count",
    "submitted_at",
    "started_at",
    "ended_at",
    "framework",
    "config",
)


class _DepartmentResolver:
    """Account or namespace → department: a cluster's own mapping wins over a global one."""

    def __init__(self, cluster: Cluster) -> None:
        self.by_code = dict(Department.objects.values_list("code", "pk"))
        self.mappings: dict[tuple[str, str], int] = {}
        rows = DepartmentMapping.objects.filter(Q(cluster=cluster) | Q(cluster__isnull=True)).values_list(
            "cluster_id", "kind", "value", "department_id"
        )
        for cluster_id, kind, value, department_id in rows:
            if cluster_id is not None or (kind, value) not in self.mappings:
                self.mappings[(kind, value)] = department_id

    def resolve(self, record: JobRecord, kinds: list[str]) -> int | None:
        code = self.code(record)
        if code:
            return self.by_code.get(code)
        for kind in kinds:
            department_id = self.mappings.get((kind, record.account))
            if department_id is not None:
                return department_id
        return None

    @staticmethod
    def code(record: JobRecord) -> str:
        """The department code the record names itself (the CSV's ``department``), or ""."""
        code = record.config.get("department_code") if isinstance(record.config, dict) else None
        return str(code) if code else ""


def _unresolved_warning(reason: tuple[str, str], count: int) -> str:
    """What went wrong with a job's department and what to do, for a ``(kind, value)`` key."""
    kind, value = reason
    if kind == "code":
        return (
            f"department code {value!r} does not exist ({count} jobs, stored without a department): "
            f"create a department with this code (Admin → Departments) or correct the code at the source"
        )
    if kind == "account":
        return f"account or namespace {value!r} maps to no department ({count} jobs); add a mapping"
    return (
        f"{count} jobs name no department code and no account or namespace (stored without a "
        f"department): fill in the account, namespace or department column at the source"
    )


# A job with an end time has ended, whatever state its row reports (a trace cut off while a
# job ran, a scheduler that kept "RUNNING"): stored finished, so nothing counts it as running now.
_ENDED_STATE = {True: JobState.COMPLETED, False: JobState.CANCELLED}  # keyed by "it started"


def _ended_record(record: JobRecord, now: datetime) -> JobRecord:
    """``record`` with a finished state when it ended (an end time up to ``now``) but reports a
    pending or running state.

    A job that started is stored as completed and one that never started as cancelled; the
    reported state is kept in the config snapshot as ``reported_state``. An end time still to
    come is a running job's expected end: it stays running until then.
    """
    if (
        record.ended_at is None
        or record.ended_at > now
        or record.state not in (JobState.RUNNING, JobState.PENDING)
    ):
        return record
    config = {**record.config, "reported_state": record.state}
    return replace(record, state=_ENDED_STATE[record.started_at is not None], config=config)


def jobs_ingest(
    *, cluster: Cluster, source: str, records: Iterable[JobRecord], now: datetime | None = None
) -> IngestResult:
    """Upsert job records on (cluster, source, external id).

    - the department comes from the record's ``department_code`` (CSV) or the mapping of its
      account / namespace; an unmapped job is stored without one and reported as a warning;
    - a finished job is never turned back into a pending or running one by an older record
      arriving late;
    - a job's GPU share (``gpu_milli``, thousandths of a GPU) is what its GPU-hours count; a
      record without one holds its ``gpu_count`` GPUs whole;
    - nodes are linked by hostname; unknown hostnames are reported as warnings; a job without
      nodes still counts for its department and cluster (placement unknown);
    - the config snapshot is stored with its secrets redacted (``efficiency.redaction``);
    - a record the raw store cannot hold (``job_record_check``: a GPU count past the column's
      range, a date in year 9999, ...) is rejected with its reason and the rest is stored; text
      longer than its column is cut to fit and reported as a warning.

    A record whose end time has passed has ended, whatever its state says (``_ended_record``);
    the run says how many such rows there were.
    """
    now = now or timezone.now()
    result = IngestResult()
    records = list(records)
    result.received = len(records)
    checked = []
    ended_but_open: dict[str, int] = defaultdict(int)
    for record in records:
        check = job_record_check(record, now=now)
        if check.record is None:
            result.reject(check.problem, record.external_id)
            continue
        result.warnings.extend(Rejected(reason=warning) for warning in check.warnings)
        ended = _ended_record(check.record, now)
        if ended is not check.record:
            ended_but_open[check.record.state] += 1
        checked.append(ended)
    for state, count in sorted(ended_but_open.items()):
        result.warnings.append(
            Rejected(
                reason=f"{count} rows had an end time but state {state.upper()}: counted as ended at "
                f"their end time (stored as completed, or cancelled when they never started)"
            )
        )
    resolver = _DepartmentResolver(cluster)
    kinds = _MAPPING_KIND.get(source, [MappingKind.SLURM_ACCOUNT, MappingKind.K8S_NAMESPACE])
    node_ids = dict(cluster.nodes.values_list("hostname", "pk"))
    latest: dict[str, JobRecord] = {}
    for record in checked:
        if record.external_id in latest:
            result.duplicates += 1
        latest[record.external_id] = record  # the last word in one delivery wins
    existing = {
        job.external_id: job
        for job in Job.objects.filter(cluster=cluster, source=source, external_id__in=list(latest))
    }
    existing_nodes: dict[int, set[int]] = defaultdict(set)
    for job_id, node_id in Job.nodes.through.objects.filter(job__in=existing.values()).values_list(
        "job_id", "node_id"
    ):
        existing_nodes[job_id].add(node_id)
    unmapped: dict[tuple[str, str], int] = defaultdict(int)
    missing_nodes: dict[str, int] = defaultdict(int)
    spans: list[tuple[datetime, datetime]] = []  # (first hour, last hour) each job held GPUs in
    to_create, to_update, node_links = [], [], {}
    finished = JobState.finished()
    for external_id, record in latest.items():
        department_id = resolver.resolve(record, kinds)
        if department_id is None:
            code = resolver.code(record)
            kind = "code" if code else "account" if record.account else ""
            unmapped[(kind, code or record.account)] += 1
        wanted_nodes = set()
        for hostname in record.node_names:
            if hostname in node_ids:
                wanted_nodes.add(node_ids[hostname])
            else:
                missing_nodes[hostname] += 1
        values = {
            "department_id": department_id,
            "account": record.account,
            "user_name": record.user_name,
            "name": record.name,
            "state": record.state,
            "gpu_count": record.gpu_count,
            "gpu_milli": record.gpu_count * MILLI_PER_GPU if record.gpu_milli is None else record.gpu_milli,
            "gpu_model": record.gpu_model,
            "node_count": record.node_count or len(record.node_names),
            "submitted_at": record.submitted_at,
            "started_at": record.started_at,
            "ended_at": record.ended_at,
            "framework": record.framework,
            "config": config_redact(record.config),
        }
        job = existing.get(external_id)
        if job is None:
            job = Job(cluster=cluster, source=source, external_id=external_id, **values)
            to_create.append(job)
            spans += _job_span(record.started_at, record.ended_at, now)
        else:
            if job.state in finished and record.state not in finished:
                result.duplicates += 1  # a stale record delivered late: keep what we know
                continue
            if (
                all(getattr(job, name) == value for name, value in values.items())
                and wanted_nodes == existing_nodes[job.pk]
            ):
                result.duplicates += 1
                continue
            # Only a change to what the job held, where and when, changes past rollups; a
            # running job's elapsed time or state alone does not (the current hour is
            # refreshed by the samples anyway).
            if any(getattr(job, name) != values[name] for name in _ALLOCATION_FIELDS) or (
                wanted_nodes != existing_nodes[job.pk]
            ):
                spans += _job_span(job.started_at, job.ended_at, now)
                spans += _job_span(record.started_at, record.ended_at, now)
            for name, value in values.items():
                setattr(job, name, value)
            to_update.append(job)
        node_links[external_id] = wanted_nodes
    with transaction.atomic():
        Job.objects.bulk_create(to_create, batch_size=1000)
        if to_update:
            fields = [name.removesuffix("_id") for name in _JOB_FIELDS]
            Job.objects.bulk_update(to_update, fields, batch_size=500)
        if node_links:
            # bulk_create sets the new jobs' keys where the database returns them (PostgreSQL,
            # SQLite 3.35+); a new job has no links to replace.
            jobs = {job.external_id: job.pk for job in [*to_create, *to_update]}
            if None in jobs.values():
                jobs = dict(
                    Job.objects.filter(
                        cluster=cluster, source=source, external_id__in=list(node_links)
                    ).values_list("external_id", "pk")
                )
            through = Job.nodes.through
            if to_update:
                through.objects.filter(job_id__in=[job.pk for job in to_update]).delete()
            through.objects.bulk_create(
                [
                    through(job_id=jobs[ext], node_id=node_id)
                    for ext, ids in node_links.items()
                    for node_id in ids
                ],
                batch_size=2000,
            )
        if hours := _span_hours(spans):
            dirty_hours_mark(cluster=cluster, hours=hours, now=now)
    result.stored = len(to_create) + len(to_update)
    for reason, count in unmapped.items():
        result.warnings.append(Rejected(reason=_unresolved_warning(reason, count)))
    for hostname, count in missing_nodes.items():
        result.warnings.append(Rejected(reason=f"jobs ran on unknown node {hostname!r} ({count} jobs)"))
    return result


def job_configs_redact(*, batch_size: int = 1000) -> tuple[int, int]:
    """Redact secrets in every stored config snapshot; returns (checked, changed).

    New jobs are redacted at ingest; this is for snapshots stored under older, narrower rules.
    """
    checked, changed, batch = 0, 0, []
    for job in Job.objects.exclude(config={}).only("pk", "config").iterator(chunk_size=batch_size):
        checked += 1
        redacted = config_redact(job.config)
        if redacted != job.config:
            job.config = redacted
            batch.append(job)
        if len(batch) >= batch_size:
            changed += Job.objects.bulk_update(batch, ["config"])
            batch = []
    changed += Job.objects.bulk_update(batch, ["config"])
    return checked, changed


def _job_span(started_at: datetime | None, ended_at: datetime | None, now: datetime) -> list[tuple]:
    """The first and last hour a job held GPUs in (up to ``now``), as a one-item list; [] if none."""
    if started_at is None:
        return []
    end = min(ended_at or now, now)
    first = _hour(started_at)
    if end < first:
        return []
    # At most 400 days of a job's hours are recomputed, as before: older ones are past any rollup.
    return [(first, min(_hour(end), first + timedelta(days=400) - timedelta(hours=1)))]


def _span_hours(spans: list[tuple[datetime, datetime]]) -> set[datetime]:
    """Every hour in any of the spans: merged first, so 5,000 overlapping jobs cost their union."""
    hours: set[datetime] = set()
    reach: datetime | None = None  # the last hour already added
    for first, last in sorted(spans):
        hour = first if reach is None or first > reach else reach + timedelta(hours=1)
        while hour <= last:
            hours.add(hour)
            hour += timedelta(hours=1)
        reach = last if reach is None or last > reach else reach
    return hours


# --- Logs ---------------------------------------------------------------------------------------


def log_chunks_ingest(*, source, chunks: Iterable[LogLines], now: datetime | None = None) -> IngestResult:
    """Store log chunks once per (stream, file generation, start offset); link them to jobs.

    A stored chunk never changes: of a longer replay only the lines after the stored ones are
    stored (``_chunk_new_part``), and likewise of a replay of a part retention pruned.
    """
    now = now or timezone.now()
    result = IngestResult()
    chunks = list(chunks)
    result.received = len(chunks)
    job_ids = dict(
        Job.objects.filter(
            cluster_id=source.cluster_id,
            external_id__in={c.job_external_id for c in chunks if c.job_external_id},
        ).values_list("external_id", "pk")
    )
    rows = [
        LogChunk(
            source=source,
            stream=chunk.stream[:500],
            file_id=chunk.file_id[:100],
            start_offset=chunk.start_offset,
            end_offset=chunk.end_offset,
            job_id=job_ids.get(chunk.job_external_id),
            job_external_id=chunk.job_external_id[:200],
            node=chunk.node[:255],
            rank=chunk.rank,
            line_count=chunk.line_count,
            text=chunk.text,
            received_at=now,
        )
        for chunk in chunks
    ]
    if rows:
        partitions_for_rows("efficiency_logchunk", [now])
    with transaction.atomic():
        # One writer per source at a time, so the check below sees every chunk stored before
        # (no unique constraint can: the table is partitioned by day).
        transaction_lock(LOG_CHUNK_LOCK_SPACE, source.pk)
        streams = {row.stream for row in rows}
        # Per file, the byte ranges delivered before, in offset order: the chunks stored, and the
        # head retention pruned (its line count no longer splits into chunks: None).
        covered: dict[tuple[str, str], list[tuple[int, int, int | None]]] = defaultdict(list)
        for stream, file_id, end in PrunedLogSpan.objects.filter(
            source=source, stream__in=streams
        ).values_list("stream", "file_id", "end_offset"):
            covered[(stream, file_id)].append((-1, end, None))
        for stream, file_id, start, end, lines in LogChunk.objects.filter(
            source=source, stream__in=streams
        ).values_list("stream", "file_id", "start_offset", "end_offset", "line_count"):
            covered[(stream, file_id)].append((start, end, lines))
        for spans in covered.values():
            spans.sort()
        new_rows = []
        for row in rows:
            spans = covered[(row.stream, row.file_id)]
            row = _chunk_new_part(row, spans, result)
            if row is None:
                continue
            bisect.insort(spans, (row.start_offset, row.end_offset, row.line_count))
            # Cut first, then replaced: the offsets count the bytes as the file holds them.
            row.text = row.text.replace("\x00", "\N{REPLACEMENT CHARACTER}")
            new_rows.append(row)
        LogChunk.objects.bulk_create(new_rows, batch_size=500)
    result.stored = len(new_rows)
    return result


def _chunk_new_part(
    row: LogChunk, spans: list[tuple[int, int, int | None]], result: IngestResult
) -> LogChunk | None:
    """``row``, or its part after what was delivered before (``spans``: the file's stored chunks
    and pruned head, in offset order); None when all of it was.

    A shipper that crashed replays from an older cursor, reaching further than before, maybe cut
    into other chunks. Stored chunks never change (the workers read each chunk once, by id), so
    what they hold is cut off the front of the new one and the rest is stored as a chunk of its
    own. The cut goes where the file's bytes say (the offsets count them) and must end a line;
    when the text does not match its offsets, it goes after the lines of stored chunks that
    follow each other from the new one's start.
    """
    start, skipped, by_lines = row.start_offset, 0, True
    while True:
        index = bisect.bisect_right(spans, (start, math.inf, math.inf)) - 1
        if index < 0 or not spans[index][0] <= start < spans[index][1]:
            break
        span_start, span_end, span_lines = spans[index]
        if span_start == start and span_lines is not None:
            skipped += span_lines
        else:
            by_lines = False
        start = span_end
    if start == row.start_offset:
        return row
    if start >= row.end_offset:
        result.duplicates += 1
        return None
    where = f"{row.stream}@{row.start_offset}"
    raw = row.text.encode("utf-8", "surrogatepass")
    cut = start - row.start_offset
    if len(raw) == row.end_offset - row.start_offset and raw[cut - 1 : cut] == b"\n":
        row.line_count -= raw[:cut].count(b"\n")
        row.start_offset, row.text = start, raw[cut:].decode("utf-8", "surrogatepass")
        return row
    if not by_lines:
        result.reject(f"chunk at {row.start_offset} overlaps what was delivered before up to {start}, "
                      "but its text does not end a line there: not stored", where)  # fmt: skip
        return None
    position = -1
    for _ in range(skipped):
        position = row.text.find("\n", position + 1)
        if position == -1:
            result.reject(
                f"chunk at {row.start_offset} does not begin with the {skipped} stored lines", where
            )
            return None
    if skipped >= row.line_count:
        result.reject(f"chunk at {row.start_offset} holds no line after the stored ones", where)
        return None
    row.start_offset, row.text, row.line_count = start, row.text[position + 1 :], row.line_count - skipped
    return row
