"""Faults end to end on the simulator's logs: collected, scanned, grouped, located, acted on.

The simulator injects faults with ground truth (job, kind, node, rank, time) and writes the log
lines real clusters write; the production log-file collector tails them, the scanner and the
incident service do the rest. "Live" is driven here tick by tick with explicit times.
"""

from datetime import UTC, datetime, timedelta

import pytest

from efficiency.actuators.command import SLURM_DRAIN
from efficiency.choices import FaultCategory, IncidentStatus, JobSource, NodeState, SourceKind
from efficiency.collectors.slurm import parse_sacct
from efficiency.models import ActuatorConfig, Cluster, DataSource, FaultScanCursor, FaultSignal, Incident
from efficiency.services import faults
from efficiency.services.ingest import jobs_ingest
from efficiency.services.organisation import DEMO_CLUSTER_SLUG, demo_organisation_create
from efficiency.services.sources import source_collect
from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes

START = datetime(2026, 11, 1, tzinfo=UTC)
TICK = timedelta(seconds=15)


@pytest.fixture
def cluster(db):
    demo_organisation_create(password="pw")
    faults.fault_policies_ensure()
    return Cluster.objects.get(slug=DEMO_CLUSTER_SLUG)


@pytest.fixture
def sim():
    return ClusterSimulator(reference_nodes(), seed=7, start=START, fault_rate_per_day=12.0)


def first_fault(sim, kind, *, min_gpus=2):
    for fault in sim.faults(START + timedelta(hours=6), START + timedelta(days=6)):
        if fault.kind == kind and sim.sim_job(fault.job_external_id).gpu_count >= min_gpus:
            return fault
    raise AssertionError(f"seed 7 has no {kind} fault of a job with {min_gpus}+ GPUs in the window")


def replay(cluster, sim, tmp_path, since, until):
    """Write the logs tick by tick and collect + scan after each tick, like the live demo."""
    jobs = parse_sacct(sim.sacct_text(START, until, timezone=UTC), timezone=UTC)
    jobs_ingest(cluster=cluster, source=JobSource.SLURM, records=jobs.records, now=until)
    source, _ = DataSource.objects.get_or_create(
        cluster=cluster,
        name="logs",
        defaults={"kind": SourceKind.LOG_FILES, "config": {"root": str(tmp_path)}},
    )
    at = since
    while at < until:
        sim.write_job_logs(tmp_path, at, at + TICK)
        sim.write_kernel_logs(tmp_path, at, at + TICK)
        at += TICK
        source.refresh_from_db()
        source.running_since = None
        source.save(update_fields=["running_since"])
        source_collect(source_id=source.pk, now=at)
        faults.fault_scan_source(source=source, now=at)
    return source


def incident_of(fault):
    return Incident.objects.select_related("node").get(job__external_id=fault.job_external_id)


def test_xid79_is_rooted_at_its_node_within_a_minute_and_a_dry_run_drain_is_logged(cluster, sim, tmp_path):
    fault = first_fault(sim, "xid79")
    ActuatorConfig.objects.create(
        name="drain", action="isolate_node", dry_run=True,
        config={"type": "command", "argv": list(SLURM_DRAIN)},
    )  # fmt: skip
    replay(
        cluster,
        sim,
        tmp_path,
        fault.occurred_at - timedelta(minutes=2),
        fault.occurred_at + timedelta(minutes=3),
    )
    incident = incident_of(fault)
    assert incident.category == FaultCategory.HARDWARE_GPU
    assert incident.code == "79"
    assert incident.node.hostname == fault.node
    # Peers' NCCL errors follow the Xid: one incident, rooted at the Xid.
    assert incident.signals.count() >= 2
    assert (incident.detected_at - incident.occurred_at).total_seconds() <= 60
    assert (incident.located_at - incident.occurred_at).total_seconds() <= 60
    faults.incident_policy_apply(incident=incident, now=incident.located_at)
    # The drain actuator is in dry run: the log says what would have run, nothing changes.
    incident.node.refresh_from_db()
    assert incident.node.state == NodeState.ACTIVE
    action = incident.actions.get(kind="isolate_node")
    assert action.dry_run
    assert action.summary.startswith("Would run: scontrol update")
    assert f"NodeName={fault.node}" in action.summary
    incident.refresh_from_db()
    assert incident.restart_requested_at is None
    assert incident.status == IncidentStatus.OPEN


def test_nccl_hang_is_located_at_the_rank_that_reported_no_timeout(cluster, sim, tmp_path):
    fault = first_fault(sim, "nccl_timeout", min_gpus=16)
    job = sim.sim_job(fault.job_external_id)
    # The watchdog fires ten minutes after the hang starts; replay around that.
    fire = datetime.fromtimestamp(job.hang_end_s, tz=UTC)
    replay(cluster, sim, tmp_path, fire - timedelta(minutes=1), fire + timedelta(minutes=2))
    incident = incident_of(fault)
    assert incident.category == FaultCategory.NCCL_TIMEOUT_HANG
    assert incident.rank == fault.rank
    assert incident.node.hostname == fault.node
    assert incident.reasoning["silent_ranks"] == [fault.rank]
    assert (incident.detected_at - incident.occurred_at).total_seconds() <= 60


def test_scanning_again_stores_nothing_new(cluster, sim, tmp_path):
    fault = first_fault(sim, "xid79")
    source = replay(
        cluster,
        sim,
        tmp_path,
        fault.occurred_at - timedelta(minutes=1),
        fault.occurred_at + timedelta(minutes=2),
    )
    before = FaultSignal.objects.count()
    FaultScanCursor.objects.filter(source=source).update(last_chunk_id=0)
    summary = faults.fault_scan_source(source=source, now=fault.occurred_at + timedelta(minutes=3))
    assert summary.signals == 0
    assert FaultSignal.objects.count() == before
    assert Incident.objects.filter(job__external_id=fault.job_external_id).count() == 1


def test_xid_codes_from_the_metrics_become_signals_when_the_last_xid_changes(db):
    from efficiency.models import GpuSample
    from tests.factories import JobFactory, NodeFactory

    faults.fault_policies_ensure()
    node = NodeFactory(hostname="gpu-x01")
    at = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    job = JobFactory(
        cluster=node.cluster,
        department=node.owner_department,
        submitted_at=at - timedelta(hours=2),
        started_at=at - timedelta(hours=1),
    )
    job.nodes.add(node)
    # DCGM_FI_DEV_XID_ERRORS holds the last Xid: 0, 0, 79, 79 (the same event), 48 (a new one).
    for minute, xid in enumerate([0, 0, 79, 79, 48]):
        GpuSample.objects.create(node=node, gpu_index=3, ts=at + timedelta(minutes=minute), interval_s=60,
                                 xid_last=xid)  # fmt: skip
    now = at + timedelta(minutes=10)
    assert faults.fault_detect_metrics(cluster=node.cluster, now=now) == 2
    signals = list(FaultSignal.objects.order_by("occurred_at"))
    assert [(s.signature_id, s.category, s.gpu_index) for s in signals] == [
        ("xid-79", "hardware_gpu", 3),
        ("xid-48", "hardware_memory_ecc", 3),
    ]
    incident = Incident.objects.get()
    assert (incident.job, incident.node, incident.gpu_index, incident.code) == (job, node, 3, "79")
    assert faults.fault_detect_metrics(cluster=node.cluster, now=now + timedelta(seconds=1)) == 0


def megatron_line(at, iteration, seconds, loss):
    return (
        f"[{at:%Y-%m-%d %H:%M:%S}] iteration {iteration:8d}/  100000 | consumed samples: {iteration * 512} | "
        f"elapsed time per iteration (ms): {seconds * 1000:.1f} | learning rate: 3.000E-04 | "
        f"global batch size:   512 | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: 1.234 |"
    )


def running_job_with_push_source(hostname):
    """A node, a log-push source of its cluster, and a job running on it since 08:00."""
    from tests.factories import JobFactory, NodeFactory

    node = NodeFactory(hostname=hostname)
    source = DataSource.objects.create(cluster=node.cluster, kind=SourceKind.LOG_PUSH, name="push")
    begin = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    job = JobFactory(cluster=node.cluster, department=node.owner_department, submitted_at=begin,
                     started_at=begin, ended_at=None)  # fmt: skip
    return node, source, job, begin


def test_progress_detectors_find_a_slowdown_and_a_loss_spike_in_iteration_lines(db):
    from efficiency.models import LogChunk

    node, source, job, begin = running_job_with_push_source("gpu-y01")
    lines, at = [], begin
    for iteration in range(1, 41):
        seconds = 2.0 if iteration <= 25 else 3.0  # 50% slower from iteration 26
        loss = 3.0 - iteration * 0.01 if iteration != 33 else 9.0  # one spike at 33
        at += timedelta(seconds=seconds)
        lines.append(megatron_line(at, iteration, seconds, loss))
    text = "\n".join(lines) + "\n"
    LogChunk.objects.create(source=source, stream="job/rank-7.log", file_id="f", start_offset=0,
                            end_offset=len(text), job=job, rank=7, line_count=40, text=text,
                            received_at=at)  # fmt: skip
    assert faults.fault_detect_jobs(cluster=node.cluster, now=at + timedelta(seconds=5)) == 2
    slowdown = FaultSignal.objects.get(signature_id="slowdown")
    assert "from iteration 26" in slowdown.message
    assert "1.50x" in slowdown.message
    spike = FaultSignal.objects.get(signature_id="loss-spike")
    assert "at iteration 33" in spike.message
    # Both belong to the job's one incident; the loss is the more fundamental evidence.
    incident = Incident.objects.get()
    assert incident.category == FaultCategory.LOSS_NAN_INF


def test_a_training_job_whose_gpus_all_go_flat_is_a_hang(db):
    from efficiency.models import GpuSample, LogChunk
    from tests.factories import JobFactory, NodeFactory

    node = NodeFactory(hostname="gpu-z01", gpu_count=2)
    source = DataSource.objects.create(cluster=node.cluster, kind=SourceKind.LOG_PUSH, name="push")
    begin = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    job = JobFactory(cluster=node.cluster, department=node.owner_department, submitted_at=begin,
                     started_at=begin, ended_at=None, gpu_count=2)  # fmt: skip
    job.nodes.add(node)
    text = (
        "\n".join(megatron_line(begin + timedelta(seconds=2 * i), i, 2.0, 3.0) for i in range(1, 21)) + "\n"
    )
    LogChunk.objects.create(source=source, stream="job/rank-1.log", file_id="f", start_offset=0,
                            end_offset=len(text), job=job, rank=1, line_count=20, text=text,
                            received_at=begin + timedelta(minutes=1))  # fmt: skip
    # Busy until 08:05, then SM activity near zero on both GPUs for 15 minutes.
    for minute in range(21):
        for gpu in range(2):
            sm = 45.0 if minute < 5 else 0.3
            GpuSample.objects.create(node=node, gpu_index=gpu, ts=begin + timedelta(minutes=minute),
                                     interval_s=60, sm_active_pct=sm)  # fmt: skip
    now = begin + timedelta(minutes=20, seconds=30)
    faults.fault_detect_jobs(cluster=node.cluster, now=now)
    flat = FaultSignal.objects.get(signature_id="gpus-flat")
    assert flat.occurred_at == begin + timedelta(minutes=5)
    assert "all 2 GPUs below 1%" in flat.message
    assert Incident.objects.get().category == FaultCategory.NCCL_TIMEOUT_HANG


def test_xid_counts_in_a_scrape_become_one_signal_per_event(db):
    from efficiency.collectors.records import GpuReading
    from efficiency.services.sources import gpu_readings_store
    from tests.factories import NodeFactory

    node = NodeFactory(hostname="gpu-w01")
    at = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

    def scrape(seconds, counts):
        ms = int((at + timedelta(seconds=seconds)).timestamp() * 1000)
        reading = GpuReading(hostname="gpu-w01", gpu_index=2, timestamp_ms=ms, xid_counts=counts)
        gpu_readings_store(
            cluster=node.cluster, readings=[reading], interval_s=30, now=at + timedelta(seconds=seconds)
        )

    scrape(0, ())
    scrape(30, ((79, 1.0),))  # the exporter's 5-minute window counts the Xid ...
    scrape(60, ((79, 1.0),))  # ... in every scrape until it slides past: the same event
    scrape(90, ((48, 0.0),))
    [signal] = FaultSignal.objects.all()
    assert (signal.source, signal.signature_id, signal.code, signal.gpu_index) == (
        "metric",
        "xid-79",
        "79",
        2,
    )
    assert signal.occurred_at == at + timedelta(seconds=30)
    faults.incidents_group(cluster=node.cluster, now=at + timedelta(minutes=2))
    assert Incident.objects.get().node == node


def test_new_xid_evidence_queues_its_grouping_only_when_the_transaction_commits(
    db, django_capture_on_commit_callbacks
):
    from tests.factories import NodeFactory

    node = NodeFactory(hostname="gpu-w02")
    at = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    event = (node.pk, 0, 79, int(at.timestamp() * 1000))
    with django_capture_on_commit_callbacks() as queued:
        assert faults.xid_count_signals_record(cluster=node.cluster, events=[event], now=at) == 1
    [callback] = queued
    assert (callback.func.__self__.name, callback.args) == (
        "efficiency.tasks.incidents_group_task",
        (node.cluster_id,),
    )
    with django_capture_on_commit_callbacks() as queued_again:
        faults.xid_count_signals_record(cluster=node.cluster, events=[event], now=at)
    assert queued_again == []  # the same evidence again is not new: nothing to group


def test_a_rising_double_bit_ecc_counter_is_a_critical_memory_fault(db):
    from efficiency.models import GpuSample
    from tests.factories import NodeFactory

    node = NodeFactory(hostname="gpu-v01")
    at = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    for minute, total in enumerate([None, 0, 0, 2, 2, 3]):
        GpuSample.objects.create(node=node, gpu_index=1, ts=at + timedelta(minutes=minute), interval_s=60,
                                 ecc_dbe_total=total)  # fmt: skip
    assert faults.fault_detect_metrics(cluster=node.cluster, now=at + timedelta(minutes=10)) == 2
    signals = list(FaultSignal.objects.order_by("occurred_at"))
    assert [s.occurred_at.minute for s in signals] == [3, 5]
    assert signals[0].message == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL rose by 2 on GPU 1"
    assert {(s.category, s.severity) for s in signals} == {("hardware_memory_ecc", "critical")}


def test_the_ecc_counter_of_a_dcgm_page_is_stored_with_the_sample(db):
    from efficiency.collectors.dcgm import gpu_readings_from_exposition
    from efficiency.models import GpuSample
    from efficiency.services.ingest import gpu_readings_ingest
    from tests.factories import NodeFactory

    node = NodeFactory(hostname="gpu-u01")
    labels = 'gpu="0",UUID="GPU-1",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-u01"'
    page = (
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
        f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 41\n"
        "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n"
        f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{labels}}} 3\n"
    )
    at = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    readings = gpu_readings_from_exposition(page, scrape_time_ms=int(at.timestamp() * 1000))
    assert not readings.rejected
    gpu_readings_ingest(cluster=node.cluster, readings=readings.records, interval_s=30, now=at)
    sample = GpuSample.objects.get()
    assert (sample.temp_c, sample.ecc_dbe_total) == (41, 3)


def test_a_slowdown_is_located_at_the_node_still_busy_while_its_peers_wait(db):
    from efficiency.models import GpuSample, LogChunk
    from tests.factories import JobFactory, NodeFactory

    nodes = [NodeFactory(hostname=f"gpu-s0{n}") for n in range(1, 5)]
    cluster = nodes[0].cluster
    source = DataSource.objects.create(cluster=cluster, kind=SourceKind.LOG_PUSH, name="push")
    begin = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    job = JobFactory(cluster=cluster, department=nodes[0].owner_department, submitted_at=begin,
                     started_at=begin, ended_at=None, gpu_count=32)  # fmt: skip
    job.nodes.set(nodes)
    lines, at = [], begin
    for iteration in range(1, 41):
        seconds = 60.0 if iteration <= 25 else 90.0  # 50% slower from iteration 26 (minute 25)
        at += timedelta(seconds=seconds)
        lines.append(megatron_line(at, iteration, seconds, 3.0 - iteration * 0.01))
    text = "\n".join(lines) + "\n"
    LogChunk.objects.create(source=source, stream="job/rank-0.log", file_id="f", start_offset=0,
                            end_offset=len(text), job=job, rank=0, line_count=40, text=text,
                            received_at=at)  # fmt: skip
    slow_from = begin + timedelta(minutes=25)
    GpuSample.objects.bulk_create(
        GpuSample(
            node=node,
            gpu_index=gpu,
            ts=begin + timedelta(minutes=m),
            interval_s=60,
            sm_active_pct=60.0 if m < 25 or node == nodes[2] else 36.0,
        )
        for node in nodes
        for gpu in range(8)
        for m in range(int((at - begin).total_seconds() // 60))
    )
    assert faults.fault_detect_jobs(cluster=cluster, now=at + timedelta(seconds=5)) == 1
    slowdown = FaultSignal.objects.get(signature_id="slowdown")
    assert slowdown.occurred_at >= slow_from
    assert slowdown.node == nodes[2]


def test_a_failing_actuator_is_logged_as_well_as_recorded(db, caplog):
    from tests.factories import NodeFactory, UserFactory

    node = NodeFactory(hostname="gpu-f01")
    at = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    faults.xid_count_signals_record(
        cluster=node.cluster, events=[(node.pk, 0, 79, int(at.timestamp() * 1000))], now=at
    )
    faults.incidents_group(cluster=node.cluster, now=at)
    incident = Incident.objects.get()
    ActuatorConfig.objects.create(
        name="broken", action="isolate_node", dry_run=False, config={"type": "nope"}
    )
    ActuatorConfig.objects.create(name="refused", action="isolate_node", dry_run=False,
                                  config={"type": "command", "argv": ["false"]})  # fmt: skip
    with caplog.at_level("WARNING", logger="efficiency.services.faults.actions"):
        faults.node_isolate(incident=incident, actor=UserFactory(), now=at)
    assert list(incident.actions.order_by("actuator").values_list("actuator", "ok")) == [
        ("broken", False),
        ("refused", False),
    ]
    logged = [record.getMessage() for record in caplog.records]
    assert len(logged) == 2
    assert all(f"incident {incident.pk}" in line and "isolate_node" in line for line in logged)
    assert any("broken" in line and "bad configuration" in line for line in logged)
    assert any("refused" in line for line in logged)
    node.refresh_from_db()
    assert node.state == NodeState.ACTIVE


def test_a_throughput_drop_across_two_collected_pieces_of_a_log_is_one_signal(db):
    from efficiency.models import LogChunk, LogStreamContext

    _, source, job, begin = running_job_with_push_source("gpu-y02")
    lines, at = [], begin
    for iteration in range(1, 21):
        seconds = 2.0 if iteration <= 18 else 3.0  # 50% slower for the last two
        at += timedelta(seconds=seconds)
        lines.append(megatron_line(at, iteration, seconds, 3.0))
    offset = 0
    for piece, received in ((lines[:19], at - timedelta(seconds=3)), (lines[19:], at)):
        text = "\n".join(piece) + "\n"
        LogChunk.objects.create(source=source, stream="job/rank-3.log", file_id="f", start_offset=offset,
                                end_offset=offset + len(text), job=job, rank=3, line_count=len(piece),
                                text=text, received_at=received)  # fmt: skip
        offset += len(text)
        faults.fault_scan_source(source=source, now=received + timedelta(seconds=1))
    (signal,) = FaultSignal.objects.filter(category=FaultCategory.SLOWDOWN)
    assert signal.signature_id == "throughput-drop"
    assert "iteration       20/" in signal.message
    assert signal.rank == 3
    stored = LogStreamContext.objects.get(source=source, stream="job/rank-3.log")
    # The drop was reported at its second slow value; the baseline forms anew from what follows.
    assert stored.context["trackers"]["elapsed_ms"] == {
        "faster": False,
        "normal": [],
        "frozen": None,
        "run": 0,
    }
    # A month later the file is over: its context goes with the next scan.
    LogChunk.objects.create(source=source, stream="job/rank-4.log", file_id="g", start_offset=0, end_offset=2,
                            job=job, rank=4, line_count=1, text="x\n", received_at=at)  # fmt: skip
    faults.fault_scan_source(source=source, now=at + timedelta(days=30))
    assert list(LogStreamContext.objects.values_list("stream", flat=True)) == ["job/rank-4.log"]
