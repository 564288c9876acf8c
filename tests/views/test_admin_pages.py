"""Platform admins administer the portal in the Django admin with the permissions their group has.

The group's permissions come from a data migration (0011), so the test database, built by running
every migration, is what a real deployment gets. The admin is used as a browser would: each change
form is opened, its fields read back from the HTML and submitted again with one change.
"""

from html.parser import HTMLParser

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from efficiency.choices import ActionKind, MappingKind, NodeState, Role
from efficiency.models import ActuatorConfig, DataSource, DepartmentMapping, FaultPolicy, Node
from efficiency.services.faults import fault_policies_ensure
from tests.conftest import PASSWORD
from tests.factories import (
    GpuFactory,
    JobLogFactsFactory,
    RecommendationDecisionFactory,
    RecommendationFactory,
    UserFactory,
)


class _FormReader(HTMLParser):
    """The values a browser would submit from the admin's change form (``id$=_form``)."""

    def __init__(self):
        super().__init__()
        self.data: list[tuple[str, str]] = []
        self._in_form = False
        self._select: str | None = None
        self._textarea: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and (attrs.get("id") or "").endswith("_form"):
            self._in_form = True
        if not self._in_form:
            return
        name = attrs.get("name")
        if tag == "input" and name:
            kind = attrs.get("type", "text")
            if kind in {"submit", "button", "file"}:
                return
            if kind in {"checkbox", "radio"}:
                if "checked" in attrs:
                    self.data.append((name, attrs.get("value") or "on"))
                return
            self.data.append((name, attrs.get("value") or ""))
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in attrs:
            self.data.append((self._select, attrs.get("value") or ""))
        elif tag == "textarea" and name:
            self._textarea, self._text = name, []

    def handle_data(self, data):
        if self._textarea:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "form":
            self._in_form = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea:
            self.data.append((self._textarea, "".join(self._text).lstrip("\n")))
            self._textarea = None


def _form_data(html: str) -> dict[str, list[str]]:
    reader = _FormReader()
    reader.feed(html)
    data: dict[str, list[str]] = {}
    for name, value in reader.data:
        data.setdefault(name, []).append(value)
    return data


def _open_and_save(client, obj, changes: dict[str, str]) -> None:
    """Open ``obj``'s change page in the admin, change some fields, save; the save must succeed."""
    meta = obj._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
    page = client.get(url)
    assert page.status_code == 200, url
    data = _form_data(page.content.decode())
    for name, value in changes.items():
        data[name] = [value]
    response = client.post(url, data)
    errors = response.context["adminform"].form.errors if response.status_code == 200 else None
    assert response.status_code == 302, (url, errors)
    assert response["Location"].endswith(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))


@pytest.fixture
def platform_admin(client, org):
    """A platform admin who is *not* a superuser: everything they can do comes from the group."""
    user = UserFactory(username="ops", role=Role.PLATFORM_ADMIN)
    assert user.is_staff
    assert not user.is_superuser
    client.login(username="ops", password=PASSWORD)
    return user


@pytest.mark.django_db
def test_every_model_in_the_admin_is_visible_to_the_platform_admin_group():
    group = Group.objects.get(name=Role.PLATFORM_ADMIN)
    granted = {
        (p.content_type.app_label, p.codename) for p in group.permissions.select_related("content_type")
    }
    missing = [
        f"{model._meta.app_label}.view_{model._meta.model_name}"
        for model in admin.site._registry
        if (model._meta.app_label, f"view_{model._meta.model_name}") not in granted
    ]
    assert missing == [], "add a data migration granting these to platform_admin"


@pytest.mark.django_db
def test_other_roles_get_no_model_permissions():
    for role in (Role.COMMITTEE, Role.DEPARTMENT_HEAD):
        assert not Group.objects.get(name=role).permissions.exists()


def test_admin_index_lists_what_the_readme_sends_admins_to(client, platform_admin):
    page = client.get(reverse("admin:index")).content.decode()
    assert "have permission to view or edit anything" not in page
    for name in (
        "Data sources",
        "Department mappings",
        "Fault policies",
        "Actuators",
        "Nodes",
        "Departments",
        "Users",
        "API tokens",
    ):
        assert f">{name}<" in page, name


def test_every_changelist_and_change_page_opens(client, org, platform_admin):
    fault_policies_ensure()
    GpuFactory(node=org.node_a, index=0)
    ActuatorConfig.objects.create(name="drain", action=ActionKind.ISOLATE_NODE, config={"type": "command"})
    DepartmentMapping.objects.create(kind=MappingKind.SLURM_ACCOUNT, value="vision", department=org.dept_a)
    # A recommendation with a decision shows them inline (read only), and a job's log facts.
    RecommendationDecisionFactory(recommendation=RecommendationFactory(department=org.dept_a))
    JobLogFactsFactory(job=org.job_a)
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        assert client.get(changelist).status_code == 200, changelist
        obj = model_admin.get_queryset(_request(platform_admin)).first()
        if obj is not None:
            change = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
            assert client.get(change).status_code == 200, change


def _request(user):
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = user
    return request


def test_platform_admin_saves_a_data_source(client, org, platform_admin):
    _open_and_save(client, org.source, {"interval_s": "120"})
    org.source.refresh_from_db()
    assert org.source.interval_s == 120


def test_platform_admin_adds_a_data_source(client, org, platform_admin, settings):
    settings.PORTAL_SOURCE_ROOTS = ["/var/spool"]  # a file source must lie under a source root
    response = client.post(
        reverse("admin:efficiency_datasource_add"),
        {
            "cluster": org.cluster.pk,
            "name": "sacct",
            "kind": "slurm",
            "config": '{"path": "/var/spool/sacct.txt"}',
            "enabled": "on",
            "interval_s": "60",
            "state": "{}",
        },
    )
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    assert DataSource.objects.filter(name="sacct").exists()


def test_platform_admin_saves_a_department_mapping(client, org, platform_admin):
    mapping = DepartmentMapping.objects.create(
        kind=MappingKind.SLURM_ACCOUNT, value="vis", department=org.dept_a
    )
    _open_and_save(client, mapping, {"department": str(org.dept_b.pk)})
    mapping.refresh_from_db()
    assert mapping.department == org.dept_b


def test_platform_admin_saves_a_fault_policy(client, org, platform_admin):
    fault_policies_ensure()
    policy = FaultPolicy.objects.get(category="hardware_gpu")
    data = _form_data(
        client.get(reverse("admin:efficiency_faultpolicy_change", args=[policy.pk])).content.decode()
    )
    data.pop("isolate_node", None)  # untick "isolate the node"
    response = client.post(reverse("admin:efficiency_faultpolicy_change", args=[policy.pk]), data)
    assert response.status_code == 302
    policy.refresh_from_db()
    assert policy.isolate_node is False


def test_platform_admin_saves_an_actuator(client, org, platform_admin):
    actuator = ActuatorConfig.objects.create(
        name="drain", action=ActionKind.ISOLATE_NODE, config={"type": "command", "argv": ["true"]}
    )
    _open_and_save(client, actuator, {"name": "slurm-drain"})
    actuator.refresh_from_db()
    assert actuator.name == "slurm-drain"
    assert actuator.dry_run is True  # unchanged: the form kept what it showed


def test_platform_admin_changes_a_node_state(client, org, platform_admin):
    GpuFactory(node=org.node_a, index=0)
    _open_and_save(client, org.node_a, {"state": NodeState.DRAINING})
    assert Node.objects.get(pk=org.node_a.pk).state == NodeState.DRAINING
    assert org.node_a.gpus.count() == 1  # the GPU inline was submitted back unchanged


def test_platform_admin_assigns_a_department_head(client, org, platform_admin):
    user = UserFactory(username="new-head")
    data = _form_data(
        client.get(reverse("admin:efficiency_department_change", args=[org.dept_b.pk])).content.decode()
    )
    data["heads"] = [*data.get("heads", []), str(user.pk)]
    response = client.post(reverse("admin:efficiency_department_change", args=[org.dept_b.pk]), data)
    assert response.status_code == 302
    assert org.dept_b.heads.filter(pk=user.pk).exists()


def test_platform_admin_gives_a_user_a_role(client, org, platform_admin):
    user = UserFactory(username="new-committee")
    committee = Group.objects.get(name=Role.COMMITTEE)
    _open_and_save(client, user, {"groups": str(committee.pk)})
    assert list(user.groups.values_list("name", flat=True)) == [Role.COMMITTEE]


def test_platform_admin_cannot_make_anyone_a_superuser(client, org, platform_admin):
    page = client.get(reverse("admin:auth_user_change", args=[platform_admin.pk])).content.decode()
    data = _form_data(page)
    assert "is_superuser" not in data
    assert 'name="user_permissions"' not in page
    data["is_superuser"] = ["on"]
    data["user_permissions"] = [str(Permission.objects.get(codename="delete_node").pk)]
    client.post(reverse("admin:auth_user_change", args=[platform_admin.pk]), data)
    platform_admin.refresh_from_db()
    assert not platform_admin.is_superuser
    assert not platform_admin.user_permissions.exists()


def test_platform_admin_cannot_delete_nodes_or_change_role_definitions(client, org, platform_admin):
    assert client.get(reverse("admin:efficiency_node_delete", args=[org.node_a.pk])).status_code == 403
    group = Group.objects.get(name=Role.COMMITTEE)
    page = client.get(reverse("admin:auth_group_change", args=[group.pk]))
    assert page.status_code == 200
    assert b'name="permissions"' not in page.content


def test_committee_and_heads_have_no_admin(client, org):
    for user in (org.committee, org.head_a):
        client.force_login(user)
        assert client.get(reverse("admin:index")).status_code == 302  # to the admin's login
