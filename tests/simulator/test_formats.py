"""The simulator's outputs read like the real sources: dcgm-exporter, sacct, kubectl."""

import json
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from prometheus_client.parser import text_string_to_metric_families

from efficiency.simulator.formats import METRICS, SACCT_FIELDS, XID_COUNT_METRIC, compress_hostlist
from efficiency.simulator.scenario import gpu_uuid
from tests.simulator.conftest import START, make_simulator

SHANGHAI = ZoneInfo("Asia/Shanghai")
AT = START + timedelta(days=2, hours=9, minutes=41, seconds=15)


def _families(text: str) -> dict[str, list]:
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def test_exposition_parses_and_has_every_metric_for_eight_gpus_per_node(sim):
    families = _families(sim.exposition(AT))
    for name, *_ in METRICS:
        samples = families[name]
        assert len(samples) == 64 * 8
        per_node: dict[str, int] = {}
        for sample in samples:
            per_node[sample.labels["Hostname"]] = per_node.get(sample.labels["Hostname"], 0) + 1
        assert set(per_node.values()) == {8}


def test_exposition_labels_follow_dcgm_exporter(sim):
    text = sim.exposition(AT, nodes=["gpu-003"])
    first = next(line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    assert first.startswith(
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{gpu_uuid("gpu-003", 0)}",pci_bus_id="00000000:18:00.0",'
        'device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-003",DCGM_FI_DRIVER_VERSION='
    )
    assert "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge" in text
    samples = _families(text)["DCGM_FI_DEV_GPU_UTIL"]
    for sample in samples:
        job = sim.job_on_gpu("gpu-003", int(sample.labels["gpu"]), AT)
        if job is None:
            assert (sample.labels["namespace"], sample.labels["pod"]) == ("", "")
        else:
            assert sample.labels["namespace"] == f"team-{job.department}"
            assert sample.labels["pod"].startswith(job.k8s_name + "-")
        assert sample.value == int(sample.value)  # GPU_UTIL is an integer percent


def test_profiling_ratios_are_printed_with_six_decimals(sim):
    text = sim.exposition(AT, nodes=["gpu-001"])
    line = next(line for line in text.splitlines() if line.startswith("DCGM_FI_PROF_SM_ACTIVE{"))
    value = line.rsplit(" ", 1)[1]
    assert len(value.split(".")[1]) == 6
    assert 0 <= float(value) <= 1


def test_xid_count_series_appear_only_inside_the_window():
    sim = make_simulator(fault_rate_per_day=6.0)
    fault = next(f for f in sim.faults(START, START + timedelta(days=7)) if f.xid is not None)
    text = sim.exposition(fault.occurred_at + timedelta(seconds=90), nodes=[fault.node])
    counts = _families(text)[XID_COUNT_METRIC]
    assert [(s.labels["gpu"], s.labels["xid"], s.value) for s in counts] == [
        (str(fault.gpu), str(fault.xid), 1)
    ]
    last = [s for s in _families(text)["DCGM_FI_DEV_XID_ERRORS"] if s.labels["gpu"] == str(fault.gpu)]
    assert last[0].value == (9223372036854775794 if fault.xid == 79 else fault.xid)


def test_sacct_text_has_a_header_and_one_row_per_job_with_ordered_times(sim):
    until = START + timedelta(days=2)
    text = sim.sacct_text(START, until, timezone=SHANGHAI)
    lines = text.splitlines()
    assert lines[0] == "|".join(SACCT_FIELDS)
    rows = [dict(zip(SACCT_FIELDS, line.split("|"), strict=True)) for line in lines[1:]]
    records = sim.jobs(START, until)
    assert [row["JobID"] for row in rows] == [record.external_id for record in records]
    for row in rows:
        if row["Start"] not in ("Unknown", "None"):
            assert row["Submit"] <= row["Start"]
            assert row["AllocTRES"].startswith("billing=")
        if row["Start"] == "None":  # its user cancelled it while it waited
            assert row["State"].startswith("CANCELLED by ")
            assert (row["NodeList"], row["AllocTRES"], row["Elapsed"]) == ("None assigned", "", "00:00:00")
            assert row["Submit"] <= row["End"]
        elif row["End"] != "Unknown":
            assert row["Start"] <= row["End"]
        if row["State"] == "PENDING":
            assert (row["Start"], row["NodeList"], row["AllocTRES"]) == ("Unknown", "None assigned", "")
    states = {row["State"].split()[0] for row in rows}
    assert {"COMPLETED", "FAILED", "RUNNING", "PENDING", "CANCELLED"} <= states
    assert any(row["Start"] == "None" for row in rows)


def test_sacct_prints_local_time_without_offset(sim):
    record = sim.jobs(START, START + timedelta(hours=6))[0]
    text = sim.sacct_text(START, START + timedelta(hours=6), timezone=SHANGHAI)
    row = text.splitlines()[1].split("|")
    assert row[5] == record.submitted_at.astimezone(SHANGHAI).strftime("%Y-%m-%dT%H:%M:%S")


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        (["gpu-001"], "gpu-001"),
        (["gpu-001", "gpu-002", "gpu-003", "gpu-004"], "gpu-[001-004]"),
        (["gpu-007", "gpu-001", "gpu-002"], "gpu-[001-002,007]"),
    ],
)
def test_node_lists_are_compressed_like_slurm(hosts, expected):
    assert compress_hostlist(hosts) == expected


def test_kubernetes_json_lists_the_same_jobs_as_batch_v1_jobs(sim):
    until = START + timedelta(hours=12)
    document = json.loads(sim.kubernetes_jobs_json(START, until))
    assert document["kind"] == "List"
    items = document["items"]
    records = {r.external_id: r for r in sim.jobs(START, until) if r.state != "cancelled"}
    assert len(items) == len(records)
    for item in items:
        assert (item["apiVersion"], item["kind"]) == ("batch/v1", "Job")
        job_id = item["metadata"]["name"].rsplit("-", 1)[1]
        record = records[job_id]
        assert item["metadata"]["namespace"] == f"team-{record.account}"
        container = item["spec"]["template"]["spec"]["containers"][0]
        pods = item["spec"]["parallelism"]
        assert int(container["resources"]["limits"]["nvidia.com/gpu"]) * pods == record.gpu_count
        assert {m["mountPath"] for m in container["volumeMounts"]} == set(record.config["mounts"])
        assert item["spec"]["suspend"] == (record.state == "pending")
        assert ("startTime" in item["status"]) == (record.state != "pending")
