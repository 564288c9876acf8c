"""A person's own choice of the notifications they hear of by email."""

from django.utils.translation import gettext as _

from efficiency.choices import NotificationEvent, Role
from efficiency.models import NotificationSubscription
from efficiency.permissions import user_role
from efficiency.services.notifications.routing import ASSIGNEE, HEADS, OPT_IN, ROUTES


class SubscriptionRefused(ValueError):
    """Bad input to ``subscription_save``: nothing was saved."""


def _direct(event: str, role: Role | None) -> bool:
    """Whether someone of ``role`` can be a direct recipient of ``event`` (anyone can be an
    assignee; heads are heads)."""
    routes = ROUTES[event]
    return ASSIGNEE in routes or (HEADS in routes and role == Role.DEPARTMENT_HEAD)


def subscribable_events(user) -> list[str]:
    """The events ``user`` may choose from: those they can be a direct recipient of, and those
    their role may opt into."""
    role = user_role(user)
    return [
        event for event in NotificationEvent.values if _direct(event, role) or role in OPT_IN.get(event, ())
    ]


def subscription_events(user) -> tuple[list[str], bool]:
    """The events ``user`` hears of, and whether by email: their subscription, or the defaults
    (every event they can be a direct recipient of, nothing opted into)."""
    subscription = NotificationSubscription.objects.filter(user=user).first()
    if subscription is not None:
        return list(subscription.events), subscription.email
    role = user_role(user)
    return [event for event in NotificationEvent.values if _direct(event, role)], True


def subscription_save(*, user, events: list[str], email: bool) -> NotificationSubscription:
    """Store ``user``'s choice; an event they may not choose is refused (``SubscriptionRefused``)."""
    allowed = subscribable_events(user)
    unknown = [event for event in events if event not in allowed]
    if unknown:
        raise SubscriptionRefused(
            _("These events cannot be chosen: %(events)s.") % {"events": ", ".join(unknown)}
        )
    subscription, _created = NotificationSubscription.objects.update_or_create(
        user=user,
        defaults={"events": sorted(set(events), key=NotificationEvent.values.index), "email": bool(email)},
    )
    return subscription
