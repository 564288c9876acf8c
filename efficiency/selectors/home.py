"""What the landing page shows, per role."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q, Sum

from efficiency.analysis.queue import QueueTotals
from efficiency.analysis.usage import UsageTotals, change_points
from efficiency.choices import IncidentStatus, JobState
from efficiency.gpu_shares import MILLI_PER_GPU, gpus_text
from efficiency.models import Department, Incident, Job
from efficiency.models.jobs import not_ended
from efficiency.scoping import User, scope_queryset
from efficiency.selectors.faults import incident_list
from efficiency.selectors.inventory import department_list, owned_node_list
from efficiency.selectors.queue import Queue, queue_summary
from efficiency.selectors.quotas import QuotaOverview, default_cluster, quota_overview
from efficiency.selectors.usage import (
    IdleAllocation,
    UsagePoint,
    cluster_usage,
    cluster_usage_series,
    department_usage_list,
    idle_allocation_list,
)
from efficiency.timeranges import TimeRange


@dataclass(frozen=True)
class HomeSummary:
    department_count: int
    node_count: int
    gpu_count: int
    shared_pool_gpu_count: int
    running_job_count: int
    running_gpu_milli: int  # thousandths of GPUs: a job on half a shared GPU holds 500
    pending_job_count: int
    pending_gpu_milli: int

    @property
    def running_gpu_count(self) -> float:
        return self.running_gpu_milli / MILLI_PER_GPU

    @property
    def pending_gpu_count(self) -> float:
        return self.pending_gpu_milli / MILLI_PER_GPU

    @property
    def running_gpus_text(self) -> str:
        return gpus_text(self.running_gpu_milli)

    @property
    def pending_gpus_text(self) -> str:
        return gpus_text(self.pending_gpu_milli)

    @property
    def running_gpus_plural(self) -> int:
        """A whole number for choosing "GPU" or "GPUs": 1 only for exactly one GPU."""
        return _plural_count(self.running_gpu_milli)

    @property
    def pending_gpus_plural(self) -> int:
        return _plural_count(self.pending_gpu_milli)


def _plural_count(milli: int) -> int:
    return milli // MILLI_PER_GPU if milli % MILLI_PER_GPU == 0 else 2


def home_summary(*, user: User) -> HomeSummary:
    """Headline counts within the user's scope (GPUs: in-service nodes the scope owns)."""
    node_totals = owned_node_list(user=user).aggregate(
        nodes=Count("pk"),
        gpus=Sum("gpu_count", default=0),
        shared=Sum("gpu_count", filter=Q(owner_department__isnull=True), default=0),
    )
    # A job whose end time has passed has ended, whatever state a source left on it.
    running_now = Q(state=JobState.RUNNING) & not_ended()
    pending_now = Q(state=JobState.PENDING) & not_ended()
    job_totals = scope_queryset(Job.objects.all(), user).aggregate(
        running=Count("pk", filter=running_now),
        running_gpus=Sum("gpu_milli", filter=running_now, default=0),
        pending=Count("pk", filter=pending_now),
        pending_gpus=Sum("gpu_milli", filter=pending_now, default=0),
    )
    return HomeSummary(
        department_count=scope_queryset(Department.objects.active(), user).count(),
        node_count=node_totals["nodes"],
        gpu_count=node_totals["gpus"],
        shared_pool_gpu_count=node_totals["shared"],
        running_job_count=job_totals["running"],
        running_gpu_milli=job_totals["running_gpus"],
        pending_job_count=job_totals["pending"],
        pending_gpu_milli=job_totals["pending_gpus"],
    )


@dataclass(frozen=True)
class HeadDepartmentRow:
    """One of the head's departments on their home: usage now and in the period before, queue."""

    department: Department  # annotated like ``department_list``
    totals: UsageTotals
    previous: UsageTotals
    queue: QueueTotals

    @property
    def utilization_change(self) -> float | None:
        return change_points(self.totals.utilization, self.previous.utilization)

    @property
    def allocation_change(self) -> float | None:
        return change_points(self.totals.allocation_rate, self.previous.allocation_rate)


@dataclass(frozen=True)
class HeadHome:
    """What a department head opens the portal for, every figure from the selector the page it
    links to uses: usage (``usage``), the queue (``queue``), the quotas in force (``quotas``),
    incidents (``faults``) and idle allocations (``usage``)."""

    totals: UsageTotals
    previous: UsageTotals
    series: list[UsagePoint]
    departments: list[HeadDepartmentRow]
    queue: Queue
    quota: QuotaOverview | None  # None: no cluster at all
    open_incidents: list[Incident]
    open_incident_count: int
    incidents_in_range: int
    idle_allocations: list[IdleAllocation]
    idle_allocation_count: int
    idle_wasted_gpu_hours: float

    @property
    def utilization_change(self) -> float | None:
        return change_points(self.totals.utilization, self.previous.utilization)

    @property
    def allocation_change(self) -> float | None:
        return change_points(self.totals.allocation_rate, self.previous.allocation_rate)


def head_home_summary(*, user: User, time_range: TimeRange, now: datetime, shown: int = 5) -> HeadHome:
    """The department head's home over ``time_range`` (and the period just before it).

    Utilization and allocation are the usage API's totals for the same range; the guarantee vs
    use is the quota page's; the incidents are the fault list's (scoped by ``scope_queryset``).
    The queries do not grow with the number of jobs or nodes.
    """
    previous_range = time_range.previous()
    usage_now = {
        row.department.pk: row.totals for row in department_usage_list(user=user, time_range=time_range)
    }
    usage_before = {
        row.department.pk: row.totals for row in department_usage_list(user=user, time_range=previous_range)
    }
    queue = queue_summary(user=user, now=now, limit=shown)
    cluster = default_cluster()
    incidents = incident_list(user=user).filter(status__in=[IncidentStatus.OPEN, IncidentStatus.RECOVERING])
    idle = idle_allocation_list(user=user, time_range=time_range)
    return HeadHome(
        totals=cluster_usage(user=user, time_range=time_range),
        previous=cluster_usage(user=user, time_range=previous_range),
        series=cluster_usage_series(user=user, time_range=time_range),
        departments=[
            HeadDepartmentRow(
                department=department,
                totals=usage_now.get(department.pk, UsageTotals()),
                previous=usage_before.get(department.pk, UsageTotals()),
                queue=queue.by_department.get(department.pk, QueueTotals()),
            )
            for department in department_list(user=user).order_by("name")
        ],
        queue=queue,
        quota=None if cluster is None else quota_overview(user=user, cluster=cluster, now=now),
        open_incidents=list(incidents[:shown]),
        open_incident_count=incidents.count(),
        incidents_in_range=incident_list(user=user, time_range=time_range).count(),
        idle_allocations=idle[:shown],
        idle_allocation_count=len(idle),
        idle_wasted_gpu_hours=sum(item.wasted_gpu_hours for item in idle),
    )
