"""Node lists → observed nodes: real ``scontrol show nodes`` / ``sinfo`` output from the CI Slurm
(22.05.8) and real ``kubectl get nodes -o json`` (tests/fixtures/inventory/SOURCES.md)."""

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from efficiency.collectors.dcgm import gpu_readings_from_exposition
from efficiency.collectors.kubernetes import parse_kubernetes_nodes
from efficiency.collectors.nodes import (
    MAX_GPUS_PER_NODE,
    ObservedNode,
    observed_node_problem,
    observed_nodes_from_readings,
    parse_nodes_csv,
)
from efficiency.collectors.slurm import gres_gpus, parse_scontrol_nodes, parse_sinfo_nodes, parse_slurm_nodes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
INVENTORY = FIXTURES / "inventory"


def fixture(name: str) -> str:
    return (INVENTORY / name).read_text()


@pytest.mark.parametrize("name", ["scontrol_oneliner_idle.txt", "scontrol_blocks_idle.txt"])
def test_an_idle_slurm_node_gives_its_eight_h100_gres_and_partition(name):
    parsed = parse_scontrol_nodes(fixture(name))
    assert parsed.rejected == []
    [node] = parsed.records
    assert (node.hostname, node.gpu_model, node.gpu_count) == ("vm", "h100", 8)
    assert [gpu.index for gpu in node.gpus] == list(range(8))
    assert (node.state, node.reason) == ("IDLE", "")
    assert node.labels["partitions"] == "gpu"
    assert node.gpu_count_exact


@pytest.mark.parametrize("name", ["scontrol_oneliner_drain_alloc.txt", "scontrol_blocks_drain_alloc.txt"])
def test_a_draining_slurm_node_keeps_its_state_and_the_reason_without_the_stamp(name):
    [node] = parse_scontrol_nodes(fixture(name)).records
    assert node.state == "MIXED+DRAIN"
    # Real output: "Reason=GPU 3 Xid 79, waiting for RMA [root@2026-12-02T07:52:36]"
    assert node.reason == "GPU 3 Xid 79, waiting for RMA"


def test_a_down_slurm_node_is_still_listed_with_its_reason():
    [node] = parse_scontrol_nodes(fixture("scontrol_oneliner_down.txt")).records
    assert (node.state, node.reason, node.gpu_count) == ("DOWN+DRAIN", "power supply failed", 8)


def test_the_os_value_with_spaces_does_not_leak_into_other_fields():
    # OS=Linux 6.18.44-fc-v1098 #1 SMP PREEMPT_DYNAMIC @0 sits between NodeHostName and RealMemory.
    [node] = parse_scontrol_nodes(fixture("scontrol_oneliner_idle.txt")).records
    assert node.labels["node_hostname"] == "vm"


@pytest.mark.parametrize(
    ("name", "state", "reason"),
    [
        ("sinfo_idle.txt", "idle", ""),
        ("sinfo_drain_alloc.txt", "draining", "GPU 3 Xid 79, waiting for RMA"),
        ("sinfo_down.txt", "drained", "power supply failed"),
    ],
)
def test_sinfo_lines_give_the_same_node(name, state, reason):
    [node] = parse_sinfo_nodes(fixture(name)).records
    assert (node.hostname, node.gpu_model, node.gpu_count, node.state, node.reason) == (
        "vm",
        "h100",
        8,
        state,
        reason,
    )
    assert node.labels == {"partitions": "gpu"}  # the default partition's "*" dropped


def test_a_node_in_two_partitions_is_one_node_and_a_hostlist_is_expanded():
    text = "gpu-[01-02]|gpu:a100:4|train*|idle|none\ngpu-01|gpu:a100:4|debug|idle|none\n"
    parsed = parse_sinfo_nodes(text)
    assert [(n.hostname, n.labels["partitions"]) for n in parsed.records] == [
        ("gpu-01", "train,debug"),
        ("gpu-02", "train"),
    ]


def test_a_cluster_of_nodes_concatenated_from_real_lines_is_read_node_by_node():
    lines = fixture("scontrol_oneliner_idle.txt") + fixture("scontrol_oneliner_down.txt").replace(
        "NodeName=vm ", "NodeName=vm2 ", 1
    )
    assert [n.hostname for n in parse_scontrol_nodes(lines).records] == ["vm", "vm2"]


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ("gpu:h100:8", (8, "h100")),
        ("gpu:8", (8, "")),
        ("gpu:a100:4(S:0-1)", (4, "a100")),
        ("gpu:a100:2(S:0),gpu:v100:2(S:1)", (4, "a100+v100")),
        ("gpu:h100:8,shard:h100:64", (8, "h100")),
        ("(null)", (0, "")),
        ("", (0, "")),
    ],
)
def test_gres_gives_gpus_and_their_type(gres, expected):
    assert gres_gpus(gres) == expected


def test_a_node_whose_gres_cannot_be_read_is_rejected_and_the_others_kept():
    text = fixture("scontrol_oneliner_idle.txt") + "NodeName=bad Gres=gpu:h100:eight State=IDLE\n"
    parsed = parse_scontrol_nodes(text)
    assert [n.hostname for n in parsed.records] == ["vm"]
    [rejected] = parsed.rejected
    assert rejected.reason == "node bad: GRES 'gpu:h100:eight': count 'eight' is not a whole number"
    assert rejected.line_no == 2


def test_kubectl_gpu_node_gives_gfd_product_count_memory():
    parsed = parse_kubernetes_nodes(fixture("kubectl_nodes_rke2_gpu.json"))
    assert parsed.rejected == []
    [node] = parsed.records
    assert (node.hostname, node.gpu_model, node.gpu_count, node.state) == (
        "nori",
        "NVIDIA-A16-4Q",
        1,
        "Ready",
    )
    assert [(g.index, g.memory_mib) for g in node.gpus] == [(0, 4096)]
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-A16-4Q"
    assert not any(key.startswith("feature.node.kubernetes.io") for key in node.labels)


def test_kubectl_cpu_nodes_are_listed_without_gpus_and_with_their_zone():
    parsed = parse_kubernetes_nodes(fixture("kubectl_nodes_aks_cpu.json"))
    assert [(n.hostname, n.gpu_count, n.fault_domain) for n in parsed.records] == [
        ("aks-agentpool-30520393-vmss000000", 0, "0"),
        ("aks-agentpool-30520393-vmss000001", 0, "1"),
        ("aks-agentpool-30520393-vmss000002", 0, "2"),
    ]


def _gpu_node(**changes) -> dict:
    document = json.loads(fixture("kubectl_nodes_rke2_gpu.json"))
    item = document["items"][0]
    for path, value in changes.items():
        target = item
        *parents, key = path.split(".")
        for parent in parents:
            target = target[parent]
        target[key] = value
    return document


def test_time_sliced_capacity_is_divided_back_to_physical_gpus():
    document = _gpu_node()
    labels = document["items"][0]["metadata"]["labels"]
    del labels["nvidia.com/gpu.count"]
    labels["nvidia.com/gpu.replicas"] = "4"
    labels["nvidia.com/gpu.product"] = "NVIDIA-A16-4Q-SHARED"
    document["items"][0]["status"]["capacity"]["nvidia.com/gpu"] = "4"
    [node] = parse_kubernetes_nodes(json.dumps(document)).records
    assert (node.gpu_count, node.gpu_model) == (1, "NVIDIA-A16-4Q")


def test_a_cordoned_not_ready_node_says_so():
    document = _gpu_node(**{"spec.unschedulable": True})
    ready = document["items"][0]["status"]["conditions"][-1]
    ready.update(status="Unknown", message="Kubelet stopped posting node status.")
    [node] = parse_kubernetes_nodes(json.dumps(document)).records
    assert (node.state, node.reason) == (
        "NotReady,SchedulingDisabled",
        "Kubelet stopped posting node status.",
    )


def test_a_bad_kubernetes_node_is_rejected_alone():
    document = json.loads(fixture("kubectl_nodes_aks_cpu.json"))
    document["items"][1]["metadata"]["labels"]["nvidia.com/gpu.count"] = "lots"
    document["items"].append("not a node")
    parsed = parse_kubernetes_nodes(json.dumps(document))
    assert len(parsed.records) == 2
    assert [r.reason for r in parsed.rejected] == [
        "items[1]: label nvidia.com/gpu.count 'lots' is not a whole number",
        "items[3] is not a JSON object",
    ]


def test_broken_json_is_one_rejection():
    parsed = parse_kubernetes_nodes('{"items": [')
    assert parsed.records == []
    assert parsed.rejected[0].reason.startswith("not valid JSON")


def test_real_dcgm_labels_give_the_node_its_gpu_uuid_and_pci_bus_id():
    text = (FIXTURES / "dcgm" / "dcgm_exporter_issue512_h100_mig_pods.txt").read_text()
    readings = gpu_readings_from_exposition(text, scrape_time_ms=1_790_000_000_000).records
    [node] = observed_nodes_from_readings(readings)
    assert (node.hostname, node.gpu_model, node.gpu_count) == ("gsrh100-074", "NVIDIA H100 80GB HBM3", 1)
    assert not node.gpu_count_exact  # silent GPUs are not in a scrape
    [gpu] = node.gpus
    assert (gpu.uuid, gpu.pci_bus_id) == ("GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77", "00000000:1A:00.0")


@pytest.mark.parametrize(
    ("node", "problem"),
    [
        (ObservedNode(hostname=""), "empty hostname"),
        (ObservedNode(hostname="   "), "empty hostname"),
        (ObservedNode(hostname="gpu 01"), "hostname 'gpu 01' holds spaces or control characters"),
        (ObservedNode(hostname="=cmd|'/c'!A1"), "hostname \"=cmd|'/c'!A1\" starts with '='"),
        (ObservedNode(hostname="x" * 256), "hostname longer than 255 characters"),
        (
            ObservedNode(hostname="big", gpu_count=10**9),
            f"1000000000 GPUs on big: at most {MAX_GPUS_PER_NODE} per node",
        ),
    ],
)
def test_hostile_observations_are_refused_with_a_reason(node, problem):
    assert observed_node_problem(node) == problem


def test_a_unicode_hostname_is_a_hostname():
    assert observed_node_problem(ObservedNode(hostname="计算节点-01", gpu_count=8)) == ""


@given(st.text(max_size=2000))
def test_no_text_crashes_the_node_list_parsers(text):
    for parse in (parse_scontrol_nodes, parse_sinfo_nodes, parse_slurm_nodes, parse_kubernetes_nodes):
        parse(text)
    parse_nodes_csv(text.splitlines(keepends=True))


@pytest.mark.parametrize(
    "name",
    [
        "scontrol_oneliner_idle.txt",
        "scontrol_blocks_idle.txt",
        "sinfo_idle.txt",
        "scontrol_oneliner_drain_alloc.txt",
        "sinfo_drain_alloc.txt",
    ],
)
def test_a_slurm_node_list_is_read_as_scontrol_or_sinfo_output_whichever_it_is(name):
    parsed = parse_slurm_nodes(fixture(name))
    assert parsed.rejected == []
    assert [(n.hostname, n.gpu_model, n.gpu_count) for n in parsed.records] == [("vm", "h100", 8)]


# sinfo's default table, as `sinfo -N` prints it without -o: no format the node list reads.
SINFO_TABLE = "NODELIST   NODES PARTITION STATE \nvm             1      gpu* idle  \n"


def test_sinfo_s_default_table_is_refused_with_the_formats_the_node_list_reads():
    parsed = parse_slurm_nodes(SINFO_TABLE)
    assert parsed.records == []
    [rejected] = parsed.rejected
    assert rejected.reason == (
        "not a node list: expected `scontrol show nodes --oneliner` output "
        "or `sinfo -N -h -o '%N|%G|%P|%T|%E'`"
    )
    assert rejected.excerpt.startswith("NODELIST")


def test_scontrol_lines_that_are_not_nodes_are_refused_not_skipped():
    parsed = parse_scontrol_nodes(fixture("sinfo_idle.txt"))
    assert parsed.records == []
    assert [r.reason for r in parsed.rejected] == ["expected `scontrol show nodes --oneliner` output"]


@given(st.text(max_size=500))
def test_a_slurm_node_list_that_is_not_blank_gives_nodes_or_a_reason(text):
    parsed = parse_slurm_nodes(text)
    if text.strip():
        assert parsed.records or parsed.rejected


def test_node_csv_rows_keep_empty_cells_as_unknown_and_report_bad_rows_by_line():
    text = (
        "hostname,gpu_model,gpu_count,fault_domain,owner_department,rdma_capable,state\n"
        "gpu-01,NVIDIA H100 80GB HBM3,8,rack-01,vision,true,active\n"
        "gpu-02,,,,,,\n"
        "=cmd|' /C calc'!A0,H100,8,,,,\n"
        "gpu-04,H100,eight,,,,\n"
        "gpu-05,H100,8,rack-02,,maybe,\n"
        "gpu-06,H100,8,@SUM(A1),,,\n"
    )
    parsed = parse_nodes_csv(text.splitlines(keepends=True))
    assert [(r.hostname, r.gpu_count, r.rdma_capable, r.owner_department) for r in parsed.records] == [
        ("gpu-01", 8, True, "vision"),
        ("gpu-02", None, None, None),
    ]
    assert [(r.line_no, r.reason) for r in parsed.rejected] == [
        (4, "hostname \"=cmd|' /C calc'!A0\" starts with '=' (a spreadsheet formula?)"),
        (5, "gpu_count 'eight' is not a whole number"),
        (6, "rdma_capable 'maybe': write true or false"),
        (7, "fault_domain '@SUM(A1)' starts with '@' (a spreadsheet formula?)"),
    ]


def test_a_node_csv_without_a_hostname_column_says_which_columns_exist():
    parsed = parse_nodes_csv(["host,gpus\n", "a,1\n"])
    assert parsed.records == []
    assert parsed.rejected[0].reason.startswith("header: unknown column(s) host, gpus; columns are hostname,")


def test_pods_given_as_the_node_list_are_refused_not_taken_for_nodes():
    parsed = parse_kubernetes_nodes((FIXTURES / "jobs" / "k8s_pods.json").read_text())
    assert parsed.records == []
    assert parsed.rejected
    assert all(
        r.reason.endswith("is a Pod, not a Node (expected `kubectl get nodes -o json`)")
        for r in parsed.rejected
    )
