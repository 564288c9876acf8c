"""Departments, nodes and GPUs as a user may see them."""

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db.models import (
    Case,
    Count,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Least, NullIf

from efficiency import days
from efficiency.analysis.class_schedule import first_classification_day
from efficiency.analysis.node_classes import NODE_CLASSES, UNKNOWN, ClassThresholds
from efficiency.choices import JobState, NodeState
from efficiency.models import Department, Job, Node, NodeClassification, NodeHour
from efficiency.models.jobs import not_ended
from efficiency.scoping import User, scope_queryset, visible_department_ids
from efficiency.timeranges import TimeRange
from efficiency.times import portal_day_zone


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
        .filter(not_ended())  # whatever its state
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
        # GPUs held, as a share: two jobs on halves of one shared GPU hold 1.
        running_gpu_count=Coalesce(
            Subquery(running.annotate(n=Sum("gpu_milli")).values("n"), output_field=IntegerField()),
            0,
        )
        / Value(1000.0),
    )


def department_get(*, user: User, code: str, counts: bool = True) -> Department:
    """One department by code; raises ``Department.DoesNotExist`` outside the user's scope.

    With ``counts`` (the department page's header), annotated as ``department_list`` annotates;
    the page's parts, which only need to know the department and that the user may see it, ask
    without: compiling the four counting subqueries was a tenth of such a part's server time.
    """
    if not counts:
        return scope_queryset(Department.objects.all(), user).get(code=code)
    return department_list(user=user).get(code=code)


def node_list(*, user: User) -> QuerySet[Node]:
    return scope_queryset(Node.objects.all(), user).select_related("cluster", "owner_department")


def department_nodes(*, user: User, department: Department) -> QuerySet[Node]:
    """The nodes a department owns, with only what the node table shows (``{% node_rows %}``):
    a node row carries six timestamps, each a timezone-aware datetime to build, that the table
    never shows."""
    return (
        node_list(user=user)
        .filter(owner_department=department)
        .only(
            "hostname",
            "gpu_model",
            "gpu_count",
            "rdma_capable",
            "fault_domain",
            "state",
            "cluster__name",
            "owner_department__name",
        )
    )


def node_get(*, user: User, pk: int) -> Node:
    return node_list(user=user).prefetch_related("gpus").get(pk=pk)


def _node_hour_sum(field: str, time_range: TimeRange) -> Subquery:
    """One node's sum of a NodeHour field over the range (NULL without rows), per outer node."""
    rows = (
        NodeHour.objects.filter(node=OuterRef("pk"), hour__gte=time_range.start, hour__lt=time_range.end)
        .order_by()
        .values("node")
        .annotate(total=Sum(field))
        .values("total")
    )
    return Subquery(rows, output_field=FloatField())


def _capped(field: str) -> Case:
    """A percentage capped at 100, NULL staying NULL (PostgreSQL's LEAST would skip the NULL)."""
    return Case(
        When(**{f"{field}__isnull": True}, then=Value(None)),
        default=Least(F(field), Value(100.0)),
        output_field=FloatField(),
    )


# The order "class" sorts in: the classes in the classifier's check order, then unknown, then
# nodes never classified.
_CLASS_RANK = Case(
    *(When(node_class=name, then=Value(rank)) for rank, name in enumerate((*NODE_CLASSES, UNKNOWN))),
    default=Value(len(NODE_CLASSES) + 1),
    output_field=IntegerField(),
)

# ``?sort=`` keys of the node list (page and API): the column, ascending; "-key" descends.
# Nodes without a value (never sampled, never classified) come last either way.
NODE_SORTS = {
    "hostname": "hostname",
    "cluster": "cluster__name",
    "gpu_model": "gpu_model",
    "gpus": "gpu_count",
    "state": "state",
    "owner": "owner_department__name",
    "fault_domain": "fault_domain",
    "class": "class_rank",
    "utilization": "util_pct",
    "coverage": "coverage_pct",
}


def node_usage_list(*, user: User, time_range: TimeRange, sort: str = "hostname") -> QuerySet[Node]:
    """Nodes the user may see, each with its latest class and its utilization and coverage over
    the range (the node page's figures: busy / sampled and sampled / available GPU-seconds of its
    hourly rollups), in one query however many nodes; ordered by ``sort`` (a ``NODE_SORTS`` key,
    "-" for descending; an unknown key raises ``ValueError``).

    ``util_pct`` is None where nothing was sampled in the range (unknown, not 0%).
    """
    descending = sort.startswith("-")
    key = sort.removeprefix("-")
    if key not in NODE_SORTS:
        raise ValueError(f"cannot sort nodes by {key!r}")
    sampled = _node_hour_sum("sampled_gpu_s", time_range)
    latest = NodeClassification.objects.filter(node=OuterRef("pk")).order_by("-cycle_end", "-pk")
    nodes = node_list(user=user).annotate(
        node_class=Subquery(latest.values("node_class")[:1]),
        class_covered_hours=Subquery(latest.values("covered_hours")[:1]),
        class_cycle_end=Subquery(latest.values("cycle_end")[:1]),
        util_raw=_node_hour_sum("busy_gpu_s", time_range) * 100.0 / NullIf(sampled, 0.0),
        coverage_raw=sampled * 100.0 / NullIf(_node_hour_sum("available_gpu_s", time_range), 0.0),
    )
    nodes = nodes.annotate(util_pct=_capped("util_raw"), coverage_pct=_capped("coverage_raw"))
    nodes = nodes.annotate(class_rank=_CLASS_RANK)
    column = F(NODE_SORTS[key])
    order = column.desc(nulls_last=True) if descending else column.asc(nulls_last=True)
    return nodes.order_by(order, "hostname", "pk")


@dataclass(frozen=True)
class ClassOutlook:
    """Why a node has no class yet, and when it will: ``covered_hours`` in the next cycle so far,
    of ``needed_hours``; ``expected_on`` None when no cycle can hold that many hours."""

    covered_hours: int
    needed_hours: int
    expected_on: date | None


def node_class_outlook(*, node: Node, now: datetime) -> ClassOutlook | None:
    """For a node whose latest class is "unknown" or that was never classified: how many covered
    hours it has towards the next cycle and the day the nightly run should first classify it,
    from its coverage so far (``efficiency.analysis.class_schedule``). None for a classified or
    retired node.
    """
    if node.state == NodeState.RETIRED:
        return None  # it gets no more samples, so no class is coming
    latest = NodeClassification.objects.filter(node=node).order_by("-cycle_end", "-pk").first()
    if latest is not None and latest.node_class != UNKNOWN:
        return None
    needed = int(
        settings.PORTAL_NODE_CLASS_THRESHOLDS.get("min_covered_hours", ClassThresholds.min_covered_hours)
    )
    cycle_days = settings.PORTAL_CYCLE_DAYS
    zone = portal_day_zone()
    since = now - timedelta(days=cycle_days + 1)
    hours = list(
        NodeHour.objects.filter(node=node, hour__gte=since, hour__lte=now)
        .filter(sampled_gpu_s__gt=0)
        .values_list("hour", flat=True)
    )
    expected = first_classification_day(
        hours, now=now, zone=zone, min_covered_hours=needed, cycle_days=cycle_days
    )
    # The covered hours the next nightly run will count (its cycle ends at the coming midnight).
    next_cycle_start = days.day_start_after(now, 1 - cycle_days, zone)
    covered = sum(1 for hour in hours if hour >= next_cycle_start)
    return ClassOutlook(covered_hours=covered, needed_hours=needed, expected_on=expected)


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


@dataclass(frozen=True)
class CycleClasses:
    """One cluster's classification of one cycle: nodes per class, the unknown ones with their
    covered hours, and the in-service nodes that have no row at all (no hourly rollups in the
    cycle, so the classifier never saw them)."""

    counts: dict[str, int]
    unknown: list[tuple[str, int]]  # (hostname, covered hours)
    unseen: list[str]


def cycle_classes_summary(*, cluster_id: int, cycle_start: datetime, cycle_end: datetime) -> CycleClasses:
    """What the nightly classification stored for ``cluster_id``'s cycle [start, end)."""
    rows = NodeClassification.objects.filter(
        node__cluster_id=cluster_id, cycle_start=cycle_start, cycle_end=cycle_end
    ).values_list("node__hostname", "node_class", "covered_hours")
    counts = dict.fromkeys((*NODE_CLASSES, UNKNOWN), 0)
    unknown, seen = [], set()
    for hostname, node_class, covered in rows.order_by("node__hostname"):
        counts[node_class] = counts.get(node_class, 0) + 1
        seen.add(hostname)
        if node_class == UNKNOWN:
            unknown.append((hostname, covered))
    unseen = [
        hostname
        for hostname in Node.objects.in_service()
        .filter(cluster_id=cluster_id)
        .order_by("hostname")
        .values_list("hostname", flat=True)
        if hostname not in seen
    ]
    return CycleClasses(counts=counts, unknown=unknown, unseen=unseen)
