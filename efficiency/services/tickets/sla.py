"""The SLA of a ticket: its due date from the severity's business hours on the working calendar,
the clock paused while it waits on its department, and whether it is due soon or overdue."""

from datetime import datetime, time, timedelta
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from efficiency.analysis.tickets.calendar import (
    CHINA_HOLIDAYS_JSON,
    SlaStatus,
    WorkingCalendar,
    holidays_from_json,
)
from efficiency.choices import TicketState
from efficiency.models import Ticket

OK, DUE_SOON, OVERDUE = "ok", "due_soon", "overdue"


@cache
def _calendar(zone: str, hours: str, holidays_file: str) -> WorkingCalendar:
    try:
        start, end = (int(part) for part in hours.split("-"))
        holidays, workdays = holidays_from_json(holidays_file or CHINA_HOLIDAYS_JSON)
        return WorkingCalendar(
            zone=zone, day_start=time(start), day_end=time(end), holidays=holidays, extra_workdays=workdays
        )
    except (ValueError, OSError, KeyError) as error:
        raise ImproperlyConfigured(
            f"Working calendar (PORTAL_WORKING_ZONE={zone!r}, PORTAL_WORKING_HOURS={hours!r}, "
            f"PORTAL_HOLIDAYS_FILE={holidays_file!r}): {error}"
        ) from None


def working_calendar() -> WorkingCalendar:
    """The deployment's working calendar (settings ``PORTAL_WORKING_*``, ``PORTAL_HOLIDAYS_FILE``)."""
    return _calendar(
        settings.PORTAL_WORKING_ZONE, settings.PORTAL_WORKING_HOURS, settings.PORTAL_HOLIDAYS_FILE
    )


def sla_hours(severity: str) -> float:
    return float(settings.PORTAL_TICKET_SLA_HOURS[severity])


def due_at(created: datetime, severity: str) -> datetime:
    """When a ticket of ``severity`` opened at ``created`` is due."""
    return working_calendar().due_at(created, sla_hours(severity))


def due_after_pause(due: datetime, paused_at: datetime, resumed_at: datetime) -> datetime:
    """The due date after the clock stood still from ``paused_at`` to ``resumed_at``: later by the
    business time that passed in between (nights and weekends of the pause cost nothing)."""
    calendar = working_calendar()
    waited = calendar.business_seconds_between(paused_at, resumed_at)
    return calendar.add_business_seconds(due, waited) if waited > 0 else due


def sla_status(ticket: Ticket, now: datetime) -> SlaStatus | None:
    """ "ok", "due_soon" or "overdue" while the clock runs; ``None`` when it is paused or stopped.

    A ticket waiting on its department is measured at the moment it began to wait.
    """
    if ticket.state not in TicketState.active():
        return None
    at = ticket.paused_at if ticket.state == TicketState.WAITING_ON_DEPARTMENT and ticket.paused_at else now
    return working_calendar().sla_status(
        at, ticket.due_at, due_soon_s=settings.PORTAL_TICKET_DUE_SOON_HOURS * 3600
    )


def overdue_by(ticket: Ticket, now: datetime) -> timedelta | None:
    """How long past its due date a ticket whose clock runs is (wall-clock), else ``None``."""
    if sla_status(ticket, now) != OVERDUE:
        return None
    return now - ticket.due_at
