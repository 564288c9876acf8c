"""Hourly rollups from raw samples and jobs; pages read these, never raw samples."""

import itertools
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection, transaction
from django.db.models import (
    Avg,
    Case,
    Count,
    DateField,
    F,
    FloatField,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce, TruncHour
from django.utils import timezone

from efficiency.analysis.rollup import (
    HOUR,
    Allocation,
    DayPart,
    NodeDayRow,
    NodeWindow,
    SampleTotals,
    UnplacedHourRow,
    rollup_node_days,
    rollup_node_hour,
    rollup_unplaced_hours,
)
from efficiency.days import day_bounds, day_of, days_covering
from efficiency.models import (
    Cluster,
    DepartmentHour,
    GpuSample,
    Job,
    JobHour,
    LogChunk,
    Node,
    NodeDay,
    NodeHour,
    PrunedLogSpan,
    RollupDirtyHour,
    RollupVersion,
    ScopeHour,
    SourceRun,
)
from efficiency.models.jobs import MILLI_PER_GPU
from efficiency.services.locks import transaction_lock
from efficiency.services.partitions import partitioning_active, partitions_ahead, partitions_drop_before
from efficiency.times import portal_day_zone

logger = logging.getLogger(__name__)
HOURS_PER_BATCH = 48
NODE_DAYS_LOCK_SPACE = 0x4E4459  # "NDY": first key of the clusters' day-row locks (the second is the id)


def rollups_refresh(*, now: datetime | None = None, max_hours: int = 2000) -> int:
    """Recompute every hour marked dirty (up to ``max_hours``); returns how many were done.

    A batch of hours is claimed by locking and deleting its marks in the transaction that writes
    its rollups: a worker killed half-way (SIGKILL, OOM, lost connection) rolls back its batch and
    the marks with it, so the next run does those hours again; ``skip_locked`` keeps two workers
    from computing the same hour at once, and a failure leaves the marks in place.

    Day rows are cut at the midnights of the portal-day zone (``TIME_ZONE``); those stored in
    another zone are recomputed first (``node_days_rezone``).
    """
    now = now or timezone.now()
    zone = portal_day_zone()
    node_days_rezone(zone=zone)
    done = 0
    while done < max_hours:
        with transaction.atomic():
            marks = RollupDirtyHour.objects.order_by("hour")
            if connection.features.has_select_for_update_skip_locked:
                marks = marks.select_for_update(skip_locked=True)
            claimed = list(
                marks.values_list("pk", "cluster_id", "hour")[: min(HOURS_PER_BATCH, max_hours - done)]
            )
            if not claimed:
                break
            RollupDirtyHour.objects.filter(pk__in=[pk for pk, _, _ in claimed]).delete()
            by_cluster: dict[int, list[datetime]] = defaultdict(list)
            for _, cluster_id, hour in claimed:
                by_cluster[cluster_id].append(hour)
            # In the order of the clusters, so that two workers take the clusters' day locks
            # (``_node_days_refresh``) in the same order and never wait on each other in a circle.
            for cluster_id, hours in sorted(by_cluster.items()):
                cluster = Cluster.objects.get(pk=cluster_id)
                rollup_hours_compute(cluster=cluster, hours=hours, now=now, zone=zone)
        done += len(claimed)
    return done


def rollup_hours_compute(
    *, cluster: Cluster, hours: list[datetime], now: datetime, zone: ZoneInfo | None = None
) -> None:
    """Recompute the hourly rollups of ``cluster`` for the given hours, and the node-days (portal
    days in ``zone``, by default ``TIME_ZONE``'s) they fall in (idempotent)."""
    zone = zone or portal_day_zone()
    hours = sorted(set(hours))
    for start in range(0, len(hours), HOURS_PER_BATCH):
        _compute_batch(cluster, hours[start : start + HOURS_PER_BATCH], now, zone)


def _compute_batch(cluster: Cluster, hours: list[datetime], now: datetime, zone: ZoneInfo) -> None:
    first, last = hours[0], hours[-1] + HOUR
    windows = [
        NodeWindow(pk, gpus, owner, since, until)
        for pk, gpus, owner, since, until in cluster.nodes.values_list(
            "pk", "gpu_count", "owner_department_id", "in_service_from", "in_service_until"
        )
    ]
    totals = _sample_totals([w.node_id for w in windows], first, last)
    allocations, unplaced_allocations = _allocations(cluster, first, last)
    unplaced = rollup_unplaced_hours(hours=hours, allocations=unplaced_allocations, now=now)
    hour_set = set(hours)
    node_rows, department_rows = [], []
    job_totals: dict[tuple[int, datetime], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for hour in hours:
        for window in windows:
            node_row, departments, jobs = rollup_node_hour(
                hour=hour,
                node=window,
                totals=totals.get((window.node_id, hour)),
                allocations=allocations.get(window.node_id, ()),
                now=now,
            )
            for job in jobs:  # a job on several nodes: one row per job and hour
                entry = job_totals[(job.job_id, hour)]
                entry[0] += job.allocated_gpu_s
                entry[1] += job.busy_gpu_s
                entry[2] += job.sm_active_busy_gpu_s
            if node_row.available_gpu_s == 0 and node_row.sample_count == 0 and not departments:
                continue  # not in service and nothing seen: no row
            node_rows.append(NodeHour(cluster=cluster, **_fields(node_row)))
            department_rows.extend(DepartmentHour(**_fields(row)) for row in departments)
    for row in unplaced:  # placement unknown: counts for the job, its department and cluster
        job_totals[(row.job_id, row.hour)][0] += row.allocated_gpu_s
    departments_of = {
        allocation.job_id: allocation.department_id
        for allocation in itertools.chain(
            itertools.chain.from_iterable(allocations.values()), unplaced_allocations
        )
    }
    job_rows = [
        JobHour(
            job_id=job_id,
            hour=hour,
            department_id=departments_of.get(job_id),
            allocated_gpu_s=allocated,
            busy_gpu_s=busy,
            sm_active_busy_gpu_s=sm_busy,
        )
        for (job_id, hour), (allocated, busy, sm_busy) in job_totals.items()
    ]
    node_ids = [w.node_id for w in windows]
    with transaction.atomic():
        NodeHour.objects.filter(node_id__in=node_ids, hour__in=hour_set).delete()
        DepartmentHour.objects.filter(node_id__in=node_ids, hour__in=hour_set).delete()
        JobHour.objects.filter(job__cluster=cluster, hour__in=hour_set).delete()
        ScopeHour.objects.filter(cluster=cluster, hour__in=hour_set).delete()
        NodeHour.objects.bulk_create(node_rows, batch_size=2000)
        DepartmentHour.objects.bulk_create(department_rows, batch_size=2000)
        JobHour.objects.bulk_create(job_rows, batch_size=2000)
        ScopeHour.objects.bulk_create(
            _scope_rows(cluster, node_rows, department_rows, unplaced), batch_size=2000
        )
        _node_days_refresh(cluster, node_ids, hours, zone)
        rollup_version_bump(cluster.pk)


def rollup_version_bump(cluster_id: int) -> None:
    """Move the cluster's rollup version on (``RollupVersion``), in the transaction that writes
    its rollup rows: the pages' cache keys hold the version, so a page read after the commit
    is rebuilt from the new rows, and one read before it never sees a version it did not read.

    Called with the cluster's day lock held (``_node_days_refresh``, ``node_days_rezone``), so two
    workers never both create the first row of a cluster."""
    if not RollupVersion.objects.filter(cluster_id=cluster_id).update(version=F("version") + 1):
        RollupVersion.objects.create(cluster_id=cluster_id, version=1)


def _scope_rows(
    cluster: Cluster,
    node_rows: list[NodeHour],
    department_rows: list[DepartmentHour],
    unplaced: list[UnplacedHourRow] = (),
) -> list[ScopeHour]:
    """Cluster totals and per-department totals of each hour (see ScopeHour); what jobs
    without node placement held counts as allocated for the cluster and their department."""
    sums: dict[tuple[datetime, int | None], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for row in node_rows:
        whole = sums[(row.hour, None)]
        whole[0] += row.available_gpu_s
        whole[1] += row.allocated_gpu_s
        whole[2] += row.sampled_gpu_s
        whole[3] += row.busy_gpu_s
        if row.owner_department_id is not None:
            owned = sums[(row.hour, row.owner_department_id)]
            owned[0] += row.available_gpu_s
            owned[2] += row.sampled_gpu_s
    for row in department_rows:
        used = sums[(row.hour, row.department_id)]
        used[1] += row.allocated_gpu_s
        used[3] += row.busy_gpu_s
    for row in unplaced:
        sums[(row.hour, None)][1] += row.allocated_gpu_s
        if row.department_id is not None:
            sums[(row.hour, row.department_id)][1] += row.allocated_gpu_s
    return [
        ScopeHour(
            cluster=cluster,
            hour=hour,
            department_id=department_id,
            available_gpu_s=available,
            allocated_gpu_s=allocated,
            sampled_gpu_s=sampled,
            busy_gpu_s=busy,
        )
        for (hour, department_id), (available, allocated, sampled, busy) in sums.items()
    ]


def _node_days_refresh(cluster: Cluster, node_ids: list[int], hours: list[datetime], zone: ZoneInfo) -> None:
    """Re-sum the NodeDay rows of the portal days (in ``zone``) these hours fall in.

    Two workers' batches may end and begin in the same day: on PostgreSQL the cluster's day rows
    are rewritten by one transaction at a time (a lock held until commit), so the second sums
    the day after the first has committed its hours, instead of both writing the day's rows
    from half of its hours (or failing on the unique day row).
    """
    days = {day_of(hour, zone) for hour in hours}
    transaction_lock(NODE_DAYS_LOCK_SPACE, cluster.pk)
    node_days = rollup_node_days(_day_parts(NodeHour.objects.filter(node_id__in=node_ids), days, zone))
    NodeDay.objects.filter(node_id__in=node_ids, day__in=days).delete()
    NodeDay.objects.bulk_create(_node_day_rows(cluster.pk, node_days, zone), batch_size=2000)


def _day_parts(node_hours: QuerySet[NodeHour], days: Iterable[date], zone: ZoneInfo) -> Iterator[DayPart]:
    """NodeHour rows of these portal days summed per node, day and owner, by the database.

    An hour counts for the day its start falls in (efficiency.days bounds, not the database's
    own zone rules); in a zone offset by half an hour, the UTC hour holding midnight counts for
    the day before.
    """
    in_days, buckets = Q(), []
    for day in days:
        start, end = day_bounds(day, zone)
        in_days |= Q(hour__gte=start, hour__lt=end)
        buckets.append(When(hour__gte=start, hour__lt=end, then=Value(day)))
    if not buckets:
        return
    rows = (
        node_hours.filter(in_days)
        .annotate(day=Case(*buckets, output_field=DateField()))
        .values_list("node_id", "day", "owner_department_id")
        .annotate(last_hour=Max("hour"), **_DAY_SUMS)
        .order_by()
    )
    yield from map(DayPart._make, rows)


_DAY_SUMS = {
    "available_gpu_s_sum": Sum("available_gpu_s"),
    "allocated_gpu_s_sum": Sum("allocated_gpu_s"),
    "sampled_gpu_s_sum": Sum("sampled_gpu_s"),
    "busy_gpu_s_sum": Sum("busy_gpu_s"),
}
# Rebuilding a node's days covers its whole history: the nodes a few at a time, and the days
# in windows of a month, so that each query's day buckets stay few.
REZONE_NODES_PER_BATCH = 50
REZONE_DAYS_PER_QUERY = 31


def node_days_rezone(*, zone: ZoneInfo | None = None) -> int:
    """Recompute, in the current portal-day zone, every node's days stored in another zone.

    After ``TIME_ZONE`` changes, a stored day is a different span of time than the day of the
    same date now: all of a node's days are rebuilt from its hours at once (a day of one zone
    overlaps two of another, so rebuilding some would leave gaps or double counts). Runs before
    the hourly work of each rollup run, so day rows of two zones never meet. A batch claims its
    nodes by locking them (``skip_locked``), so two workers rebuild different nodes; a failure
    rolls the batch back and the next run does it again. Returns how many nodes were redone.
    """
    zone = zone or portal_day_zone()
    done = 0
    while True:
        with transaction.atomic():
            stale = NodeDay.objects.filter(Q(day_zone__lt=zone.key) | Q(day_zone__gt=zone.key))
            stale_nodes = stale.order_by("node_id").values_list("node_id", flat=True).distinct()
            candidates = list(stale_nodes[:REZONE_NODES_PER_BATCH])
            # Claimed by locking the nodes: a second worker takes other nodes or none.
            nodes = Node.objects.filter(pk__in=candidates).order_by("pk")
            if connection.features.has_select_for_update_skip_locked:
                nodes = nodes.select_for_update(skip_locked=True)
            by_cluster: dict[int, list[int]] = defaultdict(list)
            for pk, cluster_id in nodes.values_list("pk", "cluster_id"):
                by_cluster[cluster_id].append(pk)
            if not by_cluster:
                return done
            for cluster_id, node_ids in sorted(by_cluster.items()):
                # The cluster's day lock, as _node_days_refresh takes it (in cluster order too).
                transaction_lock(NODE_DAYS_LOCK_SPACE, cluster_id)
                node_hours = NodeHour.objects.filter(node_id__in=node_ids)
                span = node_hours.aggregate(first=Min("hour"), last=Max("hour"))
                covered = []
                if span["first"] is not None:
                    covered = list(days_covering(span["first"], span["last"] + HOUR, zone))
                parts = itertools.chain.from_iterable(
                    _day_parts(node_hours, covered[i : i + REZONE_DAYS_PER_QUERY], zone)
                    for i in range(0, len(covered), REZONE_DAYS_PER_QUERY)
                )
                node_days = rollup_node_days(parts)
                NodeDay.objects.filter(node_id__in=node_ids).delete()
                NodeDay.objects.bulk_create(_node_day_rows(cluster_id, node_days, zone), batch_size=2000)
                rollup_version_bump(cluster_id)
        count = sum(map(len, by_cluster.values()))
        done += count
        logger.info("node days of %d nodes recomputed in %s", count, zone.key)


def _node_day_rows(cluster_id: int, node_days: list[NodeDayRow], zone: ZoneInfo) -> list[NodeDay]:
    return [NodeDay(cluster_id=cluster_id, day_zone=zone.key, **_fields(row)) for row in node_days]


def _fields(row) -> dict:
    return {name: getattr(row, name) for name in row.__slots__}


def _sample_totals(
    node_ids: list[int], start: datetime, end: datetime
) -> dict[tuple[int, datetime], SampleTotals]:
    activity = Coalesce("gr_engine_active_pct", "util_pct")
    seconds = Cast("interval_s", FloatField())
    rows = (
        GpuSample.objects.filter(node_id__in=node_ids, ts__gte=start, ts__lt=end)
        .annotate(hour=TruncHour("ts", tzinfo=UTC))
        .values("node_id", "hour")
        .annotate(
            sampled=Sum(
                Case(
                    When(Q(gr_engine_active_pct__isnull=False) | Q(util_pct__isnull=False), then=seconds),
                    default=0.0,
                ),
                output_field=FloatField(),
            ),
            busy=Sum(activity * seconds / 100.0, output_field=FloatField()),
            util_busy=Sum(F("util_pct") * seconds / 100.0, output_field=FloatField()),
            sm_busy=Sum(F("sm_active_pct") * seconds / 100.0, output_field=FloatField()),
            count=Count("*"),
            fb=Avg("fb_used_mib"),
            power=Avg("power_w"),
            temp=Max("temp_c"),
        )
        .order_by()
    )
    return {
        (row["node_id"], row["hour"]): SampleTotals(
            sampled_gpu_s=row["sampled"] or 0.0,
            busy_gpu_s=row["busy"] or 0.0,
            gpu_util_busy_gpu_s=row["util_busy"] or 0.0,
            sm_active_busy_gpu_s=row["sm_busy"] or 0.0,
            sample_count=row["count"],
            fb_used_mib_avg=row["fb"],
            power_w_avg=row["power"],
            temp_c_max=row["temp"],
        )
        for row in rows
    }


def _allocations(
    cluster: Cluster, start: datetime, end: datetime
) -> tuple[dict[int, list[Allocation]], list[Allocation]]:
    """GPUs each job held on each of its nodes (spread evenly over its nodes), and the jobs
    whose nodes nobody recorded (placement unknown). A job's GPUs are its GPU share
    (``gpu_milli`` / 1000): half of a shared GPU holds 0.5."""
    jobs = {
        pk: (department_id, milli / MILLI_PER_GPU, started, ended)
        for pk, department_id, milli, started, ended in Job.objects.filter(cluster=cluster)
        .between(start, end)
        .filter(gpu_milli__gt=0)
        .values_list("pk", "department_id", "gpu_milli", "started_at", "ended_at")
    }
    nodes_of: dict[int, list[int]] = defaultdict(list)
    for job_id, node_id in Job.nodes.through.objects.filter(job_id__in=list(jobs)).values_list(
        "job_id", "node_id"
    ):
        nodes_of[job_id].append(node_id)
    by_node: dict[int, list[Allocation]] = defaultdict(list)
    unplaced: list[Allocation] = []
    for job_id, (department_id, gpus, started, ended) in jobs.items():
        node_ids = nodes_of.get(job_id)
        if not node_ids:
            unplaced.append(Allocation(department_id, gpus, started, ended, job_id))
            continue
        for node_id in node_ids:
            by_node[node_id].append(Allocation(department_id, gpus / len(node_ids), started, ended, job_id))
    return by_node, unplaced


def retention_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Drop raw samples and log chunks past the retention window, and old run records.

    On PostgreSQL the raw tables are partitioned by day: a day goes whole, by dropping its
    partition, once all of it is past the window (so up to a day more is kept), and the
    partitions of the coming days are made. Elsewhere the rows are deleted. What the log chunks
    held up to where they go is kept per file (``PrunedLogSpan``), in the same transaction, so the
    chunks still stored keep their line numbers and a replay of a pruned part is not stored again.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.PORTAL_RAW_RETENTION_DAYS)
    deleted = {"samples": 0, "log_chunks": 0}

    def spans_keep(relation: str, upto: datetime) -> None:
        pruned_log_spans_record(relation, upto, now=now)

    if partitioning_active():
        partitions_ahead(now=now)
        samples = partitions_drop_before("efficiency_gpusample", cutoff)
        chunks = partitions_drop_before("efficiency_logchunk", cutoff, before_drop=spans_keep)
        deleted.update(
            samples=samples["rows"],
            sample_days_dropped=samples["partitions"],
            log_chunks=chunks["rows"],
            log_chunk_days_dropped=chunks["partitions"],
        )
    else:
        while True:
            # Delete in slices by time so one run never holds a huge transaction.
            oldest = (
                GpuSample.objects.filter(ts__lt=cutoff).order_by("ts").values_list("ts", flat=True).first()
            )
            if oldest is None:
                break
            upto = min(cutoff, oldest + timedelta(hours=6))
            count, _ = GpuSample.objects.filter(ts__lt=upto).delete()
            deleted["samples"] += count
        with transaction.atomic():
            spans_keep(LogChunk._meta.db_table, cutoff)
            deleted["log_chunks"], _ = LogChunk.objects.filter(received_at__lt=cutoff).delete()
    deleted["runs"], _ = SourceRun.objects.filter(started_at__lt=now - timedelta(days=30)).delete()
    return deleted


def pruned_log_spans_record(relation: str, upto: datetime, *, now: datetime) -> int:
    """Add the log chunks of ``relation`` (the chunk table or one of its partitions) received
    before ``upto`` to their files' pruned spans; returns the files touched. Call it in the
    transaction that removes those chunks."""
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT source_id, stream, file_id, MAX(end_offset), SUM(line_count) FROM "{relation}" '  # noqa: S608 -- a table name from the partition list
            "WHERE received_at < %s GROUP BY source_id, stream, file_id",
            [upto],
        )
        spans = {
            (source, stream, file_id): (end, int(lines)) for source, stream, file_id, end, lines in cursor
        }
    if not spans:
        return 0
    known = {
        (span.source_id, span.stream, span.file_id): span
        for span in PrunedLogSpan.objects.select_for_update().filter(
            source_id__in={source for source, _, _ in spans}, stream__in={stream for _, stream, _ in spans}
        )
    }
    new, changed = [], []
    for (source, stream, file_id), (end, lines) in spans.items():
        span = known.get((source, stream, file_id))
        if span is None:
            span = PrunedLogSpan(source_id=source, stream=stream, file_id=file_id, end_offset=0, line_count=0)
            new.append(span)
        else:
            changed.append(span)
        span.end_offset = max(span.end_offset, end)
        span.line_count += lines
        span.pruned_at = now
    PrunedLogSpan.objects.bulk_create(new, batch_size=1000)
    PrunedLogSpan.objects.bulk_update(changed, ["end_offset", "line_count", "pruned_at"], batch_size=1000)
    return len(spans)
