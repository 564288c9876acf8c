"""Utilization and allocation as pages, exports and the API need them, read from the rollups.

All numbers come from ``efficiency.analysis.usage`` definitions over ``NodeHour`` (capacity,
coverage, cluster busy time), ``DepartmentHour`` (what each department's jobs held and used) and
``JobHour`` (per job). Nothing here reads raw samples, except the per-job and per-GPU views of
one job or node, which are bounded by that job or node.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Case, Count, Exists, F, FloatField, Max, OuterRef, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Cast, Coalesce, Least, TruncDay, TruncHour
from django.db.models.lookups import GreaterThan
from django.utils import timezone

from efficiency import days
from efficiency.analysis.idle import IdleHour, IdleStretch, find_idle_stretches
from efficiency.analysis.usage import UsageTotals
from efficiency.models import (
    Cluster,
    Department,
    GpuSample,
    Job,
    JobHour,
    Node,
    NodeClassification,
    NodeDay,
    NodeHour,
    ScopeHour,
)
from efficiency.scoping import User, scope_queryset, sees_all_departments, visible_department_ids
from efficiency.timeranges import TimeRange
from efficiency.times import portal_day_zone

_NODE_SUMS = {
    "available": Sum("available_gpu_s"),
    "allocated": Sum("allocated_gpu_s"),
    "sampled": Sum("sampled_gpu_s"),
    "busy": Sum("busy_gpu_s"),
}


def _totals(row: dict) -> UsageTotals:
    return UsageTotals(
        available_gpu_s=row.get("available") or 0.0,
        allocated_gpu_s=row.get("allocated") or 0.0,
        sampled_gpu_s=row.get("sampled") or 0.0,
        busy_gpu_s=row.get("busy") or 0.0,
    )


def _trunc(bucket: str, field: str = "hour"):
    if bucket == "hour":
        return TruncHour(field)
    return TruncDay(field, tzinfo=portal_day_zone())


def node_hours(*, user: User, time_range: TimeRange) -> QuerySet[NodeHour]:
    return scope_queryset(NodeHour.objects.between(time_range.start, time_range.end), user)


def cluster_by_slug(slug: str) -> Cluster | None:
    """One cluster by slug; None when there is none."""
    return Cluster.objects.filter(slug=slug).first()


def cluster_choices() -> list[tuple[str, str]]:
    """Every cluster as (slug, name), for a cluster select."""
    return list(Cluster.objects.order_by("name").values_list("slug", "name"))


def _in_cluster(rows: QuerySet, cluster: Cluster | None) -> QuerySet:
    return rows if cluster is None else rows.filter(cluster=cluster)


def _scope_hours(*, user: User, time_range: TimeRange, cluster: Cluster | None = None) -> QuerySet[ScopeHour]:
    """The whole-scope rows a user's totals are made of: the cluster rows for those who see
    every department, their departments' rows for a head; of one cluster, or of all summed."""
    rows = _in_cluster(ScopeHour.objects.between(time_range.start, time_range.end), cluster)
    if sees_all_departments(user):
        return rows.filter(department__isnull=True)
    return scope_queryset(rows, user)


def cluster_usage(*, user: User, time_range: TimeRange, cluster: Cluster | None = None) -> UsageTotals:
    """Totals over every node the user may see (the whole cluster for the committee); of one
    cluster, or of every cluster summed when ``cluster`` is None."""
    return _totals(_scope_hours(user=user, time_range=time_range, cluster=cluster).aggregate(**_NODE_SUMS))


@dataclass(frozen=True)
class UsagePoint:
    """One bucket (hour or day) of a usage series; ``seconds`` is how much of it has data
    (a range can start or end inside a day), so averages of partial buckets stay right."""

    time: datetime
    totals: UsageTotals
    seconds: float

    @property
    def gpus_available(self) -> float:
        return self.totals.available_gpu_s / self.seconds if self.seconds else 0.0

    @property
    def gpus_allocated(self) -> float:
        return self.totals.allocated_gpu_s / self.seconds if self.seconds else 0.0


def _series(rows: QuerySet, time_range: TimeRange) -> list[UsagePoint]:
    """Hourly rows (ScopeHour or NodeHour) summed per hour or day of the range.

    The hour still under way is left out: its rows hold only the minutes gone so far, and an
    hour's point is an average over the whole hour (it would show the cluster shrinking at the
    right edge of every chart). The range's totals still count it.
    """
    this_hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    rows = (
        rows.filter(hour__lt=this_hour)
        .annotate(bucket=_trunc(time_range.bucket))
        .values("bucket")
        .annotate(hours=Count("hour", distinct=True), **_NODE_SUMS)
        .order_by("bucket")
    )
    return [UsagePoint(row["bucket"], _totals(row), row["hours"] * 3600) for row in rows]


def cluster_usage_series(
    *, user: User, time_range: TimeRange, cluster: Cluster | None = None
) -> list[UsagePoint]:
    """Totals per hour (ranges up to a week) or day: utilization trend and water level."""
    return _series(_scope_hours(user=user, time_range=time_range, cluster=cluster), time_range)


@dataclass(frozen=True)
class DepartmentUsage:
    department: Department
    totals: UsageTotals
    # Of the allocated GPU-seconds, those of jobs whose nodes nobody recorded (imported history,
    # a scheduler that does not say): they count for the department, on no node.
    unplaced_gpu_s: float = 0.0

    @property
    def unplaced_gpu_hours(self) -> float:
        return self.unplaced_gpu_s / 3600


def _department_hours(
    user: User, time_range: TimeRange, cluster: Cluster | None = None
) -> QuerySet[ScopeHour]:
    return scope_queryset(
        _in_cluster(ScopeHour.objects.between(time_range.start, time_range.end), cluster).filter(
            department__isnull=False
        ),
        user,
    )


def department_usage_list(
    *, user: User, time_range: TimeRange, cluster: Cluster | None = None
) -> list[DepartmentUsage]:
    """Per department: owned GPU-hours and coverage, its jobs' allocated and busy GPU-hours (in
    one cluster, or in all of them)."""
    sums, unplaced = department_usage_sums(user=user, time_range=time_range, cluster=cluster)
    return department_usage_of(user=user, sums=sums, unplaced=unplaced)


def department_usage_sums(
    *, user: User, time_range: TimeRange, cluster: Cluster | None = None
) -> tuple[dict[int, UsageTotals], dict[int | None, float]]:
    """The numbers of ``department_usage_list`` by department id, read from the rollups only:
    totals, and allocated GPU-seconds without node placement (``unplaced_allocation``)."""
    rows = _department_hours(user, time_range, cluster)
    sums = {
        row["department"]: _totals(row) for row in rows.values("department").annotate(**_NODE_SUMS).order_by()
    }
    return sums, unplaced_allocation(user=user, time_range=time_range, cluster=cluster)


def department_usage_of(
    *, user: User, sums: dict[int, UsageTotals], unplaced: dict[int | None, float]
) -> list[DepartmentUsage]:
    """Every department the user may see with its numbers from ``department_usage_sums``."""
    departments = scope_queryset(Department.objects.all(), user)
    return [
        DepartmentUsage(department, sums.get(department.pk, UsageTotals()), unplaced.get(department.pk, 0.0))
        for department in departments
    ]


def _unplaced_job_hours(
    user: User, time_range: TimeRange, cluster: Cluster | None = None
) -> QuerySet[JobHour]:
    """Hours of jobs without node placement: linked to no node at all (of one cluster, or all)."""
    placed = Job.nodes.through.objects.filter(job_id=OuterRef("job_id"))
    rows = scope_queryset(JobHour.objects.filter(hour__gte=time_range.start, hour__lt=time_range.end), user)
    if cluster is not None:
        rows = rows.filter(job__cluster=cluster)
    return rows.filter(~Exists(placed))


def unplaced_allocation(
    *, user: User, time_range: TimeRange, cluster: Cluster | None = None, department: Department | None = None
) -> dict[int | None, float]:
    """Allocated GPU-seconds of jobs without node placement, per department (``None``: jobs of
    no known department), or of ``department`` only. Node-level figures leave these out: their
    placement is unknown."""
    rows = _unplaced_job_hours(user, time_range, cluster)
    if department is not None:
        rows = rows.filter(department=department)
    return {
        row["department"]: row["allocated"] or 0.0
        for row in rows.values("department").annotate(allocated=Sum("allocated_gpu_s")).order_by()
    }


def department_usage(*, user: User, department: Department, time_range: TimeRange) -> UsageTotals:
    return _totals(_department_hours(user, time_range).filter(department=department).aggregate(**_NODE_SUMS))


def department_usage_series(*, user: User, department: Department, time_range: TimeRange) -> list[UsagePoint]:
    return _series(_department_hours(user, time_range).filter(department=department), time_range)


def nodes_fingerprint() -> tuple:
    """How many nodes there are and when one was last saved (``updated_at``): part of the key a
    chart that names nodes is cached under, so a renamed or re-owned node rebuilds it."""
    row = Node.objects.aggregate(count=Count("pk"), last=Max("updated_at"))
    return row["count"], row["last"]


@dataclass(frozen=True)
class Heatmap:
    nodes: list[str]
    times: list[datetime]
    values_pct: list[list[float | None]]  # one row per node; None = no samples
    block_hours: int = 1  # hourly maps of many nodes are merged into blocks of this many hours


HEATMAP_MAX_CELLS = 12_000  # beyond this a chart is slow to build and no more readable


def department_heatmap(
    *, user: User, department: Department, time_range: TimeRange, max_cells: int = HEATMAP_MAX_CELLS
) -> Heatmap:
    """Utilization of each owned node per hour (ranges up to a week) or day; None where nothing
    was sampled. Day cells come from NodeDay (one row a node and day); hourly cells are summed
    in the database, in blocks of several hours when the map would exceed ``max_cells``."""
    if time_range.bucket == "hour":
        return _hourly_heatmap(user, department, time_range, max_cells)
    zone = portal_day_zone()
    first, last = days.day_of(time_range.start, zone), days.day_of(time_range.end, zone)
    rows = (
        scope_queryset(NodeDay.objects.filter(day__gte=first, day__lte=last, day_zone=zone.key), user)
        .filter(owner_department=department)
        .annotate(busy_share=_busy_share(F("sampled_gpu_s"), F("busy_gpu_s")))
        .values_list("node__hostname", "day", "busy_share")
    )
    starts = {
        day: days.day_start(day, zone) for day in days.days_covering(time_range.start, time_range.end, zone)
    }
    return _heatmap(
        _rows_fetch(rows), block_hours=1, time_of=lambda day: starts.get(day) or days.day_start(day, zone)
    )


def _busy_share(sampled, busy) -> Case:
    """A cell's busy share of its sampled time, at most 1; NULL where nothing was sampled. The
    database's division and LEAST are IEEE doubles as Python's are: the same value, bit for bit.
    Busy time is capped at the sampled time before dividing (the same result: x / y for x <= y,
    else 1): PostgreSQL refuses a quotient past the largest double where Python gives inf, and
    one cell of a few busy seconds over a vanishing sampled time failed the whole map."""
    return Case(
        When(GreaterThan(sampled, 0.0), then=Least(Coalesce(busy, Value(0.0)), sampled) / sampled),
        default=None,
        output_field=FloatField(),
    )


def _rows_fetch(queryset) -> list[tuple]:
    """A values_list queryset's rows in one fetch (Django's iterator fetches 100 rows at a time:
    a 90-day map of 230 nodes was 200 round trips through the driver); [] for an empty IN."""
    try:
        sql, params = queryset.query.sql_with_params()
    except EmptyResultSet:
        return []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _hourly_heatmap(user: User, department: Department, time_range: TimeRange, max_cells: int) -> Heatmap:
    owned = node_hours(user=user, time_range=time_range).filter(owner_department=department)
    hours = int(time_range.duration.total_seconds() // 3600)
    node_count = Node.objects.filter(owner_department=department).count()
    block = max(1, -(-node_count * hours // max_cells))
    try:
        inner_sql, params = owned.values(
            "node_id", "hour", "sampled_gpu_s", "busy_gpu_s"
        ).query.sql_with_params()
    except EmptyResultSet:
        return Heatmap([], [], [], block)
    least = "LEAST" if connection.vendor == "postgresql" else "MIN"
    sql = (
        f"SELECT node_id, {_block_index_sql()} AS block, "  # noqa: S608
        "CASE WHEN SUM(sampled_gpu_s) > 0 "  # capped, then divided: see _busy_share
        f"THEN {least}(COALESCE(SUM(busy_gpu_s), 0.0), SUM(sampled_gpu_s)) / SUM(sampled_gpu_s) END "
        f"FROM ({inner_sql}) node_hours GROUP BY node_id, block"
    )
    start_epoch = int(time_range.start.timestamp())
    with connection.cursor() as cursor:
        cursor.execute(sql, [start_epoch, 3600 * block, *params])
        rows = cursor.fetchall()
    hostnames = dict(Node.objects.filter(pk__in={row[0] for row in rows}).values_list("pk", "hostname"))
    return _heatmap(
        ((hostnames[node_id], index, share) for node_id, index, share in rows),
        block_hours=block,
        time_of=lambda index: time_range.start + timedelta(hours=int(index) * block),
    )


def _epoch_sql() -> str:
    """The ``hour`` column as seconds since the Unix epoch, in this database's SQL."""
    if connection.vendor == "postgresql":
        return "EXTRACT(EPOCH FROM hour)"
    return "CAST(strftime('%%s', hour) AS INTEGER)"


def _block_index_sql() -> str:
    """Which block of ``%s`` seconds, counted from epoch ``%s``, an hour falls in (SQL)."""
    if connection.vendor == "postgresql":
        return f"FLOOR(({_epoch_sql()} - %s) / %s)"
    return f"(({_epoch_sql()} - %s) / %s)"  # integer division: floor for values >= 0


def _heatmap(cells, *, block_hours: int, time_of) -> Heatmap:
    """Build the matrix from (hostname, column key, busy share) cells; a column's time is
    ``time_of(key)`` (a day, a block number), worked out once per column, not per cell.

    A cell's value is its busy share of the sampled time (``_busy_share``) in %, rounded to 0.1;
    None where nothing was sampled or there is no row."""
    values: dict[str, dict] = defaultdict(dict)
    for hostname, key, share in cells:
        values[hostname][key] = None if share is None else round(share * 100, 1)
    nodes = sorted(values)
    keys = sorted(set().union(*values.values()))
    matrix = [list(map(values[node].get, keys)) for node in nodes]
    return Heatmap(nodes, [time_of(key) for key in keys], matrix, block_hours)


@dataclass(frozen=True)
class JobUsage:
    job: Job
    totals: UsageTotals  # allocated and busy of this job within the range
    placed: bool = True  # False: no node recorded, so no samples say how busy its GPUs were

    @property
    def gpu_hours(self) -> float:
        return self.totals.allocated_gpu_hours

    @property
    def efficiency(self) -> float | None:
        """Busy share of what the job held (its utilization); unknown without its nodes."""
        if self.totals.allocated_gpu_s <= 0 or not self.placed:
            return None
        return min(self.totals.busy_gpu_s / self.totals.allocated_gpu_s, 1.0)


def job_usage_list(
    *, user: User, time_range: TimeRange, department: Department | None = None, limit: int | None = 200
) -> list[JobUsage]:
    """Jobs that held GPUs in the range, largest first, with their GPU-hours and efficiency."""
    sums = job_usage_sums(user=user, time_range=time_range, department=department, limit=limit)
    return job_usage_of(sums)


def job_usage_sums(
    *, user: User, time_range: TimeRange, department: Department | None = None, limit: int | None = 200
) -> list[dict]:
    """The rows of ``job_usage_list`` as read from the rollups: job id, allocated and busy
    GPU-seconds, largest first."""
    hours = scope_queryset(JobHour.objects.filter(hour__gte=time_range.start, hour__lt=time_range.end), user)
    if department is not None:
        hours = hours.filter(department=department)
    sums = (
        hours.values("job")
        .annotate(allocated=Sum("allocated_gpu_s"), busy=Sum("busy_gpu_s"))
        .order_by("-allocated", "job")
    )
    if limit is not None:
        sums = sums[:limit]
    return list(sums)


def job_usage_of(sums: list[dict]) -> list[JobUsage]:
    """The jobs of ``job_usage_sums`` rows, read now (names and states change between rollups)."""
    placed = Job.nodes.through.objects.filter(job_id=OuterRef("pk"))
    jobs = (
        Job.objects.select_related("department", "cluster")
        .annotate(placed=Exists(placed))
        .in_bulk([row["job"] for row in sums])
    )
    return [
        JobUsage(
            jobs[row["job"]],
            UsageTotals(allocated_gpu_s=row["allocated"] or 0.0, busy_gpu_s=row["busy"] or 0.0),
            jobs[row["job"]].placed,
        )
        for row in sums
        if row["job"] in jobs
    ]


def job_usage_count(*, user: User, time_range: TimeRange, department: Department | None = None) -> int:
    """How many jobs held GPUs in the range: all the rows ``job_usage_list`` would give unlimited."""
    hours = scope_queryset(JobHour.objects.filter(hour__gte=time_range.start, hour__lt=time_range.end), user)
    if department is not None:
        hours = hours.filter(department=department)
    return hours.values("job").distinct().count()


@dataclass(frozen=True)
class IdleAllocation:
    """A job that held GPUs while they stayed below the idle threshold for a long stretch."""

    job: Job
    start: datetime
    end: datetime
    idle_hours: int
    wasted_gpu_hours: float


def _idle_hours(
    *, user: User, time_range: TimeRange, department: Department | None, idle_below_pct: float
) -> QuerySet[JobHour]:
    hours = scope_queryset(JobHour.objects.filter(hour__gte=time_range.start, hour__lt=time_range.end), user)
    if department is not None:
        hours = hours.filter(department=department)
    # A job without node placement has no samples: its busy time is unknown, not idle.
    placed = Job.nodes.through.objects.filter(job_id=OuterRef("job_id"))
    return hours.filter(
        Exists(placed), allocated_gpu_s__gt=0, busy_gpu_s__lt=F("allocated_gpu_s") * (idle_below_pct / 100.0)
    )


def idle_allocation_list(
    *,
    user: User,
    time_range: TimeRange,
    department: Department | None = None,
    min_hours: int = 2,
    idle_below_pct: float = 1.0,
    limit: int | None = None,
) -> list[IdleAllocation]:
    """Stretches of at least ``min_hours`` consecutive hours in which a job's GPUs were below
    ``idle_below_pct`` busy, with the GPU-hours they held meanwhile (wasted), largest first.

    The stretches are found in the database ("gaps and islands": consecutive hours of one job
    share ``epoch - row_number x 3600``), so a range with many idle job-hours costs one grouped
    query; ``efficiency.analysis.idle.find_idle_stretches`` is the plain-Python statement of the
    same rule, and tests/selectors checks that both agree.
    """
    stretches = idle_stretch_rows(
        user=user,
        time_range=time_range,
        department=department,
        min_hours=min_hours,
        idle_below_pct=idle_below_pct,
        limit=limit,
    )
    return idle_allocations_of(stretches)


def idle_stretch_rows(
    *,
    user: User,
    time_range: TimeRange,
    department: Department | None = None,
    min_hours: int = 2,
    idle_below_pct: float = 1.0,
    limit: int | None = None,
) -> list[tuple]:
    """The stretches of ``idle_allocation_list`` as read from the rollups: (job id, first and
    last hour as epoch seconds, hours, wasted GPU-seconds), largest first."""
    idle = _idle_hours(user=user, time_range=time_range, department=department, idle_below_pct=idle_below_pct)
    try:
        inner_sql, params = idle.values("job_id", "hour", "allocated_gpu_s").query.sql_with_params()
    except EmptyResultSet:  # the user may see no department at all
        return []
    epoch = _epoch_sql()
    sql = (
        "SELECT job_id, MIN(ts), MAX(ts), COUNT(*), SUM(allocated_gpu_s) FROM ("  # noqa: S608 -- no user text
        f"  SELECT job_id, allocated_gpu_s, {epoch} AS ts,"
        f"    {epoch} - 3600 * ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY hour) AS island"
        f"  FROM ({inner_sql}) idle_hours"
        ") numbered GROUP BY job_id, island HAVING COUNT(*) >= %s"
        " ORDER BY SUM(allocated_gpu_s) DESC, job_id, MIN(ts)"
    )
    arguments = [*params, min_hours]
    if limit is not None:
        sql += " LIMIT %s"
        arguments.append(limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, arguments)
        return [tuple(row) for row in cursor.fetchall()]


def idle_allocations_of(stretches: list[tuple]) -> list[IdleAllocation]:
    """The stretches of ``idle_stretch_rows`` with their jobs, read now."""
    jobs = Job.objects.select_related("department").in_bulk({row[0] for row in stretches})
    return [
        IdleAllocation(
            jobs[job_id],
            datetime.fromtimestamp(float(first), tz=UTC),
            datetime.fromtimestamp(float(last), tz=UTC) + timedelta(hours=1),
            hours,
            wasted / 3600,
        )
        for job_id, first, last, hours, wasted in stretches
        if job_id in jobs
    ]


def idle_stretches_reference(
    *, user: User, time_range: TimeRange, department: Department | None = None, min_hours: int = 2
) -> list[IdleStretch]:
    """The same stretches found in Python (``find_idle_stretches``): the reference for tests."""
    idle = _idle_hours(user=user, time_range=time_range, department=department, idle_below_pct=1.0)
    rows = [
        IdleHour(job_id, hour, allocated)
        for job_id, hour, allocated in idle.values_list("job", "hour", "allocated_gpu_s").order_by(
            "job", "hour"
        )
    ]
    return find_idle_stretches(rows, min_hours=min_hours)


def node_class_counts(
    *, user: User, cluster: Cluster | None = None
) -> tuple[dict[str, int], datetime | None]:
    """Nodes per class in the latest classification cycle (of one cluster, or of all), and that
    cycle's end."""
    rows = scope_queryset(NodeClassification.objects.all(), user)
    if cluster is not None:
        rows = rows.filter(node__cluster=cluster)
    latest = rows.order_by("-cycle_end").values_list("cycle_end", flat=True).first()
    if latest is None:
        return {}, None
    counts: dict[str, int] = defaultdict(int)
    for node_class in rows.filter(cycle_end=latest).values_list("node_class", flat=True):
        counts[node_class] += 1
    return dict(counts), latest


def shared_pool_usage(
    *, user: User, time_range: TimeRange, cluster: Cluster | None = None
) -> UsageTotals | None:
    """The nodes no department owns (the shared pool), as a whole: their capacity and coverage,
    and what any job held and used on them, from their hourly rollups. ``None`` for a user who
    does not see every department (a head's view has no shared pool row)."""
    if not sees_all_departments(user):
        return None
    rows = _in_cluster(NodeHour.objects.between(time_range.start, time_range.end), cluster)
    return _totals(rows.filter(owner_department__isnull=True).aggregate(**_NODE_SUMS))


def node_usage(*, node: Node, time_range: TimeRange) -> UsageTotals:
    return _totals(
        NodeHour.objects.filter(node=node).between(time_range.start, time_range.end).aggregate(**_NODE_SUMS)
    )


def node_usage_series(*, node: Node, time_range: TimeRange) -> list[UsagePoint]:
    return _series(NodeHour.objects.filter(node=node).between(time_range.start, time_range.end), time_range)


def node_classification_history(*, node: Node) -> QuerySet[NodeClassification]:
    return NodeClassification.objects.filter(node=node).order_by("-cycle_end")[:20]


@dataclass(frozen=True)
class GpuUsage:
    index: int
    utilization_pct: float | None
    samples: int


def _own_job_windows(*, user: User, node: Node, time_range: TimeRange) -> Q | None:
    """Samples a department head may see on ``node``: all of them (None) on a node their
    departments own; on a shared node only those taken while one of their jobs ran on it,
    since the samples do not say whose job used a GPU (an empty Q matches nothing)."""
    ids = visible_department_ids(user)
    if ids is None or node.owner_department_id in ids:
        return None
    windows = Q(pk__in=[])
    jobs = (
        scope_queryset(Job.objects.filter(nodes=node), user)
        .filter(started_at__lt=time_range.end)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=time_range.start))
        .values_list("started_at", "ended_at")
    )
    for started_at, ended_at in jobs:
        windows |= Q(ts__gte=started_at, ts__lt=ended_at) if ended_at else Q(ts__gte=started_at)
    return windows


def node_gpu_usage(*, user: User, node: Node, time_range: TimeRange) -> list[GpuUsage]:
    """Average activity per GPU from raw samples (only within the raw retention window).

    A department head sees, on a node another department owns or the shared pool, only the
    activity while their own jobs ran on it.
    """
    activity = Coalesce("gr_engine_active_pct", "util_pct")
    samples = GpuSample.objects.filter(node=node, ts__gte=time_range.start, ts__lt=time_range.end)
    windows = _own_job_windows(user=user, node=node, time_range=time_range)
    if windows is not None:
        samples = samples.filter(windows)
    # Each sample weighs the time it stands for (``interval_s``), as in the rollups, so a GPU's
    # figure agrees with the node's Utilization card over the same range.
    measured = Q(gr_engine_active_pct__isnull=False) | Q(util_pct__isnull=False)
    rows = (
        samples.values("gpu_index")
        .annotate(
            busy=Sum(Cast(activity, FloatField()) * F("interval_s"), output_field=FloatField()),
            covered=Sum("interval_s", filter=measured),
            samples=Count("*"),
        )
        .order_by("gpu_index")
    )
    found = {
        row["gpu_index"]: {**row, "activity": row["busy"] / row["covered"] if row["covered"] else None}
        for row in rows
    }
    return [
        GpuUsage(
            index,
            None if found.get(index, {}).get("activity") is None else round(found[index]["activity"], 1),
            found.get(index, {}).get("samples") or 0,
        )
        for index in range(node.gpu_count)
    ]


@dataclass(frozen=True)
class JobSeries:
    times: list[datetime]
    activity_pct: list[float | None]
    sm_active_pct: list[float | None]
    fb_used_mib: list[float | None]
    power_w: list[float | None]


def job_metric_series(*, job: Job, max_points: int = 400) -> JobSeries:
    """A job's GPUs over its run: mean activity, SM active, memory and power per time step.

    Read from raw samples of the job's nodes while it ran (a node shared with other jobs
    mixes them in: exact for whole-node jobs). Empty once the samples passed retention.
    """
    if job.started_at is None:
        return JobSeries([], [], [], [], [])
    end = job.ended_at or timezone.now()
    seconds = max((end - job.started_at).total_seconds(), 1)
    step = max(60, int(seconds / max_points) // 60 * 60)
    samples = GpuSample.objects.filter(
        Q(node__in=job.nodes.all()), ts__gte=job.started_at, ts__lt=end
    ).values_list("ts", "gr_engine_active_pct", "util_pct", "sm_active_pct", "fb_used_mib", "power_w")
    buckets: dict[datetime, list[list[float]]] = defaultdict(lambda: [[], [], [], []])
    for ts, gr, util, sm, fb, power in samples.iterator(chunk_size=5000):
        bucket = datetime.fromtimestamp(ts.timestamp() // step * step, tz=ts.tzinfo)
        values = buckets[bucket]
        for position, value in enumerate((gr if gr is not None else util, sm, fb, power)):
            if value is not None:
                values[position].append(value)
    times = sorted(buckets)

    def mean(position: int) -> list[float | None]:
        return [
            round(sum(buckets[t][position]) / len(buckets[t][position]), 1) if buckets[t][position] else None
            for t in times
        ]

    return JobSeries(times, mean(0), mean(1), mean(2), mean(3))
