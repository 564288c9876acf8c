"""Notifications: events recorded by the services, delivered by the workers.

``notification_emit`` is what a service calls when something happened: it inserts one
``Notification`` row in the caller's transaction (rolled back with it) and, once that commits, a
worker routes it (``routing``: who hears what) and later sends it (``deliver``: batched per target,
a digest when many pile up, retried with backoff). Nothing here blocks a request on a network call.
"""

from datetime import datetime

from django.utils import timezone

from efficiency import dispatch
from efficiency.choices import NotificationEvent
from efficiency.models import Incident, Notification, Recommendation, Ticket
from efficiency.services.notifications.deliver import delivery_retry, notifications_deliver
from efficiency.services.notifications.routing import ROUTES, notification_route
from efficiency.services.notifications.sla import notifications_sla_scan
from efficiency.services.notifications.subscriptions import (
    SubscriptionRefused,
    subscribable_events,
    subscription_events,
    subscription_save,
)

__all__ = [
    "ROUTES",
    "SubscriptionRefused",
    "delivery_retry",
    "notification_emit",
    "notification_route",
    "notifications_deliver",
    "notifications_sla_scan",
    "subscribable_events",
    "subscription_events",
    "subscription_save",
]


def notification_emit(
    event: str,
    *,
    now: datetime | None = None,
    users=(),
    ticket: Ticket | None = None,
    recommendation: Recommendation | None = None,
    incident: Incident | None = None,
) -> Notification:
    """Record that ``event`` happened to a ticket, a recommendation or an incident; ``users`` are
    people the caller names as recipients (a ticket's new assignee). Routed after commit."""
    event = NotificationEvent(event)
    department_id = None
    payload: dict = {}
    if ticket is not None:
        department_id = ticket.department_id
        payload = _ticket_payload(ticket)
    elif recommendation is not None:
        department_id = recommendation.assignee_department_id or recommendation.department_id
        payload = _recommendation_payload(recommendation)
    elif incident is not None:
        department_id = incident.department_id
        payload = _incident_payload(incident)
    users = [user for user in users if user is not None]
    if event == NotificationEvent.TICKET_ASSIGNED and users:
        payload["assignee"] = _name(users[0])  # the one it is assigned to now, saved or not
    notification = Notification.objects.create(
        event=event,
        created_at=now or timezone.now(),
        department_id=department_id,
        ticket=ticket,
        recommendation=recommendation,
        incident=incident,
        payload=payload,
        user_ids=[user.pk for user in users],
    )
    dispatch.notification_route(notification.pk)
    return notification


def _name(user) -> str:
    if user is None:
        return ""
    return user.get_full_name() or user.get_username()


def _ticket_payload(ticket: Ticket) -> dict:
    return {
        "id": ticket.pk,
        "title": ticket.title,
        "severity": ticket.severity,
        "state": ticket.state,
        "due_at": ticket.due_at.isoformat() if ticket.due_at else None,
        "department": ticket.department.name,
        "assignee": _name(ticket.assignee),
        "measured_gain_pct": ticket.measured_gain_pct,
    }


def _recommendation_payload(recommendation: Recommendation) -> dict:
    department = recommendation.assignee_department or recommendation.department
    ticket = recommendation.tickets.order_by("-pk").first()
    return {
        "id": recommendation.pk,
        "rule": recommendation.rule,
        "subject": recommendation.subject_key,
        "department": department.name if department else "",
        "gain_gpu_h_week": recommendation.gain_gpu_h_week,
        "ticket_id": ticket.pk if ticket else None,
    }


def _incident_payload(incident: Incident) -> dict:
    return {
        "id": incident.pk,
        "category": incident.category,
        "severity": incident.severity,
        "code": incident.code,
        "node": incident.node.hostname if incident.node_id else "",
        "job": incident.job.external_id if incident.job_id else "",
        "department": incident.department.name if incident.department_id else "",
        "occurred_at": incident.occurred_at.isoformat(),
    }
