"""From a service's event to the message each channel receives: the payload each vendor documents,
its signature recomputed here from the vendor's formula, and the email in Django's outbox."""

import base64
import hashlib
import hmac
import time
from datetime import timedelta

from django.core import mail

from efficiency.choices import DeliveryState
from efficiency.models import Delivery
from efficiency.services.notifications import notification_emit
from efficiency.services.tickets import ticket_create
from tests.services.notifications.conftest import MONDAY_10, channel
from tests.services.notifications.helpers import deliver, route_all

ASSIGNED = "ticket_assigned"


def _assigned_ticket(org, title="Turn on NCCL RDMA for vision-train"):
    return ticket_create(
        user=org.admin,
        title=title,
        department=org.dept_a,
        severity="high",
        assignee=org.head_a,
        now=MONDAY_10,
    )


def test_an_assigned_ticket_reaches_the_assignee_by_email_with_a_link_to_the_ticket(notified):
    ticket = _assigned_ticket(notified)

    assert route_all() == 1
    assert mail.outbox == []  # nothing before the batching window ends
    deliver(MONDAY_10, after_s=30)
    assert mail.outbox == []
    assert deliver(MONDAY_10) == {"sent": 1}

    [email] = mail.outbox
    assert email.to == ["head-a@example.com"]
    assert email.subject == f"Ticket #{ticket.pk} assigned to head-a: Turn on NCCL RDMA for vision-train"
    assert f"https://portal.example.com/tickets/{ticket.pk}/" in email.body
    assert "Department: Vehicle vision" in email.body
    assert "Severity: High" in email.body
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts, delivery.sent_at) == (
        DeliveryState.SENT,
        1,
        MONDAY_10 + timedelta(seconds=61),
    )


def test_wecom_gets_a_markdown_message(notified, receiver):
    channel(receiver, "wecom", department=notified.dept_a, events=[ASSIGNED])
    ticket = _assigned_ticket(notified)
    route_all()
    deliver(MONDAY_10)

    [sent] = receiver.of("wecom")
    assert set(sent.body) == {"msgtype", "markdown"}
    assert sent.body["msgtype"] == "markdown"
    content = sent.body["markdown"]["content"]
    assert content.startswith(
        f"**Ticket #{ticket.pk} assigned to head-a: Turn on NCCL RDMA for vision-train**"
    )
    assert f"[Open in the portal](https://portal.example.com/tickets/{ticket.pk}/)" in content
    assert len(content.encode()) <= 4096


def test_dingtalk_gets_a_signed_url_whose_hmac_matches_the_vendor_formula(notified, receiver):
    secret = "SECd1ngta1k-secret"
    channel(receiver, "dingtalk", department=notified.dept_a, events=[ASSIGNED], secret=secret)
    ticket = _assigned_ticket(notified)
    route_all()
    before_ms = int(time.time() * 1000)
    deliver(MONDAY_10)

    [sent] = receiver.of("dingtalk")
    assert sent.query["access_token"] == ["tok-123"]
    [timestamp], [sign] = sent.query["timestamp"], sent.query["sign"]  # parse_qs URL-decoded it once
    assert before_ms <= int(timestamp) <= int(time.time() * 1000)  # milliseconds, now
    expected = base64.b64encode(
        hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256).digest()
    ).decode()
    assert sign == expected
    assert sent.body["msgtype"] == "markdown"
    assert sent.body["markdown"]["title"].startswith(f"Ticket #{ticket.pk} assigned")
    assert f"(https://portal.example.com/tickets/{ticket.pk}/)" in sent.body["markdown"]["text"]


def test_dingtalk_sign_is_url_encoded_in_the_query(notified, receiver):
    # A base64 signature holds "+", "/" and "=": sent raw, "+" would arrive as a space.
    from efficiency.services.notifications.channels import dingtalk_sign

    assert any(c in dingtalk_sign("s", str(ts)) for ts in range(1700000000000, 1700000000050) for c in "+/")
    secret = "s"
    channel(receiver, "dingtalk", events=[ASSIGNED], secret=secret)
    _assigned_ticket(notified)
    route_all()
    deliver(MONDAY_10)
    [sent] = receiver.of("dingtalk")
    assert sent.query["sign"] == [dingtalk_sign(secret, sent.query["timestamp"][0])]


def test_feishu_gets_a_signed_body_whose_hmac_matches_the_vendor_formula(notified, receiver):
    secret = "fe1shu-secret"
    channel(receiver, "feishu", department=notified.dept_a, events=[ASSIGNED], secret=secret)
    ticket = _assigned_ticket(notified)
    route_all()
    before_s = int(time.time())
    deliver(MONDAY_10)

    [sent] = receiver.of("feishu")
    assert set(sent.body) == {"timestamp", "sign", "msg_type", "content"}
    timestamp = sent.body["timestamp"]
    assert isinstance(timestamp, str)
    assert before_s <= int(timestamp) <= int(time.time())  # seconds
    # Feishu: the key is timestamp + "\n" + secret, the message signed is empty.
    expected = base64.b64encode(
        hmac.new(f"{timestamp}\n{secret}".encode(), b"", hashlib.sha256).digest()
    ).decode()
    assert sent.body["sign"] == expected
    assert sent.body["msg_type"] == "text"
    text = sent.body["content"]["text"]
    assert text.startswith(f"Ticket #{ticket.pk} assigned to head-a")
    assert f"https://portal.example.com/tickets/{ticket.pk}/" in text


def test_feishu_without_a_secret_sends_no_signature(notified, receiver):
    channel(receiver, "feishu", events=[ASSIGNED])
    _assigned_ticket(notified)
    route_all()
    deliver(MONDAY_10)
    [sent] = receiver.of("feishu")
    assert set(sent.body) == {"msg_type", "content"}


def test_slack_gets_text_with_a_link(notified, receiver):
    channel(receiver, "slack", department=notified.dept_a, events=[ASSIGNED])
    ticket = _assigned_ticket(notified)
    route_all()
    deliver(MONDAY_10)

    [sent] = receiver.of("slack")
    assert set(sent.body) == {"text"}
    assert sent.body["text"].startswith(f"*Ticket #{ticket.pk} assigned to head-a")
    assert f"<https://portal.example.com/tickets/{ticket.pk}/|Open in the portal>" in sent.body["text"]


def test_an_email_channel_mails_its_list(notified):
    from efficiency.models import NotificationChannel

    NotificationChannel.objects.create(
        name="vision list",
        kind="email",
        department=notified.dept_a,
        events=[ASSIGNED],
        config={"to": ["vision@example.com"]},
    )
    _assigned_ticket(notified)
    route_all()
    deliver(MONDAY_10)
    assert sorted(email.to[0] for email in mail.outbox) == ["head-a@example.com", "vision@example.com"]


def test_a_channel_hears_only_its_events_and_its_department(notified, receiver):
    channel(receiver, "wecom", department=notified.dept_b, events=[ASSIGNED], name="radar")
    channel(receiver, "slack", department=notified.dept_a, name="vision")  # default events: SLA and incidents
    _assigned_ticket(notified)  # a vision ticket, assigned
    route_all()
    deliver(MONDAY_10)
    assert receiver.received == []


def test_an_incident_opened_by_the_fault_service_reaches_the_department_channel(notified, receiver):
    from efficiency.services.faults import incidents_group
    from tests.factories import FaultSignalFactory

    channel(receiver, "wecom", department=notified.dept_a)  # default events include incident_opened
    signal = FaultSignalFactory(cluster=notified.cluster, node=notified.node_a, job=notified.job_a)
    assert incidents_group(cluster=notified.cluster) == 1
    route_all()
    deliver(signal.detected_at, after_s=3600)

    [sent] = receiver.of("wecom")
    incident = signal.__class__.objects.get(pk=signal.pk).incident
    content = sent.body["markdown"]["content"]
    assert f"Incident #{incident.pk} opened" in content
    assert "gpu-a01" in content
    assert f"(https://portal.example.com/faults/incidents/{incident.pk}/)" in content


def test_a_recommendation_accepted_goes_to_the_heads_of_the_department_making_the_change(notified):
    from tests.factories import RecommendationFactory

    recommendation = RecommendationFactory(department=notified.dept_b, assignee_department=notified.dept_a)
    notification_emit("recommendation_accepted", recommendation=recommendation, now=MONDAY_10)
    route_all()
    deliver(MONDAY_10)
    [email] = mail.outbox
    assert email.to == ["head-a@example.com"]
    assert email.subject.startswith(f"Recommendation #{recommendation.pk} accepted")
