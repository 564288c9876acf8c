"""Inventory discovery: nodes created, updated, retired and returned from what the sources report."""

from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.choices import NodeState, SourceKind
from efficiency.collectors.dcgm import gpu_readings_from_exposition
from efficiency.collectors.nodes import ObservedGpu, ObservedNode
from efficiency.collectors.records import Rejected
from efficiency.collectors.slurm import parse_scontrol_nodes
from efficiency.models import DataSource, Gpu, GpuSample, Job, Node, NodeHour, NodeStateChange, SourceRun
from efficiency.selectors.quotas import cluster_capacity
from efficiency.services.discovery import DiscoveryResult, nodes_confirm, nodes_discover
from efficiency.services.ingest import IngestResult, gpu_readings_ingest
from efficiency.services.rollups import rollup_hours_compute
from efficiency.services.sources import RunRecorder, SourceConfigError, source_collect, source_config_check
from tests.factories import ClusterFactory, DepartmentFactory, JobFactory, NodeFactory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
H100 = "NVIDIA H100 80GB HBM3"

pytestmark = pytest.mark.django_db


def slurm_nodes(name: str = "scontrol_oneliner_idle.txt") -> list[ObservedNode]:
    return parse_scontrol_nodes((FIXTURES / "inventory" / name).read_text()).records


def node(hostname: str, gpus: int = 8, **fields) -> ObservedNode:
    return ObservedNode(
        hostname=hostname,
        gpu_model=fields.pop("gpu_model", "h100"),
        gpu_count=gpus,
        gpus=tuple(ObservedGpu(index=i, model="h100") for i in range(min(gpus, 256))),
        **fields,
    )


@pytest.fixture
def cluster():
    return ClusterFactory(slug="discovery")


def test_a_node_slurm_lists_is_discovered_but_adds_no_capacity_until_confirmed(cluster):
    result = nodes_discover(cluster=cluster, observed=slurm_nodes(), complete=True, now=NOW)
    assert result.created == ["vm"]
    vm = Node.objects.get(cluster=cluster, hostname="vm")
    assert (vm.state, vm.gpu_model, vm.gpu_count, vm.last_seen_at) == (NodeState.DISCOVERED, "h100", 8, NOW)
    assert (vm.reported_state, vm.source_labels) == ("IDLE", {"partitions": "gpu", "node_hostname": "vm"})
    assert list(vm.gpus.values_list("index", flat=True)) == list(range(8))
    assert cluster_capacity(cluster=cluster) == {}
    assert nodes_confirm(nodes=Node.objects.filter(pk=vm.pk), now=NOW) == 1
    assert cluster_capacity(cluster=cluster) == {"h100": 8}
    change = NodeStateChange.objects.get(node=vm)
    assert (change.previous_state, change.state) == (NodeState.DISCOVERED, NodeState.ACTIVE)


def test_auto_accept_makes_discovered_nodes_active_at_once(cluster, settings):
    settings.PORTAL_DISCOVERY_AUTO_ACCEPT = True
    nodes_discover(cluster=cluster, observed=slurm_nodes(), complete=True, now=NOW)
    assert Node.objects.get(hostname="vm").state == NodeState.ACTIVE
    assert cluster_capacity(cluster=cluster) == {"h100": 8}


def test_what_an_admin_set_by_hand_is_never_changed(cluster):
    owner = DepartmentFactory(code="vision")
    NodeFactory(
        cluster=cluster,
        hostname="vm",
        gpu_model=H100,
        gpu_count=8,
        fault_domain="rack-07",
        rdma_capable=True,
        owner_department=owner,
        state=NodeState.ISOLATED,
    )
    observed = [node("vm", gpus=4, fault_domain="zone-a", state="MIXED+DRAIN", reason="GPU 3 Xid 79")]
    result = nodes_discover(cluster=cluster, observed=observed, complete=True, now=NOW)
    vm = Node.objects.get(hostname="vm")
    assert (vm.fault_domain, vm.rdma_capable, vm.owner_department, vm.state) == (
        "rack-07",
        True,
        owner,
        NodeState.ISOLATED,
    )
    assert (vm.gpu_model, vm.gpu_count) == (H100, 8)
    assert (vm.reported_state, vm.reported_reason) == ("MIXED+DRAIN", "GPU 3 Xid 79")
    assert result.notes == [
        "vm: the source lists 4 GPUs, the inventory 8 (kept; edit the node if the source is right)"
    ]


def test_a_node_that_vanishes_is_retired_and_comes_back_with_its_history(cluster):
    source = DataSource.objects.create(cluster=cluster, kind=SourceKind.SLURM, name="slurm")
    both = [node("gpu-01"), node("gpu-02")]
    nodes_discover(cluster=cluster, observed=both, source=source, complete=True, now=NOW)
    gpu02 = Node.objects.get(hostname="gpu-02")
    nodes_confirm(nodes=[gpu02], now=NOW)
    job = JobFactory(cluster=cluster)
    job.nodes.add(gpu02)
    gpu_readings_ingest(
        cluster=cluster,
        readings=gpu_readings_from_exposition(
            'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="gpu-02"} 37', scrape_time_ms=int(NOW.timestamp() * 1000)
        ).records,
        interval_s=60,
        now=NOW,
    )
    later = NOW + timedelta(hours=1)
    gone = nodes_discover(cluster=cluster, observed=both[:1], source=source, complete=True, now=later)
    assert gone.retired == ["gpu-02"]
    gpu02.refresh_from_db()
    assert (gpu02.state, gpu02.in_service_until, gpu02.missing_since) == (NodeState.RETIRED, NOW, later)
    assert gpu02.state_reason == "no longer listed by slurm"
    assert cluster_capacity(cluster=cluster) == {}
    assert list(job.nodes.all()) == [gpu02]
    assert GpuSample.objects.filter(node=gpu02).count() == 1
    back = nodes_discover(
        cluster=cluster, observed=both, source=source, complete=True, now=later + timedelta(hours=1)
    )
    assert back.returned == ["gpu-02"]
    gpu02.refresh_from_db()
    assert (gpu02.state, gpu02.in_service_until, gpu02.missing_since) == (NodeState.ACTIVE, None, None)
    assert cluster_capacity(cluster=cluster) == {"h100": 8}
    assert GpuSample.objects.filter(node=gpu02).count() == 1
    assert list(job.nodes.all()) == [gpu02]
    assert [(c.previous_state, c.state) for c in gpu02.state_changes.order_by("at", "id")] == [
        (NodeState.DISCOVERED, NodeState.ACTIVE),
        (NodeState.ACTIVE, NodeState.RETIRED),
        (NodeState.RETIRED, NodeState.ACTIVE),
    ]


def test_a_node_an_admin_retired_stays_retired_when_listed_again(cluster):
    NodeFactory(cluster=cluster, hostname="vm", state=NodeState.RETIRED, in_service_until=NOW)
    result = nodes_discover(cluster=cluster, observed=slurm_nodes(), complete=True, now=NOW)
    assert result.returned == []
    assert Node.objects.get(hostname="vm").state == NodeState.RETIRED


def test_an_empty_node_list_retires_nothing(cluster):
    NodeFactory(cluster=cluster, hostname="gpu-01")
    result = nodes_discover(cluster=cluster, observed=[], complete=True, now=NOW)
    assert result.retired == []
    assert result.notes == ["the source listed no nodes: nothing retired"]
    assert Node.objects.get(hostname="gpu-01").state == NodeState.ACTIVE


def test_a_known_node_whose_entry_is_refused_is_not_retired(cluster):
    NodeFactory(cluster=cluster, hostname="gpu-01")
    result = nodes_discover(
        cluster=cluster, observed=[node("gpu-01", gpus=100_000), node("gpu-02")], complete=True, now=NOW
    )
    assert [r.reason for r in result.rejected] == ["100000 GPUs on gpu-01: at most 256 per node"]
    assert (result.created, result.retired) == (["gpu-02"], [])
    assert Node.objects.get(hostname="gpu-01").state == NodeState.ACTIVE


def test_readings_never_retire_a_node(cluster):
    NodeFactory(cluster=cluster, hostname="gpu-01")
    nodes_discover(cluster=cluster, observed=[node("gpu-02")], complete=False, now=NOW)
    assert Node.objects.get(hostname="gpu-01").state == NodeState.ACTIVE


def test_nodes_without_gpus_are_not_created_but_count_as_listed(cluster):
    NodeFactory(cluster=cluster, hostname="cpu-01")
    result = nodes_discover(
        cluster=cluster, observed=[node("cpu-01", gpus=0), node("cpu-02", gpus=0)], complete=True, now=NOW
    )
    assert result.ignored == ["cpu-02"]
    assert (result.created, result.retired) == ([], [])
    assert list(Node.objects.values_list("hostname", flat=True)) == ["cpu-01"]


def test_hostile_observations_are_rejected_one_by_one_and_the_rest_kept(cluster):
    observed = [
        node("", gpus=8),
        node("huge", gpus=10**6),
        node("gpu-01"),
        node("gpu-01", gpus=4),
        node("=cmd|'/c'!A1"),
        node("计算节点-01"),
    ]
    result = nodes_discover(cluster=cluster, observed=observed, complete=True, now=NOW)
    assert result.created == ["gpu-01", "计算节点-01"]
    assert [r.reason for r in result.rejected] == [
        "empty hostname",
        "1000000 GPUs on huge: at most 256 per node",
        "gpu-01 listed twice; the first kept",
        "hostname \"=cmd|'/c'!A1\" starts with '='",
    ]
    assert Node.objects.get(hostname="gpu-01").gpu_count == 8


def test_readings_from_an_unknown_host_discover_it_with_uuid_and_pci_bus_id(cluster):
    source = DataSource.objects.create(cluster=cluster, kind=SourceKind.DCGM_SCRAPE, name="dcgm")
    text = (FIXTURES / "dcgm" / "dcgm_exporter_issue512_h100_mig_pods.txt").read_text()
    scrape_ms = int(NOW.timestamp() * 1000)
    readings = gpu_readings_from_exposition(text, scrape_time_ms=scrape_ms).records
    result = gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=30, now=NOW, source=source)
    assert result.discovered == ["gsrh100-074"]
    assert result.rejected == []
    assert result.stored == 1  # its MIG instances averaged into GPU 0
    found = Node.objects.get(hostname="gsrh100-074")
    assert (found.state, found.gpu_model, found.gpu_count, found.discovered_by) == (
        NodeState.DISCOVERED,
        H100,
        1,
        source,
    )
    assert found.last_seen_at == NOW
    gpu = Gpu.objects.get(node=found)
    assert (gpu.uuid, gpu.pci_bus_id) == ("GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77", "00000000:1A:00.0")
    # The same scrape again: stored once, nothing new discovered.
    again = gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=30, now=NOW, source=source)
    assert (again.discovered, again.stored, again.duplicates) == ([], 0, 1)


def test_late_readings_never_move_last_seen_backwards(cluster):
    def scrape(at: datetime) -> None:
        text = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="gpu-late"} 5'
        readings = gpu_readings_from_exposition(text, scrape_time_ms=int(at.timestamp() * 1000)).records
        gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=30, now=NOW)

    scrape(NOW - timedelta(minutes=1))
    scrape(NOW - timedelta(minutes=10))  # out of order: an older chunk arrives after a newer one
    late = Node.objects.get(hostname="gpu-late")
    assert late.last_seen_at == NOW - timedelta(minutes=1)  # the latest reading; never moved back
    scrape(NOW + timedelta(minutes=2))  # within LAST_SEEN_RESOLUTION: not written
    late.refresh_from_db()
    assert late.last_seen_at == NOW - timedelta(minutes=1)
    scrape(NOW + timedelta(minutes=4, seconds=1))
    late.refresh_from_db()
    assert late.last_seen_at == NOW + timedelta(minutes=4, seconds=1)
    assert GpuSample.objects.filter(node=late).count() == 4


def test_readings_a_host_cannot_be_discovered_from_are_rejected_with_the_reason(cluster):
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="100000",Hostname="gpu-x"} 5'
    readings = gpu_readings_from_exposition(text, scrape_time_ms=int(NOW.timestamp() * 1000)).records
    result = gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=30, now=NOW)
    assert result.stored == 0
    assert [r.reason for r in result.rejected] == [
        "node 'gpu-x' (1 readings) cannot be discovered: 100001 GPUs on gpu-x: at most 256 per node"
    ]


def test_a_slurm_collection_discovers_the_nodes_of_its_node_list(cluster, tmp_path):
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("JobID|State|Submit\n")
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.SLURM,
        name="slurm",
        config={
            "path": str(sacct),
            "nodes_path": str(FIXTURES / "inventory" / "scontrol_oneliner_drain_alloc.txt"),
        },
    )
    run = source_collect(source_id=source.pk, now=NOW)
    assert run.status == "ok"
    assert run.message == "nodes: 1 created, 0 updated, 0 retired, 0 returned"
    vm = Node.objects.get(cluster=cluster, hostname="vm")
    assert (vm.discovered_by, vm.reported_state, vm.reported_reason) == (
        source,
        "MIXED+DRAIN",
        "GPU 3 Xid 79, waiting for RMA",
    )


def test_a_kubernetes_collection_reads_its_node_list_and_a_missing_one_is_a_rejection(cluster, tmp_path):
    pods = tmp_path / "pods.json"
    pods.write_text('{"kind": "List", "items": []}')
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.KUBERNETES,
        name="k8s",
        config={"path": str(pods), "nodes_path": str(FIXTURES / "inventory" / "kubectl_nodes_rke2_gpu.json")},
    )
    source_collect(source_id=source.pk, now=NOW)
    assert Node.objects.get(hostname="nori").gpu_model == "NVIDIA-A16-4Q"
    source.config["nodes_path"] = str(tmp_path / "missing.json")
    source.save()
    run = source_collect(source_id=source.pk, now=NOW + timedelta(minutes=5))
    assert run.status == "partial"
    assert run.rejects[0]["reason"].startswith("node list: cannot read")
    assert Node.objects.get(hostname="nori").state == NodeState.DISCOVERED  # not retired


def test_a_node_list_outside_the_source_roots_is_refused_on_save_and_on_read(cluster, tmp_path, settings):
    settings.PORTAL_SOURCE_ROOTS = [str(tmp_path)]
    pods = tmp_path / "pods.json"
    pods.write_text('{"kind": "List", "items": []}')
    config = {"path": str(pods), "nodes_path": "/etc/passwd"}
    with pytest.raises(SourceConfigError, match="/etc/passwd is outside the source roots"):
        source_config_check(config)
    source = DataSource.objects.create(cluster=cluster, kind=SourceKind.KUBERNETES, name="k8s", config=config)
    run = source_collect(source_id=source.pk, now=NOW)
    assert run.rejects[0]["reason"].startswith("node list: /etc/passwd is outside the source roots")
    assert not Node.objects.exists()


# --- Invariants ----------------------------------------------------------------------------------

PROPERTY = settings(
    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
HOSTS = ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]
observations = st.lists(
    st.builds(
        lambda host, gpus, state: node(host, gpus=gpus, state=state),
        st.sampled_from(HOSTS),
        st.integers(0, 8),
        st.sampled_from(["IDLE", "MIXED+DRAIN", "DOWN"]),
    ),
    max_size=5,
)


@contextmanager
def rolled_back():
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def snapshot(cluster) -> list[tuple]:
    nodes = Node.objects.filter(cluster=cluster).order_by("hostname")
    gpus = Gpu.objects.filter(node__cluster=cluster).order_by("node__hostname", "index")
    return [
        *nodes.values_list(
            "hostname",
            "state",
            "gpu_count",
            "gpu_model",
            "in_service_until",
            "missing_since",
            "reported_state",
        ),
        *gpus.values_list("node__hostname", "index", "uuid", "model"),
    ]


@PROPERTY
@given(steps=st.lists(st.tuples(observations, st.booleans()), max_size=6))
def test_the_same_observation_twice_changes_nothing_and_nothing_is_ever_deleted(cluster, steps):
    with rolled_back():
        seed = NodeFactory(cluster=cluster, hostname="gpu-01", gpu_count=8)
        GpuSample.objects.create(node=seed, gpu_index=0, ts=NOW, interval_s=60, util_pct=50.0)
        job = JobFactory(cluster=cluster)
        job.nodes.add(seed)
        source = DataSource.objects.create(cluster=cluster, kind=SourceKind.SLURM, name="slurm")
        ever: set[str] = {"gpu-01"}
        clock = NOW
        for observed, complete in steps:
            clock += timedelta(minutes=5)
            nodes_discover(cluster=cluster, observed=observed, source=source, complete=complete, now=clock)
            before = snapshot(cluster)
            again = nodes_discover(
                cluster=cluster, observed=observed, source=source, complete=complete, now=clock
            )
            assert snapshot(cluster) == before
            assert (again.created, again.updated, again.retired, again.returned) == ([], [], [], [])
            ever |= set(Node.objects.filter(cluster=cluster).values_list("hostname", flat=True))
            assert set(Node.objects.filter(cluster=cluster).values_list("hostname", flat=True)) == ever
            assert GpuSample.objects.filter(node=seed).count() == 1
            assert list(Job.objects.get(pk=job.pk).nodes.all()) == [seed]


# --- Two node lists and readings in one cluster: a list retires only the nodes it listed ---------


def test_a_node_list_added_to_a_cluster_retires_none_of_the_nodes_the_readings_found(cluster, tmp_path):
    readings = DataSource.objects.create(cluster=cluster, kind=SourceKind.PROMETHEUS, name="prometheus")
    nodes_discover(
        cluster=cluster,
        observed=[node(f"hq-{i}", gpus=1) for i in range(5)],
        source=readings,
        now=NOW,
    )
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("JobID|State|Submit\n")
    slurm = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.SLURM,
        name="slurm",
        config={
            "path": str(sacct),
            "nodes_path": str(FIXTURES / "inventory" / "scontrol_oneliner_drain_alloc.txt"),
        },
    )
    source_collect(source_id=slurm.pk, now=NOW + timedelta(minutes=5))
    states = dict(Node.objects.filter(cluster=cluster).values_list("hostname", "state"))
    assert states == {**{f"hq-{i}": NodeState.DISCOVERED for i in range(5)}, "vm": NodeState.DISCOVERED}
    vm = Node.objects.get(hostname="vm")
    assert (vm.discovered_by, vm.listed_by) == (slurm, slurm)


def test_two_node_lists_in_one_cluster_do_not_retire_each_other_s_nodes(cluster):
    slurm = DataSource.objects.create(cluster=cluster, kind=SourceKind.SLURM, name="slurm")
    k8s = DataSource.objects.create(cluster=cluster, kind=SourceKind.KUBERNETES, name="k8s")
    nodes_discover(cluster=cluster, observed=[node("s1"), node("s2")], source=slurm, complete=True, now=NOW)
    result = nodes_discover(cluster=cluster, observed=[node("k1")], source=k8s, complete=True, now=NOW)
    assert result.retired == []
    again = nodes_discover(cluster=cluster, observed=[node("s1")], source=slurm, complete=True, now=NOW)
    assert again.retired == ["s2"]
    states = dict(Node.objects.filter(cluster=cluster).values_list("hostname", "state"))
    assert states == {"s1": NodeState.DISCOVERED, "s2": NodeState.RETIRED, "k1": NodeState.DISCOVERED}


LISTS = ("slurm", "k8s")


@PROPERTY
@given(
    steps=st.lists(
        st.tuples(st.sampled_from([*LISTS, "prometheus"]), st.lists(st.sampled_from(HOSTS), max_size=4)),
        max_size=8,
    )
)
def test_a_node_is_never_retired_by_a_list_that_never_named_it_and_nothing_is_deleted(cluster, steps):
    with rolled_back():
        sources = {
            "slurm": DataSource.objects.create(cluster=cluster, kind=SourceKind.SLURM, name="slurm"),
            "k8s": DataSource.objects.create(cluster=cluster, kind=SourceKind.KUBERNETES, name="k8s"),
            "prometheus": DataSource.objects.create(
                cluster=cluster, kind=SourceKind.PROMETHEUS, name="prometheus"
            ),
        }
        named: dict[str, set[str]] = {name: set() for name in LISTS}
        ever: set[str] = set()
        clock = NOW
        for name, hosts in steps:
            clock += timedelta(minutes=5)
            result = nodes_discover(
                cluster=cluster,
                observed=[node(host) for host in dict.fromkeys(hosts)],
                source=sources[name],
                complete=name in LISTS,
                now=clock,
            )
            if name in LISTS:
                named[name] |= set(hosts)
                assert set(result.retired) <= named[name]
                for hostname in result.retired:
                    retired = Node.objects.get(cluster=cluster, hostname=hostname)
                    assert retired.state_reason == f"no longer listed by {name}"
            else:
                assert result.retired == []
            ever |= set(Node.objects.filter(cluster=cluster).values_list("hostname", flat=True))
            assert set(Node.objects.filter(cluster=cluster).values_list("hostname", flat=True)) == ever


def test_the_discovery_summary_is_recorded_beside_a_warning_of_the_same_run(cluster):
    source = DataSource.objects.create(cluster=cluster, kind=SourceKind.SLURM, name="slurm")
    recorder = RunRecorder(run=SourceRun.objects.create(source=source, started_at=NOW))
    recorder.add(IngestResult(warnings=[Rejected(reason="1 job ran on unknown node 'vm'")]))
    recorder.add_discovery(DiscoveryResult(retired=[f"hq-{i}" for i in range(5)]))
    recorder.message_finish()
    assert recorder.run.message == (
        "nodes: 0 created, 0 updated, 5 retired, 0 returned; 1 job ran on unknown node 'vm'"
    )


# --- Start of service ----------------------------------------------------------------------------


def test_a_node_found_by_its_readings_is_in_service_from_its_earliest_reading(cluster):
    dec1 = datetime(2026, 12, 1, tzinfo=UTC)
    readings = [
        *gpu_readings_from_exposition(
            f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",Hostname="hq-1",modelName="{H100}"}} 40',
            scrape_time_ms=int((dec1 + timedelta(hours=2)).timestamp() * 1000),
        ).records,
        *gpu_readings_from_exposition(
            f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",Hostname="hq-1",modelName="{H100}"}} 30',
            scrape_time_ms=int(dec1.timestamp() * 1000),
        ).records,
    ]
    gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=60, now=NOW)
    hq1 = Node.objects.get(hostname="hq-1")
    assert hq1.in_service_from == dec1
    nodes_confirm(nodes=[hq1], now=NOW)
    hours = [dec1 - timedelta(hours=h) for h in range(1, 49)] + [dec1 + timedelta(hours=h) for h in range(3)]
    rollup_hours_compute(cluster=cluster, hours=hours, now=NOW)
    available = NodeHour.objects.filter(node=hq1).values_list("hour", "available_gpu_s")
    assert sorted(available) == [(dec1 + timedelta(hours=h), 3600) for h in range(3)]


def test_a_listed_node_is_in_service_from_the_run_and_keeps_it_when_it_returns(cluster):
    source = DataSource.objects.create(cluster=cluster, kind=SourceKind.SLURM, name="slurm")
    nodes_discover(
        cluster=cluster, observed=[node("gpu-01"), node("gpu-02")], source=source, complete=True, now=NOW
    )
    assert set(Node.objects.values_list("in_service_from", flat=True)) == {NOW}
    later = NOW + timedelta(days=1)
    nodes_discover(cluster=cluster, observed=[node("gpu-01")], source=source, complete=True, now=later)
    back = nodes_discover(
        cluster=cluster,
        observed=[node("gpu-01"), node("gpu-02")],
        source=source,
        complete=True,
        now=later + timedelta(days=1),
    )
    assert back.returned == ["gpu-02"]
    assert Node.objects.get(hostname="gpu-02").in_service_from == NOW


def test_an_existing_start_of_service_is_never_moved(cluster):
    NodeFactory(cluster=cluster, hostname="gpu-01", in_service_from=None)
    NodeFactory(cluster=cluster, hostname="gpu-02", in_service_from=NOW - timedelta(days=30))
    nodes_discover(cluster=cluster, observed=[node("gpu-01"), node("gpu-02")], complete=False, now=NOW)
    starts = dict(Node.objects.values_list("hostname", "in_service_from"))
    assert starts == {"gpu-01": None, "gpu-02": NOW - timedelta(days=30)}


def test_a_slurm_node_list_in_sinfo_format_discovers_its_nodes(cluster, tmp_path):
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("JobID|State|Submit\n")
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.SLURM,
        name="slurm",
        config={"path": str(sacct), "nodes_path": str(FIXTURES / "inventory" / "sinfo_drain_alloc.txt")},
    )
    run = source_collect(source_id=source.pk, now=NOW)
    assert (run.status, run.rejected) == ("ok", 0)
    vm = Node.objects.get(cluster=cluster, hostname="vm")
    assert (vm.gpu_count, vm.reported_state, vm.reported_reason) == (
        8,
        "draining",
        "GPU 3 Xid 79, waiting for RMA",
    )


def test_a_node_list_in_a_format_slurm_s_parser_does_not_read_is_a_rejection(cluster, tmp_path):
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("JobID|State|Submit\n")
    table = tmp_path / "sinfo.txt"
    table.write_text(
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\ngpu*         up   infinite      1   idle vm\n"
    )
    NodeFactory(cluster=cluster, hostname="gpu-01")
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.SLURM,
        name="slurm",
        config={"path": str(sacct), "nodes_path": str(table)},
    )
    run = source_collect(source_id=source.pk, now=NOW)
    assert (run.status, run.rejected) == ("partial", 1)
    assert run.rejects[0]["reason"].startswith("not a node list: expected `scontrol show nodes --oneliner`")
    assert Node.objects.get(hostname="gpu-01").state == NodeState.ACTIVE


def test_a_kubernetes_node_list_that_names_no_node_is_a_rejection(cluster, tmp_path):
    pods = tmp_path / "pods.json"
    pods.write_text('{"kind": "List", "items": []}')
    NodeFactory(cluster=cluster, hostname="gpu-01")
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.KUBERNETES,
        name="k8s",
        config={"path": str(pods), "nodes_path": str(pods)},
    )
    run = source_collect(source_id=source.pk, now=NOW)
    assert (run.status, [r["reason"] for r in run.rejects]) == ("partial", ["node list: it names no node"])
    assert Node.objects.get(hostname="gpu-01").state == NodeState.ACTIVE


def test_the_first_slurm_run_places_its_jobs_on_the_nodes_it_discovers(cluster, tmp_path):
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(
        "JobID|JobName|Account|User|Partition|State|Submit|Start|End|Elapsed|NNodes|AllocTRES|ReqTRES"
        "|NodeList|ExitCode\n"
        "7|train|vision|zhang.wei|gpu|COMPLETED|2026-12-02T07:00:00|2026-12-02T07:00:05|2026-12-02T07:40:05"
        "|00:40:00|1|billing=2,cpu=2,gres/gpu:h100=2,gres/gpu=2,node=1|billing=2,cpu=2,gres/gpu=2,node=1|vm|0:0\n"
    )
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.SLURM,
        name="slurm",
        config={
            "path": str(sacct),
            "nodes_path": str(FIXTURES / "inventory" / "scontrol_oneliner_drain_alloc.txt"),
        },
    )
    run = source_collect(source_id=source.pk, now=NOW)
    assert run.message.startswith("nodes: 1 created, 0 updated, 0 retired, 0 returned")
    assert "unknown node" not in run.message
    assert [r["reason"] for r in run.rejects if "node" in r["reason"]] == []
    job = Job.objects.get(cluster=cluster)
    assert [n.hostname for n in job.nodes.all()] == ["vm"]
