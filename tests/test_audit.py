"""The audit trail: a change of a quota, incident, node, source, department or user made through
a page, the API or the admin records who made it, when, and from what to what; the platform
admins read it in the Django admin. Bookkeeping writes (collection runs, sign-ins) record nothing.
"""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from efficiency.choices import IncidentStatus, NodeState, Role, SourceKind
from efficiency.models import GpuSample, Job, JobHour, LogChunk, Quota
from efficiency.models.audit import BASELINE_REASON
from efficiency.services import quotas as quota_services
from efficiency.services.organisation import user_role_assign
from efficiency.services.sources import source_claim, source_run_record
from tests.conftest import PASSWORD
from tests.factories import DataSourceFactory, IncidentFactory, UserFactory
from tests.quota_fixtures import NOW, SETTINGS, make_planning


def changes(record) -> dict[str, tuple]:
    """``{field: (from, to)}`` between a historical record and the one before it."""
    delta = record.diff_against(record.prev_record)
    return {change.field: (change.old, change.new) for change in delta.changes}


@pytest.fixture
def incident(org):
    now = timezone.now()
    return IncidentFactory(
        cluster=org.cluster, job=org.job_a, department=org.dept_a, node=org.node_a,
        occurred_at=now - timedelta(minutes=5), detected_at=now - timedelta(minutes=4),
    )  # fmt: skip


def test_closing_an_incident_on_its_page_records_who_when_and_the_status_from_to(client, org, incident):
    client.force_login(org.admin)
    before = timezone.now()
    client.post(f"/faults/incidents/{incident.pk}/close/", {"reason": "False alarm"})
    record = incident.history.latest()
    assert record.history_user == org.admin
    assert record.history_date >= before
    assert changes(record)["status"] == (IncidentStatus.OPEN, IncidentStatus.CLOSED)
    assert changes(record)["close_reason"] == ("", "False alarm")


def test_a_quota_edit_through_the_api_records_the_committee_member_and_the_numbers(client, db, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    settings.PORTAL_CYCLE_DAYS = 14
    planning = make_planning()
    # The proposal writes its quotas in bulk: they have no history until their first change.
    cycle = quota_services.quota_proposal_create(
        cluster=planning.cluster, now=NOW, settings_override=SETTINGS
    )
    radar = Quota.objects.get(cycle=cycle, department=planning.radar)
    client.force_login(planning.committee)
    response = client.patch(
        f"/api/v1/quotas/{radar.pk}/",
        {"guaranteed_gpus": 14, "comment": "Radar retires two projects"},
        content_type="application/json",
    )
    assert response.status_code == 200
    edit, baseline = radar.history.all()[:2]
    assert (edit.history_user, changes(edit)["guaranteed_gpus"]) == (planning.committee, (12, 14))
    assert (baseline.history_user, baseline.history_change_reason) == (None, BASELINE_REASON)

    client.post(
        f"/api/v1/quota-cycles/{cycle.pk}/approve/", {"comment": "Agreed"}, content_type="application/json"
    )
    approval = cycle.history.latest()
    assert approval.history_user == planning.committee
    assert changes(approval)["status"] == ("proposed", "approved")


def test_a_node_edited_in_the_admin_records_the_admin_and_the_state(client, org):
    client.force_login(org.admin)
    node = org.node_a
    url = reverse("admin:efficiency_node_change", args=[node.pk])
    form = {
        "cluster": node.cluster_id, "hostname": node.hostname, "gpu_model": node.gpu_model,
        "gpu_count": node.gpu_count, "rdma_capable": "on", "fault_domain": node.fault_domain,
        "state": NodeState.RETIRED, "state_reason": "decommissioned",
        "owner_department": node.owner_department_id,
        "gpus-TOTAL_FORMS": 0, "gpus-INITIAL_FORMS": 0,
    }  # fmt: skip
    assert client.post(url, form).status_code == 302
    record = node.history.latest()
    assert record.history_user == org.admin
    assert changes(record)["state"] == (NodeState.ACTIVE, NodeState.RETIRED)
    # ... and the admin's history page shows it, from -> to, to a platform admin (not a superuser).
    page = client.get(reverse("admin:efficiency_node_history", args=[node.pk])).content.decode()
    assert "admin" in page
    assert "active" in page
    assert "retired" in page


def test_a_role_given_in_the_admin_records_the_group_membership(client, org):
    user = UserFactory(username="newcomer")
    client.force_login(org.admin)
    user_role_assign(user=user, role=Role.COMMITTEE)
    record = user.history.latest()
    assert [group.group.name for group in record.groups.all()] == ["committee"]
    assert [group.group.name for group in record.prev_record.groups.all()] == []
    user_role_assign(user=user, role=Role.DEPARTMENT_HEAD, department_codes=("vision",))
    assert [group.group.name for group in user.history.latest().groups.all()] == ["department_head"]
    record = org.dept_a.history.latest()
    assert {head.user.username for head in record.heads.all()} == {"head-a", "newcomer"}


def test_giving_a_user_the_role_they_have_records_nothing(org):
    count = org.committee.history.count()
    user_role_assign(user=org.committee, role=Role.COMMITTEE)
    assert org.committee.history.count() == count


def test_the_trail_keeps_no_password_hash_and_a_sign_in_is_not_a_change(client, org):
    count = org.head_a.history.count()
    client.post("/login/", {"username": "head-a", "password": PASSWORD})
    assert org.head_a.history.count() == count
    org.head_a.set_password("another horse battery")
    org.head_a.save()
    record = org.head_a.history.latest()
    assert not hasattr(record, "password")
    assert "password" not in changes(record)


def test_a_collection_run_records_no_history_but_an_edit_of_the_source_does(client, org):
    source = DataSourceFactory(
        cluster=org.cluster, kind=SourceKind.DCGM_SCRAPE, name="dcgm", config={"urls": []}
    )
    assert source.history.count() == 1
    now = timezone.now()
    for minute in range(3):
        claimed = source_claim(source_id=source.pk, now=now + timedelta(minutes=minute))
        with source_run_record(claimed, now=now + timedelta(minutes=minute)) as recorder:
            recorder.watermark = now + timedelta(minutes=minute)
    assert source.history.count() == 1
    source.refresh_from_db()
    source.interval_s = 30
    source.save()
    assert changes(source.history.latest())["interval_s"] == (60, 30)


def test_telemetry_jobs_and_rollups_have_no_history():
    for model in (GpuSample, LogChunk, Job, JobHour):
        assert not hasattr(model, "history"), model


def test_platform_admins_read_the_trail_of_incidents_and_quotas_in_the_admin(client, org, incident):
    platform_admin = UserFactory(username="ops", role=Role.PLATFORM_ADMIN)
    client.force_login(platform_admin)
    for url in (
        reverse("admin:efficiency_incident_history", args=[incident.pk]),
        reverse("admin:efficiency_incident_changelist"),
        reverse("admin:efficiency_quota_changelist"),
        reverse("admin:efficiency_quotacycle_changelist"),
        reverse("admin:efficiency_nodestatechange_changelist"),
    ):
        assert client.get(url).status_code == 200, url
    client.force_login(org.committee)
    assert client.get(reverse("admin:efficiency_incident_history", args=[incident.pk])).status_code == 302


def test_following_the_password_link_from_a_users_past_version_leads_to_the_password_page(client, org):
    platform_admin = UserFactory(username="ops", role=Role.PLATFORM_ADMIN)
    client.force_login(platform_admin)
    version = org.head_a.history.first()
    page = client.get(reverse("admin:auth_user_simple_history", args=[org.head_a.pk, version.history_id]))
    assert page.status_code == 200

    # The user form's "change password" link is relative: from the version's page it names
    # ".../history/password/", which is no version but means the user's password page.
    followed = client.get(f"/admin/auth/user/{org.head_a.pk}/history/password/", follow=True)
    assert followed.redirect_chain[-1][0] == reverse("admin:auth_user_password_change", args=[org.head_a.pk])
    assert followed.status_code == 200
    # Any other text where the version belongs is a 404, not a 500.
    assert client.get(f"/admin/auth/user/{org.head_a.pk}/history/nonsense/").status_code == 404
