"""Remediation tickets, the write side: create, edit, transitions, comments (``core``), the SLA
clock on the working calendar (``sla``) and the measured gain of a resolved ticket
(``verification``). The workflow table and the calendar themselves are pure, in
``efficiency.analysis.tickets``. Import from this package, not from its modules.
"""

from efficiency.services.tickets.core import (
    EDITABLE,
    MAX_COMMENT,
    TicketRefused,
    assignee_candidates,
    creatable_departments,
    may_manage,
    may_see,
    measurable,
    ticket_actions,
    ticket_comment,
    ticket_create,
    ticket_from_incident,
    ticket_from_recommendation,
    ticket_transition,
    ticket_update,
    visible_comments,
)
from efficiency.services.tickets.sla import DUE_SOON, OK, OVERDUE, due_at, sla_status, working_calendar
from efficiency.services.tickets.verification import ticket_verify, ticket_windows, tickets_verify

__all__ = [
    "DUE_SOON",
    "EDITABLE",
    "MAX_COMMENT",
    "OK",
    "OVERDUE",
    "TicketRefused",
    "assignee_candidates",
    "creatable_departments",
    "due_at",
    "may_manage",
    "may_see",
    "measurable",
    "sla_status",
    "ticket_actions",
    "ticket_comment",
    "ticket_create",
    "ticket_from_incident",
    "ticket_from_recommendation",
    "ticket_transition",
    "ticket_update",
    "ticket_verify",
    "ticket_windows",
    "tickets_verify",
    "visible_comments",
    "working_calendar",
]
