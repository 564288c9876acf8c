"""Tickets as the board, a ticket's page, the home pages and the CSV read them, scoped like
everything else (a head sees their departments' tickets, and of their comments the public ones)."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import BooleanField, Case, Count, F, IntegerField, Q, QuerySet, Value, When
from django.db.models.functions import Coalesce
from simple_history.models import DeletedObject

from efficiency.choices import Role, TicketSeverity, TicketState
from efficiency.models import Incident, Job, Node, Ticket
from efficiency.models.audit import BASELINE_REASON
from efficiency.scoping import User, scope_queryset

# The board's groups, in the order work flows through them.
STATE_ORDER = list(TicketState.values)
SEVERITY_ORDER = list(TicketSeverity.values)


def overdue_q(now: datetime) -> Q:
    """Tickets whose SLA clock has run out: due at or before ``now`` while open or in progress, and
    for a ticket waiting on its department, due at or before the moment it began to wait (its clock
    stands still there). Exact: the due date already counts business hours."""
    running = Q(state__in=(TicketState.OPEN, TicketState.IN_PROGRESS), due_at__lte=now)
    waiting = Q(state=TicketState.WAITING_ON_DEPARTMENT, due_at__lte=Coalesce(F("paused_at"), Value(now)))
    return running | waiting


def ticket_list(*, user: User) -> QuerySet[Ticket]:
    """Every ticket the user may see, soonest due first."""
    return scope_queryset(
        Ticket.objects.select_related("department", "assignee", "recommendation", "incident"), user
    ).order_by("due_at", "pk")


def ticket_board(*, user: User, now: datetime) -> QuerySet[Ticket]:
    """The board: tickets grouped by state in workflow order, and in each state the overdue ones
    first, then the soonest due. Annotated with ``overdue``, ``state_rank`` and ``severity_rank``
    (for sorting by urgency)."""
    return (
        ticket_list(user=user)
        .annotate(
            overdue=_overdue(now),
            state_rank=Case(
                *(When(state=state, then=Value(rank)) for rank, state in enumerate(STATE_ORDER)),
                default=Value(len(STATE_ORDER)),
                output_field=IntegerField(),
            ),
            severity_rank=Case(
                *(When(severity=severity, then=Value(rank)) for rank, severity in enumerate(SEVERITY_ORDER)),
                default=Value(len(SEVERITY_ORDER)),
                output_field=IntegerField(),
            ),
        )
        .order_by("state_rank", "-overdue", "due_at", "pk")
    )


def _overdue(now: datetime) -> Case:
    """Whether a ticket is overdue at ``now``, as an annotation."""
    return Case(When(overdue_q(now), then=Value(True)), default=Value(False), output_field=BooleanField())


def ticket_state_counts(queryset: QuerySet[Ticket]) -> dict[str, int]:
    """How many of ``queryset``'s tickets are in each state."""
    rows = queryset.order_by().values("state").annotate(n=Count("pk"))
    return {row["state"]: row["n"] for row in rows}


def ticket_sla_candidates(*, user: User, now: datetime, horizon: timedelta) -> QuerySet[Ticket]:
    """Tickets whose clock runs, not yet overdue, due within ``horizon`` (wall-clock): those that may
    be "due soon" in business hours, for the caller to check on the working calendar."""
    return (
        ticket_list(user=user)
        .filter(
            state__in=(TicketState.OPEN, TicketState.IN_PROGRESS), due_at__gt=now, due_at__lte=now + horizon
        )
        .order_by()
    )


def ticket_get(*, user: User, pk: int) -> Ticket:
    """One ticket by id; raises ``Ticket.DoesNotExist`` outside the user's scope."""
    return ticket_list(user=user).select_related("created_by").get(pk=pk)


@dataclass(frozen=True)
class TicketLinks:
    """What a ticket is about, as far as the user may see it."""

    jobs: list[Job]
    nodes: list[Node]
    incidents: list[Incident]
    hidden: int  # linked rows of departments the user does not see


def ticket_links(*, user: User, ticket: Ticket, limit: int = 50) -> TicketLinks:
    """The jobs, nodes and incidents linked to ``ticket`` that the user may see."""
    jobs = scope_queryset(Job.objects.all(), user).filter(tickets=ticket).order_by("-submitted_at", "-pk")
    nodes = scope_queryset(Node.objects.all(), user).filter(tickets=ticket).order_by("hostname")
    incidents = (
        scope_queryset(Incident.objects.select_related("node", "job"), user)
        .filter(linked_tickets=ticket)
        .order_by("-occurred_at")
    )
    shown = [list(jobs[:limit]), list(nodes[:limit]), list(incidents[:limit])]
    total = ticket.jobs.count() + ticket.nodes.count() + ticket.incidents.count()
    visible = jobs.count() + nodes.count() + incidents.count()
    return TicketLinks(*shown, hidden=max(0, total - visible))


# --- History ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryChange:
    """One field of one change: its label, and what it was and became (values, model objects, or
    for a many-to-many field the rows added and removed)."""

    field: str
    label: str
    old: Any
    new: Any
    added: list = field(default_factory=list)
    removed: list = field(default_factory=list)
    m2m: bool = False


@dataclass(frozen=True)
class HistoryEntry:
    at: datetime
    user: Any  # the user, or None for the portal
    created: bool
    reason: str
    changes: list[HistoryChange]


def _label(name: str) -> str:
    return str(Ticket._meta.get_field(name).verbose_name)


def _display(name: str, value: Any) -> Any:
    """A stored value as a reader knows it: a choice's label, a deleted row as "#id"."""
    model_field = Ticket._meta.get_field(name)
    if isinstance(value, DeletedObject):
        return None if value.pk is None else f"#{value.pk}"
    if model_field.choices and value not in (None, ""):
        return dict(model_field.flatchoices).get(value, value)
    return value


def _m2m_objects(rows: list[dict]) -> list:
    objects = []
    for row in rows or []:
        for key, value in row.items():
            if key != "ticket":
                objects.append(f"#{value.pk}" if isinstance(value, DeletedObject) else value)
    return objects


def ticket_history(*, ticket: Ticket) -> list[HistoryEntry]:
    """The ticket's audit trail, oldest first: who changed what when, from what to what, and why
    (a transition's reason). Linked jobs, nodes and incidents show as added and removed."""
    records = list(ticket.history.select_related("history_user").order_by("history_date", "history_id"))
    entries = []
    previous = None
    for record in records:
        if (
            record.history_type == "~"
            and record.history_change_reason == BASELINE_REASON
            and previous is None
        ):
            previous = record  # the row as it was before its first recorded change
            continue
        changes = []
        if previous is not None:
            delta = record.diff_against(previous, foreign_keys_are_objs=True)
            for change in delta.changes:
                # The verification record is shown whole in its own section; here its
                # outcome is the state change and the measured gain beside it.
                if change.field in ("updated_at", "sla_notified", "verification"):
                    continue
                if change.field in ("jobs", "nodes", "incidents"):
                    old, new = _m2m_objects(change.old), _m2m_objects(change.new)
                    changes.append(
                        HistoryChange(
                            change.field,
                            _label(change.field),
                            old,
                            new,
                            added=[item for item in new if item not in old],
                            removed=[item for item in old if item not in new],
                            m2m=True,
                        )
                    )
                else:
                    changes.append(
                        HistoryChange(
                            change.field,
                            _label(change.field),
                            _display(change.field, change.old),
                            _display(change.field, change.new),
                        )
                    )
        created = record.history_type == "+"
        previous = record
        if not created and not changes:
            continue
        entries.append(
            HistoryEntry(
                at=record.history_date,
                user=record.history_user,
                created=created,
                reason=record.history_change_reason or "",
                changes=sorted(changes, key=lambda change: _FIELD_ORDER.get(change.field, 99)),
            )
        )
    return entries


_FIELD_ORDER = {
    name: index for index, name in enumerate(("state", "assignee", "due_at", "paused_at", "severity"))
}


# --- Home pages and department pages -------------------------------------------------------------------


def department_open_tickets(*, user: User, department_ids: list[int], now: datetime, limit: int = 10):
    """The active tickets of these departments the user may see, overdue first then soonest due, at
    most ``limit``, and how many there are in all."""
    # Only what the open-tickets table shows: the department and the assignee, not the
    # recommendation and incident the board joins (their rows were most of this query's cost).
    tickets = (
        ticket_list(user=user)
        .select_related(None)
        .select_related("department", "assignee")
        .filter(department_id__in=department_ids, state__in=TicketState.active())
        .annotate(overdue=_overdue(now))
    )
    shown = list(tickets.order_by("-overdue", "due_at", "pk")[:limit])
    return shown, len(shown) if len(shown) < limit else tickets.count()


def overdue_ticket_count(*, user: User, now: datetime) -> int:
    """How many tickets the user may see are overdue."""
    return ticket_list(user=user).filter(overdue_q(now)).count()


def incident_tickets(*, user: User, incident: Incident) -> list[Ticket]:
    """The follow-up tickets of an incident, newest first."""
    return list(
        ticket_list(user=user).filter(Q(incident=incident) | Q(incidents=incident)).distinct().order_by("-pk")
    )


def recommendation_tickets(*, user: User, recommendation_id: int) -> list[Ticket]:
    """The tickets an accepted recommendation became, newest first."""
    return list(ticket_list(user=user).filter(recommendation_id=recommendation_id).order_by("-pk"))


def ticket_assignee_choices(*, department_ids: list[int]) -> QuerySet:
    """Who may own a ticket of one of these departments: their heads, and the platform admins (the
    services check the one chosen against the ticket's own department)."""
    users = get_user_model().objects.filter(is_active=True)
    return (
        (users.filter(headed_departments__in=department_ids) | users.filter(groups__name=Role.PLATFORM_ADMIN))
        .distinct()
        .order_by("username")
    )
