"""The SLA scan announces a ticket due soon, then overdue, once per due date."""

from datetime import UTC, datetime, timedelta

from django.core import mail

from efficiency.models import Notification, Ticket
from efficiency.services.tickets import ticket_create, ticket_transition
from efficiency.tasks import notifications_sla_scan_task
from tests.services.notifications.conftest import MONDAY_10
from tests.services.notifications.helpers import deliver, route_all

# High = 18 business hours: due Wednesday 2026-12-02 10:00 Shanghai (02:00 UTC); "due soon" starts
# 4 business hours before it: 1 h of Wednesday morning and 3 h of Tuesday, Tuesday 15:00 Shanghai.
DUE = datetime(2026, 12, 2, 2, 0, tzinfo=UTC)


def _high(org, title: str) -> Ticket:
    return ticket_create(user=org.admin, title=title, department=org.dept_a, severity="high", now=MONDAY_10)


def _scan(at: datetime) -> dict:
    return notifications_sla_scan_task(at.isoformat())


def _events() -> list[str]:
    return list(Notification.objects.order_by("pk").values_list("event", flat=True))


def test_due_soon_then_overdue_each_announced_once(notified):
    ticket = ticket_create(
        user=notified.admin, title="Fix NCCL", department=notified.dept_a, severity="high", now=MONDAY_10
    )
    assert ticket.due_at == DUE
    assert _scan(DUE - timedelta(hours=24)) == {"due_soon": 0, "overdue": 0}
    assert _scan(DUE - timedelta(hours=1)) == {"due_soon": 1, "overdue": 0}
    assert _scan(DUE - timedelta(minutes=30)) == {"due_soon": 0, "overdue": 0}
    route_all()
    deliver(DUE - timedelta(hours=1))
    # The heads of vision (the ticket has no assignee).
    assert [(email.to, email.subject) for email in mail.outbox] == [
        (["head-a@example.com"], f"Ticket #{ticket.pk} is due soon (2026-12-02 10:00): Fix NCCL")
    ]

    assert _scan(DUE + timedelta(minutes=5)) == {"due_soon": 0, "overdue": 1}
    assert _scan(DUE + timedelta(hours=5)) == {"due_soon": 0, "overdue": 0}
    assert _events() == ["ticket_due_soon", "ticket_overdue"]
    assert Ticket.objects.get(pk=ticket.pk).sla_notified == "overdue"
    assert ticket.history.count() == 1  # the mark is not a change of the ticket
    route_all()
    deliver(DUE + timedelta(minutes=5))
    assert mail.outbox[1].subject == f"Ticket #{ticket.pk} is overdue (was due 2026-12-02 10:00): Fix NCCL"


def test_a_ticket_found_overdue_at_once_gets_only_the_overdue_notice(notified):
    ticket_create(
        user=notified.admin, title="Late", department=notified.dept_a, severity="high", now=MONDAY_10
    )
    _scan(DUE + timedelta(days=1))
    assert _events() == ["ticket_overdue"]


def test_a_new_due_date_is_announced_again(notified):
    ticket = ticket_create(
        user=notified.admin, title="Reopened", department=notified.dept_a, severity="high", now=MONDAY_10
    )
    _scan(DUE + timedelta(minutes=5))
    # Waiting on the department, then resuming, moves the due date later and clears the mark.
    ticket = ticket_transition(ticket, "wait", user=notified.admin, now=DUE + timedelta(minutes=10))
    ticket = ticket_transition(ticket, "resume", user=notified.head_a, now=DUE + timedelta(days=2))
    assert ticket.sla_notified == ""
    assert _scan(ticket.due_at + timedelta(minutes=1)) == {"due_soon": 0, "overdue": 1}
    assert _events() == ["ticket_overdue", "ticket_overdue"]


def test_resolved_tickets_are_not_announced(notified):
    ticket = ticket_create(
        user=notified.admin, title="Done", department=notified.dept_a, severity="high", now=MONDAY_10
    )
    ticket_transition(ticket, "start", user=notified.head_a, now=MONDAY_10)
    ticket_transition(ticket, "resolve", user=notified.head_a, now=MONDAY_10 + timedelta(hours=1))
    assert _scan(DUE + timedelta(days=3)) == {"due_soon": 0, "overdue": 0}


def test_due_soon_starts_four_business_hours_before_the_due_date(notified):
    ticket_create(
        user=notified.admin, title="Edge", department=notified.dept_a, severity="high", now=MONDAY_10
    )
    # Tuesday 14:59 Shanghai: 4 h 1 min of working time left (Tue 14:59–18:00 and Wed 09:00–10:00).
    assert _scan(datetime(2026, 12, 1, 6, 59, tzinfo=UTC)) == {"due_soon": 0, "overdue": 0}
    assert _scan(datetime(2026, 12, 1, 7, 1, tzinfo=UTC)) == {"due_soon": 1, "overdue": 0}
