"""Tickets as the API reads them: scoped like the pages (a head sees their departments' tickets),
overdue ones first, and a ticket's history as rows of who changed what, from → to, and why.

The board's definition of overdue is ``selectors.tickets.overdue_q``, shared with the pages.
"""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import BooleanField, Case, Prefetch, QuerySet, Value, When

from efficiency.choices import TicketState
from efficiency.models import Department, Incident, Job, Node, Recommendation, Ticket
from efficiency.scoping import User, scope_queryset
from efficiency.selectors.tickets import overdue_q

# Fields whose history values are rows of other tables: shown by their code, username or id.
_USER_FIELDS = ("assignee", "created_by")
_HIDDEN_FIELDS = ("updated_at", "sla_notified")


def ticket_list(*, user: User, now: datetime) -> QuerySet[Ticket]:
    """Every ticket the user may see: overdue ones first, then by due date."""
    return (
        scope_queryset(Ticket.objects.select_related("department", "assignee"), user)
        .annotate(
            overdue=Case(
                When(overdue_q(now), then=Value(True)), default=Value(False), output_field=BooleanField()
            )
        )
        .order_by("-overdue", "due_at", "pk")
    )


def ticket_detail_list(*, user: User, now: datetime) -> QuerySet[Ticket]:
    """Tickets with what a detail shows beside them: who opened them, the linked rows' ids."""
    return (
        ticket_list(user=user, now=now)
        .select_related("created_by")
        .prefetch_related(
            Prefetch("jobs", queryset=Job.objects.only("pk").order_by("pk")),
            Prefetch("nodes", queryset=Node.objects.only("pk").order_by("pk")),
            Prefetch("incidents", queryset=Incident.objects.only("pk").order_by("pk")),
        )
    )


def ticket_active_list(tickets: QuerySet[Ticket]) -> QuerySet[Ticket]:
    """Of ``tickets``, those whose SLA clock runs or is paused, with what the clock needs."""
    return (
        tickets.filter(state__in=TicketState.active())
        .select_related(None)
        .prefetch_related(None)
        .only("pk", "state", "due_at", "paused_at")
    )


def ticket_departments() -> QuerySet[Department]:
    """Every department a ticket may name (the services decide which one a user may choose)."""
    return Department.objects.all()


def ticket_users() -> QuerySet:
    """Every active user a ticket may be assigned to (the services decide who fits a department)."""
    return get_user_model().objects.filter(is_active=True)


def ticket_recommendation_get(*, user: User, pk: int) -> Recommendation:
    """A recommendation the user may see; ``Recommendation.DoesNotExist`` otherwise."""
    return scope_queryset(
        Recommendation.objects.select_related("department", "assignee_department", "node"), user
    ).get(pk=pk)


def ticket_incident_get(*, user: User, pk: int) -> Incident:
    """An incident the user may see; ``Incident.DoesNotExist`` otherwise."""
    return scope_queryset(Incident.objects.select_related("department", "node", "job"), user).get(pk=pk)


@dataclass
class HistoryRow:
    """One saved version of a ticket: who made it, when, why, and which fields changed."""

    at: datetime
    by: str | None
    kind: str  # "created", "changed", "deleted"
    state: str
    reason: str
    changes: list[tuple[str, Any, Any]] = field(default_factory=list)


_KINDS = {"+": "created", "~": "changed", "-": "deleted"}


def ticket_history(*, ticket: Ticket) -> list[HistoryRow]:
    """The ticket's audit trail, oldest first; each change as (field, from, to) with a department
    as its code, a user as their username, other linked rows by id."""
    records = list(ticket.history.select_related("history_user").order_by("history_date", "history_id"))
    user_ids: set[int] = set()
    department_ids: set[int] = set()
    for record in records:
        user_ids |= {getattr(record, f"{name}_id") for name in _USER_FIELDS} - {None}
        department_ids.add(record.department_id)
    usernames = dict(get_user_model().objects.filter(pk__in=user_ids).values_list("pk", "username"))
    codes = dict(Department.objects.filter(pk__in=department_ids).values_list("pk", "code"))

    def shown(name: str, value):
        if value is None:
            return None
        if name in _USER_FIELDS:
            return usernames.get(value, value)
        if name == "department":
            return codes.get(value, value)
        if isinstance(value, list):  # a many-to-many field: the linked rows
            return sorted(
                next((v for k, v in row.items() if k != "ticket"), None) if isinstance(row, dict) else row
                for row in value
            )
        return value

    rows = []
    previous = None
    for record in records:
        changes = []
        if previous is not None:
            delta = record.diff_against(previous, excluded_fields=_HIDDEN_FIELDS)
            for change in sorted(delta.changes, key=lambda c: c.field):
                changes.append(
                    (change.field, shown(change.field, change.old), shown(change.field, change.new))
                )
        rows.append(
            HistoryRow(
                at=record.history_date,
                by=record.history_user.get_username() if record.history_user else None,
                kind=_KINDS.get(record.history_type, record.history_type),
                state=record.state,
                reason=record.history_change_reason or "",
                changes=changes,
            )
        )
        previous = record
    return rows
