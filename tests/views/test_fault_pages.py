import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone, translation

from efficiency.choices import ActionKind, IncidentStatus, JobState, NodeState
from efficiency.models import FaultSignal, Incident
from efficiency.services import faults
from tests.fault_helpers import T0, slurm_actuators, xid_count_event


@pytest.fixture
def incidents(org):
    now = timezone.now().replace(microsecond=0)

    def make(job, node, dept, category, code, minutes_ago):
        at = now - timedelta(minutes=minutes_ago)
        incident = Incident.objects.create(
            cluster=org.cluster, job=job, department=dept, node=node, category=category, severity="critical",
            code=code, root_signature_id=f"xid-{code}", occurred_at=at,
            detected_at=at + timedelta(seconds=20),
            located_at=at + timedelta(seconds=25), gpu_count=8,
        )  # fmt: skip
        FaultSignal.objects.create(
            cluster=org.cluster, evidence_key=f"t:{incident.pk}", source="log", signature_id=f"xid-{code}",
            category=category, severity="critical", code=code, job=job, department=dept, node=node,
            occurred_at=at, detected_at=at + timedelta(seconds=20), incident=incident,
            message=f"NVRM: Xid (PCI:0000:18:00): {code}, pid=1234, name=python",
            location=f"kern/{node.hostname}.log@0", trusted=True,  # the node's kernel log
        )  # fmt: skip
        return incident

    return (
        make(org.job_a, org.node_a, org.dept_a, "hardware_gpu", "79", 30),
        make(org.job_b, org.node_b, org.dept_b, "hardware_memory_ecc", "48", 60),
    )


def test_head_sees_only_their_departments_incidents(client, org, incidents):
    client.force_login(org.head_a)
    body = client.get("/faults/?range=24h").content.decode()
    # A job id as a whole word: a number such as 0.1111 in the chart's colour scale is no job.
    assert re.search(rf"(?<![\w.]){re.escape(org.job_a.external_id)}(?![\w.])", body)
    assert not re.search(rf"(?<![\w.]){re.escape(org.job_b.external_id)}(?![\w.])", body)
    assert "gpu-b01" not in body
    assert client.get(f"/faults/incidents/{incidents[1].pk}/").status_code == 404


def test_overview_cards_and_csv(client, org, incidents):
    client.force_login(org.committee)
    body = client.get("/faults/?range=24h").content.decode()
    assert 'id="fault-timeline-chart"' in body
    assert "20 s / 25 s" in body  # median time to detect / locate
    rows = list(
        csv.DictReader(
            io.StringIO(client.get("/faults/?range=24h&export=csv").getvalue().decode("utf-8-sig"))
        )
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


# --- What an admin may do, as the page offers it -------------------------------------------------


def _buttons(body: str) -> set[str]:
    return {name for name in ("isolate", "restart", "return", "close") if f'id="{name}-button"' in body}


def test_the_incident_page_offers_only_what_applies_and_asks_before_acting(client, org, incidents):
    client.force_login(org.admin)
    incident = incidents[0]
    body = client.get(f"/faults/incidents/{incident.pk}/").content.decode()
    assert _buttons(body) == {"isolate", "restart", "close"}
    assert 'data-confirm="Isolate gpu-a01? No new jobs will be scheduled on it."' in body
    assert f'data-confirm="Restart job {org.job_a.external_id} from its last checkpoint?"' in body
    org.job_a.state, org.job_a.ended_at = JobState.COMPLETED, timezone.now()
    org.job_a.save()
    client.post(f"/faults/incidents/{incident.pk}/isolate/")
    body = client.get(f"/faults/incidents/{incident.pk}/").content.decode()
    assert _buttons(body) == {"return", "close"}  # no restart for a completed job
    assert 'data-confirm="Return gpu-a01 to service? Jobs will be scheduled on it again."' in body
    client.force_login(org.committee)
    assert _buttons(client.get(f"/faults/incidents/{incident.pk}/").content.decode()) == set()


def test_an_action_that_does_not_apply_is_refused_with_the_reason(client, org, incidents):
    org.job_a.state, org.job_a.ended_at = JobState.COMPLETED, timezone.now()
    org.job_a.save()
    client.force_login(org.admin)
    response = client.post(f"/faults/incidents/{incidents[0].pk}/restart/", follow=True)
    assert "is completed: there is nothing to restart." in response.content.decode()
    assert not incidents[0].actions.exists()


def test_closing_from_the_page_needs_a_reason_and_shows_who_closed_it_and_why(client, org, incidents):
    client.force_login(org.admin)
    incident = incidents[0]
    response = client.post(f"/faults/incidents/{incident.pk}/close/", {"reason": " "}, follow=True)
    assert "a reason is required" in response.content.decode()
    assert Incident.objects.get(pk=incident.pk).status == IncidentStatus.OPEN
    response = client.post(
        f"/faults/incidents/{incident.pk}/close/", {"reason": "False alarm: the job finished"}, follow=True
    )
    body = response.content.decode()
    assert "Incident closed." in body
    assert "admin: False alarm: the job finished" in body
    assert 'id="recovered">—' in body
    assert _buttons(body) == set()
    action = Incident.objects.get(pk=incident.pk).actions.get()
    assert (action.kind, action.actor) == (ActionKind.CLOSE, org.admin)


def test_a_dry_run_says_nothing_changed(client, org, incidents):
    slurm_actuators(dry_run=True)
    client.force_login(org.admin)
    response = client.post(f"/faults/incidents/{incidents[0].pk}/isolate/", follow=True)
    assert "Dry run: nothing was changed." in response.content.decode()
    org.node_a.refresh_from_db()
    assert org.node_a.state == NodeState.ACTIVE


def test_an_isolated_node_is_returned_to_service_from_its_page(client, org, incidents):
    client.force_login(org.admin)
    client.post(f"/faults/incidents/{incidents[0].pk}/isolate/")
    body = client.get(f"/nodes/{org.node_a.pk}/").content.decode()
    assert f'href="/faults/incidents/{incidents[0].pk}/" id="isolating-incident"' in body
    assert 'id="node-return-button"' in body
    response = client.post(f"/faults/nodes/{org.node_a.pk}/return-to-service/", follow=True)
    assert "Node returned to service." in response.content.decode()
    org.node_a.refresh_from_db()
    assert org.node_a.state == NodeState.ACTIVE
    history = client.get(f"/nodes/{org.node_a.pk}/").content.decode()
    assert history.count("<td>admin</td>") == 2  # isolated, then back in service, both by admin
    assert incidents[0].actions.filter(kind=ActionKind.RESUME_NODE).exists()


def test_a_head_opens_an_incident_on_their_node_from_the_node_page(client, org):
    faults.xid_count_signals_record(
        cluster=org.cluster, events=[xid_count_event(org.node_a, 3, 79, T0)], now=T0 + timedelta(seconds=30)
    )
    faults.incidents_group(cluster=org.cluster, now=T0 + timedelta(seconds=30))
    incident = Incident.objects.get()
    assert incident.job is None
    client.force_login(org.head_a)
    body = client.get(f"/nodes/{org.node_a.pk}/").content.decode()
    assert f'href="/faults/incidents/{incident.pk}/"' in body
    assert 'id="node-return-button"' not in body
    assert client.get(f"/faults/incidents/{incident.pk}/").status_code == 200
    client.force_login(org.head_b)
    assert client.get(f"/faults/incidents/{incident.pk}/").status_code == 404


@pytest.fixture
def chinese(client):
    client.cookies["django_language"] = "zh-hans"
    yield client
    translation.deactivate()  # the locale middleware leaves the last request's language active


def test_a_chinese_reader_gets_machine_text_and_durations_in_chinese(chinese, org, incidents):
    client = chinese
    slurm_actuators(dry_run=True)
    faults.fault_policies_ensure()
    faults.incident_policy_apply(incident=incidents[0])
    client.force_login(org.committee)
    body = client.get(f"/faults/incidents/{incidents[0].pk}/").content.decode()
    assert "Would run" not in body
    assert "scontrol update NodeName=gpu-a01 State=DRAIN" in body
    assert "20 秒" in body  # detected after 20 s, in the facts and the phases chart
    assert "进程序号（rank）" in body
    overview = client.get("/faults/?range=24h").content.decode()
    assert "进程序号（rank）" in overview


def test_fault_domain_chart_names_incidents_not_located_and_nodes_without_a_domain(client, org, incidents):
    located, other = incidents
    located.node.fault_domain = ""
    located.node.save()
    Incident.objects.filter(pk=other.pk).update(node=None, located_at=None)
    client.force_login(org.committee)

    with translation.override("en"):
        figure = client.get("/faults/?range=24h").context["domain_figure"]

    labels = sorted(label for trace in figure.data for label in trace.y)
    assert labels == ["No fault domain", "Not located yet"]


def test_the_incident_csv_says_each_ones_status_and_whether_only_job_output_says_so(client, org, incidents):
    confirmed, suspected = incidents
    Incident.objects.filter(pk=suspected.pk).update(confirmed=False)
    Incident.objects.filter(pk=confirmed.pk).update(confirmed=True)
    client.force_login(org.committee)

    with translation.override("en"):
        export = client.get("/faults/?range=24h&export=csv", HTTP_ACCEPT_LANGUAGE="en")
    rows = {
        row["Incident"]: row for row in csv.DictReader(io.StringIO(export.getvalue().decode("utf-8-sig")))
    }

    assert rows[str(confirmed.pk)]["Evidence"] == "confirmed"
    assert rows[str(suspected.pk)]["Evidence"] == "suspicion"
    assert rows[str(suspected.pk)]["Status"] == suspected.get_status_display()
