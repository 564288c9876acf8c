"""Inventory discovery against the real Slurm of ``scripts/slurm-local.sh`` (see test_real_slurm.py).

These tests only read the node list (``scontrol show nodes``, ``sinfo``): they leave the node
as they found it, so they can run beside the tests that submit jobs.
"""

import pytest

from efficiency.choices import NodeState, SourceKind
from efficiency.collectors.slurm import (
    parse_scontrol_nodes,
    parse_sinfo_nodes,
    scontrol_nodes_command,
    sinfo_nodes_command,
)
from efficiency.models import DataSource, Node
from efficiency.services.sources import source_collect
from tests.factories import ClusterFactory
from tests.slurm.test_real_slurm import HOST, run, slurm_env  # noqa: F401 (the fixture)

GPUS = 8  # scripts/slurm-local.sh declares Gres=gpu:h100:8


def test_the_real_node_list_gives_the_node_its_gres_and_partition(slurm_env):  # noqa: F811
    for argv, parse in (
        (scontrol_nodes_command(), parse_scontrol_nodes),
        (sinfo_nodes_command(), parse_sinfo_nodes),
    ):
        parsed = parse(run(slurm_env, *argv) + "\n")
        assert parsed.rejected == []
        [node] = [n for n in parsed.records if n.hostname == HOST]
        assert (node.gpu_model, node.gpu_count, node.labels["partitions"]) == ("h100", GPUS, "gpu")
        assert node.state


@pytest.mark.django_db
def test_a_slurm_source_discovers_the_real_node_in_its_collection(slurm_env):  # noqa: F811
    cluster = ClusterFactory(slug="portal-slurm-discovery")
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.SLURM, name="slurm", config={"timezone": "UTC"}
    )
    run_record = source_collect(source_id=source.pk)
    assert run_record.status == "ok", run_record.rejects
    node = Node.objects.get(cluster=cluster, hostname=HOST)
    assert (node.state, node.gpu_model, node.gpu_count, node.discovered_by) == (
        NodeState.DISCOVERED,
        "h100",
        GPUS,
        source,
    )
    assert node.gpus.count() == GPUS


@pytest.mark.django_db
def test_a_node_list_command_giving_sinfo_output_is_read_as_sinfo(slurm_env):  # noqa: F811
    cluster = ClusterFactory(slug="portal-slurm-sinfo")
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.SLURM,
        name="slurm",
        config={"timezone": "UTC", "nodes_command": sinfo_nodes_command()},
    )
    run_record = source_collect(source_id=source.pk)
    assert run_record.status == "ok", run_record.rejects
    node = Node.objects.get(cluster=cluster, hostname=HOST)
    assert (node.gpu_model, node.gpu_count, node.source_labels) == ("h100", GPUS, {"partitions": "gpu"})


@pytest.mark.django_db
def test_sinfo_s_default_table_as_the_node_list_is_refused_with_the_reason(slurm_env):  # noqa: F811
    cluster = ClusterFactory(slug="portal-slurm-sinfo-table")
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.SLURM,
        name="slurm",
        config={"timezone": "UTC", "nodes_command": ["sinfo", "-N"]},
    )
    run_record = source_collect(source_id=source.pk)
    assert run_record.status == "partial"
    assert run_record.rejects[0]["reason"].startswith(
        "not a node list: expected `scontrol show nodes --oneliner` output"
    )
    assert not Node.objects.filter(cluster=cluster).exists()
