"""Who may see what: the one place where department scoping is decided.

Every page, API endpoint, export and chart gets its rows through ``scope_queryset``:

* a platform admin or a committee member sees every department;
* a department head sees the departments they head, and nothing of any other;
* a signed-in user with no role sees nothing.

A model that is not listed here cannot be scoped, and asking for it raises: new data stays
private until someone decides who sees it.
"""

from functools import cache

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Model, Q, QuerySet

from efficiency.choices import FaultCategory, Role
from efficiency.models import (
    ActuatorConfig,
    CapacityAlert,
    Department,
    DepartmentHour,
    DepartmentMapping,
    FaultPolicy,
    FaultSignal,
    Gpu,
    Incident,
    IncidentAction,
    Job,
    JobHour,
    Node,
    NodeClassification,
    NodeDay,
    NodeHour,
    NodeStateChange,
    Quota,
    QuotaBacktest,
    QuotaCycle,
    QuotaEvent,
    QuotaObjection,
    Recommendation,
    ScopeHour,
    Ticket,
    TicketComment,
)

# Evidence about a node's hardware, shown to the heads of the department that owns the node.
_NODE_FAULTS = [
    FaultCategory.HARDWARE_GPU,
    FaultCategory.HARDWARE_MEMORY_ECC,
    FaultCategory.NVLINK,
    FaultCategory.NETWORK_RDMA,
]
_ROLE_PRECEDENCE = [Role.PLATFORM_ADMIN, Role.COMMITTEE, Role.DEPARTMENT_HEAD]

User = AbstractBaseUser | AnonymousUser


def user_role(user: User) -> Role | None:
    """The most privileged portal role of a user (superusers are platform admins)."""
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.PLATFORM_ADMIN
    cached = getattr(user, "_portal_role", False)
    if cached is not False:
        return cached
    names = set(user.groups.values_list("name", flat=True))
    role = next((r for r in _ROLE_PRECEDENCE if r.value in names), None)
    user._portal_role = role
    return role


def sees_all_departments(user: User) -> bool:
    return user_role(user) in {Role.PLATFORM_ADMIN, Role.COMMITTEE}


def visible_department_ids(user: User) -> list[int] | None:
    """Ids of the departments a user may see; ``None`` means all of them."""
    if sees_all_departments(user):
        return None
    if user_role(user) != Role.DEPARTMENT_HEAD:
        return []
    cached = getattr(user, "_portal_department_ids", None)
    if cached is None:
        cached = list(user.headed_departments.values_list("pk", flat=True))
        user._portal_department_ids = cached
    return cached


@cache
def _scopers() -> dict[type[Model], object]:
    return {
        Department: lambda qs, ids: qs.filter(pk__in=ids),
        DepartmentMapping: lambda qs, ids: qs.filter(department_id__in=ids),
        Node: lambda qs, ids: qs.for_departments(ids),
        Gpu: lambda qs, ids: qs.filter(node__in=Node.objects.for_departments(ids)),
        Job: lambda qs, ids: qs.for_departments(ids),
        # Rollups: a head sees the hours of the nodes their departments own, and their own
        # departments' and jobs' shares, never another department's.
        NodeHour: lambda qs, ids: qs.filter(owner_department_id__in=ids),
        NodeDay: lambda qs, ids: qs.filter(owner_department_id__in=ids),
        # Cluster-wide rows (no department) are for those who see every department.
        ScopeHour: lambda qs, ids: qs.filter(department_id__in=ids),
        DepartmentHour: lambda qs, ids: qs.filter(department_id__in=ids),
        JobHour: lambda qs, ids: qs.filter(department_id__in=ids),
        NodeClassification: lambda qs, ids: qs.filter(node__in=Node.objects.for_departments(ids)),
        # Quota planning: a head sees the cycles, their own department's quotas, objections and
        # history (and the cycle-wide events such as approval), not the committee material
        # that compares every department (backtests, capacity alerts).
        QuotaCycle: lambda qs, ids: qs,
        Quota: lambda qs, ids: qs.filter(department_id__in=ids),
        QuotaObjection: lambda qs, ids: qs.filter(department_id__in=ids),
        QuotaEvent: lambda qs, ids: qs.filter(Q(department_id__in=ids) | Q(department__isnull=True)),
        QuotaBacktest: lambda qs, ids: qs.none(),
        CapacityAlert: lambda qs, ids: qs.none(),
        # Faults: a head sees the incidents of their departments' jobs and those on the nodes their
        # departments own (a fault found in the metrics of an idle node has no job); of the
        # evidence, their jobs' and the hardware evidence of their nodes, not another department's
        # log lines.
        Incident: lambda qs, ids: qs.filter(Q(department_id__in=ids) | Q(node__owner_department_id__in=ids)),
        FaultSignal: lambda qs, ids: qs.filter(
            Q(department_id__in=ids) | Q(node__owner_department_id__in=ids, category__in=_NODE_FAULTS)
        ),
        IncidentAction: lambda qs, ids: qs.filter(
            Q(incident__department_id__in=ids) | Q(incident__node__owner_department_id__in=ids)
        ),
        NodeStateChange: lambda qs, ids: qs.filter(node__in=Node.objects.for_departments(ids)),
        # Recommendations: a head sees those of their departments' job families and users, those
        # assigned to their departments, and those about the nodes their departments own.
        Recommendation: lambda qs, ids: qs.filter(
            Q(department_id__in=ids)
            | Q(assignee_department_id__in=ids)
            | Q(subject_kind="node", node__owner_department_id__in=ids)
        ),
        # Tickets: a head sees their departments' tickets, and of their comments the public ones
        # (internal notes are for platform admins and the committee).
        Ticket: lambda qs, ids: qs.filter(department_id__in=ids),
        TicketComment: lambda qs, ids: qs.filter(ticket__department_id__in=ids, internal=False),
        FaultPolicy: lambda qs, ids: qs.none(),
        ActuatorConfig: lambda qs, ids: qs.none(),
    }


def scope_queryset(queryset: QuerySet, user: User) -> QuerySet:
    """Narrow ``queryset`` to the rows ``user`` may see."""
    scoper = _scopers().get(queryset.model)
    if scoper is None:
        raise ImproperlyConfigured(f"No department scoping is defined for {queryset.model.__name__}.")
    ids = visible_department_ids(user)
    if ids is None:
        return queryset
    if not ids:
        return queryset.none()
    return scoper(queryset, ids)
