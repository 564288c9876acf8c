"""Kubernetes Job and Pod parsing, against hand-written kubectl -o json output."""

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from efficiency.collectors.kubernetes import guess_framework, parse_kubernetes_jobs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "jobs"
LEAKED_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"  # the made-up HF_TOKEN in k8s_jobs.json


def fixture_text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def fixture_json(name):
    return json.loads(fixture_text(name))


def by_id(outcome):
    return {record.external_id: record for record in outcome.records}


def jobs():
    return by_id(parse_kubernetes_jobs(fixture_text("k8s_jobs.json")))


def pods():
    return by_id(parse_kubernetes_jobs(fixture_text("k8s_pods.json")))


def pod(name="train-0", namespace="vision", phase="Running", **spec):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-11-02T00:00:00Z"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec},
        "status": {"phase": phase},
    }


def parse_items(*items, kind="List"):
    return parse_kubernetes_jobs(json.dumps({"apiVersion": "v1", "kind": kind, "items": list(items)}))


# Jobs


def test_jobs_fixture_keeps_good_jobs_and_rejects_the_one_without_namespace():
    outcome = parse_kubernetes_jobs(fixture_text("k8s_jobs.json"))
    assert len(outcome.records) == 7
    assert [(rejected.reason, rejected.line_no) for rejected in outcome.rejected] == [
        ("items[6]: metadata.namespace is missing for Job 'hdmap-build'", None)
    ]
    assert "hdmap-build" in outcome.rejected[0].excerpt


def test_job_states_come_from_status_and_conditions():
    assert {job_id: job.state for job_id, job in jobs().items()} == {
        "vision/megatron-gpt-pretrain": "running",  # active 4
        "bev/bev-fusion-train-20261102": "completed",  # Complete condition
        "radar/radar-seg-sweep-3": "failed",  # Failed, BackoffLimitExceeded
        "e2e/e2e-planner-ds": "timeout",  # Failed, DeadlineExceeded
        "sim/sim-replay-batch": "pending",  # suspended
        "data/dedup-queue": "pending",  # no startTime
        "cabin/cabin-asr-eval": "running",
    }


def test_running_job_carries_identity_times_and_gpus():
    job = jobs()["vision/megatron-gpt-pretrain"]
    assert job.source == "kubernetes"
    assert job.account == "vision"
    assert job.user_name == "zhang.wei"  # label "user"
    assert job.name == "megatron-gpt-pretrain"
    assert job.gpu_count == 32  # 8 per pod x parallelism 4
    assert job.gpu_model == "NVIDIA-H100-80GB-HBM3"
    assert job.submitted_at == datetime(2026, 11, 2, 0, 15, 3, tzinfo=UTC)
    assert job.started_at == datetime(2026, 11, 2, 0, 15, 5, tzinfo=UTC)
    assert job.ended_at is None
    assert job.framework == "megatron"
    assert job.config["uid"] == "5d1c8a4e-3f0b-4d5e-9a51-2c7f0e6b1a93"
    assert (job.config["parallelism"], job.config["completions"]) == (4, 4)


def test_job_config_snapshot_holds_images_env_mounts_and_launcher():
    config = jobs()["vision/megatron-gpt-pretrain"].config
    assert config["images"] == ["registry.example.com/vision/megatron-lm:24.03-py3"]
    assert config["env"]["NCCL_SOCKET_IFNAME"] == "eth0"
    assert config["volume_mounts"] == ["/data", "/checkpoints", "/dev/shm"]
    assert config["containers"] == [
        {
            "name": "trainer",
            "image": "registry.example.com/vision/megatron-lm:24.03-py3",
            "command": ["torchrun"],
            "args": [
                "--nproc_per_node=8",
                "--nnodes=4",
                "pretrain_gpt.py",
                "--tensor-model-parallel-size=8",
                "--data-path=/data/pile/pile_text_document",
            ],
        }
    ]


def test_values_from_secrets_and_config_maps_are_recorded_as_references():
    config = jobs()["vision/megatron-gpt-pretrain"].config
    assert config["env"]["WANDB_API_KEY"] == "<from secretKeyRef>"
    assert config["env"]["MASTER_PORT"] == "<from configMapKeyRef>"
    assert config["env_from"] == ["secretRef:s3-credentials"]


def test_literal_credentials_never_reach_the_snapshot():
    outcome = parse_kubernetes_jobs(fixture_text("k8s_jobs.json"))
    assert jobs()["vision/megatron-gpt-pretrain"].config["env"]["HF_TOKEN"] == "<redacted>"
    assert LEAKED_TOKEN not in repr(outcome)


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("HF_TOKEN", False),
        ("GITHUB_TOKEN", False),
        ("OPENAI_API_KEY", False),
        ("AWS_SECRET_ACCESS_KEY", False),
        ("DB_PASSWORD", False),
        ("secret", False),
        ("TOKENIZERS_PARALLELISM", True),
        ("NCCL_IB_HCA", True),
        ("OMP_NUM_THREADS", True),
        ("MASTER_ADDR", True),
        ("TORCH_HUB_TOKEN", False),  # an audit prefix, but a credential word
        ("KEYFILE_DIR", False),  # not a variable the audit reads: redacted
        ("DB_PASS", False),
    ],
)
def test_only_audit_variables_keep_their_value(name, kept):
    item = pod()
    item["spec"]["containers"][0]["env"] = [{"name": name, "value": "v4lue"}]
    env = parse_items(item).records[0].config["env"]
    assert env[name] == ("v4lue" if kept else "<redacted>")


def test_user_falls_back_to_the_annotation():
    assert jobs()["bev/bev-fusion-train-20261102"].user_name == "li.na"
    assert jobs()["data/dedup-queue"].user_name == ""


def test_completed_job_ends_at_completion_time():
    job = jobs()["bev/bev-fusion-train-20261102"]
    assert job.ended_at == datetime(2026, 11, 2, 5, 47, 55, tzinfo=UTC)
    assert job.gpu_count == 8  # an integer quantity, not a string
    assert job.framework == "pytorch"


def test_failed_job_ends_at_its_failed_condition():
    assert jobs()["radar/radar-seg-sweep-3"].ended_at == datetime(2026, 11, 2, 1, 20, 3, tzinfo=UTC)
    timed_out = jobs()["e2e/e2e-planner-ds"]
    assert timed_out.ended_at == datetime(2026, 11, 2, 1, 30, 2, tzinfo=UTC)
    assert timed_out.framework == "deepspeed"
    assert timed_out.gpu_model == "NVIDIA-A100-SXM4-80GB"


def test_suspended_job_is_pending_with_its_gpu_demand():
    job = jobs()["sim/sim-replay-batch"]
    assert (job.state, job.started_at, job.gpu_count) == ("pending", None, 8)


def test_fewer_completions_than_parallelism_limit_the_gpus():
    assert jobs()["cabin/cabin-asr-eval"].gpu_count == 4  # 2 per pod x min(parallelism 4, completions 2)


def test_job_without_gpus_counts_zero():
    job = jobs()["data/dedup-queue"]
    assert (job.gpu_count, job.framework) == (0, "unknown")


def test_job_whose_last_pod_succeeded_before_the_condition_is_completed():
    item = fixture_json("k8s_jobs.json")["items"][1]
    item["status"] = {"startTime": "2026-11-02T01:00:12Z", "succeeded": 1}
    assert parse_items(item).records[0].state == "completed"


# Pods


def test_pods_fixture_keeps_good_pods_and_rejects_the_one_without_name():
    outcome = parse_kubernetes_jobs(fixture_text("k8s_pods.json"))
    assert len(outcome.records) == 7
    assert [rejected.reason for rejected in outcome.rejected] == ["items[6]: metadata.name is missing"]


def test_pod_phases_map_to_states():
    assert {pod_id: record.state for pod_id, record in pods().items()} == {
        "vision/megatron-gpt-pretrain-0-x7k2p": "running",
        "bev/bev-fusion-train-20261102-q8m4z": "completed",
        "radar/radar-seg-sweep-3-r2c9d": "failed",
        "e2e/e2e-batch-infer-7f9c": "preempted",  # DisruptionTarget: PreemptionByScheduler
        "sim/sim-worker-5": "pending",
        "mapping/map-tiler-2": "node_fail",  # phase Unknown, NodeLost
        "cabin/cabin-asr-serve-0": "running",
    }


def test_running_pod_carries_its_node_and_owner():
    record = pods()["vision/megatron-gpt-pretrain-0-x7k2p"]
    assert record.node_names == ("gpu-001",)
    assert record.node_count == 1
    assert record.gpu_count == 8
    assert record.started_at == datetime(2026, 11, 2, 0, 15, 5, tzinfo=UTC)
    assert record.ended_at is None
    assert record.exit_code == ""
    assert record.config["owners"] == ["Job/megatron-gpt-pretrain"]
    assert record.config["env"] == {
        "NCCL_SOCKET_IFNAME": "eth0",
        "AWS_SECRET_ACCESS_KEY": "<from secretKeyRef>",
        "POD_IP": "<from fieldRef>",
    }


def test_finished_pod_ends_when_its_last_container_finishes():
    record = pods()["bev/bev-fusion-train-20261102-q8m4z"]
    assert record.ended_at == datetime(2026, 11, 2, 5, 47, 58, tzinfo=UTC)  # the sidecar, 5 s later
    assert record.exit_code == "0"
    assert record.framework == "pytorch"


def test_failed_pod_keeps_the_exit_code():
    assert pods()["radar/radar-seg-sweep-3-r2c9d"].exit_code == "1"
    assert pods()["e2e/e2e-batch-infer-7f9c"].exit_code == "137"


def test_running_pod_with_a_finished_sidecar_has_not_ended():
    record = pods()["cabin/cabin-asr-serve-0"]
    assert (record.ended_at, record.exit_code) == (None, "")
    assert record.gpu_count == 2  # summed over containers


def test_pending_pod_has_no_node():
    record = pods()["sim/sim-worker-5"]
    assert (record.node_names, record.node_count, record.started_at) == ((), 0, None)


def test_lost_node_pod_records_the_reason():
    assert pods()["mapping/map-tiler-2"].config["status_reason"] == "NodeLost"


def test_pod_deadline_is_a_timeout():
    item = pod(phase="Failed")
    item["status"]["reason"] = "DeadlineExceeded"
    assert parse_items(item).records[0].state == "timeout"


def test_gpu_requests_count_when_limits_are_absent():
    item = pod()
    item["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "2"}}
    assert parse_items(item).records[0].gpu_count == 2


# MIG instances under the device plugin's mixed strategy (NVIDIA/k8s-device-plugin v0.7.0 release
# notes: "nvidia.com/mig-3g.20gb: 2"): a device each, holding its compute slices of the GPU.
@pytest.mark.parametrize(
    ("resources", "devices", "milli"),
    [
        ({"nvidia.com/mig-1g.5gb": "1"}, 1, 143),  # A100 40GB: 1 of 7 slices, 1000/7 = 142.9
        ({"nvidia.com/mig-3g.20gb": "2"}, 2, 858),  # 2 x 3/7 = 2 x 428.6 -> 2 x 429
        ({"nvidia.com/mig-7g.80gb": "1"}, 1, 1000),  # H100 80GB, the whole GPU
        ({"nvidia.com/mig-1g.6gb": "1"}, 1, 250),  # A30: 1 of 4 slices
        ({"nvidia.com/mig-2g.12gb": "1"}, 1, 500),
        ({"nvidia.com/mig-1g.10gb+me": "1"}, 1, 143),  # with a media extension
        ({"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "1"}, 2, 1143),
    ],
)
def test_mig_instances_count_their_share_of_a_gpu(resources, devices, milli):
    item = pod()
    item["spec"]["containers"][0]["resources"] = {"limits": resources}
    record = parse_items(item).records[0]
    assert (record.gpu_count, record.gpu_milli) == (devices, milli)


def test_a_malformed_mig_request_is_rejected_naming_the_resource():
    item = pod()
    item["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.5gb": "half"}}
    outcome = parse_items(item)
    assert not outcome.records
    assert "nvidia.com/mig-1g.5gb" in outcome.rejected[0].reason


def test_all_times_are_timezone_aware_utc():
    for record in [*jobs().values(), *pods().values()]:
        for moment in (record.submitted_at, record.started_at, record.ended_at):
            assert moment is None or moment.utcoffset() == timedelta(0)


def test_offset_timestamps_are_converted_to_utc():
    item = pod()
    item["metadata"]["creationTimestamp"] = "2026-11-02T08:00:00.250+08:00"
    assert parse_items(item).records[0].submitted_at == datetime(2026, 11, 2, 0, 0, 0, 250_000, tzinfo=UTC)


# list shapes


def test_api_server_pod_list_without_item_kinds_is_read():
    item = pod()
    del item["kind"]
    outcome = parse_items(item, kind="PodList")
    assert [record.external_id for record in outcome.records] == ["vision/train-0"]


def test_single_object_is_read():
    outcome = parse_kubernetes_jobs(json.dumps(pod()))
    assert [record.external_id for record in outcome.records] == ["vision/train-0"]


def test_empty_list_gives_nothing():
    outcome = parse_kubernetes_jobs('{"apiVersion": "v1", "items": [], "kind": "List"}')
    assert (outcome.records, outcome.rejected) == ([], [])


# bad input


def test_invalid_json_is_one_rejection_with_the_json_error():
    text = fixture_text("k8s_pods.json").replace('"phase": "Running",', '"phase": "Running"', 1)
    outcome = parse_kubernetes_jobs(text)
    assert outcome.records == []
    assert len(outcome.rejected) == 1
    rejected = outcome.rejected[0]
    assert rejected.reason.startswith("not valid JSON: Expecting ',' delimiter: line ")
    assert rejected.line_no is not None
    assert '"phase": "Running"' in rejected.excerpt


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[1, 2]", "expected a JSON object (a List of Jobs or Pods)"),
        ('{"kind": "List", "items": {}}', "'items' is not a list"),
    ],
)
def test_unexpected_json_shapes_are_rejected(text, reason):
    outcome = parse_kubernetes_jobs(text)
    assert [rejected.reason for rejected in outcome.rejected] == [reason]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda item: item.update(kind="Deployment"),
            "kind 'Deployment' of vision/train-0 is neither Job nor Pod",
        ),
        (
            lambda item: item["status"].update(phase="Lost"),
            "status.phase 'Lost' of vision/train-0 is not a pod phase",
        ),
        (
            lambda item: item["metadata"].update(creationTimestamp="yesterday"),
            "metadata.creationTimestamp 'yesterday' is not an RFC 3339 timestamp",
        ),
        (
            lambda item: item["metadata"].update(creationTimestamp="2026-11-02T00:00:00"),
            "metadata.creationTimestamp '2026-11-02T00:00:00' has no time zone",
        ),
        (lambda item: item["metadata"].pop("creationTimestamp"), "metadata.creationTimestamp is missing"),
        (
            lambda item: item["spec"]["containers"][0].update(
                resources={"limits": {"nvidia.com/gpu": "500m"}}
            ),
            "resources.limits['nvidia.com/gpu'] '500m' is not a whole number of GPUs",
        ),
        (lambda item: item["spec"].update(containers="main"), "containers is not a list"),
        (lambda item: item.update(metadata="train-0"), "metadata is not an object"),
        (lambda item: item["metadata"].update(name="tr\x00ain"), "contains a NUL character"),
    ],
)
def test_bad_item_is_rejected_and_the_rest_kept(change, reason):
    bad = pod()
    change(bad)
    outcome = parse_items(bad, pod(name="train-1"))
    assert [record.external_id for record in outcome.records] == ["vision/train-1"]
    assert len(outcome.rejected) == 1
    assert outcome.rejected[0].reason.startswith("items[0]")
    assert reason in outcome.rejected[0].reason


def test_item_that_is_not_an_object_is_rejected():
    outcome = parse_items("train-0", pod(name="train-1"))
    assert [rejected.reason for rejected in outcome.rejected] == ["items[0] is not a JSON object"]
    assert len(outcome.records) == 1


def test_rejection_excerpt_leaves_out_the_environment():
    bad = copy.deepcopy(fixture_json("k8s_jobs.json")["items"][0])
    bad["status"]["startTime"] = "not a time"
    outcome = parse_items(bad)
    assert outcome.rejected[0].reason == "items[0]: startTime 'not a time' is not an RFC 3339 timestamp"
    assert LEAKED_TOKEN not in outcome.rejected[0].excerpt
    assert "megatron-gpt-pretrain" in outcome.rejected[0].excerpt


# framework guess


@pytest.mark.parametrize(
    ("images", "framework"),
    [
        (["registry.example.com/vision/megatron-lm:24.03-py3"], "megatron"),
        (["nvcr.io/nvidia/pytorch:24.05-py3"], "pytorch"),
        (["registry.example.com/e2e/deepspeed-train:0.14.4-cu124"], "deepspeed"),
        (["pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime", "example.com/MEGATRON-core:0.8"], "megatron"),
        (["registry.example.com/radar/seg-torch:1.4.2"], "pytorch"),
        (["python:3.11-slim", "busybox:1.36"], "unknown"),
        ([], "unknown"),
    ],
)
def test_framework_is_guessed_from_image_names(images, framework):
    assert guess_framework(images) == framework
