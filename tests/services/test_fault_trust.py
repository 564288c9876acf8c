"""The fault rules of trust (DESIGN.md), one behaviour per test: dry run changes nothing, closing is
not recovering, a node returns to service, one fault is one incident, time only moves forward, a
head sees the incidents on their nodes, machine-written text speaks the reader's language."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import translation

from efficiency.choices import ActionKind, IncidentStatus, JobState, NodeState
from efficiency.models import ActuatorConfig, FaultSignal, GpuSample, Incident, NodeStateChange
from efficiency.scoping import scope_queryset
from efficiency.selectors.faults import fault_summary
from efficiency.services import faults
from tests.factories import JobFactory, NodeFactory
from tests.fault_helpers import (
    T0,
    kernel_xid_chunk,
    running_job,
    slurm_actuators,
    true_actuators,
    xid_count_event,
)


@pytest.fixture(autouse=True)
def _english():
    # Refusals and outcomes are worded in the active language; these tests read the English.
    with translation.override("en"):
        yield


@pytest.fixture
def hit(org):
    """Department A's job running on A's node; an Xid 79 on it at T0, scanned 20 s later."""
    faults.fault_policies_ensure()
    running_job(org.job_a)
    kernel_xid_chunk(org.source, org.node_a, T0)
    faults.fault_scan_source(source=org.source, now=T0 + timedelta(seconds=20))
    org.incident = Incident.objects.get(job=org.job_a)
    return org


def allowed(incident) -> set[str]:
    return {
        name for name, why_not in faults.incident_operations(incident=incident).items() if why_not is None
    }


# --- Dry run changes nothing but the record of what would have run ------------------------------


def test_a_dry_run_policy_leaves_the_inventory_alone_and_logs_what_would_have_run(hit):
    slurm_actuators(dry_run=True)
    faults.incident_policy_apply(incident=hit.incident, now=T0 + timedelta(seconds=30))
    hit.node_a.refresh_from_db()
    assert hit.node_a.state == NodeState.ACTIVE
    assert not NodeStateChange.objects.exists()
    hit.incident.refresh_from_db()
    assert (hit.incident.status, hit.incident.restart_requested_at) == (IncidentStatus.OPEN, None)
    isolate = hit.incident.actions.get(kind=ActionKind.ISOLATE_NODE)
    assert isolate.dry_run
    assert "scontrol update NodeName=gpu-a01 State=DRAIN" in isolate.text
    restart = hit.incident.actions.get(kind=ActionKind.RESTART_JOB)
    assert restart.dry_run
    assert f"scontrol requeue {hit.job_a.external_id}" in restart.text


def test_a_policy_with_no_actuator_configured_changes_nothing_and_says_so(hit):
    faults.incident_policy_apply(incident=hit.incident, now=T0 + timedelta(seconds=30))
    hit.node_a.refresh_from_db()
    assert hit.node_a.state == NodeState.ACTIVE
    isolate = hit.incident.actions.get(kind=ActionKind.ISOLATE_NODE)
    assert (isolate.ok, isolate.dry_run) == (False, False)
    assert "no isolation actuator" in isolate.text.lower()
    hit.incident.refresh_from_db()
    assert hit.incident.restart_requested_at is None


def test_a_failed_actuator_leaves_the_node_in_service(hit):
    ActuatorConfig.objects.create(
        name="broken-drain", action=ActionKind.ISOLATE_NODE, dry_run=False,
        config={"type": "command", "argv": ["false", "{node}"]},
    )  # fmt: skip
    faults.node_isolate(incident=hit.incident, actor=hit.admin, now=T0 + timedelta(minutes=1))
    hit.node_a.refresh_from_db()
    assert hit.node_a.state == NodeState.ACTIVE
    assert not hit.incident.actions.get().ok


def test_an_admin_isolating_by_hand_without_actuators_is_recorded_on_the_node(hit):
    faults.node_isolate(incident=hit.incident, actor=hit.admin, now=T0 + timedelta(minutes=1))
    hit.node_a.refresh_from_db()
    assert hit.node_a.state == NodeState.ISOLATED
    change = NodeStateChange.objects.get()
    assert (change.node, change.state, change.incident, change.actor) == (
        hit.node_a,
        NodeState.ISOLATED,
        hit.incident,
        hit.admin,
    )


# --- Return to service --------------------------------------------------------------------------


def test_a_dry_run_return_to_service_says_it_would_resume_and_leaves_the_node_isolated(hit):
    faults.node_isolate(incident=hit.incident, actor=hit.admin, now=T0 + timedelta(minutes=1))
    slurm_actuators(dry_run=True)
    faults.node_return_to_service(node=hit.node_a, actor=hit.admin, now=T0 + timedelta(hours=2))
    hit.node_a.refresh_from_db()
    assert hit.node_a.state == NodeState.ISOLATED
    resume = hit.incident.actions.get(kind=ActionKind.RESUME_NODE)
    assert resume.dry_run
    assert "scontrol update NodeName=gpu-a01 State=RESUME" in resume.text


def test_returning_a_node_to_service_is_recorded_on_the_incident_and_the_node(hit):
    true_actuators()
    faults.node_isolate(incident=hit.incident, actor=hit.admin, now=T0 + timedelta(minutes=1))
    hit.node_a.refresh_from_db()
    assert hit.node_a.state == NodeState.ISOLATED
    assert allowed(hit.incident) >= {"return-to-service"}
    faults.node_return_to_service(node=hit.node_a, actor=hit.admin, now=T0 + timedelta(hours=2))
    hit.node_a.refresh_from_db()
    assert (hit.node_a.state, hit.node_a.state_reason) == (NodeState.ACTIVE, "")
    resume = hit.incident.actions.get(kind=ActionKind.RESUME_NODE)
    assert (resume.ok, resume.dry_run, resume.actor) == (True, False, hit.admin)
    assert [(c.state, c.incident) for c in NodeStateChange.objects.order_by("at")] == [
        (NodeState.ISOLATED, hit.incident),
        (NodeState.ACTIVE, hit.incident),
    ]


def test_a_node_in_service_cannot_be_returned_to_service(hit):
    with pytest.raises(faults.IncidentActionRefused, match="not isolated"):
        faults.node_return_to_service(node=hit.node_a, actor=hit.admin, now=T0 + timedelta(hours=1))
    assert not hit.incident.actions.exists()


# --- Closing is not recovering ------------------------------------------------------------------


def test_closing_needs_a_reason_and_records_who_when_and_why_and_no_recovery(hit):
    hit.job_a.state, hit.job_a.ended_at = JobState.COMPLETED, T0 + timedelta(hours=1)
    hit.job_a.save()
    with pytest.raises(faults.IncidentActionRefused, match="reason"):
        faults.incident_close(
            incident=hit.incident, reason="   ", actor=hit.admin, now=T0 + timedelta(hours=27)
        )
    closed_at = T0 + timedelta(hours=27)
    faults.incident_close(
        incident=hit.incident, reason="The job finished its run; nothing to recover.", actor=hit.admin,
        now=closed_at,
    )  # fmt: skip
    incident = Incident.objects.get(pk=hit.incident.pk)
    assert incident.status == IncidentStatus.CLOSED
    assert (incident.recovered_at, incident.mttr_s) == (None, None)
    assert (incident.closed_by, incident.closed_at) == (hit.admin, closed_at)
    assert incident.close_reason == "The job finished its run; nothing to recover."
    assert [a.kind for a in incident.actions.all()] == [ActionKind.CLOSE]
    summary = fault_summary([incident])
    assert (summary.resolved, summary.mttr_median_s, summary.gpu_hours_lost) == (0, None, 0.0)


def test_a_closed_incident_is_not_recovered_later_when_the_job_runs_again(hit):
    faults.incident_close(
        incident=hit.incident, reason="Known bad image", actor=hit.admin, now=T0 + timedelta(minutes=5)
    )
    hit.job_a.started_at = T0 + timedelta(minutes=20)  # requeued under the same id
    hit.job_a.save()
    faults.incidents_refresh(cluster=hit.cluster, now=T0 + timedelta(hours=1))
    incident = Incident.objects.get(pk=hit.incident.pk)
    assert (incident.status, incident.recovered_at) == (IncidentStatus.CLOSED, None)


def test_an_incident_whose_job_never_came_back_is_closed_not_recovered(hit):
    hit.job_a.state, hit.job_a.ended_at = JobState.NODE_FAIL, T0 + timedelta(minutes=1)
    hit.job_a.save()
    faults.incidents_refresh(cluster=hit.cluster, now=T0 + timedelta(days=2))
    incident = Incident.objects.get(pk=hit.incident.pk)
    assert (incident.status, incident.recovered_at, incident.closed_by) == (IncidentStatus.CLOSED, None, None)
    assert incident.closed_at == T0 + timedelta(days=2)


def test_a_job_known_to_run_again_only_later_than_now_has_not_recovered_yet(hit):
    # A replay knows the scheduler's records ahead of its clock; live, nothing starts in the future.
    hit.job_a.started_at = T0 + timedelta(hours=2)
    hit.job_a.save()
    faults.incidents_refresh(cluster=hit.cluster, now=T0 + timedelta(hours=1))
    assert Incident.objects.get().status == IncidentStatus.OPEN
    faults.incidents_refresh(cluster=hit.cluster, now=T0 + timedelta(hours=3))
    assert Incident.objects.get().recovered_at == T0 + timedelta(hours=2)


def test_a_job_of_the_same_name_days_later_is_not_its_recovery(hit):
    hit.job_a.state, hit.job_a.ended_at = JobState.NODE_FAIL, T0 + timedelta(minutes=1)
    hit.job_a.save()
    three_days_later = T0 + timedelta(days=3)
    JobFactory(cluster=hit.cluster, department=hit.dept_a, name=hit.job_a.name, submitted_at=three_days_later,
               started_at=three_days_later + timedelta(minutes=5))  # fmt: skip
    faults.incidents_refresh(cluster=hit.cluster, now=T0 + timedelta(days=4))
    incident = Incident.objects.get()
    assert (incident.status, incident.recovered_at) == (IncidentStatus.CLOSED, None)


# --- Only what makes sense now is offered; the rest is refused with the reason ------------------


def test_an_open_incident_of_a_running_job_on_an_active_node_offers_isolate_restart_close(hit):
    assert allowed(hit.incident) == {"isolate", "restart", "close"}


def test_a_completed_job_is_not_offered_a_restart(hit):
    hit.job_a.state, hit.job_a.ended_at = JobState.COMPLETED, T0 + timedelta(minutes=30)
    hit.job_a.save()
    why_not = faults.incident_operations(incident=hit.incident)["restart"]
    assert "completed" in why_not
    with pytest.raises(faults.IncidentActionRefused, match="completed"):
        faults.job_restart_request(incident=hit.incident, actor=hit.admin, now=T0 + timedelta(hours=1))
    assert not hit.incident.actions.exists()


def test_a_closed_incident_offers_nothing_but_returning_its_isolated_node(hit):
    faults.node_isolate(incident=hit.incident, actor=hit.admin, now=T0 + timedelta(minutes=1))
    faults.incident_close(
        incident=hit.incident, reason="GPU replaced", actor=hit.admin, now=T0 + timedelta(hours=3)
    )
    assert allowed(hit.incident) == {"return-to-service"}
    with pytest.raises(faults.IncidentActionRefused):
        faults.incident_close(
            incident=hit.incident, reason="again", actor=hit.admin, now=T0 + timedelta(hours=4)
        )


# --- One fault seen by several signal paths is one incident -------------------------------------


def test_an_xid_counted_by_the_exporter_before_the_job_is_known_then_logged_by_the_kernel_is_one_incident(
    org,
):
    faults.fault_policies_ensure()
    # The exporter's count arrives first; the scheduler has not reported the job on the node yet.
    faults.xid_count_signals_record(
        cluster=org.cluster, events=[xid_count_event(org.node_a, 3, 48, T0 + timedelta(seconds=50))],
        now=T0 + timedelta(seconds=50),
    )  # fmt: skip
    faults.incidents_group(cluster=org.cluster, now=T0 + timedelta(seconds=51))
    assert Incident.objects.get().job is None
    running_job(org.job_a)  # sacct reports the job that was running there
    kernel_xid_chunk(org.source, org.node_a, T0, xid=48)
    faults.fault_scan_source(source=org.source, now=T0 + timedelta(seconds=70))
    incident = Incident.objects.get()
    assert incident.job == org.job_a
    assert sorted(incident.signals.values_list("source", flat=True)) == ["log", "metric"]
    assert incident.occurred_at == T0


def test_late_evidence_of_a_fault_whose_job_already_recovered_joins_its_incident(hit):
    hit.job_a.started_at = T0 + timedelta(minutes=4)  # requeued at once
    hit.job_a.save()
    faults.incidents_refresh(cluster=hit.cluster, now=T0 + timedelta(minutes=5))
    assert Incident.objects.get().status == IncidentStatus.RESOLVED
    faults.xid_count_signals_record(
        cluster=hit.cluster, events=[xid_count_event(hit.node_a, 2, 79, T0 + timedelta(seconds=30))],
        now=T0 + timedelta(minutes=6),
    )  # fmt: skip
    faults.incidents_group(cluster=hit.cluster, now=T0 + timedelta(minutes=6))
    assert Incident.objects.count() == 1


def test_two_faults_on_an_idle_node_days_apart_are_two_incidents_even_when_grouped_together(org):
    idle = NodeFactory(hostname="gpu-idle", cluster=org.cluster, owner_department=org.dept_a)
    faults.xid_count_signals_record(
        cluster=org.cluster,
        events=[xid_count_event(idle, 2, 79, T0), xid_count_event(idle, 6, 74, T0 + timedelta(days=2))],
        now=T0 + timedelta(days=2),
    )
    faults.incidents_group(cluster=org.cluster, now=T0 + timedelta(days=2))
    assert sorted(Incident.objects.values_list("code", flat=True)) == ["74", "79"]


def test_a_last_xid_that_stays_set_is_one_signal_however_the_window_slides(db):
    node = NodeFactory(hostname="gpu-x02")
    for minute in range(120):
        GpuSample.objects.create(node=node, gpu_index=1, ts=T0 + timedelta(minutes=minute), interval_s=60,
                                 xid_last=0 if minute < 5 else 79)  # fmt: skip
    for minute in range(10, 121, 10):
        faults.fault_detect_metrics(cluster=node.cluster, now=T0 + timedelta(minutes=minute))
    assert FaultSignal.objects.count() == 1


# --- Time only moves forward in an incident -----------------------------------------------------


def test_a_replayed_log_line_is_detected_when_the_live_portal_would_have_seen_it(org):
    faults.fault_policies_ensure()
    running_job(org.job_a)
    kernel_xid_chunk(org.source, org.node_a, T0)
    # The replay writes 15 minutes of logs, then scans them; live, the line was read within 15 s.
    faults.fault_scan_source(
        source=org.source, now=T0 + timedelta(minutes=15), seen_after=timedelta(seconds=15)
    )
    incident = Incident.objects.get()
    assert incident.signals.get().detected_at == T0 + timedelta(seconds=15)
    assert (incident.detected_at, incident.located_at) == (T0 + timedelta(seconds=15),) * 2


def test_evidence_grouped_before_its_detection_time_is_not_located_before_it_was_detected(org):
    faults.xid_count_signals_record(
        cluster=org.cluster, events=[xid_count_event(org.node_a, 3, 48, T0)], now=T0 + timedelta(days=1)
    )
    faults.incidents_group(cluster=org.cluster, now=T0 + timedelta(hours=1))
    incident = Incident.objects.get()
    assert incident.occurred_at <= incident.detected_at <= incident.located_at


def test_the_database_refuses_an_incident_located_before_it_was_detected(org):
    with pytest.raises(IntegrityError), transaction.atomic():
        Incident.objects.create(
            cluster=org.cluster, node=org.node_a, category="hardware_gpu", severity="critical",
            root_signature_id="xid-79", occurred_at=T0, detected_at=T0 + timedelta(minutes=1), located_at=T0,
        )  # fmt: skip


def test_the_database_refuses_a_recovery_before_the_restart_was_requested(org):
    with pytest.raises(IntegrityError), transaction.atomic():
        Incident.objects.create(
            cluster=org.cluster, node=org.node_a, category="hardware_gpu", severity="critical",
            root_signature_id="xid-79", occurred_at=T0, detected_at=T0,
            restart_requested_at=T0 + timedelta(minutes=5),
            recovered_at=T0 + timedelta(minutes=2),
        )  # fmt: skip


def test_a_job_running_again_before_its_restart_was_requested_recovers_no_earlier_than_the_request(hit):
    true_actuators()
    faults.job_restart_request(incident=hit.incident, actor=hit.admin, now=T0 + timedelta(minutes=10))
    hit.job_a.started_at = T0 + timedelta(minutes=3)  # the scheduler requeued it by itself
    hit.job_a.save()
    faults.incidents_refresh(cluster=hit.cluster, now=T0 + timedelta(minutes=15))
    incident = Incident.objects.get()
    assert incident.status == IncidentStatus.RESOLVED
    assert incident.restart_requested_at <= incident.recovered_at


# --- Department heads see the incidents on the nodes their department owns ----------------------


def test_a_head_sees_a_metric_incident_on_their_node_with_no_job_of_theirs(org):
    faults.xid_count_signals_record(
        cluster=org.cluster, events=[xid_count_event(org.node_a, 3, 79, T0)], now=T0 + timedelta(seconds=30)
    )
    faults.incidents_group(cluster=org.cluster, now=T0 + timedelta(seconds=30))
    incident = Incident.objects.get()
    assert incident.job is None
    assert list(scope_queryset(Incident.objects.all(), org.head_a)) == [incident]
    assert list(scope_queryset(FaultSignal.objects.all(), org.head_a)) == list(incident.signals.all())
    assert not scope_queryset(Incident.objects.all(), org.head_b).exists()
    assert not scope_queryset(FaultSignal.objects.all(), org.head_b).exists()


def test_a_head_does_not_see_another_departments_incident_on_a_shared_pool_node(org):
    pool = NodeFactory(hostname="pool-01", cluster=org.cluster, owner_department=None)
    theirs = running_job(JobFactory(cluster=org.cluster, department=org.dept_b))
    theirs.nodes.add(pool)
    faults.xid_count_signals_record(
        cluster=org.cluster, events=[xid_count_event(pool, 0, 79, T0)], now=T0 + timedelta(seconds=30)
    )
    faults.incidents_group(cluster=org.cluster, now=T0 + timedelta(seconds=30))
    assert Incident.objects.get().department == org.dept_b
    assert not scope_queryset(Incident.objects.all(), org.head_a).exists()
    assert scope_queryset(Incident.objects.all(), org.head_b).exists()


# --- Machine-written text is stored as facts and read in the reader's language -----------------


def test_action_and_evidence_text_is_rendered_in_chinese_for_a_chinese_reader(hit):
    slurm_actuators(dry_run=True)
    faults.incident_policy_apply(incident=hit.incident, now=T0 + timedelta(seconds=30))
    faults.xid_count_signals_record(
        cluster=hit.cluster, events=[xid_count_event(hit.node_a, 3, 79, T0 + timedelta(seconds=30))],
        now=T0 + timedelta(seconds=40),
    )  # fmt: skip
    isolate = hit.incident.actions.get(kind=ActionKind.ISOLATE_NODE)
    metric = FaultSignal.objects.get(source="metric")
    with translation.override("zh-hans"):
        assert "Would run" not in isolate.text
        assert "scontrol update NodeName=gpu-a01 State=DRAIN" in isolate.text
        assert "GPU 3" in metric.text
        assert " on GPU " not in metric.text
    with translation.override("en"):
        assert isolate.text.startswith("Would run: scontrol update")
    # The kernel's own line is evidence: shown as written in every language.
    line = FaultSignal.objects.get(source="log")
    with translation.override("zh-hans"):
        assert line.text.startswith("Nov 30 10:00:00 gpu-a01 kernel")
    hit.incident.refresh_from_db()
    assert hit.incident.reasoning["why"] == "most_fundamental"
