"""Who hears of what: each notification goes to its people (by email) and its channels.

| event                   | people, by email                      | channels (department's, cluster-wide) |
| ----------------------- | ------------------------------------- | ------------------------------------- |
| ticket_assigned         | the assignee                          | those that list it                    |
| ticket_due_soon         | the assignee, the department's heads  | listed by default                     |
| ticket_overdue          | the assignee, the department's heads  | listed by default                     |
| ticket_verified         | the department's heads                | those that list it                    |
| recommendation_accepted | the heads of the department fixing it | those that list it                    |
| incident_opened         | (subscribers only)                    | listed by default                     |
| pack_ready              | the committee (its group's members)   | those that list it                    |

On top of the table, **subscribers** hear of the events that are theirs to opt into (``OPT_IN``):
the committee and platform admins of every verification, anyone of the incidents they may see (a
head: their departments'). A person's subscription also mutes: a direct recipient whose
subscription leaves an event out, or has email switched off, does not hear of it. Without a
subscription a person hears every event they are a direct recipient of, and opts into nothing.
A person without an email address hears nothing.

A channel hears the events it lists (``NotificationChannel.events``) about its department, or about
every department when it has none.
"""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from efficiency import dispatch
from efficiency.choices import DeliveryState, Role
from efficiency.choices import NotificationEvent as E
from efficiency.models import Delivery, Department, Notification, NotificationChannel
from efficiency.permissions import user_role

ASSIGNEE, HEADS, COMMITTEE = "assignee", "heads", "committee"
# Direct recipients of each event (the first column of the table above).
ROUTES: dict[str, tuple[str, ...]] = {
    E.TICKET_ASSIGNED: (ASSIGNEE,),
    E.TICKET_DUE_SOON: (ASSIGNEE, HEADS),
    E.TICKET_OVERDUE: (ASSIGNEE, HEADS),
    E.TICKET_VERIFIED: (HEADS,),
    E.RECOMMENDATION_ACCEPTED: (HEADS,),
    E.INCIDENT_OPENED: (),
    E.PACK_READY: (COMMITTEE,),
}

# Events a role may subscribe to beyond the table (about what the person may see).
OPT_IN: dict[str, tuple[Role, ...]] = {
    E.TICKET_VERIFIED: (Role.COMMITTEE, Role.PLATFORM_ADMIN),
    E.INCIDENT_OPENED: (Role.DEPARTMENT_HEAD, Role.COMMITTEE, Role.PLATFORM_ADMIN),
}


def notification_route(notification: Notification, *, now=None) -> int:
    """Add ``notification`` to the pending delivery of each of its targets (one is made where
    none is open). Safe to run twice: a routed notification is left alone. Returns the targets."""
    now = now or timezone.now()
    with transaction.atomic():
        claimed = Notification.objects.filter(pk=notification.pk, routed_at__isnull=True).update(
            routed_at=now
        )
        if not claimed:
            return 0
        users = notification_users(notification)
        channels = notification_channels(notification)
        opened = [_add(notification, user=user) for user in users]
        opened += [_add(notification, channel=channel) for channel in channels]
    if any(opened):
        # A new delivery is sent when its window ends (the minutely sweep catches any other).
        dispatch.notifications_deliver(countdown_s=settings.PORTAL_NOTIFICATION_WINDOW_S + 1)
    return len(users) + len(channels)


def _add(notification: Notification, **target) -> bool:
    # The row lock keeps a sender from claiming this delivery while it is being added to (the
    # sender claims with a conditional update on the state, which waits for this transaction).
    delivery = (
        Delivery.objects.select_for_update().filter(state=DeliveryState.PENDING, attempts=0, **target).first()
    )
    opened = delivery is None
    if opened:
        # The window runs from the event, not from when a (possibly busy) worker routed it.
        at = notification.created_at
        delivery = Delivery.objects.create(
            created_at=at, due_at=at + timedelta(seconds=settings.PORTAL_NOTIFICATION_WINDOW_S), **target
        )
    delivery.notifications.add(notification)
    return opened


def notification_users(notification: Notification) -> list:
    """The people who hear of ``notification`` by email (the table above, then subscriptions)."""
    User = get_user_model()
    direct: set[int] = set()
    routes = ROUTES[notification.event]
    if ASSIGNEE in routes:
        direct.update(notification.user_ids)
        if notification.ticket_id and notification.event != E.TICKET_ASSIGNED:
            assignee_id = notification.ticket.assignee_id if notification.ticket else None
            if assignee_id:
                direct.add(assignee_id)
    if HEADS in routes and notification.department_id:
        direct.update(
            Department.objects.filter(pk=notification.department_id).values_list("heads", flat=True)
        )
    if COMMITTEE in routes:
        direct.update(User.objects.filter(groups__name=Role.COMMITTEE).values_list("pk", flat=True))
    direct.discard(None)
    candidates = (
        User.objects.filter(is_active=True).exclude(email="").select_related("notification_subscription")
    )
    people = []
    for user in candidates.filter(pk__in=direct):
        subscription = getattr(user, "notification_subscription", None)
        if subscription is None or (subscription.email and notification.event in subscription.events):
            people.append(user)
    subscribers = candidates.filter(
        notification_subscription__email=True,
        notification_subscription__isnull=False,
    ).exclude(pk__in=direct)
    opt_in = OPT_IN.get(notification.event, ())
    for user in subscribers:
        if (
            notification.event in user.notification_subscription.events
            and user_role(user) in opt_in
            and _may_see(user, notification)
        ):
            people.append(user)
    return people


def _may_see(user, notification: Notification) -> bool:
    role = user_role(user)
    if role in (Role.COMMITTEE, Role.PLATFORM_ADMIN):
        return True
    if role == Role.DEPARTMENT_HEAD and notification.department_id:
        return user.headed_departments.filter(pk=notification.department_id).exists()
    return False


def notification_channels(notification: Notification) -> list[NotificationChannel]:
    """The active channels that list the event, of its department or of every department."""
    channels = NotificationChannel.objects.filter(is_active=True, department__isnull=True)
    if notification.department_id:
        channels = channels | NotificationChannel.objects.filter(
            is_active=True, department_id=notification.department_id
        )
    return [channel for channel in channels.order_by("pk") if notification.event in (channel.events or [])]
