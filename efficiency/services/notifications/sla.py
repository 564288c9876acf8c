"""The SLA scan: tickets that became due soon or overdue are announced once per due date."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from efficiency.choices import NotificationEvent, TicketState
from efficiency.models import Ticket

DUE_SOON, OVERDUE = "due_soon", "overdue"


def notifications_sla_scan(*, now: datetime | None = None) -> dict[str, int]:
    """Emit ``ticket_due_soon`` / ``ticket_overdue`` for each running ticket that reached it.

    ``Ticket.sla_notified`` remembers what was announced for the current due date (the ticket
    services clear it when the due date moves); a ticket found overdue before its "due soon" was
    announced gets only the overdue notice. Safe to run twice.
    """
    # Imported here: the ticket services emit notifications, so a module-level import is a cycle.
    from efficiency.services.notifications import notification_emit
    from efficiency.services.tickets import sla_status

    now = now or timezone.now()
    counts = {DUE_SOON: 0, OVERDUE: 0}
    running = (
        Ticket.objects.filter(state__in=TicketState.active())
        .exclude(sla_notified=OVERDUE)
        .select_related("department", "assignee")
    )
    for ticket in running:
        status = sla_status(ticket, now)
        if status == OVERDUE:
            event, mark = NotificationEvent.TICKET_OVERDUE, OVERDUE
        elif status == DUE_SOON and ticket.sla_notified != DUE_SOON:
            event, mark = NotificationEvent.TICKET_DUE_SOON, DUE_SOON
        else:
            continue
        with transaction.atomic():
            # Claimed with a conditional update, so that two scans announce it once.
            if not Ticket.objects.filter(
                pk=ticket.pk, sla_notified=ticket.sla_notified, due_at=ticket.due_at
            ).update(sla_notified=mark):
                continue
            ticket.sla_notified = mark
            notification_emit(event, ticket=ticket, now=now)
        counts[mark] += 1
    return counts
