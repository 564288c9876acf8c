"""Notifications: events recorded by the services, delivered by the workers.

Placeholder until the notification area lands: events are accepted and not delivered yet.
"""

from datetime import datetime


def notification_emit(event: str, *, now: datetime | None = None, users=(), **subjects) -> None:
    """Record that ``event`` happened to ``subjects`` (ticket, recommendation, incident)."""
