"""Departments, nodes and GPUs as a user may see them."""

from dataclasses import dataclass

from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from efficiency.choices import JobState
from efficiency.models import Department, Job, Node
from efficiency.scoping import User, scope_queryset, visible_department_ids


def department_names(*, user: User) -> dict[str, str]:
    """The names of the departments the user may see, by code (a backtest's queues are codes)."""
    return dict(scope_queryset(Department.objects.all(), user).values_list("code", "name"))


def department_list(*, user: User) -> QuerySet[Department]:
    """Departments the user may see, with owned nodes/GPUs and running jobs/GPUs."""
    owned = (
        Node.objects.in_service()
        .filter(owner_department=OuterRef("pk"))
        .order_by()
        .values("owner_department")
    )
    running = (
        Job.objects.filter(department=OuterRef("pk"), state=JobState.RUNNING)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=timezone.now()))  # not ended, whatever its state
        .order_by()
        .values("department")
    )
    return scope_queryset(Department.objects.all(), user).annotate(
        node_count=Coalesce(
            Subquery(owned.annotate(n=Count("pk")).values("n"), output_field=IntegerField()), 0
        ),
        gpu_count=Coalesce(
            Subquery(owned.annotate(n=Sum("gpu_count")).values("n"), output_field=IntegerField()), 0
        ),
        running_job_count=Coalesce(
            Subquery(running.annotate(n=Count("pk")).values("n"), output_field=IntegerField()), 0
        ),
        running_gpu_count=Coalesce(
            Subquery(running.annotate(n=Sum("gpu_count")).values("n"), output_field=IntegerField()),
            0,
        ),
    )


def department_get(*, user: User, code: str) -> Department:
    """One department by code; raises ``Department.DoesNotExist`` outside the user's scope."""
    return department_list(user=user).get(code=code)


def node_list(*, user: User) -> QuerySet[Node]:
    return scope_queryset(Node.objects.all(), user).select_related("cluster", "owner_department")


def node_get(*, user: User, pk: int) -> Node:
    return node_list(user=user).prefetch_related("gpus").get(pk=pk)


def owned_node_list(*, user: User) -> QuerySet[Node]:
    """In-service nodes owned by the departments the user sees (all, shared pool included, for
    those who see every department). Not the node scope: a head also sees nodes their jobs ran
    on, but owns only their own."""
    nodes = Node.objects.in_service()
    ids = visible_department_ids(user)
    return nodes if ids is None else nodes.filter(owner_department_id__in=ids)


@dataclass(frozen=True)
class OwnershipRow:
    """GPUs of one model owned by one department (``department`` None: the shared pool)."""

    department: str | None
    gpu_model: str
    gpu_count: int


def gpu_ownership_summary(*, user: User) -> list[OwnershipRow]:
    """In-service GPUs per owner and GPU model, within the user's scope.

    Department heads see their own departments only; the shared pool appears for roles that
    see every department.
    """
    nodes = owned_node_list(user=user)
    rows = (
        nodes.values("owner_department__name", "gpu_model")
        .annotate(gpus=Sum("gpu_count"))
        .order_by("owner_department__name", "gpu_model")
    )
    return [
        OwnershipRow(
            department=row["owner_department__name"],
            gpu_model=row["gpu_model"],
            gpu_count=row["gpus"],
        )
        for row in rows
    ]
