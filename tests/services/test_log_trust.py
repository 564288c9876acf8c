"""A job's own output cannot get a node isolated (issue 12, item 2).

Rank logs and pushed job lines are written by the job's user. Hardware evidence is trusted only
from the node's kernel log and the exporter's metrics; job output raises a suspicion that such a
signal must confirm, and may only name the job's own nodes. The lines are real ones, from the
public bug reports listed in tests/fixtures/logs/README.md.
"""

import csv
import json
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.db import transaction
from django.utils import translation
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from efficiency.analysis.faults import trust
from efficiency.choices import ActionKind, NodeState, SourceKind
from efficiency.collectors.records import LogLines
from efficiency.models import (
    DataSource,
    FaultSignal,
    Incident,
    IncidentAction,
    LogChunk,
    Node,
    NodeStateChange,
)
from efficiency.services import faults
from efficiency.services.ingest import log_chunks_ingest
from efficiency.services.sources import source_collect
from efficiency.services.tokens import api_token_issue
from tests.factories import UserFactory
from tests.fault_helpers import T0, kernel_xid_chunk, running_job, slurm_actuators, true_actuators

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
with (FIXTURES / "examples.tsv").open(encoding="utf-8") as handle:
    REAL_LINES = [
        row[2] for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE) if len(row) == 3
    ]
# my-t450s-troubleshoot: a real Xid 79 line from nvidia-bug-report.log, host "pc".
XID79 = "Mar 21 20:18:56 pc kernel: [   65.315783] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."  # noqa: E501
HARDWARE = {"hardware_gpu", "hardware_memory_ecc", "nvlink", "network_rdma"}


@pytest.fixture(autouse=True)
def _english():
    with translation.override("en"):
        yield


@pytest.fixture
def world(org):
    faults.fault_policies_ensure()
    running_job(org.job_a)
    running_job(org.job_b)
    true_actuators()  # actuators out of dry run: anything the policy did would change the inventory
    return org


def naming(host: str, line: str = XID79, *, at=None) -> str:
    """The real line with its syslog host replaced by ``host`` (and its time by ``at``)."""
    line = line.replace(" pc kernel:", f" {host} kernel:")
    return line if at is None else line.replace("Mar 21 20:18:56", f"{at:%b} {at.day:2d} {at:%H:%M:%S}")


def act_on_everything(org, at) -> None:
    """What the portal does after a scan: group, locate, and run every incident's policy."""
    faults.incidents_group(cluster=org.cluster, now=at)
    for incident in Incident.objects.all():
        faults.incident_policy_apply(incident=incident, now=at)


def assert_nothing_was_done(org) -> None:
    assert set(Node.objects.values_list("state", flat=True)) == {NodeState.ACTIVE}
    assert not NodeStateChange.objects.exists()
    assert not IncidentAction.objects.exists()
    assert not Incident.objects.filter(confirmed=True).exists()


# --- The pushed line of the issue ----------------------------------------------------------------


def test_a_pushed_xid79_line_naming_another_node_is_a_suspicion_without_that_node(client, world):
    shipper = UserFactory(username="fluent-bit")
    shipper.user_permissions.add(Permission.objects.get(codename="add_logchunk"))
    line = {"stream": "/var/log/jobs/a/rank-0.log", "offset": 0, "job": world.job_a.external_id,
            "node": "gpu-a01", "rank": 0, "line": naming("gpu-b01")}  # fmt: skip
    answer = client.post(
        f"/api/v1/sources/{world.source.pk}/logs/", data=json.dumps(line),
        content_type="application/x-ndjson",
        HTTP_AUTHORIZATION=f"Token {api_token_issue(user=shipper, name='shipper').key}",
    )  # fmt: skip
    assert answer.status_code == 200
    faults.fault_scan_source(source=world.source, now=T0)
    act_on_everything(world, T0)

    assert_nothing_was_done(world)
    signal = FaultSignal.objects.get()
    assert (signal.category, signal.trusted, signal.node) == ("hardware_gpu", False, None)
    assert signal.trust_text == (
        f"The job's output named node gpu-b01, which is not one of job {world.job_a.external_id}'s nodes: "
        "node refused."
    )
    incident = Incident.objects.get()
    assert (incident.confirmed, incident.node, incident.job) == (False, None, world.job_a)


def test_the_lines_a_grown_replay_adds_are_scanned(world):
    """A shipper that crashed replays from an offset already stored, with lines written since: the
    scanner reads each chunk once, by id, so those lines must arrive as a chunk of their own."""
    head = "epoch 1 step 10\nepoch 1 step 20\n"
    grown = head + naming("gpu-b01") + "\n"

    def deliver(text: str, lines: int, at) -> None:
        chunk = LogLines("/var/log/jobs/a/rank-0.log", "push", 0, len(text.encode()), text, lines,
                         job_external_id=world.job_a.external_id, node="gpu-a01", rank=0)  # fmt: skip
        log_chunks_ingest(source=world.source, chunks=[chunk], now=at)
        faults.fault_scan_source(source=world.source, now=at)

    deliver(head, 2, T0)
    assert not FaultSignal.objects.exists()
    deliver(grown, 3, T0 + timedelta(minutes=1))
    signal = FaultSignal.objects.get()
    assert (signal.category, signal.job) == ("hardware_gpu", world.job_a)


def test_a_log_file_under_a_node_the_job_never_ran_on_names_no_node(world, tmp_path):
    folder = tmp_path / world.job_a.external_id / "gpu-b01"
    folder.mkdir(parents=True)
    (folder / "rank0.log").write_text(XID79 + "\n")
    source = DataSource.objects.create(
        cluster=world.cluster, kind=SourceKind.LOG_FILES, name="files", config={"root": str(tmp_path)}
    )
    source_collect(source_id=source.pk, now=T0)
    assert LogChunk.objects.get().node == "gpu-b01"
    faults.fault_scan_source(source=source, now=T0)
    act_on_everything(world, T0)

    assert_nothing_was_done(world)
    signal = FaultSignal.objects.get()
    assert signal.node is None
    assert "gpu-b01, which is not one of job" in signal.trust_text


def test_job_output_with_no_job_known_names_no_node(world):
    LogChunk.objects.create(source=world.source, stream="orphan.log", file_id="push", start_offset=0,
                            end_offset=200, node="gpu-b01", line_count=1, text=XID79 + "\n",
                            received_at=T0)  # fmt: skip
    faults.fault_scan_source(source=world.source, now=T0)
    act_on_everything(world, T0)

    assert_nothing_was_done(world)
    signal = FaultSignal.objects.get()
    assert (signal.node, signal.job) == (None, None)
    assert "no job the scheduler reported vouches for it" in signal.trust_text


# --- A suspicion a trusted signal confirms -------------------------------------------------------


def push_line(org, text: str, *, job, node: str, offset: int = 0, at=T0) -> LogChunk:
    return LogChunk.objects.create(
        source=org.source, stream=f"/var/log/jobs/{job.external_id}/rank-0.log", file_id="push",
        start_offset=offset, end_offset=offset + len(text) + 1, job=job, job_external_id=job.external_id,
        node=node, rank=0, line_count=1, text=text + "\n", received_at=at,
    )  # fmt: skip


# basicsr-737 (tests/fixtures/logs/examples.tsv): a real NCCL watchdog timeout from a job's rank log.
NCCL_TIMEOUT = next(line for line in REAL_LINES if "Watchdog caught collective operation timeout" in line)


def test_a_fault_of_the_job_itself_in_its_own_output_requeues_that_job_and_touches_no_node(world):
    push_line(world, NCCL_TIMEOUT, job=world.job_a, node="gpu-a01")
    faults.fault_scan_source(source=world.source, now=T0 + timedelta(seconds=10))
    act_on_everything(world, T0 + timedelta(seconds=10))

    incident = Incident.objects.get()
    assert incident.category == "nccl_timeout_hang"
    assert incident.confirmed is False
    assert incident.job == world.job_a
    assert set(incident.actions.values_list("kind", flat=True)) == {ActionKind.RESTART_JOB, ActionKind.NOTIFY}
    assert set(Node.objects.values_list("state", flat=True)) == {NodeState.ACTIVE}
    assert not NodeStateChange.objects.exists()


def test_job_output_about_its_own_node_waits_for_the_kernel_then_the_policy_acts(org):
    faults.fault_policies_ensure()
    running_job(org.job_a)
    slurm_actuators(dry_run=True)
    push_line(org, naming("gpu-a01", at=T0), job=org.job_a, node="gpu-a01")
    faults.fault_scan_source(source=org.source, now=T0 + timedelta(seconds=10))
    act_on_everything(org, T0 + timedelta(seconds=10))
    incident = Incident.objects.get()
    assert (incident.confirmed, incident.node) == (False, org.node_a)
    assert not incident.actions.exists()
    assert incident.signals.get().trust_text.startswith("From the job's own output: a suspicion")

    kernel_xid_chunk(org.source, org.node_a, T0 + timedelta(seconds=5))
    faults.fault_scan_source(source=org.source, now=T0 + timedelta(seconds=30))
    act_on_everything(org, T0 + timedelta(seconds=30))
    incident = Incident.objects.get()
    assert incident.confirmed
    assert sorted(incident.signals.values_list("trusted", flat=True)) == [False, True]
    root = FaultSignal.objects.get(pk=incident.reasoning["root_signal"])
    assert root.trusted
    kinds = set(incident.actions.values_list("kind", flat=True))
    assert {ActionKind.ISOLATE_NODE, ActionKind.RESTART_JOB} <= kinds
    assert "NodeName=gpu-a01" in incident.actions.get(kind=ActionKind.ISOLATE_NODE).text


def test_a_kernel_log_is_trusted_about_its_own_node_not_a_host_its_lines_name(world):
    text = naming("gpu-b01")  # a forwarded line naming another host, in gpu-a01's kernel log
    LogChunk.objects.create(source=world.source, stream="kern/gpu-a01.log", file_id="kern", start_offset=0,
                            end_offset=len(text) + 1, node="gpu-a01", line_count=1, text=text + "\n",
                            received_at=T0)  # fmt: skip
    faults.fault_scan_source(source=world.source, now=T0)
    signal = FaultSignal.objects.get()
    assert (signal.trusted, signal.node) == (True, world.node_a)


def test_a_push_source_that_ships_only_job_output_cannot_pass_a_line_off_as_a_kernel_log(world):
    world.source.config = {}  # its shipper was not declared to forward kernel logs
    world.source.save()
    text = naming("gpu-b01", at=T0)
    LogChunk.objects.create(source=world.source, stream="kern/gpu-b01.log", file_id="push", start_offset=0,
                            end_offset=len(text) + 1, node="gpu-b01", line_count=1, text=text + "\n",
                            received_at=T0)  # fmt: skip
    faults.fault_scan_source(source=world.source, now=T0)
    act_on_everything(world, T0)

    assert_nothing_was_done(world)
    assert FaultSignal.objects.get().trusted is False


def test_a_metric_confirms_a_suspicion_on_the_same_node(world):
    from tests.fault_helpers import xid_count_event

    push_line(world, naming("gpu-a01", at=T0), job=world.job_a, node="gpu-a01")
    faults.fault_scan_source(source=world.source, now=T0 + timedelta(seconds=10))
    faults.xid_count_signals_record(cluster=world.cluster, events=[xid_count_event(world.node_a, 0, 79, T0)],
                                    now=T0 + timedelta(seconds=20))  # fmt: skip
    act_on_everything(world, T0 + timedelta(seconds=20))
    incident = Incident.objects.get()
    assert incident.confirmed
    world.node_a.refresh_from_db()
    assert world.node_a.state == NodeState.ISOLATED  # the real (true) actuator did it


# --- The property: whatever a job writes, nothing is done without a trusted signal ---------------


@contextmanager
def rolled_back():
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


hosts = st.sampled_from(["gpu-a01", "gpu-b01", "gpu-zz9", "pc", "", "kern", "../gpu-b01"])
job_line = st.one_of(
    st.sampled_from(REAL_LINES),
    st.tuples(hosts.filter(bool), st.sampled_from(REAL_LINES)).map(lambda pair: naming(*pair)),
    st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\n\r\x00"), max_size=200),
)
# A job-output stream: anything but a node's own kernel log (``kern/<host>.log`` of that host, no job).
stream = st.tuples(
    st.sampled_from(
        [
            "/var/log/jobs/{job}/rank-0.log",
            "{job}/{node}/rank0.log",
            "{job}/launcher.log",
            "kern/{node}.log",
            "kern/gpu-b01.log",
            "misc/out.log",
        ]
    ),
    st.sampled_from(["a", "b", None]),  # whose job, by the chunk's job field
    hosts,  # the node the chunk claims
    st.one_of(st.none(), st.integers(0, 15)),  # rank
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(chunks=st.lists(st.tuples(stream, st.lists(job_line, min_size=1, max_size=6)), min_size=1, max_size=5))
@example(chunks=[(("{job}/{node}/rank0.log", "a", "gpu-b01", 0), [XID79])])
@example(chunks=[(("kern/{node}.log", "a", "gpu-b01", None), [naming("gpu-b01")])])
def test_no_content_of_a_job_output_stream_changes_a_node_or_takes_an_action(world, chunks):
    jobs = {"a": world.job_a, "b": world.job_b, None: None}
    with rolled_back():
        for index, ((pattern, whose, node, rank), lines) in enumerate(chunks):
            job = jobs[whose]
            name = pattern.format(job=job.external_id if job else "none", node=node or "x")
            if name == f"kern/{node}.log" and job is None:
                continue  # that is a node's kernel log, the trusted stream
            text = "".join(line + "\n" for line in lines)
            LogChunk.objects.create(
                source=world.source, stream=name, file_id="push", start_offset=index * 100_000,
                end_offset=index * 100_000 + len(text.encode()), job=job,
                job_external_id=job.external_id if job else "", node=node, rank=rank,
                line_count=len(lines), text=text, received_at=T0,
            )  # fmt: skip
        faults.fault_scan_source(source=world.source, now=T0 + timedelta(seconds=15))
        faults.fault_detect_jobs(cluster=world.cluster, now=T0 + timedelta(minutes=30))
        act_on_everything(world, T0 + timedelta(minutes=30))

        # No node changes and nothing acts on a machine; a fault of the job itself may requeue
        # only the job whose output it is.
        assert set(Node.objects.values_list("state", flat=True)) == {NodeState.ACTIVE}
        assert not NodeStateChange.objects.exists()
        assert not Incident.objects.filter(confirmed=True).exists()
        for action in IncidentAction.objects.select_related("incident"):
            assert action.kind in {ActionKind.RESTART_JOB, ActionKind.NOTIFY}
            assert trust.job_output_may_restart(action.incident.category)
            assert action.incident.signals.filter(job=action.incident.job).exists()
        assert not FaultSignal.objects.filter(trusted=True).exists()
        for signal in FaultSignal.objects.exclude(node=None).select_related("job"):
            # A node job output names is always one of its job's nodes.
            assert signal.job is not None
            assert signal.job.nodes.filter(pk=signal.node_id).exists()


# --- What a reader sees -------------------------------------------------------------------------


def test_the_fault_list_and_page_show_a_suspicion_and_why_its_node_was_refused(client, world):
    push_line(world, naming("gpu-b01", at=T0), job=world.job_a, node="gpu-a01")
    faults.fault_scan_source(source=world.source, now=T0 + timedelta(seconds=10))
    faults.incidents_group(cluster=world.cluster, now=T0 + timedelta(seconds=10))
    incident = Incident.objects.get()
    client.force_login(world.committee)

    listing = client.get("/faults/?range=custom&start=2026-11-29&end=2026-12-01").content.decode()
    assert 'class="suspicion"' in listing
    page = client.get(f"/faults/incidents/{incident.pk}/").content.decode()
    assert "Suspicion: only the job's own output says so." in page
    assert "named node gpu-b01, which is not one of job" in page
    api = client.get(f"/api/v1/incidents/{incident.pk}/").json()
    assert api["confirmed"] is False
