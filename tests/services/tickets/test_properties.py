"""The ticket services as properties, on the database, through the real services.

(a) Any sequence of moves (by a head of the ticket's department, a head of another, a committee
    member, a platform admin or the portal itself; any action, known or not; with or without a
    reason, or one too long) applied with ``ticket_transition``: the state is always one of
    ``TicketState`` and the one the workflow table predicts (predicted here from the table and the
    role rules as documented, not from ``ticket_actions``); a refused move leaves the row and its
    history as they were; the history has one version per accepted move (two when resolving a
    measurable ticket starts its verification); ``closed_at`` is set exactly when the ticket is
    closed or declined, ``paused_at`` exactly while it waits on its department, ``resolved_at``
    whenever it is resolved or being verified and never while the work is open.
(b) The SLA: for any moment of creation and any severity, the due date lies exactly the
    severity's business hours after it on the working calendar; after any sequence of waits and
    resumptions, the business time from creation to the due date, less the business time spent
    waiting, is still exactly those hours.
"""

from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings as django_settings
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.analysis.tickets.workflow import PORTAL_ACTIONS, REASON_REQUIRED, TRANSITIONS, Action, State
from efficiency.choices import TicketSeverity, TicketState
from efficiency.models import Ticket
from efficiency.services.tickets import (
    TicketRefused,
    ticket_create,
    ticket_transition,
    working_calendar,
)

# Monday 2026-11-30 10:00 in Shanghai.
T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def _examples(count: int) -> int:
    """``count`` locally; the CI profile's larger number there."""
    return max(count, settings.default.max_examples)


PROPERTY_SETTINGS = settings(
    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

HEAD_ACTIONS = {Action.START, Action.WAIT, Action.RESUME, Action.RESOLVE, Action.REOPEN}
HEAD_REOPENS_FROM = {State.RESOLVED, State.VERIFYING}
RESOLVED_FAMILY = {State.RESOLVED, State.VERIFYING, State.VERIFIED_GAIN, State.NO_GAIN, State.REGRESSED}
MEASURED = {State.VERIFIED_GAIN, State.NO_GAIN, State.REGRESSED}
ROLES = ["head_a", "head_b", "committee", "admin", "portal"]


@contextmanager
def rolled_back():
    """Each example starts from the fixture's world: its writes are undone afterwards."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def _row(ticket: Ticket) -> dict:
    return Ticket.objects.filter(pk=ticket.pk).values().get()


def _accepted(role: str, state: State, action: str, reason: str) -> bool:
    """Whether the move must be taken, from the table and the role rules as documented."""
    text = reason.strip()
    if role == "head_b" or len(text) > 2000:  # another department's ticket; a reason too long
        return False
    if action not in {known.value for known in Action}:
        return False
    action = Action(action)
    if (state, action) not in TRANSITIONS:
        return False
    if role == "portal":
        return action in PORTAL_ACTIONS
    if action in PORTAL_ACTIONS:
        return False
    if role == "head_a" and (
        action not in HEAD_ACTIONS or (action == Action.REOPEN and state not in HEAD_REOPENS_FROM)
    ):
        return False
    return not (action in REASON_REQUIRED and not text)


step_strategy = st.tuples(
    st.sampled_from(ROLES),
    st.sampled_from([*(action.value for action in Action), "bogus", ""]),
    st.sampled_from(["", "   ", "Agreed with the department.", "x" * 2000, "x" * 2001]),
    st.integers(min_value=0, max_value=3 * 24 * 60),  # minutes since the previous move
)


@settings(PROPERTY_SETTINGS, max_examples=_examples(40))
@given(
    measurable=st.booleans(),
    severity=st.sampled_from(TicketSeverity.values),
    steps=st.lists(step_strategy, min_size=1, max_size=25),
)
def test_any_sequence_of_moves_keeps_the_workflow_and_the_clock_fields_consistent(
    org, measurable, severity, steps
):
    with rolled_back():
        ticket = ticket_create(user=org.admin, title="Fix", department=org.dept_a, severity=severity, now=T0)
        if measurable:
            Ticket.objects.filter(pk=ticket.pk).update(family_user="alice", family_pattern="vision-train")
        state, versions, now = State.OPEN, 1, T0
        for role, action, reason, minutes in steps:
            now += timedelta(minutes=minutes)
            before = _row(ticket)
            expected = _accepted(role, state, action, reason)
            kwargs = {"reason": reason, "now": now}
            if role == "portal":
                kwargs.update(user=None, actor="portal")
                if action in ("measure_gain", "measure_no_gain", "measure_regression"):
                    kwargs["verification"] = {"outcome": action, "gain_pct": 12.5}
            else:
                kwargs["user"] = getattr(org, role)
            if expected:
                ticket = ticket_transition(ticket, action, **kwargs)
                state = TRANSITIONS[(state, Action(action))]
                versions += 1
                if action == Action.RESOLVE and measurable:
                    state, versions = State.VERIFYING, versions + 1
            else:
                with pytest.raises(TicketRefused) as refused:
                    ticket_transition(ticket, action, **kwargs)
                assert refused.value.status in (400, 403, 404)
                assert _row(ticket) == before
                assert ticket.history.count() == versions
            ticket.refresh_from_db()
            assert ticket.state in TicketState.values
            assert ticket.state == state
            assert ticket.history.count() == versions
            assert (ticket.closed_at is not None) == (state in (State.CLOSED, State.WONT_FIX))
            assert (ticket.paused_at is not None) == (state == State.WAITING_ON_DEPARTMENT)
            if state in RESOLVED_FAMILY:
                assert ticket.resolved_at is not None
            if state in TicketState.active():
                assert ticket.resolved_at is None
                assert ticket.verified_at is None
            if state in MEASURED:
                assert ticket.verified_at is not None


# --- (b) The SLA ----------------------------------------------------------------------------------

# Any moment from 2025 to 2027: the shipped holiday notices' years, and a year beyond them.
moments = st.datetimes(
    min_value=datetime(2025, 1, 1), max_value=datetime(2027, 12, 31), timezones=st.just(UTC)
)


def _sla_seconds(severity: str) -> float:
    return django_settings.PORTAL_TICKET_SLA_HOURS[severity] * 3600


@settings(PROPERTY_SETTINGS, max_examples=_examples(60))
@given(created=moments, severity=st.sampled_from(TicketSeverity.values))
def test_the_due_date_is_the_severitys_business_hours_after_creation(org, created, severity):
    with rolled_back():
        ticket = ticket_create(
            user=org.admin, title="Fix", department=org.dept_a, severity=severity, now=created
        )
        ticket.refresh_from_db()
        assert ticket.created_at == created
        assert working_calendar().business_seconds_between(created, ticket.due_at) == _sla_seconds(severity)


@settings(PROPERTY_SETTINGS, max_examples=_examples(40))
@given(
    created=moments,
    severity=st.sampled_from(TicketSeverity.values),
    started=st.booleans(),
    # (minutes of work before waiting, minutes waited), each up to two weeks.
    waits=st.lists(
        st.tuples(st.integers(0, 14 * 24 * 60), st.integers(0, 14 * 24 * 60)), min_size=1, max_size=5
    ),
)
def test_waiting_moves_the_due_date_by_exactly_the_business_time_waited(
    org, created, severity, started, waits
):
    calendar = working_calendar()
    with rolled_back():
        ticket = ticket_create(
            user=org.admin, title="Fix", department=org.dept_a, severity=severity, now=created
        )
        now = created
        if started:
            ticket = ticket_transition(ticket, "start", user=org.head_a, now=now)
        waited = 0.0
        for work, wait in waits:
            paused = now + timedelta(minutes=work)
            ticket = ticket_transition(ticket, "wait", user=org.head_a, now=paused)
            now = paused + timedelta(minutes=wait)
            ticket = ticket_transition(ticket, "resume", user=org.head_a, now=now)
            waited += calendar.business_seconds_between(paused, now)
        ticket.refresh_from_db()
        assert ticket.paused_at is None
        # Exact to the microsecond (the seconds are floats, summed over the waits).
        assert calendar.business_seconds_between(created, ticket.due_at) - waited == pytest.approx(
            _sla_seconds(severity), abs=1e-6
        )
