"""The admin's source and actuator forms: a secret is never shown (form, list, history), a form
sent back unchanged keeps it, a literal one is warned about, and an unusable configuration is
refused on save with the key named."""

import json
import logging

import pytest
from django.urls import reverse

from efficiency.choices import ActionKind, Role, SourceKind
from efficiency.config_secrets import MASK
from efficiency.models import ActuatorConfig, DataSource
from tests.conftest import PASSWORD
from tests.factories import UserFactory
from tests.views.test_admin_pages import _form_data

SECRET = "Bearer zq81-literal-token"
HOOK_SECRET = "hmac-key-55f0c1"


@pytest.fixture
def platform_admin(client, org):
    UserFactory(username="ops", role=Role.PLATFORM_ADMIN)
    client.login(username="ops", password=PASSWORD)


def _add_source(client, org, config: dict):
    return client.post(
        reverse("admin:efficiency_datasource_add"),
        {
            "cluster": org.cluster.pk,
            "name": "prom",
            "kind": SourceKind.PROMETHEUS,
            "config": json.dumps(config),
            "enabled": "on",
            "interval_s": "60",
            "state": "{}",
        },
        follow=True,
    )


def test_a_literal_secret_is_stored_warned_about_and_never_shown(client, org, platform_admin, caplog):
    caplog.set_level(logging.DEBUG)
    response = _add_source(client, org, {"base_url": "http://prom:9090", "auth_header": SECRET})
    assert response.status_code == 200
    page = response.content.decode()
    assert "The secret in auth_header is written into the configuration" in page
    source = DataSource.objects.get(name="prom")
    assert source.config["auth_header"] == SECRET  # a literal secret still works

    change = reverse("admin:efficiency_datasource_change", args=[source.pk])
    form_page = client.get(change).content.decode()
    assert MASK in form_page
    assert "{&quot;env&quot;: &quot;NAME&quot;}" in form_page or '{"env": "NAME"}' in form_page  # the help
    # Sent back as shown, with another change: the stored secret is kept.
    data = _form_data(form_page)
    data["interval_s"] = ["120"]
    assert client.post(change, data).status_code == 302
    source.refresh_from_db()
    assert source.config["auth_header"] == SECRET
    assert source.interval_s == 120

    # Replaced by a reference: the literal leaves the current row.
    data = _form_data(client.get(change).content.decode())
    data["config"] = [json.dumps({"base_url": "http://prom:9090", "auth_header": {"env": "PROM_AUTH"}})]
    assert client.post(change, data).status_code == 302
    source.refresh_from_db()
    assert source.config["auth_header"] == {"env": "PROM_AUTH"}

    history = reverse("admin:efficiency_datasource_history", args=[source.pk])
    history_page = client.get(history).content.decode()
    assert "auth_header" in history_page  # the change is listed…
    versions = source.history.order_by("history_id")
    pages = [
        client.get(changelist).content.decode()
        for changelist in (
            reverse("admin:efficiency_datasource_changelist"),
            *(
                reverse("admin:efficiency_datasource_simple_history", args=[source.pk, version.pk])
                for version in versions
            ),
        )
    ]
    for shown in (form_page, history_page, *pages, client.get("/sources/").content.decode()):
        assert SECRET not in shown  # …and no page shows the secret
    assert SECRET not in client.get(f"/sources/{source.pk}/").content.decode()
    assert SECRET not in caplog.text


def test_a_reference_is_shown_as_written_and_not_warned_about(client, org, platform_admin):
    response = _add_source(client, org, {"base_url": "http://prom:9090", "auth_header": {"env": "PROM_AUTH"}})
    assert "is written into the configuration" not in response.content.decode()
    source = DataSource.objects.get(name="prom")
    page = client.get(reverse("admin:efficiency_datasource_change", args=[source.pk])).content.decode()
    assert json.loads(_form_data(page)["config"][0])["auth_header"] == {"env": "PROM_AUTH"}


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"base_url": "http://prom:9090", "lag_s": "sixty"}, "&#x27;lag_s&#x27;"),
        ({"base_url": "http://prom:9090", "auth_header": MASK}, "&#x27;auth_header&#x27;"),
        ({"base_url": "http://prom:9090", "stepp_s": 30}, "&#x27;stepp_s&#x27;"),
    ],
)
def test_an_unusable_configuration_is_refused_on_save_naming_the_key(
    client, org, platform_admin, config, named
):
    response = _add_source(client, org, config)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["config"]
    assert "This configuration cannot be used" in response.content.decode()
    assert named in response.content.decode()
    assert not DataSource.objects.filter(name="prom").exists()


def test_a_webhook_secret_is_masked_kept_and_its_config_checked(client, org, platform_admin):
    actuator = ActuatorConfig.objects.create(
        name="notify",
        action=ActionKind.NOTIFY,
        config={"type": "webhook", "url": "https://hooks.example.com/a", "secret": HOOK_SECRET},
    )
    change = reverse("admin:efficiency_actuatorconfig_change", args=[actuator.pk])
    page = client.get(change).content.decode()
    assert HOOK_SECRET not in page
    assert MASK in page
    data = _form_data(page)
    data["name"] = ["chat-notify"]
    response = client.post(change, data, follow=True)
    assert "The secret in secret is written into the configuration" in response.content.decode()
    actuator.refresh_from_db()
    assert actuator.config["secret"] == HOOK_SECRET
    assert actuator.name == "chat-notify"
    assert (
        HOOK_SECRET not in client.get(reverse("admin:efficiency_actuatorconfig_changelist")).content.decode()
    )

    data = _form_data(client.get(change).content.decode())
    data["config"] = [json.dumps({"type": "webhook", "url": "https://hooks.example.com/a", "timeout_s": 0})]
    response = client.post(change, data)
    assert response.status_code == 200
    assert "&#x27;timeout_s&#x27;" in response.content.decode()


def test_a_staff_member_who_may_only_view_sees_the_masked_configuration(client, org):
    from django.contrib.auth.models import Permission

    source = DataSource.objects.create(
        cluster=org.cluster,
        kind=SourceKind.PROMETHEUS,
        name="prom",
        config={"base_url": "http://prom:9090", "auth_header": SECRET},
    )
    viewer = UserFactory(username="viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_datasource"))
    client.force_login(viewer)
    page = client.get(reverse("admin:efficiency_datasource_change", args=[source.pk]))
    assert page.status_code == 200
    assert SECRET not in page.content.decode()
    assert MASK in page.content.decode()
