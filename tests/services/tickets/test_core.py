"""Ticket services: create, SLA due dates on the working calendar, transitions with the clock,
permissions and bad input (nothing half-written), history of every change."""

from datetime import UTC, datetime, timedelta

import pytest

from efficiency.choices import TicketOrigin, TicketState
from efficiency.models import Ticket, TicketComment
from efficiency.services.tickets import (
    TicketRefused,
    ticket_actions,
    ticket_comment,
    ticket_create,
    ticket_transition,
    ticket_update,
    visible_comments,
)

# Monday 2026-11-30 10:00 in Shanghai (02:00 UTC), an ordinary working day.
MONDAY_10 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def _ticket(org, **fields):
    values = {
        "user": org.admin,
        "title": "Fix NCCL",
        "department": org.dept_a,
        "severity": "high",
        "now": MONDAY_10,
    }
    values.update(fields)
    return ticket_create(**values)


def test_due_date_counts_business_hours_of_the_shanghai_calendar(org):
    # High = 18 business hours: Monday 10:00 + 8 h (to 18:00) + 9 h Tuesday + 1 h Wednesday → Wed 10:00.
    ticket = _ticket(org)
    assert ticket.due_at == datetime(2026, 12, 2, 2, 0, tzinfo=UTC)
    assert ticket.origin == TicketOrigin.MANUAL
    assert ticket.state == TicketState.OPEN


def test_waiting_on_the_department_moves_the_due_date_by_the_business_time_waited(org):
    ticket = _ticket(org)
    ticket = ticket_transition(ticket, "wait", user=org.admin, now=MONDAY_10 + timedelta(hours=1))
    assert ticket.state == TicketState.WAITING_ON_DEPARTMENT
    assert ticket.paused_at is not None
    # Waited Monday 11:00 → Tuesday 11:00 Shanghai: 7 + 2 = 9 business hours.
    ticket = ticket_transition(ticket, "resume", user=org.head_a, now=MONDAY_10 + timedelta(hours=25))
    assert ticket.state == TicketState.IN_PROGRESS
    assert ticket.paused_at is None
    # Wed 10:00 + 9 business hours = Wed 18:00 + 1 h → Thursday 10:00 Shanghai.
    assert ticket.due_at == datetime(2026, 12, 3, 2, 0, tzinfo=UTC)


def test_resolving_a_family_ticket_starts_verification_and_a_manual_one_waits_to_be_closed(org):
    manual = _ticket(org)
    ticket_transition(manual, "start", user=org.head_a, now=MONDAY_10)
    manual = ticket_transition(manual, "resolve", user=org.head_a, now=MONDAY_10 + timedelta(hours=2))
    assert manual.state == TicketState.RESOLVED
    assert manual.resolved_at == MONDAY_10 + timedelta(hours=2)
    family = _ticket(org)
    Ticket.objects.filter(pk=family.pk).update(family_pattern="bev-exp*", family_user="alice")
    ticket_transition(family, "start", user=org.head_a, now=MONDAY_10)
    family = ticket_transition(family, "resolve", user=org.head_a, now=MONDAY_10 + timedelta(hours=2))
    assert family.state == TicketState.VERIFYING
    states = [row.state for row in family.history.order_by("history_date", "history_id")]
    assert states == ["open", "in_progress", "resolved", "verifying"]


def test_an_illegal_move_is_refused_and_changes_nothing(org):
    ticket = _ticket(org)
    with pytest.raises(TicketRefused) as refused:
        ticket_transition(ticket, "resolve", user=org.admin, now=MONDAY_10)
    assert "allowed now" in refused.value.message
    assert refused.value.status == 400
    with pytest.raises(TicketRefused):
        ticket_transition(ticket, "measure_gain", user=org.admin, now=MONDAY_10)
    with pytest.raises(TicketRefused) as refused:
        ticket_transition(ticket, "wont_fix", user=org.admin, reason="  ", now=MONDAY_10)
    assert refused.value.field == "reason"
    ticket.refresh_from_db()
    assert ticket.state == TicketState.OPEN
    assert ticket.history.count() == 1


def test_heads_work_on_their_departments_tickets_only(org):
    ticket = _ticket(org)
    assert "wont_fix" not in ticket_actions(ticket, org.head_a)
    assert ticket_actions(ticket, org.head_b) == []
    with pytest.raises(TicketRefused) as refused:
        ticket_transition(ticket, "start", user=org.head_b, now=MONDAY_10)
    assert refused.value.status == 404
    with pytest.raises(TicketRefused) as refused:
        ticket_transition(ticket, "wont_fix", user=org.head_a, reason="no", now=MONDAY_10)
    assert refused.value.status == 403


def test_bad_input_is_refused_with_the_field(org):
    with pytest.raises(TicketRefused) as refused:
        _ticket(org, assignee=org.head_b)
    assert refused.value.field == "assignee"
    with pytest.raises(TicketRefused) as refused:
        _ticket(org, due_at=MONDAY_10 - timedelta(days=1))
    assert refused.value.field == "due_at"
    with pytest.raises(TicketRefused) as refused:
        _ticket(org, severity="urgent")
    assert refused.value.field == "severity"
    with pytest.raises(TicketRefused) as refused:
        _ticket(org, user=org.head_b)
    assert refused.value.status == 403
    assert not Ticket.objects.exists()


def test_internal_notes_are_hidden_from_heads(org):
    ticket = _ticket(org, assignee=org.head_a)
    ticket_comment(ticket, user=org.head_a, text="On it", now=MONDAY_10)
    ticket_comment(ticket, user=org.committee, text="Budget", internal=True, now=MONDAY_10)
    with pytest.raises(TicketRefused):
        ticket_comment(ticket, user=org.head_a, text="secret", internal=True, now=MONDAY_10)
    with pytest.raises(TicketRefused):
        ticket_comment(ticket, user=org.head_a, text="x" * 4001, now=MONDAY_10)
    assert [c.text for c in visible_comments(ticket, org.head_a)] == ["On it"]
    assert [c.text for c in visible_comments(ticket, org.admin)] == ["On it", "Budget"]
    assert TicketComment.objects.count() == 2


def test_every_field_change_is_in_the_history_with_who(org):
    ticket = _ticket(org)
    ticket_update(ticket, user=org.head_a, assignee=org.head_a, now=MONDAY_10)
    with pytest.raises(TicketRefused):
        ticket_update(ticket, user=org.head_a, severity="low", now=MONDAY_10)
    ticket_update(ticket, user=org.committee, severity="low", now=MONDAY_10)
    latest, previous = ticket.history.order_by("-history_date", "-history_id")[:2]
    assert latest.history_user == org.committee
    assert [(c.field, c.old, c.new) for c in latest.diff_against(previous).changes] == [
        ("severity", "high", "low")
    ]
