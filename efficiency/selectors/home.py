"""What the landing page shows, per role."""

from dataclasses import dataclass

from django.db.models import Count, Q, Sum

from efficiency.choices import JobState
from efficiency.models import Department, Job
from efficiency.scoping import User, scope_queryset
from efficiency.selectors.inventory import owned_node_list


@dataclass(frozen=True)
class HomeSummary:
    department_count: int
    node_count: int
    gpu_count: int
    shared_pool_gpu_count: int
    running_job_count: int
    running_gpu_count: int
    pending_job_count: int
    pending_gpu_count: int


def home_summary(*, user: User) -> HomeSummary:
    """Headline counts within the user's scope (GPUs: in-service nodes the scope owns)."""
    node_totals = owned_node_list(user=user).aggregate(
        nodes=Count("pk"),
        gpus=Sum("gpu_count", default=0),
        shared=Sum("gpu_count", filter=Q(owner_department__isnull=True), default=0),
    )
    job_totals = scope_queryset(Job.objects.all(), user).aggregate(
        running=Count("pk", filter=Q(state=JobState.RUNNING)),
        running_gpus=Sum("gpu_count", filter=Q(state=JobState.RUNNING), default=0),
        pending=Count("pk", filter=Q(state=JobState.PENDING)),
        pending_gpus=Sum("gpu_count", filter=Q(state=JobState.PENDING), default=0),
    )
    return HomeSummary(
        department_count=scope_queryset(Department.objects.active(), user).count(),
        node_count=node_totals["nodes"],
        gpu_count=node_totals["gpus"],
        shared_pool_gpu_count=node_totals["shared"],
        running_job_count=job_totals["running"],
        running_gpu_count=job_totals["running_gpus"],
        pending_job_count=job_totals["pending"],
        pending_gpu_count=job_totals["pending_gpus"],
    )
