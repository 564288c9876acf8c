"""A channel that fails is retried with backoff, then marked failed and shown to admins; the
worker and the other channels go on; nothing is lost silently."""

import socket
from datetime import timedelta

from django.core import mail
from django.urls import reverse

from efficiency.choices import DeliveryState
from efficiency.models import Delivery
from efficiency.services.notifications import delivery_retry
from efficiency.services.tickets import ticket_create
from tests.conftest import PASSWORD
from tests.services.notifications.conftest import MONDAY_10, channel
from tests.services.notifications.helpers import deliver, route_all

ASSIGNED = "ticket_assigned"


def _ticket(org):
    return ticket_create(
        user=org.admin,
        title="Fix the PFS cache",
        department=org.dept_a,
        severity="high",
        assignee=org.head_a,
        now=MONDAY_10,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_500_is_retried_with_backoff_then_failed_while_the_other_channels_are_delivered(notified, receiver):
    receiver.replies["wecom"] = (500, '{"errcode": -1, "errmsg": "system busy"}')
    broken = channel(receiver, "wecom", events=[ASSIGNED])
    channel(receiver, "slack", events=[ASSIGNED])
    _ticket(notified)
    route_all()

    # First try at the end of the window: Slack and the email go, WeCom waits 60 s.
    assert deliver(MONDAY_10) == {"retry": 1, "sent": 2}
    assert len(receiver.of("slack")) == 1
    assert len(mail.outbox) == 1
    failing = Delivery.objects.get(channel=broken)
    assert failing.state == DeliveryState.PENDING
    assert failing.attempts == 1
    assert failing.due_at == MONDAY_10 + timedelta(seconds=61 + 60)
    assert failing.last_error.startswith("127.0.0.1: HTTP 500")
    assert "/wecom/hook" not in failing.last_error  # the URL holds the robot's key

    assert deliver(MONDAY_10, after_s=61 + 59) == {}  # not yet
    assert deliver(MONDAY_10, after_s=61 + 60) == {"retry": 1}
    failing.refresh_from_db()
    assert failing.due_at == MONDAY_10 + timedelta(seconds=61 + 60 + 300)
    assert deliver(MONDAY_10, after_s=61 + 60 + 300) == {"failed": 1}
    failing.refresh_from_db()
    assert (failing.state, failing.attempts) == (DeliveryState.FAILED, 3)
    assert len(receiver.of("wecom")) == 3
    assert len(receiver.of("slack")) == 1  # sent once, not again


def test_an_ok_http_status_with_an_error_code_is_a_failure(notified, receiver):
    receiver.replies["wecom"] = (200, '{"errcode": 93000, "errmsg": "invalid webhook url"}')
    channel(receiver, "wecom", events=[ASSIGNED])
    _ticket(notified)
    route_all()
    deliver(MONDAY_10)
    failing = Delivery.objects.get(channel__isnull=False)
    assert failing.last_error == "127.0.0.1: errcode 93000: invalid webhook url"


def test_a_refused_connection_is_recorded_and_the_worker_goes_on(notified, receiver):
    from efficiency.models import NotificationChannel

    NotificationChannel.objects.create(
        name="gone",
        kind="slack",
        events=[ASSIGNED],
        config={"url": f"http://127.0.0.1:{_free_port()}/T0/B0/secret"},
    )
    channel(receiver, "feishu", events=[ASSIGNED])
    _ticket(notified)
    route_all()
    assert deliver(MONDAY_10) == {"retry": 1, "sent": 2}
    failing = Delivery.objects.get(channel__name="gone")
    assert failing.last_error == "127.0.0.1: ConnectionError (cannot connect)"
    assert len(receiver.of("feishu")) == 1


def test_a_missing_environment_secret_is_a_failure_that_names_the_variable(notified, receiver, monkeypatch):
    from efficiency.models import NotificationChannel

    monkeypatch.delenv("VISION_DINGTALK_SECRET", raising=False)
    NotificationChannel.objects.create(
        name="ding",
        kind="dingtalk",
        events=[ASSIGNED],
        config={"url": receiver.url("dingtalk"), "secret": {"env": "VISION_DINGTALK_SECRET"}},
    )
    _ticket(notified)
    route_all()
    deliver(MONDAY_10)
    failing = Delivery.objects.get(channel__name="ding")
    assert "VISION_DINGTALK_SECRET" in failing.last_error
    assert receiver.received == []


def test_failed_deliveries_are_listed_for_admins_with_their_error_and_can_be_retried(
    notified, receiver, client
):
    receiver.replies["slack"] = (404, "no_service")
    channel(receiver, "slack", events=[ASSIGNED], name="ops slack")
    _ticket(notified)
    route_all()
    for after_s in (61, 61 + 60, 61 + 60 + 300):
        deliver(MONDAY_10, after_s=after_s)
    failed = Delivery.objects.get(state=DeliveryState.FAILED)
    assert failed.last_error == "127.0.0.1: HTTP 404: no_service"

    notified.admin.is_staff = True
    notified.admin.save()
    client.login(username="admin", password=PASSWORD)
    page = client.get(reverse("admin:efficiency_delivery_changelist") + "?state__exact=failed")
    assert page.status_code == 200
    assert "ops slack" in page.content.decode()
    assert "HTTP 404: no_service" in page.content.decode()

    receiver.replies.pop("slack")
    delivery_retry(failed, now=MONDAY_10 + timedelta(hours=1))
    assert deliver(MONDAY_10 + timedelta(hours=1), after_s=0) == {"sent": 1}
    failed.refresh_from_db()
    assert failed.state == DeliveryState.SENT
    assert failed.last_error == ""


def test_the_platform_admins_home_page_counts_failed_deliveries(notified, client):
    from efficiency.models import NotificationChannel

    NotificationChannel.objects.create(
        name="gone", kind="slack", events=[ASSIGNED], config={"url": f"http://127.0.0.1:{_free_port()}/x"}
    )
    _ticket(notified)
    route_all()
    client.login(username="admin", password=PASSWORD)
    assert 'id="failed-deliveries"' not in client.get("/").content.decode()
    for after_s in (61, 61 + 60, 61 + 60 + 300):
        deliver(MONDAY_10, after_s=after_s)
    page = client.get("/").content.decode()
    assert "1 notification could not be sent." in page
    assert "/admin/efficiency/delivery/?state__exact=failed" in page


def test_an_unexpected_error_in_one_channel_is_recorded_and_the_others_are_sent(
    notified, receiver, monkeypatch
):
    from efficiency.services.notifications import deliver as deliver_module

    real_send = deliver_module.channel_send

    def flaky(kind, config, message, **kwargs):
        if kind == "wecom":
            raise RuntimeError("a bug in the client")
        return real_send(kind, config, message, **kwargs)

    monkeypatch.setattr(deliver_module, "channel_send", flaky)
    channel(receiver, "wecom", events=[ASSIGNED])
    channel(receiver, "slack", events=[ASSIGNED])
    _ticket(notified)
    route_all()
    assert deliver(MONDAY_10) == {"retry": 1, "sent": 2}
    assert Delivery.objects.get(channel__kind="wecom").last_error == "RuntimeError: a bug in the client"
    assert len(receiver.of("slack")) == 1
