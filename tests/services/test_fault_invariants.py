"""The fault rules of trust as properties: random evidence, arriving by random paths in random
orders, driven through the real services (scan, Xid counts, metric detection, grouping, locating,
policy, refresh, close, isolate, restart, return to service), and what must hold afterwards.

- Time only moves forward in an incident: occurred ≤ detected ≤ located ≤ restart requested ≤
  recovered, and every signal is detected no earlier than it occurred.
- One fault seen by several signal paths is one incident, and two faults are two.
- Closing is not recovering: a closed incident has no recovery time and counts in no MTTR.
- Dry run changes nothing but the record of what would have run.
"""

from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from efficiency.choices import IncidentStatus, JobState, NodeState
from efficiency.models import FaultSignal, GpuSample, Incident, IncidentAction, Node, NodeStateChange
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

PHASES = ["occurred_at", "detected_at", "located_at", "restart_requested_at", "recovered_at"]
PROPERTY_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@contextmanager
def rolled_back():
    """Each example starts from the fixture's world: its writes are undone afterwards."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


@pytest.fixture
def world(org):
    """Three single-GPU-job nodes (A owns two, B one) and one idle node, policies in place."""
    faults.fault_policies_ensure()
    second = NodeFactory(hostname="gpu-a02", cluster=org.cluster, owner_department=org.dept_a)
    idle = NodeFactory(hostname="gpu-idle", cluster=org.cluster, owner_department=org.dept_b)
    org.nodes = [org.node_a, second, org.node_b, idle]
    org.jobs = [running_job(org.job_a), running_job(JobFactory(cluster=org.cluster, department=org.dept_a)),
                running_job(org.job_b)]  # fmt: skip
    org.jobs[1].nodes.add(second)
    return org


def assert_time_moves_forward():
    for incident in Incident.objects.all():
        stamped = [getattr(incident, phase) for phase in PHASES if getattr(incident, phase) is not None]
        assert stamped == sorted(stamped), {phase: getattr(incident, phase) for phase in PHASES}
    for signal in FaultSignal.objects.all():
        assert signal.occurred_at <= signal.detected_at


def assert_closing_is_not_recovering():
    closed = list(Incident.objects.filter(status=IncidentStatus.CLOSED))
    for incident in closed:
        assert incident.recovered_at is None
        assert incident.mttr_s is None
        assert incident.closed_at is not None
    recovered = list(Incident.objects.filter(status=IncidentStatus.RESOLVED))
    assert all(incident.recovered_at is not None for incident in recovered)
    assert fault_summary(closed + recovered).resolved == len(recovered)


# --- Random operations on incidents ---------------------------------------------------------------

evidence = st.tuples(
    st.sampled_from(["kernel", "xid_count"]),
    st.integers(0, 3),  # node
    st.integers(0, 7),  # GPU
    st.sampled_from([79, 48, 74, 31]),
    st.integers(-3600, 60),  # when it happened, against the clock (a little skew ahead)
    st.sampled_from([None, 15]),  # replay: seen this many seconds after it happened
)
operation = st.one_of(
    st.tuples(st.just("evidence"), evidence),
    st.tuples(st.just("group"), st.just(0)),
    st.tuples(st.just("policy"), st.integers(0, 20)),
    st.tuples(st.sampled_from(["isolate", "restart", "close", "return-to-service"]), st.integers(0, 20)),
    st.tuples(st.sampled_from(["isolate", "restart", "close", "return-to-service"]), st.integers(0, 20)),
    st.tuples(st.just("job_back"), st.integers(0, 20), st.integers(-1200, 600)),
    st.tuples(st.just("job_ends"), st.integers(0, 20), st.sampled_from(list(JobState.finished()))),
    st.tuples(st.just("refresh"), st.just(0)),
)
# Every story starts with some evidence, so that the operations have incidents to act on.
story = st.tuples(
    st.lists(
        st.tuples(st.tuples(st.just("evidence"), evidence), st.integers(0, 120)), min_size=1, max_size=4
    ),
    st.lists(st.tuples(operation, st.integers(0, 1800)), min_size=1, max_size=14),
).map(lambda parts: parts[0] + parts[1])


def _pick(index: int) -> Incident | None:
    incidents = list(Incident.objects.select_related("node", "job").order_by("pk"))
    return incidents[index % len(incidents)] if incidents else None


def _apply(world, op, clock, *, actor):
    kind = op[0]
    if kind == "evidence":
        path, node_index, gpu, xid, offset_s, seen_after_s = op[1]
        node, at = world.nodes[node_index], clock + timedelta(seconds=offset_s)
        seen_after = None if seen_after_s is None else timedelta(seconds=seen_after_s)
        if path == "kernel":
            kernel_xid_chunk(world.source, node, at, xid)
            faults.fault_scan_source(source=world.source, now=clock, seen_after=seen_after)
        else:
            faults.xid_count_signals_record(
                cluster=world.cluster, events=[xid_count_event(node, gpu, xid, at)], now=clock
            )
    elif kind == "group":
        faults.incidents_group(cluster=world.cluster, now=clock)
    elif kind == "policy":
        incident = _pick(op[1])
        if incident is not None:
            faults.incident_policy_apply(incident=incident, now=clock)
    elif kind in ("job_back", "job_ends"):
        # What the scheduler reports next about the job of an incident: requeued, or ended.
        incident = _pick(op[1])
        job = incident.job if incident is not None else None
        if job is None:
            return
        if kind == "job_back":
            job.started_at, job.ended_at, job.state = clock + timedelta(seconds=op[2]), None, JobState.RUNNING
        else:
            job.ended_at, job.state = max(job.started_at, clock), op[2]
        job.save()
    elif kind == "refresh":
        faults.incidents_refresh(cluster=world.cluster, now=clock)
    else:
        incident = _pick(op[1])
        if incident is None:
            return
        why_not = faults.incident_operations(incident=incident)[kind]
        actions_before = IncidentAction.objects.count()
        try:
            if kind == "isolate":
                faults.node_isolate(incident=incident, actor=actor, now=clock)
            elif kind == "restart":
                faults.job_restart_request(incident=incident, actor=actor, now=clock)
            elif kind == "close":
                faults.incident_close(incident=incident, reason="checked by hand", actor=actor, now=clock)
            else:
                faults.node_return_to_service(node=incident.node, incident=incident, actor=actor, now=clock)
        except faults.IncidentActionRefused:
            # Refused exactly when it was not offered, and a refusal does nothing.
            assert why_not is not None
            assert IncidentAction.objects.count() == actions_before
        else:
            assert why_not is None, f"{kind} was done although refused: {why_not}"


@settings(PROPERTY_SETTINGS, max_examples=60)
@given(operations=story, actuators=st.sampled_from(["none", "dry_run", "real"]))
# The scheduler requeued the job before the portal asked for a restart.
@example(
    operations=[(("evidence", ("kernel", 0, 0, 79, -10, None)), 0), (("restart", 0), 600),
                (("job_back", 0, -300), 10), (("refresh", 0), 10)],
    actuators="real",
)  # fmt: skip
# A replayed line located by its evidence; then a restart, the job back, closed attempts.
@example(
    operations=[(("evidence", ("kernel", 1, 0, 48, -900, 15)), 0), (("policy", 0), 5),
                (("evidence", ("xid_count", 1, 4, 48, -600, None)), 30), (("job_back", 0, -800), 60),
                (("close", 0), 60), (("refresh", 0), 60)],
    actuators="none",
)  # fmt: skip
def test_time_only_moves_forward_and_closing_is_not_recovering(world, operations, actuators):
    with rolled_back():
        if actuators == "dry_run":
            slurm_actuators(dry_run=True)
        elif actuators == "real":
            true_actuators()
        clock = T0
        for op, advance_s in operations:
            clock += timedelta(seconds=advance_s)
            _apply(world, op, clock, actor=world.admin)
        faults.incidents_group(cluster=world.cluster, now=clock)
        faults.incidents_refresh(cluster=world.cluster, now=clock + timedelta(days=2))
        assert_time_moves_forward()
        assert_closing_is_not_recovering()
        assert not FaultSignal.objects.filter(incident__isnull=True).exists()


@PROPERTY_SETTINGS
@given(operations=story, by_hand=st.booleans())
def test_dry_run_changes_nothing_but_the_record_of_what_would_have_run(world, operations, by_hand):
    with rolled_back():
        slurm_actuators(dry_run=True)
        clock = T0
        for op, advance_s in operations:
            clock += timedelta(seconds=advance_s)
            _apply(world, op, clock, actor=world.admin if by_hand else None)
        assert set(Node.objects.values_list("state", flat=True)) == {NodeState.ACTIVE}
        assert not NodeStateChange.objects.exists()
        assert not Incident.objects.filter(restart_requested_at__isnull=False).exists()
        assert not Incident.objects.filter(status=IncidentStatus.RECOVERING).exists()
        # Whatever was attempted is in the log, as what would have run.
        kinds = {"isolate_node", "restart_job", "resume_node"}
        assert all(a.dry_run for a in IncidentAction.objects.filter(kind__in=kinds))


# --- One fault, several signal paths -------------------------------------------------------------

path_set = st.sets(st.sampled_from(["kernel", "xid_count", "xid_last"]), min_size=1)


@st.composite
def faults_on_nodes(draw):
    """Faults on two nodes, each at least seven hours after the one before on its node; some hit a
    job whose record reaches the portal only after some of the fault's evidence (sacct lags)."""
    found = []
    for node_index in range(2):
        at_s = draw(st.integers(0, 3600))
        for _ in range(draw(st.integers(0, 3))):
            paths = draw(st.permutations(sorted(draw(path_set))))
            job_known_after = draw(st.one_of(st.none(), st.integers(0, len(paths))))
            found.append((node_index, at_s, draw(st.integers(0, 7)), draw(st.sampled_from([79, 48, 74])),
                          paths, draw(st.integers(5, 290)), job_known_after))  # fmt: skip
            at_s += draw(st.integers(7 * 3600, 30 * 3600))
    return found


@PROPERTY_SETTINGS
@given(found=faults_on_nodes(), group_each_time=st.booleans(), seen_after=st.sampled_from([None, 15]))
# The case: the exporter's count first, with no job known; the kernel line after the job.
@example(found=[(0, 0, 3, 48, ["xid_count", "kernel"], 50, 1)], group_each_time=True, seen_after=None)
def test_one_fault_seen_by_several_signal_paths_is_one_incident(org, found, group_each_time, seen_after):
    with rolled_back():
        nodes = [
            NodeFactory(hostname=f"gpu-q{i}", cluster=org.cluster, owner_department=org.dept_a)
            for i in (1, 2)
        ]
        arrivals = []
        for node_index, at_s, gpu, xid, paths, lag_s, job_known_after in found:
            at = T0 + timedelta(seconds=at_s)
            job = None
            if job_known_after is not None:
                # Its record is not in yet: no start time until the scheduler reports it.
                job = JobFactory(cluster=org.cluster, department=org.dept_a, state=JobState.PENDING,
                                 submitted_at=at - timedelta(hours=2), started_at=None)  # fmt: skip
                job.nodes.add(nodes[node_index])
            for number, path in enumerate(paths):
                # Each path sees the fault a little later than the one before.
                arrival = at + timedelta(seconds=lag_s * number)
                reveal = job if job_known_after == number else None
                arrivals.append((arrival, path, nodes[node_index], at, gpu, xid, reveal))
            if job_known_after == len(paths):
                arrivals.append((at + timedelta(seconds=lag_s * len(paths)), "job", None, at, gpu, xid, job))
        for arrival, path, node, at, gpu, xid, reveal in sorted(arrivals, key=lambda a: a[0]):
            if reveal is not None:
                reveal.state, reveal.started_at = JobState.RUNNING, at - timedelta(hours=1)
                reveal.save()
            if path == "kernel":
                kernel_xid_chunk(org.source, node, at, xid)
                faults.fault_scan_source(
                    source=org.source, now=arrival,
                    seen_after=None if seen_after is None else timedelta(seconds=seen_after),
                )  # fmt: skip
            elif path == "xid_count":
                faults.xid_count_signals_record(
                    cluster=org.cluster, events=[xid_count_event(node, gpu, xid, arrival)], now=arrival
                )
            elif path == "xid_last":
                before = arrival - timedelta(seconds=2)
                GpuSample.objects.create(node=node, gpu_index=gpu, ts=before, interval_s=30, xid_last=0)
                GpuSample.objects.create(node=node, gpu_index=gpu, ts=arrival, interval_s=30, xid_last=xid)
                faults.fault_detect_metrics(cluster=org.cluster, now=arrival + timedelta(seconds=1))
            if group_each_time:
                faults.incidents_group(cluster=org.cluster, now=arrival + timedelta(seconds=1))
        faults.incidents_group(cluster=org.cluster, now=T0 + timedelta(days=10))
        incident_of_fault = {}
        for fault_id, (node_index, at_s, *_rest) in enumerate(found):
            at = T0 + timedelta(seconds=at_s)
            signals = FaultSignal.objects.filter(
                node=nodes[node_index], occurred_at__gte=at, occurred_at__lte=at + timedelta(minutes=10)
            )
            incidents = set(signals.values_list("incident", flat=True))
            assert len(incidents) == 1, f"fault {fault_id} is in incidents {incidents}"
            incident_of_fault[fault_id] = incidents.pop()
        assert len(set(incident_of_fault.values())) == len(found)
        assert Incident.objects.count() == len(found)
        assert_time_moves_forward()
