"""Ticket selectors: the board's order and its exact "overdue", scoping, the open tickets of the home
and department pages, linked rows a head may not see, and the history as the page shows it."""

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.choices import TicketState
from efficiency.models import Ticket
from efficiency.selectors.tickets import (
    department_open_tickets,
    overdue_ticket_count,
    ticket_board,
    ticket_history,
    ticket_links,
    ticket_list,
)
from efficiency.services.tickets import OVERDUE, sla_status, ticket_create, ticket_transition, ticket_update

NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # Monday 10:00 in Shanghai


def _ticket(org, title, *, department=None, severity="medium", now=NOW, **fields):
    return ticket_create(
        user=org.admin, title=title, department=department or org.dept_a, severity=severity, now=now, **fields
    )


def test_the_board_groups_by_state_and_puts_overdue_first_in_each(org):
    late = _ticket(org, "late", severity="critical", now=NOW - timedelta(days=4))  # due last Thursday 14:00
    soon = _ticket(org, "soon", due_at=NOW + timedelta(hours=2), now=NOW - timedelta(hours=1))
    later = _ticket(org, "later", severity="low")
    working = _ticket(org, "working", severity="critical", now=NOW - timedelta(days=4))
    ticket_transition(working, "start", user=org.admin, now=NOW - timedelta(days=3))
    done = _ticket(org, "done")
    ticket_transition(done, "wont_fix", user=org.admin, reason="duplicate", now=NOW)
    board = list(ticket_board(user=org.committee, now=NOW))
    assert [t.title for t in board] == ["late", "soon", "later", "working", "done"]
    assert [t.overdue for t in board] == [True, False, False, True, False]
    assert {t.pk for t in board} == {late.pk, soon.pk, later.pk, working.pk, done.pk}


def test_a_waiting_tickets_clock_stands_still_where_it_began_to_wait(org):
    ticket = _ticket(org, "wait", severity="critical", now=NOW - timedelta(hours=1))  # due 14:00 today
    ticket_transition(ticket, "wait", user=org.admin, now=NOW)
    much_later = NOW + timedelta(days=10)
    row = ticket_board(user=org.committee, now=much_later).get(pk=ticket.pk)
    assert row.overdue is False
    assert overdue_ticket_count(user=org.committee, now=much_later) == 0


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    due_h=st.integers(min_value=-200, max_value=200),
    state=st.sampled_from(list(TicketState.values)),
    paused_h=st.one_of(st.none(), st.integers(min_value=-200, max_value=0)),
)
def test_overdue_on_the_board_is_what_the_sla_clock_says(org, due_h, state, paused_h):
    ticket = _ticket(org, "t", now=NOW - timedelta(days=400))
    paused = None if paused_h is None else NOW + timedelta(hours=paused_h)
    Ticket.objects.filter(pk=ticket.pk).update(
        due_at=NOW + timedelta(hours=due_h),
        state=state,
        paused_at=paused if state == TicketState.WAITING_ON_DEPARTMENT else None,
    )
    row = ticket_board(user=org.admin, now=NOW).get(pk=ticket.pk)
    assert row.overdue == (sla_status(row, NOW) == OVERDUE)
    Ticket.objects.filter(pk=ticket.pk).delete()


def test_heads_read_only_their_departments_tickets(org):
    _ticket(org, "a", severity="critical", now=NOW - timedelta(days=4))
    _ticket(org, "b", department=org.dept_b, severity="critical", now=NOW - timedelta(days=4))
    assert [t.title for t in ticket_list(user=org.head_a)] == ["a"]
    assert [t.title for t in ticket_list(user=org.head_b)] == ["b"]
    assert list(ticket_list(user=org.no_role)) == []
    assert overdue_ticket_count(user=org.head_a, now=NOW) == 1
    assert overdue_ticket_count(user=org.committee, now=NOW) == 2


def test_a_departments_open_tickets_are_overdue_first_and_counted_in_full(org):
    for index in range(4):
        _ticket(org, f"open {index}", due_at=NOW + timedelta(days=4 - index))
    late = _ticket(org, "late", severity="critical", now=NOW - timedelta(days=4))
    closed = _ticket(org, "closed")
    ticket_transition(closed, "wont_fix", user=org.admin, reason="no", now=NOW)
    shown, count = department_open_tickets(user=org.head_a, department_ids=[org.dept_a.pk], now=NOW, limit=3)
    assert count == 5
    assert [t.title for t in shown] == ["late", "open 3", "open 2"]
    assert shown[0].pk == late.pk
    assert department_open_tickets(user=org.head_b, department_ids=[org.dept_a.pk], now=NOW) == ([], 0)


def test_linked_rows_of_another_department_are_counted_not_shown(org):
    ticket = _ticket(org, "linked", nodes=[org.node_a, org.node_b], jobs=[org.job_a])
    links = ticket_links(user=org.head_a, ticket=ticket)
    assert [node.hostname for node in links.nodes] == ["gpu-a01"]
    assert [job.pk for job in links.jobs] == [org.job_a.pk]
    assert links.hidden == 1
    assert ticket_links(user=org.admin, ticket=ticket).hidden == 0


def test_the_history_names_fields_by_their_labels_and_values_by_their_choices(org):
    ticket = _ticket(org, "history", nodes=[org.node_a])
    ticket_update(ticket, user=org.admin, severity="high", assignee=org.head_a, now=NOW)
    ticket_transition(ticket, "wont_fix", user=org.admin, reason="The family was retired.", now=NOW)
    Ticket.objects.get(pk=ticket.pk).nodes.remove(org.node_a)
    entries = ticket_history(ticket=Ticket.objects.get(pk=ticket.pk))
    assert entries[0].created
    assert entries[0].user == org.admin
    added = entries[1].changes[0]
    assert (added.label, added.added, added.removed) == ("nodes", [org.node_a], [])
    edit = {change.field: (change.label, change.old, change.new) for change in entries[2].changes}
    assert edit["severity"] == ("severity", "Medium", "High")
    assert edit["assignee"] == ("assignee", None, org.head_a)
    assert [c.field for c in entries[2].changes] == ["assignee", "severity"]
    move = entries[3]
    assert move.reason == "The family was retired."
    assert ("state", "Open", "Won't fix") in [(c.field, c.old, c.new) for c in move.changes]
    assert entries[4].changes[0].removed == [org.node_a]
