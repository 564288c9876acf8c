"""Notification channels in the admin: secrets (the robot's URL, the signing secret) are never
shown, a form sent back unchanged keeps them, and an unusable configuration is refused."""

import json

import pytest
from django.urls import reverse

from efficiency.config_secrets import MASK
from efficiency.models import NotificationChannel
from tests.conftest import PASSWORD
from tests.views.test_admin_pages import _form_data

HOOK = "https://oapi.dingtalk.com/robot/send?access_token=9f3c-robot-key"
SECRET = "SEC7d1c-signing-secret"


@pytest.fixture
def admin_client(client, org):
    client.login(username="admin", password=PASSWORD)
    return client


def _add(client, org, config, kind="dingtalk", **extra):
    data = {
        "name": "vision ding",
        "kind": kind,
        "department": org.dept_a.pk,
        "events": ["ticket_overdue", "incident_opened"],
        "config": json.dumps(config),
        "is_active": "on",
    } | extra
    return client.post(reverse("admin:efficiency_notificationchannel_add"), data, follow=True)


def test_a_channel_is_added_with_its_events_and_its_secrets_are_never_shown(admin_client, org):
    response = _add(admin_client, org, {"url": HOOK, "secret": SECRET})
    assert response.status_code == 200
    channel = NotificationChannel.objects.get()
    assert channel.events == ["ticket_overdue", "incident_opened"]
    assert channel.config == {"url": HOOK, "secret": SECRET}
    assert "is written into the configuration" in response.content.decode()  # better: {"env": …}

    change = reverse("admin:efficiency_notificationchannel_change", args=[channel.pk])
    page = admin_client.get(change).content.decode()
    assert "9f3c-robot-key" not in page
    assert SECRET not in page
    assert MASK in page
    data = _form_data(page)
    data["name"] = ["vision robot"]
    assert admin_client.post(change, data).status_code == 302
    channel.refresh_from_db()
    assert channel.name == "vision robot"
    assert channel.config == {"url": HOOK, "secret": SECRET}  # kept


def test_secrets_from_the_environment_are_accepted(admin_client, org):
    _add(admin_client, org, {"url": {"env": "VISION_DING_URL"}, "secret": {"env": "VISION_DING_SECRET"}})
    assert NotificationChannel.objects.get().config["secret"] == {"env": "VISION_DING_SECRET"}


@pytest.mark.parametrize(
    ("kind", "config", "reason"),
    [
        ("dingtalk", {"url": "ftp://robot"}, "needs &quot;url&quot;"),
        ("slack", {}, "needs &quot;url&quot;"),
        ("email", {"to": "ops@example.com"}, "needs &quot;to&quot;"),
        ("email", {"to": ["not an address"]}, "is not an email address"),
        ("feishu", {"url": "https://open.feishu.cn/x", "secret": {"env": "1BAD"}}, "environment reference"),
    ],
)
def test_an_unusable_configuration_is_refused_and_nothing_is_saved(admin_client, org, kind, config, reason):
    response = _add(admin_client, org, config, kind=kind)
    assert reason in response.content.decode()
    assert not NotificationChannel.objects.exists()
