"""Quota planning as the pages, exports, API and planning services read it.

Demand and use per department come from the jobs themselves (GPUs, GPU model, submit, start
and end), so that a waiting job counts as demand and a job's GPU model decides which capacity
it draws on.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Exists, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from efficiency.analysis.quotas import GpuInterval, Key, hourly_mean_gpus, resolve_gpu_model, shared_pool_gpus
from efficiency.analysis.stats import percentile
from efficiency.models import (
    CapacityAlert,
    Cluster,
    Department,
    Job,
    JobHour,
    Node,
    Quota,
    QuotaBacktest,
    QuotaCycle,
    QuotaEvent,
    QuotaObjection,
)
from efficiency.models.jobs import MILLI_PER_GPU
from efficiency.permissions import headed_departments
from efficiency.scoping import User, scope_queryset


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job as quota planning sees it; times are epoch seconds, ``department`` a code."""

    department: str
    gpu_model: str
    gpus: float  # the job's GPU share: 0.5 for half of a shared GPU
    submit_s: float
    start_s: float | None
    end_s: float | None
    busy_fraction: float | None

    @property
    def key(self) -> Key:
        return (self.department, self.gpu_model)


def default_cluster(slug: str | None = None) -> Cluster | None:
    """The cluster a page is about: the one asked for, else the first with nodes."""
    clusters = Cluster.objects.order_by("name")
    if slug:
        return clusters.filter(slug=slug).first()
    return clusters.filter(nodes__isnull=False).distinct().first() or clusters.first()


def cluster_capacity(*, cluster: Cluster) -> dict[str, int]:
    """GPUs in service per GPU model (isolated and draining nodes still count: they return)."""
    rows = (
        Node.objects.in_service().filter(cluster=cluster).values("gpu_model").annotate(gpus=Sum("gpu_count"))
    )
    return {row["gpu_model"]: row["gpus"] for row in rows.order_by("gpu_model")}


def owned_gpus(*, cluster: Cluster) -> dict[Key, int]:
    """The fixed partition: GPUs each department owns, per GPU model."""
    rows = (
        Node.objects.in_service()
        .filter(cluster=cluster, owner_department__isnull=False)
        .values("owner_department__code", "gpu_model")
        .annotate(gpus=Sum("gpu_count"))
    )
    return {(row["owner_department__code"], row["gpu_model"]): row["gpus"] for row in rows}


def quota_job_rows(*, cluster: Cluster, start: datetime, end: datetime) -> list[JobRow]:
    """Jobs of ``cluster`` that asked for or held GPUs at some moment of [start, end).

    A job's GPU model is the inventory's name for what the scheduler reported; a job that did
    not say gets its department's main GPU model (else the cluster's).
    """
    capacity = cluster_capacity(cluster=cluster)
    models = list(capacity)
    cluster_model = max(capacity, key=capacity.get) if capacity else ""
    department_model: dict[str, str] = {}
    for (code, model), _gpus in sorted(owned_gpus(cluster=cluster).items(), key=lambda kv: kv[1]):
        department_model[code] = model  # the biggest last
    jobs = (
        Job.objects.filter(cluster=cluster, submitted_at__lt=end, gpu_milli__gt=0)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
        .values_list(
            "id", "department__code", "gpu_model", "gpu_milli", "submitted_at", "started_at", "ended_at"
        )
    )
    busy = {
        row["job_id"]: row["busy"] / row["allocated"]
        for row in JobHour.objects.filter(job__cluster=cluster, hour__gte=start, hour__lt=end)
        # without node placement no samples say how busy a job was: unknown, not idle
        .filter(Exists(Job.nodes.through.objects.filter(job_id=OuterRef("job_id"))))
        .values("job_id")
        .annotate(allocated=Sum("allocated_gpu_s"), busy=Sum("busy_gpu_s"))
        .order_by()
        if row["allocated"]
    }
    rows = []
    for job_id, code, model, milli, submitted, started, ended in jobs.iterator(chunk_size=5000):
        code = code or ""
        rows.append(
            JobRow(
                department=code,
                gpu_model=resolve_gpu_model(model, models, department_model.get(code, cluster_model)),
                gpus=milli / MILLI_PER_GPU,
                submit_s=submitted.timestamp(),
                start_s=started.timestamp() if started else None,
                end_s=ended.timestamp() if ended else None,
                busy_fraction=busy.get(job_id),
            )
        )
    return rows


def hourly_demand(rows: list[JobRow], *, start: datetime, end: datetime) -> dict[Key, list[float]]:
    """GPUs each department's jobs held or waited for, hour by hour (mean per hour)."""
    start_s, end_s = start.timestamp(), end.timestamp()
    intervals = (
        GpuInterval(row.key, row.gpus, row.submit_s, row.end_s if row.end_s is not None else end_s)
        for row in rows
        if row.department
    )
    return hourly_mean_gpus(intervals, start_s=start_s, end_s=end_s)


def hourly_use(rows: list[JobRow], *, start: datetime, end: datetime) -> dict[Key, list[float]]:
    """GPUs each department's jobs held, hour by hour (mean per hour)."""
    start_s, end_s = start.timestamp(), end.timestamp()
    intervals = (
        GpuInterval(row.key, row.gpus, row.start_s, row.end_s if row.end_s is not None else end_s)
        for row in rows
        if row.start_s is not None
    )
    return hourly_mean_gpus(intervals, start_s=start_s, end_s=end_s)


def quota_cycle_in_force(*, cluster: Cluster, at: datetime) -> QuotaCycle | None:
    """The latest approved cycle that has begun by ``at`` (its quotas stay until the next one)."""
    return QuotaCycle.objects.approved().filter(cluster=cluster, start__lte=at).order_by("-start").first()


def quota_cycle_list(*, user: User, cluster: Cluster | None) -> QuerySet[QuotaCycle]:
    """Every cycle of a cluster, newest first, with the guaranteed GPUs the user may see.

    Each cycle carries ``every_quota``: every department's quotas, prefetched in one query for
    the shared pool (``cycle_shared_pool``), which is cluster-wide and shown to every role; only
    the pool's size leaves the selector, never another department's quota.
    """
    if cluster is None:
        return QuotaCycle.objects.none()
    # Subqueries, not joins: summing quotas over a join with objections would count each
    # quota once per objection.
    quotas = (
        scope_queryset(Quota.objects.filter(cycle=OuterRef("pk")), user)
        .order_by()
        .values("cycle")
        .annotate(total=Sum("guaranteed_gpus"))
        .values("total")
    )
    objections = (
        scope_queryset(QuotaObjection.objects.filter(cycle=OuterRef("pk"), responded_at__isnull=True), user)
        .order_by()
        .values("cycle")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return (
        scope_queryset(QuotaCycle.objects.filter(cluster=cluster), user)
        .select_related("cluster", "approved_by")
        .prefetch_related(
            Prefetch("quotas", queryset=Quota.objects.select_related("department"), to_attr="every_quota")
        )
        .annotate(
            guaranteed_gpus=Subquery(quotas, output_field=IntegerField()),
            open_objections=Coalesce(Subquery(objections, output_field=IntegerField()), 0),
        )
        .order_by("-start")
    )


@dataclass(frozen=True)
class QuotaHistory:
    """Guarantees over a run of cycles (oldest first), for the history chart."""

    cycles: list[QuotaCycle]
    guaranteed_gpus: dict[str, list[float]]  # department name -> per cycle, the ones the user may see
    shared_pool_gpus: list[int]  # per cycle, the whole cluster's
    department_order: list[str]  # every department's name in one fixed order (chart colours)


def quota_history(*, user: User, cycles: list[QuotaCycle]) -> QuotaHistory:
    """The guaranteed GPUs per department and the shared pool of each of ``cycles`` (two queries,
    however many cycles, when they come from ``quota_cycle_list``)."""
    index = {cycle.pk: i for i, cycle in enumerate(cycles)}
    per_department: dict[str, list[float]] = {}
    quotas = scope_queryset(Quota.objects.filter(cycle__in=cycles).select_related("department"), user)
    for quota in quotas:
        row = per_department.setdefault(quota.department.name, [0.0] * len(cycles))
        row[index[quota.cycle_id]] += quota.guaranteed_gpus
    # Colours follow every department, not the visible ones, so a department keeps its colour.
    every_department = Department.objects.order_by("name", "code").values_list("name", flat=True)
    return QuotaHistory(
        cycles=cycles,
        guaranteed_gpus=dict(sorted(per_department.items())),
        shared_pool_gpus=[
            sum(cycle_shared_pool(cycle, getattr(cycle, "every_quota", None)).values()) for cycle in cycles
        ],
        department_order=list(every_department),
    )


def quota_cycle_get(*, user: User, pk: int) -> QuotaCycle:
    """A cycle with the quotas, objections and events the user may see, prefetched."""
    return (
        scope_queryset(QuotaCycle.objects.select_related("cluster", "approved_by", "created_by"), user)
        .prefetch_related(
            Prefetch(
                "quotas",
                queryset=scope_queryset(Quota.objects.select_related("department"), user).order_by(
                    "department__name", "gpu_model"
                ),
            ),
            Prefetch(
                "objections",
                queryset=scope_queryset(
                    QuotaObjection.objects.select_related("department", "author", "responded_by"), user
                ),
            ),
            Prefetch(
                "events",
                queryset=scope_queryset(QuotaEvent.objects.select_related("department", "actor"), user),
            ),
        )
        .get(pk=pk)
    )


def quota_list(*, user: User) -> QuerySet[Quota]:
    """Every quota the user may see, with its cycle and department."""
    return scope_queryset(Quota.objects.select_related("cycle", "department"), user)


def quota_get(*, user: User, pk: int) -> Quota:
    return quota_list(user=user).get(pk=pk)


def quota_objection_list(*, user: User) -> QuerySet[QuotaObjection]:
    """Every objection the user may see, with its cycle and department."""
    return scope_queryset(QuotaObjection.objects.select_related("cycle", "department"), user)


def quota_objection_get(*, user: User, pk: int) -> QuotaObjection:
    return quota_objection_list(user=user).get(pk=pk)


def quota_objection_departments(*, user: User, cycle: QuotaCycle) -> QuerySet[Department]:
    """The departments the user may object for in ``cycle``: those they head with a quota in it."""
    return headed_departments(user).filter(quotas__cycle=cycle).distinct()


def cycle_shared_pool(cycle: QuotaCycle, quotas: list[Quota] | None = None) -> dict[str, int]:
    """The shared pool per GPU model: capacity less *every* department's guarantee (not only
    the ones a user may see), from ``quotas`` when given, else from the database."""
    if quotas is None:
        quotas = list(Quota.objects.filter(cycle_id=cycle.pk).select_related("department"))
    guaranteed: dict[Key, int] = defaultdict(int)
    for quota in quotas:
        guaranteed[(quota.department.code, quota.gpu_model)] += quota.guaranteed_gpus
    return shared_pool_gpus(cycle.capacity, guaranteed)


@dataclass(frozen=True)
class QuotaUse:
    """How a department used its guarantee so far in a cycle (mean GPUs over the hours)."""

    quota: Quota
    hours: int
    mean_used_gpus: float
    p95_used_gpus: float
    mean_borrowed_gpus: float  # above the guarantee, from the shared pool

    @property
    def guarantee_used_share(self) -> float | None:
        if not self.quota.guaranteed_gpus:
            return None
        return (self.mean_used_gpus - self.mean_borrowed_gpus) / self.quota.guaranteed_gpus


@dataclass(frozen=True)
class QuotaOverview:
    cycle: QuotaCycle | None
    uses: list[QuotaUse]
    shared_pool: dict[str, int]
    shared_pool_borrowed: dict[str, float]  # mean GPUs borrowed per model (all departments)
    since: datetime | None
    until: datetime | None
    next_cycle: QuotaCycle | None
    alerts: list[CapacityAlert]


def quota_overview(*, user: User, cluster: Cluster, now: datetime) -> QuotaOverview:
    """The cycle in force: guaranteed vs used vs borrowed per department, so far this cycle."""
    cycle = quota_cycle_in_force(cluster=cluster, at=now)
    after = cycle.start if cycle is not None else now
    next_cycle = (
        scope_queryset(QuotaCycle.objects.filter(cluster=cluster, start__gt=after), user)
        .order_by("start")
        .first()
    )
    alerts = list(
        scope_queryset(CapacityAlert.objects.filter(cluster=cluster, resolved_at__isnull=True), user)
    )
    if cycle is None:
        return QuotaOverview(None, [], {}, {}, None, None, next_cycle, alerts)
    all_quotas = list(cycle.quotas.select_related("department"))
    visible_ids = set(scope_queryset(Quota.objects.filter(cycle=cycle), user).values_list("pk", flat=True))
    # The cycle in force is the latest approved one that has begun: its quotas hold until now,
    # past its planned end too when no newer cycle was approved in time.
    since, until = cycle.start, max(now, cycle.start)
    use = hourly_use(quota_job_rows(cluster=cluster, start=since, end=until), start=since, end=until)
    borrowed_total: dict[str, float] = defaultdict(float)
    uses = []
    for quota in all_quotas:
        series = use.get((quota.department.code, quota.gpu_model), [])
        borrowed = [max(0.0, gpus - quota.guaranteed_gpus) for gpus in series]
        hours = len(series)
        mean_borrowed = sum(borrowed) / hours if hours else 0.0
        borrowed_total[quota.gpu_model] += mean_borrowed
        if quota.pk in visible_ids:
            uses.append(
                QuotaUse(
                    quota=quota,
                    hours=hours,
                    mean_used_gpus=sum(series) / hours if hours else 0.0,
                    p95_used_gpus=percentile(series, 95) or 0.0,
                    mean_borrowed_gpus=mean_borrowed,
                )
            )
    return QuotaOverview(
        cycle=cycle,
        uses=uses,
        shared_pool=cycle_shared_pool(cycle, all_quotas),
        shared_pool_borrowed=dict(borrowed_total),
        since=since,
        until=until,
        next_cycle=next_cycle,
        alerts=alerts,
    )


def quota_backtest_latest(*, user: User, cycle: QuotaCycle) -> QuotaBacktest | None:
    return scope_queryset(QuotaBacktest.objects.filter(cycle=cycle), user).order_by("-computed_at").first()


def capacity_alert_list(*, user: User, open_only: bool = True) -> QuerySet[CapacityAlert]:
    alerts = scope_queryset(CapacityAlert.objects.select_related("cluster"), user)
    return alerts.filter(resolved_at__isnull=True) if open_only else alerts
