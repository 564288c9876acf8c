"""The queue as a department head sees it: pending jobs, how long they have waited, and why.

Why a job waits is decided by ``efficiency.analysis.queue.classify_queue``, each department's
queue per GPU model oldest first, from what this module reads: the scheduler's own reason when
the record carries one, else the department's use of the job's GPU model against the quotas in
force, the same way the quota backtest schedules (``efficiency.analysis.backtest``): a
department may use its guarantee G, and borrow from the shared pool (capacity less every
guarantee) up to its borrowing limit. Without an approved cycle in force, the fixed partition
applies: G is what the department owns, borrowing unlimited. The shared pool is sized from the
GPUs in service, as on the quota pages (isolated and draining nodes return); but a GPU is only
free now if it is on an active node and no running job holds it."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.models import F, Sum

from efficiency.analysis.queue import (
    PendingJob,
    QueueLimits,
    QueueTotals,
    WaitingJob,
    classify_queue,
    summarize_queue,
)
from efficiency.analysis.quotas import Key, resolve_gpu_model
from efficiency.analysis.stats import percentile
from efficiency.choices import JobState, NodeState
from efficiency.models import Cluster, Department, Job, Node, Quota
from efficiency.models.functions import EpochSeconds
from efficiency.models.jobs import MILLI_PER_GPU, not_ended
from efficiency.scoping import User, scope_queryset
from efficiency.selectors.quotas import cluster_capacity, owned_gpus, quota_cycle_in_force
from efficiency.timeranges import TimeRange


@dataclass(frozen=True)
class QueuedJob:
    """A pending job, how long it has waited so far, and why (a key of ``WAIT_REASONS``)."""

    job: Job
    gpu_model: str  # the inventory's name of the model it waits for
    wait_s: float
    reason: str
    scheduler_reason: str  # as the scheduler wrote it; "" when it gave none
    limits: QueueLimits  # of its department and GPU model, now
    ahead_gpus: float  # asked for by the jobs ahead of it in that queue


@dataclass(frozen=True)
class Queue:
    """The pending jobs in a scope: totals, totals per department id, and the longest waits."""

    totals: QueueTotals = field(default_factory=QueueTotals)
    by_department: dict[int, QueueTotals] = field(default_factory=dict)
    jobs: list[QueuedJob] = field(default_factory=list)  # longest wait first, up to the limit


class _ClusterLimits:
    """Guarantees, borrowing limits and use per (department code, GPU model) in one cluster now."""

    def __init__(self, cluster: Cluster, *, now: datetime, running: list[tuple[str, str, float]]):
        capacity = cluster_capacity(cluster=cluster)
        owned = owned_gpus(cluster=cluster)
        # As quota planning resolves a job's model: a blank or unknown one is its department's
        # main model, else the cluster's.
        self.models = list(capacity)
        self.cluster_model = max(capacity, key=capacity.get) if capacity else ""
        self.department_model: dict[str, str] = {}
        for (code, model), _gpus in sorted(owned.items(), key=lambda kv: kv[1]):
            self.department_model[code] = model
        self.cycle = quota_cycle_in_force(cluster=cluster, at=now)
        self.borrowing: dict[Key, int | None] = {}
        if self.cycle is None:
            self.guaranteed: dict[Key, int] = dict(owned)
        else:
            self.guaranteed = {}
            for code, model, gpus, limit in Quota.objects.filter(cycle=self.cycle).values_list(
                "department__code", "gpu_model", "guaranteed_gpus", "borrowing_limit_gpus"
            ):
                self.guaranteed[(code, model)] = gpus
                self.borrowing[(code, model)] = limit
        self.used: dict[Key, float] = defaultdict(float)
        for code, model, gpus in running:
            self.used[(code, self.model_of(model, code))] += gpus
        borrowed: dict[str, float] = defaultdict(float)
        for (code, model), gpus in self.used.items():
            borrowed[model] += max(0.0, gpus - self.guaranteed.get((code, model), 0))
        pool: dict[str, float] = dict(capacity)
        for (_code, model), gpus in self.guaranteed.items():
            pool[model] = pool.get(model, 0) - gpus
        self.pool_free = {model: max(0.0, gpus - borrowed[model]) for model, gpus in pool.items()}
        # Whatever the quotas allow, only GPUs of active nodes that no job holds can be given.
        held: dict[str, float] = defaultdict(float)
        for (_code, model), gpus in self.used.items():
            held[model] += gpus
        active = (
            Node.objects.filter(cluster=cluster, state=NodeState.ACTIVE)
            .values_list("gpu_model")
            .annotate(gpus=Sum("gpu_count"))
            .order_by()
        )
        self.unheld = {model: max(0.0, gpus - held[model]) for model, gpus in active}

    def model_of(self, job_model: str, code: str) -> str:
        return resolve_gpu_model(job_model, self.models, self.department_model.get(code, self.cluster_model))

    def limits(self, code: str, model: str) -> QueueLimits:
        key = (code, model)
        guaranteed = self.guaranteed.get(key, 0)
        borrowing = self.borrowing.get(key)
        used = self.used.get(key, 0.0)
        return QueueLimits(
            used_gpus=used,
            limit_gpus=None if borrowing is None else guaranteed + borrowing,
            free_gpus=min(
                max(0.0, guaranteed - used) + self.pool_free.get(model, 0.0), self.unheld.get(model, 0.0)
            ),
        )


def queue_summary(
    *, user: User, now: datetime, department: Department | None = None, limit: int | None = 20
) -> Queue:
    """Pending jobs the user may see (of one department, when given): count, GPUs asked for,
    the longest wait so far, and why each waits, in total, per department and per reason.

    The queries do not grow with the number of jobs or nodes, only with the clusters that have
    pending jobs in scope (five each).
    """
    # A job whose end time has passed is not waiting, whatever state a source left on it.
    pending = scope_queryset(Job.objects.filter(not_ended(now), state=JobState.PENDING), user)
    if department is not None:
        pending = pending.filter(department=department)
    pending = list(pending.select_related("department").order_by("submitted_at", "pk"))
    if not pending:
        return Queue()
    cluster_ids = {job.cluster_id for job in pending}
    running: dict[int, list[tuple[str, str, float]]] = defaultdict(list)
    # Every department's running jobs, not only the user's: the shared pool is shared. Only the
    # free GPUs that result are shown. What a job holds is its GPU share (0.5: half of a shared GPU).
    for cluster_id, code, model, milli in (
        Job.objects.filter(not_ended(now), state=JobState.RUNNING, cluster_id__in=cluster_ids)
        .values_list("cluster_id", "department__code", "gpu_model")
        .annotate(milli=Sum("gpu_milli"))
        .order_by()
    ):
        running[cluster_id].append((code or "", model, (milli or 0) / MILLI_PER_GPU))
    clusters = {
        cluster.pk: _ClusterLimits(cluster, now=now, running=running[cluster.pk])
        for cluster in Cluster.objects.filter(pk__in=cluster_ids)
    }
    entries, limits = [], {}
    for job in pending:
        code = job.department.code if job.department else ""
        cluster = clusters[job.cluster_id]
        key = (job.cluster_id, code, cluster.model_of(job.gpu_model, code))
        if key not in limits:
            limits[key] = cluster.limits(code, key[2])
        reason = job.config.get("pending_reason") if isinstance(job.config, dict) else None
        entries.append(PendingJob(key, job.gpus, str(reason or "")))
    queued = [
        QueuedJob(
            job=job,
            gpu_model=entry.queue[2],
            wait_s=max(0.0, (now - job.submitted_at).total_seconds()),
            reason=wait.reason,
            scheduler_reason="" if entry.scheduler_reason == "None" else entry.scheduler_reason,
            limits=wait.limits,
            ahead_gpus=wait.ahead_gpus,
        )
        for job, entry, wait in zip(pending, entries, classify_queue(entries, limits), strict=True)
    ]
    per_department: dict[int, list[WaitingJob]] = defaultdict(list)
    for item in queued:
        per_department[item.job.department_id].append(
            WaitingJob(item.job.gpu_count, item.wait_s, item.reason)
        )
    return Queue(
        totals=summarize_queue(WaitingJob(q.job.gpu_count, q.wait_s, q.reason) for q in queued),
        by_department={pk: summarize_queue(jobs) for pk, jobs in per_department.items() if pk is not None},
        jobs=sorted(queued, key=lambda q: (-q.wait_s, q.job.pk))[:limit],
    )


@dataclass(frozen=True)
class WaitStats:
    """Waits (submit to start) of the jobs that started in a range."""

    jobs: int
    p50_s: float | None
    p95_s: float | None


def started_wait_stats(
    *, user: User, time_range: TimeRange, department: Department | None = None
) -> WaitStats:
    """P50 and P95 of the waits of jobs that started within the range (one query)."""
    jobs = scope_queryset(
        Job.objects.filter(started_at__gte=time_range.start, started_at__lt=time_range.end), user
    )
    if department is not None:
        jobs = jobs.filter(department=department)
    if connection.vendor == "postgresql":
        # The waits as one float a row, worked out by the database: reading two datetimes a row
        # was most of the department page's Python time over 90 days (thousands of jobs).
        rows = jobs.annotate(wait_s=EpochSeconds(F("started_at") - F("submitted_at")))
        waits = [max(0.0, wait) for wait in rows.values_list("wait_s", flat=True).order_by()]
    else:
        waits = [
            max(0.0, (started - submitted).total_seconds())
            for submitted, started in jobs.values_list("submitted_at", "started_at").order_by()
        ]
    return WaitStats(len(waits), percentile(waits, 50), percentile(waits, 95))
