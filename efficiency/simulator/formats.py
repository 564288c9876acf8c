"""The simulator's scheduler and metrics outputs in the real sources' text formats.

- ``exposition``: dcgm-exporter ``/metrics`` (Prometheus text format 0.0.4), label order and number
  formatting copied from real exporter output (NVIDIA/dcgm-exporter issues #58 and #512, PR #239):
  ``gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION`` then
  ``container, namespace, pod`` (empty strings when no pod holds the GPU), integers for
  ``DCGM_FI_DEV_*`` counters and ``%f`` for power and the profiling ratios.
- ``sacct_text``: ``sacct --parsable2 --allocations`` with a header line.
- ``kubernetes_jobs_json``: ``kubectl get jobs -A -o json`` (a ``List`` of ``batch/v1`` Jobs, queued
  ones suspended as Kueue does).
"""

import json
import re
from collections.abc import Sequence
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from efficiency.simulator.model import (
    DCGM_BLANK,
    XID_WINDOW_MS,
    SimJob,
    SimulatedReading,
    _dt,
    _hash_int,
    _ts,
)

if TYPE_CHECKING:
    from efficiency.simulator.model import ClusterSimulator

# (metric, type, help, how to read the value from a SimulatedReading, how to print it)
_INT = "int"
_FLOAT = "float"
METRICS: tuple[tuple[str, str, str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "sm_clock_mhz", _INT),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "mem_clock_mhz", _INT),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temp_c", _INT),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power_w", _FLOAT),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "util_pct", _INT),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "mem_copy_util_pct", _INT),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", "xid_last", _INT),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "fb_free_mib", _INT),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "fb_used_mib", _INT),
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gauge",
        "Ratio of time the graphics engine is active.",
        "gr_active",
        _FLOAT,
    ),
    (
        "DCGM_FI_PROF_SM_ACTIVE",
        "gauge",
        "The ratio of cycles an SM has at least 1 warp assigned.",
        "sm_active",
        _FLOAT,
    ),
    (
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "gauge",
        "The ratio of number of warps resident on an SM.",
        "sm_occupancy",
        _FLOAT,
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        "tensor_active",
        _FLOAT,
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        "dram_active",
        _FLOAT,
    ),
)
XID_COUNT_METRIC = "DCGM_EXP_XID_ERRORS_COUNT"
XID_COUNT_HELP = "Count of XID Errors within user-specified time window (see xid-count-window-size param)."
CONTAINER_NAME = "trainer"
_EMPTY_POD = ',container="",namespace="",pod=""'
_BLANK_TEXT = str(DCGM_BLANK)

# Slurm prints these columns for ``--format=``; the portal's collector asks for ReqTRES and
# Elapsed too, so the default carries them after the fields of a plain ``sacct -X --parsable2``.
SACCT_FIELDS = (
    "JobID",
    "JobName",
    "Account",
    "User",
    "State",
    "Submit",
    "Start",
    "End",
    "AllocTRES",
    "NodeList",
    "ExitCode",
    "Partition",
    "NNodes",
    "ReqTRES",
    "Elapsed",
    # The site's job_submit plugin records each job's container setup here as JSON (image, env,
    # mounts, dataset cache mode, command line): the config snapshot the recommendations read.
    "AdminComment",
)
CPUS_PER_GPU = 8
MEM_GB_PER_GPU = 62.5  # 500G per 8-GPU node


def _pod_name(job: SimJob, node_rank: int) -> str:
    # An Indexed Job's pods: <job>-<completion index>-<5 random characters>.
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    value = _hash_int("pod", job.job_id, node_rank)
    suffix = "".join(alphabet[(value >> (5 * i)) % len(alphabet)] for i in range(5))
    return f"{job.k8s_name}-{node_rank}-{suffix}"


def pod_name(job: SimJob, node_index: int) -> str:
    """The Kubernetes pod a job runs on one node (the dcgm ``pod`` label)."""
    node_rank = job.node_indices().index(node_index)
    return _pod_name(job, node_rank)


def _pod_labels(job: SimJob | None, node_index: int) -> str:
    if job is None:
        return _EMPTY_POD
    labels = job.pod_labels.get(node_index)
    if labels is None:
        labels = (
            f',container="{CONTAINER_NAME}",namespace="{job.namespace}",pod="{pod_name(job, node_index)}"'
        )
        job.pod_labels[node_index] = labels
    return labels


def exposition(sim: "ClusterSimulator", at: datetime, *, nodes: list[str] | None = None) -> str:
    """dcgm-exporter text for every GPU of the given nodes (all by default) at ``at``.

    One page for many nodes is a simulator convenience (each series carries its ``Hostname``);
    a real exporter runs per node and serves only its own GPUs.
    """
    at_s = _ts(at)
    sim._advance(at_s)
    states = sim._node_states if nodes is None else [sim._node_states[sim._index[h]] for h in nodes]
    labels: list[str] = []
    samples: list[SimulatedReading] = []
    for node in states:
        for gpu in range(len(node.free)):
            sample = sim._sample(node, gpu, at_s)
            samples.append(sample)
            labels.append(node.labels[gpu] + _pod_labels(sample.job, node.index))
    parts: list[str] = []
    for name, kind, help_text, attribute, number in METRICS:
        parts.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        if number == _INT:
            values = [str(getattr(sample, attribute)) for sample in samples]
        else:
            values = [
                _BLANK_TEXT if sample.blank else f"{getattr(sample, attribute):f}" for sample in samples
            ]
        prefix = name + "{"
        parts.append(
            "".join(f"{prefix}{label}}} {value}\n" for label, value in zip(labels, values, strict=True))
        )
    parts.append(f"# HELP {XID_COUNT_METRIC} {XID_COUNT_HELP}\n# TYPE {XID_COUNT_METRIC} gauge\n")
    for label, sample in zip(labels, samples, strict=True):
        for xid, count in sample.xid_counts:
            parts.append(
                f'{XID_COUNT_METRIC}{{{label},window_size_in_ms="{XID_WINDOW_MS}",xid="{xid}"}} {count}\n'
            )
    return "".join(parts)


# ------------------------------------------------------------------------------------------------
# Slurm


def compress_hostlist(hostnames: Sequence[str]) -> str:
    """Slurm's compressed hostlist: ``gpu-[001-003,007]``, a single name as is, groups by prefix."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int]] = []
    plain: list[str] = []
    for host in hostnames:
        match = re.fullmatch(r"(.*?)(\d+)", host)
        if match is None:
            plain.append(host)
            continue
        key = (match.group(1), len(match.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(match.group(2)))
    parts = list(plain)
    for prefix, width in order:
        numbers = sorted(set(groups[(prefix, width)]))
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        ranges: list[str] = []
        low = high = numbers[0]
        for number in [*numbers[1:], None]:
            if number is not None and number == high + 1:
                high = number
                continue
            ranges.append(f"{low:0{width}d}" if low == high else f"{low:0{width}d}-{high:0{width}d}")
            if number is not None:
                low = high = number
        parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)


def tres_text(job: SimJob) -> str:
    """Slurm TRES of a job's allocation: ``billing=64,cpu=64,gres/gpu=8,mem=500G,node=1``."""
    cpus = CPUS_PER_GPU * job.gpu_count
    memory_gb = MEM_GB_PER_GPU * job.gpu_count
    memory = f"{memory_gb:.0f}G" if memory_gb.is_integer() else f"{memory_gb:.2f}G"
    return f"billing={cpus},cpu={cpus},gres/gpu={job.gpu_count},mem={memory},node={job.node_count}"


def _slurm_time(seconds: float | None, timezone: tzinfo) -> str:
    if seconds is None:
        return "Unknown"
    return _dt(seconds).astimezone(timezone).strftime("%Y-%m-%dT%H:%M:%S")


def _elapsed(seconds: float) -> str:
    whole = max(0, int(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def sacct_row(sim: "ClusterSimulator", job: SimJob, at_s: float, timezone: tzinfo) -> dict[str, str]:
    """Every column ``sacct_text`` can print for one job, as ``sacct`` run at ``at_s`` shows it."""
    state, start_s, end_s = job.state_at(at_s)
    if state == "CANCELLED":
        state = f"CANCELLED by {job.uid}"
    hosts = [sim.nodes[i].hostname for i in job.node_indices()]
    elapsed = 0.0 if start_s is None else (end_s if end_s is not None else at_s) - start_s
    return {
        "JobID": job.external_id,
        "JobName": job.name,
        "Account": job.department,
        "User": job.user_name,
        "State": state,
        "Submit": _slurm_time(job.submit_s, timezone),
        # A job cancelled while it waited never started: sacct prints "None" (as Slurm 22.05 does).
        "Start": "None" if start_s is None and end_s is not None else _slurm_time(start_s, timezone),
        "End": _slurm_time(end_s, timezone),
        "AllocTRES": tres_text(job) if start_s is not None else "",
        "ReqTRES": tres_text(job),
        "NodeList": compress_hostlist(hosts) if start_s is not None else "None assigned",
        "ExitCode": job.exit_code if end_s is not None else "0:0",
        "Partition": job.department,
        "NNodes": str(job.node_count),
        "Elapsed": _elapsed(elapsed),
        "UID": str(job.uid),
        "AdminComment": json.dumps(job.config, separators=(",", ":"), sort_keys=True),
    }


def sacct_text(
    sim: "ClusterSimulator",
    since: datetime,
    until: datetime,
    *,
    timezone: tzinfo,
    fields: Sequence[str] | None = None,
) -> str:
    """``sacct --parsable2 --allusers --allocations -S since -E until --format=<fields>`` at ``until``.

    Times are printed in ``timezone`` without an offset, as Slurm does; jobs are in submit order.
    """
    columns = list(fields or SACCT_FIELDS)
    at_s = _ts(until)
    lines = ["|".join(columns)]
    for job in sim._jobs_between(_ts(since), at_s):
        row = sacct_row(sim, job, at_s, timezone)
        lines.append("|".join(row[column] for column in columns))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# Kubernetes


def _k8s_time(seconds: float) -> str:
    return _dt(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def _k8s_job(sim: "ClusterSimulator", job: SimJob, at_s: float) -> dict[str, Any] | None:
    state, start_s, end_s = job.state_at(at_s)
    if state == "CANCELLED":
        return None  # cancelling a Kubernetes Job means deleting it: it is gone from the list
    pods = job.node_count
    gpus_per_pod = job.gpu_count // pods
    config = job.config
    launcher = list(config["launcher_args"])
    product = sim.nodes[sim._pool_by_key[job.pool_key].nodes[0]].gpu_model.replace(" ", "-")
    created = _k8s_time(job.submit_s)
    uid = f"{_hash_int('k8s-uid', job.job_id):016x}"
    memory_gi = round(MEM_GB_PER_GPU * gpus_per_pod)
    resources = {
        "cpu": str(CPUS_PER_GPU * gpus_per_pod),
        "memory": f"{memory_gi}Gi",
        "nvidia.com/gpu": str(gpus_per_pod),
    }
    volumes = [
        {
            "name": "pfs-datasets",
            "csi": {
                "driver": "pfs.csi.storage.internal",
                "volumeAttributes": {"cacheMode": config["storage_cache_mode"], "path": "/datasets"},
            },
        },
        {
            "name": "pfs-checkpoints",
            "csi": {
                "driver": "pfs.csi.storage.internal",
                "volumeAttributes": {"cacheMode": config["storage_cache_mode"], "path": "/checkpoints"},
            },
        },
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]
    mounts = [
        {"name": volume["name"], "mountPath": path}
        for volume, path in zip(volumes, config["mounts"], strict=True)
    ]
    item: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "creationTimestamp": created,
            "generation": 1 if state == "PENDING" else 2,
            "labels": {
                "kueue.x-k8s.io/queue-name": f"{job.department}-queue",
                "user": job.user_name,
            },
            "name": job.k8s_name,
            "namespace": job.namespace,
            "resourceVersion": str(_hash_int("rv", job.job_id, state) % 90_000_000 + 10_000_000),
            "uid": f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{_hash_int('uid2', job.job_id) % 65536:04x}-"
            f"{_hash_int('uid3', job.job_id) % 16**12:012x}",
        },
        "spec": {
            "activeDeadlineSeconds": 604800,
            "backoffLimit": 0,
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "suspend": state == "PENDING",
            "template": {
                "metadata": {"labels": {"job-name": job.k8s_name}},
                "spec": {
                    "containers": [
                        {
                            "args": launcher[1:],
                            "command": launcher[:1],
                            "env": [{"name": key, "value": value} for key, value in config["env"].items()],
                            "image": config["image"],
                            "name": CONTAINER_NAME,
                            "resources": {"limits": dict(resources), "requests": dict(resources)},
                            "volumeMounts": mounts,
                        }
                    ],
                    "nodeSelector": {"nvidia.com/gpu.product": product},
                    "restartPolicy": "Never",
                    "volumes": volumes,
                },
            },
        },
        "status": {},
    }
    status: dict[str, Any] = item["status"]
    if state == "PENDING":
        status["conditions"] = [
            {
                "lastProbeTime": created,
                "lastTransitionTime": created,
                "message": "Job suspended",
                "reason": "JobSuspended",
                "status": "True",
                "type": "Suspended",
            }
        ]
        return item
    assert start_s is not None
    status["startTime"] = _k8s_time(start_s)
    if state == "RUNNING":
        status.update(active=pods, ready=pods, uncountedTerminatedPods={})
        return item
    assert end_s is not None
    ended = _k8s_time(end_s)
    if state == "COMPLETED":
        status.update(
            completionTime=ended,
            conditions=[
                {
                    "lastProbeTime": ended,
                    "lastTransitionTime": ended,
                    "status": "True",
                    "type": "Complete",
                }
            ],
            ready=0,
            succeeded=pods,
        )
        return item
    deadline = state == "TIMEOUT"
    status.update(
        conditions=[
            {
                "lastProbeTime": ended,
                "lastTransitionTime": ended,
                "message": "Job was active longer than specified deadline"
                if deadline
                else "Job has reached the specified backoff limit",
                "reason": "DeadlineExceeded" if deadline else "BackoffLimitExceeded",
                "status": "True",
                "type": "Failed",
            }
        ],
        failed=pods if deadline else 1,
        ready=0,
    )
    return item


def kubernetes_jobs_json(sim: "ClusterSimulator", since: datetime, until: datetime) -> str:
    """``kubectl get jobs -A -o json`` at ``until`` for the jobs of ``[since, until)``.

    Namespaces are ``team-<department>``; queued jobs are suspended (Kueue admission) and have no
    ``startTime``; cancelled jobs are absent because cancelling means ``kubectl delete job``.
    The GPU model is the ``nvidia.com/gpu.product`` node selector (GPU feature discovery label).
    """
    at_s = _ts(until)
    items = [item for job in sim._jobs_between(_ts(since), at_s) if (item := _k8s_job(sim, job, at_s))]
    document = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    return json.dumps(document, indent=4) + "\n"
