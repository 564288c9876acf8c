"""Who hears of what (the table in efficiency.services.notifications.routing)."""

from datetime import timedelta

from efficiency.choices import TicketState
from efficiency.models import Notification, NotificationChannel
from efficiency.services.notifications import notification_emit, notification_route, subscription_save
from efficiency.services.notifications.routing import notification_channels, notification_users
from efficiency.services.tickets import ticket_create
from tests.factories import IncidentFactory, UserFactory
from tests.services.notifications.conftest import MONDAY_10


def _ticket(org, **fields):
    values = {
        "user": org.admin,
        "title": "Fix it",
        "department": org.dept_a,
        "severity": "high",
        "now": MONDAY_10,
    }
    return ticket_create(**(values | fields))


def _names(users) -> list[str]:
    return sorted(user.username for user in users)


def test_an_overdue_ticket_reaches_its_assignee_and_the_departments_heads(notified):
    engineer = UserFactory(username="engineer", email="engineer@example.com")
    ticket = _ticket(notified)
    ticket.assignee = engineer
    second_head = UserFactory(username="head-a2", email="a2@example.com")
    notified.dept_a.heads.add(second_head)
    ticket.save()
    notification = notification_emit("ticket_overdue", ticket=ticket, now=MONDAY_10)
    assert _names(notification_users(notification)) == ["engineer", "head-a", "head-a2"]


def test_a_verification_reaches_the_heads_and_the_committee_members_who_follow_them(notified):
    ticket = _ticket(notified)
    ticket.state = TicketState.VERIFIED_GAIN
    notification = notification_emit("ticket_verified", ticket=ticket, now=MONDAY_10)
    assert _names(notification_users(notification)) == ["head-a"]
    subscription_save(user=notified.committee, events=["ticket_verified"], email=True)
    assert _names(notification_users(notification)) == ["committee", "head-a"]


def test_heads_hear_of_incidents_only_of_their_departments_and_only_when_subscribed(notified):
    incident = IncidentFactory(cluster=notified.cluster, department=notified.dept_a, job=notified.job_a)
    notification = notification_emit("incident_opened", incident=incident, now=MONDAY_10)
    assert notification_users(notification) == []
    for user in (notified.head_a, notified.head_b, notified.admin):
        subscription_save(user=user, events=["incident_opened"], email=True)
    assert _names(notification_users(notification)) == ["admin", "head-a"]


def test_a_subscription_can_mute_an_event_or_email_altogether(notified):
    ticket = _ticket(notified, assignee=notified.head_a)
    [assigned] = Notification.objects.filter(event="ticket_assigned")
    assert _names(notification_users(assigned)) == ["head-a"]
    subscription_save(user=notified.head_a, events=["ticket_overdue"], email=True)
    assert notification_users(assigned) == []
    subscription_save(user=notified.head_a, events=["ticket_assigned"], email=False)
    assert notification_users(assigned) == []
    assert ticket.pk


def test_a_person_without_an_email_address_hears_nothing(notified):
    notified.head_a.email = ""
    notified.head_a.save()
    _ticket(notified, assignee=notified.head_a)
    [assigned] = Notification.objects.filter(event="ticket_assigned")
    assert notification_users(assigned) == []


def test_channels_hear_their_department_and_cluster_wide_ones_every_department(notified):
    vision = NotificationChannel.objects.create(name="vision", kind="slack", department=notified.dept_a)
    radar = NotificationChannel.objects.create(name="radar", kind="slack", department=notified.dept_b)
    ops = NotificationChannel.objects.create(name="ops", kind="slack")
    NotificationChannel.objects.create(name="off", kind="slack", is_active=False)
    incident = IncidentFactory(cluster=notified.cluster, department=notified.dept_a, job=notified.job_a)
    notification = notification_emit("incident_opened", incident=incident, now=MONDAY_10)
    assert notification_channels(notification) == [vision, ops]
    assert radar.pk


def test_routing_twice_adds_nothing_twice(notified):
    _ticket(notified, assignee=notified.head_a)
    [assigned] = Notification.objects.filter(event="ticket_assigned")
    assert notification_route(assigned, now=MONDAY_10 + timedelta(seconds=1)) == 1
    assert notification_route(assigned, now=MONDAY_10 + timedelta(seconds=2)) == 0
    assert assigned.deliveries.count() == 1


def test_an_event_rolled_back_with_its_transaction_is_not_recorded(notified):
    from django.db import transaction

    try:
        with transaction.atomic():
            _ticket(notified, assignee=notified.head_a)
            raise RuntimeError("the request failed")
    except RuntimeError:
        pass
    assert not Notification.objects.exists()
