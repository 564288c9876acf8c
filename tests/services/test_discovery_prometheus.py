"""A real Prometheus and an empty inventory: the nodes and GPUs come from the series' labels alone."""

from datetime import UTC, datetime, timedelta

import pytest

from efficiency.choices import NodeState, RunStatus, SourceKind
from efficiency.models import DataSource, Gpu, GpuSample, Node
from efficiency.selectors.quotas import cluster_capacity
from efficiency.services.sources import source_collect
from tests.factories import ClusterFactory
from tests.prometheus_server import running_prometheus

# Labels as dcgm-exporter writes them (tests/fixtures/dcgm/dcgm_exporter_issue512_h100_mig_pods.txt).
HOSTS = {"gsrh100-074": "1A", "gsrh100-075": "3B"}
GPUS = 2
MINUTES = 30
MODEL = "NVIDIA H100 80GB HBM3"


def _openmetrics(start: datetime) -> str:
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for host, bus in HOSTS.items():
        for gpu in range(GPUS):
            labels = (
                f'gpu="{gpu}",UUID="GPU-{host}-{gpu}",pci_bus_id="00000000:{bus}:0{gpu}.0",'
                f'device="nvidia{gpu}",modelName="{MODEL}",Hostname="{host}"'
            )
            for minute in range(MINUTES):
                ts = int((start + timedelta(minutes=minute)).timestamp())
                lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {float(minute + gpu)} {ts}")
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture
def prometheus(tmp_path, transactional_db):
    start = (datetime.now(tz=UTC) - timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    with running_prometheus(tmp_path, openmetrics_text=_openmetrics(start)) as base_url:
        yield base_url, start


def test_an_empty_inventory_is_discovered_from_prometheus_labels_and_their_readings_stored(prometheus):
    base_url, start = prometheus
    cluster = ClusterFactory(slug="prom-discovery")
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.PROMETHEUS,
        name="prometheus",
        config={
            "base_url": base_url,
            "step_s": 60,
            "lag_s": 0,
            "queries": {"util_pct": "DCGM_FI_DEV_GPU_UTIL"},
        },
        watermark=start,
    )
    run = source_collect(source_id=source.pk, now=start + timedelta(minutes=MINUTES))
    assert run.status == RunStatus.OK, run.rejects
    assert run.message == "discovered 2 new node(s): gsrh100-074, gsrh100-075"
    nodes = Node.objects.filter(cluster=cluster).order_by("hostname")
    assert [(n.hostname, n.state, n.gpu_model, n.gpu_count, n.discovered_by) for n in nodes] == [
        (host, NodeState.DISCOVERED, MODEL, GPUS, source) for host in HOSTS
    ]
    gpus = Gpu.objects.filter(node__cluster=cluster).order_by("node__hostname", "index")
    assert [(g.node.hostname, g.index, g.uuid, g.pci_bus_id) for g in gpus] == [
        (host, gpu, f"GPU-{host}-{gpu}", f"00000000:{bus}:0{gpu}.0")
        for host, bus in HOSTS.items()
        for gpu in range(GPUS)
    ]
    for node in nodes:
        assert GpuSample.objects.filter(node=node).values("gpu_index").distinct().count() == GPUS
        assert start <= node.last_seen_at <= start + timedelta(minutes=MINUTES)
    assert cluster_capacity(cluster=cluster) == {}  # not until an admin confirms them
