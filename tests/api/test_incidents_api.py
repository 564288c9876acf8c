"""The incident actions over the API: the same services and refusals as the pages."""

from datetime import timedelta

import pytest
from django.utils import timezone

from efficiency.choices import IncidentStatus, JobState, NodeState
from efficiency.models import Incident


@pytest.fixture
def incident(org):
    at = timezone.now().replace(microsecond=0) - timedelta(minutes=30)
    return Incident.objects.create(
        cluster=org.cluster, job=org.job_a, department=org.dept_a, node=org.node_a, category="hardware_gpu",
        severity="critical", code="79", root_signature_id="xid-79", occurred_at=at,
        detected_at=at + timedelta(seconds=20), located_at=at + timedelta(seconds=25), gpu_count=8,
    )  # fmt: skip


def test_the_detail_says_what_may_be_done_now_and_why_not(client, org, incident):
    client.force_login(org.admin)
    operations = client.get(f"/api/v1/incidents/{incident.pk}/").json()["operations"]
    assert operations == {
        "isolate": None,
        "restart": None,
        "return-to-service": "Node gpu-a01 is not isolated.",
        "close": None,
    }


def test_restarting_a_completed_job_is_a_conflict_with_the_reason(client, org, incident):
    org.job_a.state, org.job_a.ended_at = JobState.COMPLETED, timezone.now()
    org.job_a.save()
    client.force_login(org.admin)
    response = client.post(f"/api/v1/incidents/{incident.pk}/restart/")
    assert response.status_code == 409
    assert "is completed: there is nothing to restart." in response.json()["detail"]
    assert not incident.actions.exists()


def test_closing_needs_a_reason_and_is_not_a_recovery(client, org, incident):
    client.force_login(org.admin)
    assert client.post(f"/api/v1/incidents/{incident.pk}/close/").status_code == 400
    response = client.post(
        f"/api/v1/incidents/{incident.pk}/close/",
        {"reason": "Duplicate of a known fault"},
        content_type="application/json",
    )
    assert response.status_code == 200
    data = response.json()
    assert (data["status"], data["recovered_at"], data["mttr_s"]) == (IncidentStatus.CLOSED, None, None)
    assert (data["closed_by"], data["close_reason"]) == ("admin", "Duplicate of a known fault")
    assert [a["kind"] for a in data["actions"]] == ["close"]
    again = client.post(
        f"/api/v1/incidents/{incident.pk}/close/", {"reason": "again"}, content_type="application/json"
    )
    assert again.status_code == 409


def test_an_isolated_node_returns_to_service(client, org, incident):
    client.force_login(org.admin)
    assert client.post(f"/api/v1/incidents/{incident.pk}/isolate/").status_code == 200
    org.node_a.refresh_from_db()
    assert org.node_a.state == NodeState.ISOLATED
    response = client.post(f"/api/v1/incidents/{incident.pk}/return-to-service/")
    assert response.status_code == 200
    assert [a["kind"] for a in response.json()["actions"]] == ["isolate_node", "resume_node"]
    org.node_a.refresh_from_db()
    assert org.node_a.state == NodeState.ACTIVE
    assert client.post(f"/api/v1/incidents/{incident.pk}/return-to-service/").status_code == 409


def test_a_head_lists_the_incidents_on_the_nodes_their_department_owns(client, org, incident):
    other = Incident.objects.create(
        cluster=org.cluster, node=org.node_b, category="hardware_gpu", severity="critical", code="48",
        root_signature_id="xid-48", occurred_at=incident.occurred_at, detected_at=incident.detected_at,
    )  # fmt: skip
    client.force_login(org.head_b)
    assert [row["id"] for row in client.get("/api/v1/incidents/").json()["results"]] == [other.pk]
