import csv
import io
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from efficiency.choices import NodeState
from efficiency.models import FaultSignal, Incident


@pytest.fixture
def incidents(org):
    now = timezone.now().replace(microsecond=0)

    def make(job, node, dept, category, code, minutes_ago):
        at = now - timedelta(minutes=minutes_ago)
        incident = Incident.objects.create(
            cluster=org.cluster, job=job, department=dept, node=node, category=category, severity="critical",
            code=code, title=f"xid-{code}", occurred_at=at, detected_at=at + timedelta(seconds=20),
            located_at=at + timedelta(seconds=25), gpu_count=8,
        )  # fmt: skip
        FaultSignal.objects.create(
            cluster=org.cluster, evidence_key=f"t:{incident.pk}", source="log", signature_id=f"xid-{code}",
            category=category, severity="critical", code=code, job=job, department=dept, node=node,
            occurred_at=at, detected_at=at + timedelta(seconds=20), incident=incident,
            message=f"NVRM: Xid (PCI:0000:18:00): {code}, pid=1234, name=python",
        )  # fmt: skip
        return incident

    return (
        make(org.job_a, org.node_a, org.dept_a, "hardware_gpu", "79", 30),
        make(org.job_b, org.node_b, org.dept_b, "hardware_memory_ecc", "48", 60),
    )


def test_head_sees_only_their_departments_incidents(client, org, incidents):
    client.force_login(org.head_a)
    body = client.get("/faults/?range=24h").content.decode()
    assert org.job_a.external_id in body
    assert org.job_b.external_id not in body
    assert "gpu-b01" not in body
    assert client.get(f"/faults/incidents/{incidents[1].pk}/").status_code == 404


def test_overview_cards_and_csv(client, org, incidents):
    client.force_login(org.committee)
    body = client.get("/faults/?range=24h").content.decode()
    assert 'id="fault-timeline-chart"' in body
    assert "20 s / 25 s" in body  # median time to detect / locate
    rows = list(
        csv.DictReader(io.StringIO(client.get("/faults/?range=24h&export=csv").content.decode("utf-8-sig")))
    )
    assert {row["Code"] for row in rows} == {"79", "48"}


def test_report_as_markdown_and_json(client, org, incidents):
    client.force_login(org.head_a)
    incident = incidents[0]
    markdown = client.get(f"/faults/incidents/{incident.pk}/report/?format=md").content.decode()
    assert markdown.startswith(f"# Fault report, incident {incident.pk}")
    assert "NVRM: Xid (PCI:0000:18:00): 79" in markdown
    data = json.loads(client.get(f"/faults/incidents/{incident.pk}/report/?format=json").content)
    assert data["node"] == "gpu-a01"
    assert data["phases"]["located"] is not None
    assert data["evidence"][0]["signature"] == "xid-79"


def test_admin_isolates_the_node_and_the_action_is_logged(client, org, incidents):
    client.force_login(org.admin)
    response = client.post(f"/faults/incidents/{incidents[0].pk}/isolate/", follow=True)
    assert "Node isolated." in response.content.decode()
    org.node_a.refresh_from_db()
    assert org.node_a.state == NodeState.ISOLATED
    action = incidents[0].actions.get()
    assert (action.kind, action.ok, action.dry_run, action.actor) == ("isolate_node", True, False, org.admin)
    assert "recorded as isolated by hand" in action.text
    client.force_login(org.head_a)
    assert client.post(f"/faults/incidents/{incidents[0].pk}/isolate/").status_code == 403


def test_api_lists_incidents_scoped_and_filters_by_category(client, org, incidents):
    client.force_login(org.head_b)
    rows = client.get("/api/v1/incidents/").json()["results"]
    assert [row["code"] for row in rows] == ["48"]
    client.force_login(org.committee)
    rows = client.get("/api/v1/incidents/?category=hardware_gpu").json()["results"]
    assert [row["node"] for row in rows] == ["gpu-a01"]
    detail = client.get(f"/api/v1/incidents/{incidents[0].pk}/").json()
    assert detail["signals"][0]["message"].startswith("NVRM: Xid")
    assert detail["time_to_detect_s"] == 20


def test_job_page_shows_its_incidents_phases_and_ettr(client, org, incidents):
    client.force_login(org.head_a)
    body = client.get(f"/jobs/{org.job_a.pk}/").content.decode()
    assert 'id="job-phases-chart"' in body
    assert f"/faults/incidents/{incidents[0].pk}/" in body
    assert 'id="job-ettr"' in body
