"""A burst of events is one digest per target, and what users wrote cannot reshape a message."""

import json
from datetime import timedelta

from django.core import mail
from hypothesis import given
from hypothesis import strategies as st

from efficiency.models import Delivery
from efficiency.services.notifications import notification_emit
from efficiency.services.notifications.channels import CHAT_MAX_BYTES, markdown_escape, slack_escape
from efficiency.services.tickets import ticket_create
from tests.services.notifications.conftest import MONDAY_10, channel
from tests.services.notifications.helpers import deliver, route_all

ASSIGNED = "ticket_assigned"


def test_a_burst_of_200_events_is_one_digest_per_target(notified, receiver):
    for kind in ("wecom", "dingtalk", "feishu", "slack"):
        channel(receiver, kind, events=[ASSIGNED], secret="s" if kind in ("dingtalk", "feishu") else "")
    ticket = ticket_create(user=notified.admin, title="Burst", department=notified.dept_a, now=MONDAY_10)
    for second in range(200):
        notification_emit(
            ASSIGNED, ticket=ticket, users=[notified.head_a], now=MONDAY_10 + timedelta(seconds=second % 50)
        )
    route_all()

    assert deliver(MONDAY_10) == {"sent": 5}
    assert [r.kind for r in receiver.received].count("wecom") == 1
    assert len(receiver.received) == 4
    [email] = mail.outbox
    assert email.subject == "Digest: 200 notifications from the GPU Efficiency Portal"
    assert "… and 180 more: see the portal." in email.body
    wecom = receiver.of("wecom")[0].body["markdown"]["content"]
    assert wecom.startswith("**Digest: 200 notifications")
    assert wecom.endswith("more: see the portal.")
    for sent in receiver.received:
        assert len(json.dumps(sent.body, ensure_ascii=False).encode()) < CHAT_MAX_BYTES + 1000
    assert all(delivery.digest for delivery in Delivery.objects.all())
    assert {delivery.notifications.count() for delivery in Delivery.objects.all()} == {200}


def test_a_few_events_are_listed_in_one_message_and_a_single_one_stands_alone(notified):
    ticket = ticket_create(user=notified.admin, title="Few", department=notified.dept_a, now=MONDAY_10)
    for _ in range(3):
        notification_emit(ASSIGNED, ticket=ticket, users=[notified.head_a], now=MONDAY_10)
    notification_emit(ASSIGNED, ticket=ticket, users=[notified.head_b], now=MONDAY_10)
    route_all()
    deliver(MONDAY_10)
    subjects = sorted((email.to[0], email.subject) for email in mail.outbox)
    assert subjects == [
        ("head-a@example.com", "3 notifications from the GPU Efficiency Portal"),
        ("head-b@example.com", f"Ticket #{ticket.pk} assigned to head-b: Few"),
    ]


def test_events_after_the_window_go_in_the_next_message(notified):
    ticket = ticket_create(user=notified.admin, title="Later", department=notified.dept_a, now=MONDAY_10)
    notification_emit(ASSIGNED, ticket=ticket, users=[notified.head_a], now=MONDAY_10)
    route_all()
    deliver(MONDAY_10)
    notification_emit(ASSIGNED, ticket=ticket, users=[notified.head_a], now=MONDAY_10 + timedelta(minutes=5))
    route_all()
    deliver(MONDAY_10 + timedelta(minutes=5))
    assert len(mail.outbox) == 2
    assert Delivery.objects.count() == 2


HOSTILE = (
    '[click me](http://evil.example) <@all> <font color="warning">**BOSS**</font> `rm` #1\n# heading '
    + "x" * 5000
)


def test_hostile_titles_are_escaped_and_cut_in_every_channel(notified, receiver):
    for kind in ("wecom", "dingtalk", "feishu", "slack"):
        channel(receiver, kind, events=[ASSIGNED])
    ticket_create(
        user=notified.admin,
        title=HOSTILE[:200],
        department=notified.dept_a,
        assignee=notified.head_a,
        now=MONDAY_10,
    )
    route_all()
    deliver(MONDAY_10)

    wecom = receiver.of("wecom")[0].body["markdown"]["content"]
    ding = receiver.of("dingtalk")[0].body["markdown"]["text"]
    for text in (wecom, ding):
        assert "[click me](http://evil.example)" not in text
        assert "\\[click me\\]\\(http://evil.example\\)" in text
        assert "<" not in text
        assert "\n# heading" not in text
    feishu = receiver.of("feishu")[0].body["content"]["text"]
    assert "<" not in feishu
    slack = receiver.of("slack")[0].body["text"]
    assert "<http://evil.example" not in slack
    assert "&lt;@all&gt;" in slack
    # The title is cut to one line of at most 120 characters, marked with an ellipsis.
    [email] = mail.outbox
    assert "\n" not in email.subject
    assert "…" in email.subject
    assert len(email.subject) < 200


@given(st.text(max_size=300))
def test_escaped_markdown_has_no_unescaped_markup(text):
    escaped = markdown_escape(text)
    assert "<" not in escaped
    assert ">" not in escaped
    # Every markdown punctuation character is preceded by a backslash.
    i = 0
    while i < len(escaped):
        if escaped[i] == "\\":
            i += 2
            continue
        assert escaped[i] not in "`*_[]()~"
        i += 1


@given(st.text(max_size=300))
def test_escaped_slack_text_has_no_control_sequences(text):
    escaped = slack_escape(text)
    assert "<" not in escaped
    assert ">" not in escaped
    assert escaped.replace("&amp;", "").replace("&lt;", "").replace("&gt;", "").count("&") == 0
