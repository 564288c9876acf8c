"""Kubernetes job records from ``kubectl get jobs -A -o json`` or ``kubectl get pods -A -o json``;
observed nodes from ``kubectl get nodes -o json`` (inventory discovery).

Both commands print a ``List`` whose items carry their ``kind`` (``Job`` or ``Pod``); a
``JobList``/``PodList`` straight from the API server, whose items carry no kind, and a single
object are read too. The namespace is the job's account: the department comes from the
``DepartmentMapping`` table at ingest.

The config snapshot records what the config audit compares with the ideal: images, environment
variables, volume mount paths, command and args. Secret material never enters it: a variable
set from a Secret or ConfigMap is recorded as ``<from secretKeyRef>`` (the reference kind, not
the value), and literal values go through ``efficiency.redaction.config_redact``: only the
variables the audit needs keep their value, and credentials in URLs, headers and flags of the
command and args are ``<redacted>``.
"""

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from efficiency.collectors.nodes import (
    GPU_MODEL_MAX_CHARS,
    MAX_GPUS_PER_NODE,
    ObservedGpu,
    ObservedNode,
    clip_labels,
)
from efficiency.collectors.records import JobRecord, ParseOutcome, excerpt
from efficiency.redaction import REDACTED, config_redact

GPU_RESOURCE = "nvidia.com/gpu"
# Set by NVIDIA GPU feature discovery on every GPU node, e.g. "NVIDIA-H100-80GB-HBM3".
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
USER_KEY = "user"  # label, else annotation, naming who submitted the job

__all__ = ["REDACTED", "guess_framework", "parse_kubernetes_jobs"]

# Checked in this order: a Megatron or DeepSpeed image usually has "pytorch" in its name too.
_FRAMEWORK_HINTS = (
    ("megatron", "megatron"),
    ("deepspeed", "deepspeed"),
    ("pytorch", "pytorch"),
    ("torch", "pytorch"),
)

POD_PHASES: Mapping[str, str] = {
    "Pending": "pending",
    "Running": "running",
    "Succeeded": "completed",
    "Failed": "failed",
    # The kubelet stopped reporting (status reason NodeLost): the pod's node has failed.
    "Unknown": "node_fail",
}


class _BadItem(ValueError):
    """An item that cannot become a record; the message is the rejection reason."""


def _json_object(text: str, outcome: ParseOutcome, expected: str) -> dict | None:
    """The JSON object ``text`` holds; else one rejection for the whole text and None."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        # The excerpt shows where the JSON breaks, which the first characters rarely do.
        outcome.reject(
            f"not valid JSON: {error}", text[max(0, error.pos - 80) : error.pos + 80], error.lineno
        )
        return None
    if not isinstance(document, dict):
        outcome.reject(f"expected a JSON object ({expected})", text)
        return None
    return document


def parse_kubernetes_jobs(text: str) -> ParseOutcome[JobRecord]:
    """Turn ``kubectl get jobs|pods -A -o json`` output into job records, one per Job or Pod.

    Invalid JSON is one rejection for the whole text; an item that lacks its name or namespace,
    or holds an unreadable field, is rejected alone and the other items are kept. Rejections
    carry the item's index in ``items`` (JSON has no useful line numbers once pretty-printed).
    """
    outcome = ParseOutcome[JobRecord]()
    document = _json_object(text, outcome, "a List of Jobs or Pods")
    if document is None:
        return outcome
    list_kind = str(document.get("kind", ""))
    if "items" in document:
        items = document["items"]
        if not isinstance(items, list):
            outcome.reject("'items' is not a list", text)
            return outcome
        # Items of a JobList/PodList from the API server carry no kind of their own.
        default_kind = list_kind.removesuffix("List") if list_kind != "List" else ""
    else:
        items, default_kind = [document], ""
    for index, item in enumerate(items):
        where = f"items[{index}]" if "items" in document else "object"
        if not isinstance(item, dict):
            outcome.reject(f"{where} is not a JSON object", json.dumps(item))
            continue
        if "\\u0000" in json.dumps(item):
            # PostgreSQL text and jsonb cannot hold NUL; such an item would fail the ingest later.
            outcome.reject(f"{where} contains a NUL character", _identity_excerpt(item))
            continue
        try:
            outcome.records.append(_item_record(item, default_kind))
        except _BadItem as error:
            outcome.reject(f"{where}: {error}", _identity_excerpt(item))
    return outcome


def guess_framework(images: Sequence[str]) -> str:
    """The framework a job likely runs, from its container image names; "unknown" if no hint."""
    lowered = [image.lower() for image in images]
    for hint, framework in _FRAMEWORK_HINTS:
        if any(hint in image for image in lowered):
            return framework
    return "unknown"


def _item_record(item: Mapping[str, Any], default_kind: str) -> JobRecord:
    kind = str(item.get("kind") or default_kind)
    metadata = _mapping(item, "metadata")
    name = metadata.get("name")
    namespace = metadata.get("namespace")
    if not isinstance(name, str) or not name:
        raise _BadItem("metadata.name is missing")
    if not isinstance(namespace, str) or not namespace:
        raise _BadItem(f"metadata.namespace is missing for {kind or 'item'} {name!r}")
    if kind == "Job":
        return _job_record(item, metadata, namespace, name)
    if kind == "Pod":
        return _pod_record(item, metadata, namespace, name)
    raise _BadItem(f"kind {kind!r} of {namespace}/{name} is neither Job nor Pod")


def _job_record(item: Mapping[str, Any], metadata: Mapping[str, Any], namespace: str, name: str) -> JobRecord:
    spec = _mapping(item, "spec")
    status = _mapping(item, "status")
    pod_spec = _mapping(_mapping(spec, "template"), "spec")
    parallelism = _count(spec, "parallelism", default=1)
    completions = spec.get("completions")
    # Fewer pods run at once than parallelism when fewer completions are wanted.
    pods_at_once = min(parallelism, _count(spec, "completions")) if completions is not None else parallelism
    conditions = _true_conditions(status)
    failed = conditions.get("Failed")
    started_at = _timestamp(status, "startTime")
    if failed is not None:
        state = "timeout" if failed.get("reason") == "DeadlineExceeded" else "failed"
    elif "Complete" in conditions:
        state = "completed"
    elif spec.get("suspend") is True or "Suspended" in conditions:
        state = "pending"
    elif _count(status, "active") > 0:
        state = "running"
    elif started_at is None:
        state = "pending"
    elif _count(status, "succeeded") >= (_count(spec, "completions") if completions is not None else 1):
        state = "completed"  # the Complete condition is written a moment after the last success
    else:
        state = "running"  # started, between pods (a retry is being created)
    ended_at = _timestamp(status, "completionTime")
    if ended_at is None and failed is not None:
        ended_at = _timestamp(failed, "lastTransitionTime")
    devices, milli = _pod_gpu_share(pod_spec)
    config = _pod_spec_config(pod_spec)
    config.update(uid=metadata.get("uid", ""), parallelism=parallelism)
    if completions is not None:
        config["completions"] = completions
    return JobRecord(
        source="kubernetes",
        external_id=f"{namespace}/{name}",
        account=namespace,
        user_name=_user(metadata),
        name=name,
        state=state,
        gpu_count=devices * pods_at_once,
        gpu_milli=milli * pods_at_once,
        submitted_at=_submitted_at(metadata),
        started_at=started_at,
        ended_at=ended_at,
        gpu_model=_gpu_model(pod_spec),
        framework=guess_framework(_images(pod_spec)),
        config=config,
    )


def _pod_record(item: Mapping[str, Any], metadata: Mapping[str, Any], namespace: str, name: str) -> JobRecord:
    spec = _mapping(item, "spec")
    status = _mapping(item, "status")
    phase = status.get("phase", "")
    state = POD_PHASES.get(phase) if isinstance(phase, str) else None
    if state is None:
        raise _BadItem(f"status.phase {phase!r} of {namespace}/{name} is not a pod phase")
    reason = status.get("reason")
    if state == "failed" and reason == "DeadlineExceeded":
        state = "timeout"  # activeDeadlineSeconds ran out
    elif state == "failed" and _true_conditions(status).get("DisruptionTarget", {}).get("reason") == (
        "PreemptionByScheduler"
    ):
        state = "preempted"
    terminated = _terminated_states(status)
    ended_at = None
    # A finished pod ends when its last container does; in a running pod a terminated sidecar
    # says nothing about the end or the outcome.
    exit_code = ""
    if state in {"completed", "failed", "timeout", "preempted"}:
        finished = [moment for moment in (_timestamp(t, "finishedAt") for t in terminated) if moment]
        ended_at = max(finished, default=None)
        exit_code = _exit_code(terminated)
    node_name = spec.get("nodeName")
    node_names = (node_name,) if isinstance(node_name, str) and node_name else ()
    devices, milli = _pod_gpu_share(spec)
    config = _pod_spec_config(spec)
    config["uid"] = metadata.get("uid", "")
    owners = [
        f"{owner.get('kind', '')}/{owner.get('name', '')}"
        for owner in _list(metadata, "ownerReferences")
        if isinstance(owner, dict)
    ]
    if owners:
        config["owners"] = owners
    if isinstance(reason, str) and reason:
        config["status_reason"] = reason
    return JobRecord(
        source="kubernetes",
        external_id=f"{namespace}/{name}",
        account=namespace,
        user_name=_user(metadata),
        name=name,
        state=state,
        gpu_count=devices,
        gpu_milli=milli,
        submitted_at=_submitted_at(metadata),
        started_at=_timestamp(status, "startTime"),
        ended_at=ended_at,
        gpu_model=_gpu_model(spec),
        node_count=len(node_names),
        node_names=node_names,
        framework=guess_framework(_images(spec)),
        config=config,
        exit_code=exit_code,
    )


def _pod_spec_config(pod_spec: Mapping[str, Any]) -> dict[str, object]:
    """The config snapshot of a pod template or pod: images, env, mounts, command and args."""
    containers = [c for c in _list(pod_spec, "containers") if isinstance(c, dict)]
    env: dict[str, str] = {}
    env_from: list[str] = []
    mounts: list[str] = []
    described: list[dict[str, object]] = []
    for container in containers:
        for variable in _list(container, "env"):
            # The first container is the main one by convention; a sidecar does not override it.
            if isinstance(variable, dict) and isinstance(variable.get("name"), str):
                env.setdefault(variable["name"], _env_value(variable))
        for source in _list(container, "envFrom"):
            if isinstance(source, dict):
                env_from.extend(
                    f"{ref_kind}:{ref.get('name', '')}"
                    for ref_kind, ref in source.items()
                    if isinstance(ref, dict)
                )
        for mount in _list(container, "volumeMounts"):
            path = mount.get("mountPath") if isinstance(mount, dict) else None
            if isinstance(path, str) and path not in mounts:
                mounts.append(path)
        described.append(
            {
                "name": container.get("name", ""),
                "image": container.get("image", ""),
                "command": _strings(container, "command"),
                "args": _strings(container, "args"),
            }
        )
    config: dict[str, object] = {
        "images": _images(pod_spec),
        "env": env,
        "volume_mounts": mounts,
        "containers": described,
    }
    if cache_modes := _cache_modes(pod_spec, containers):
        config["storage_cache_modes"] = cache_modes
    if env_from:
        config["env_from"] = env_from
    return config_redact(config)


def _cache_modes(pod_spec: Mapping[str, Any], containers: list[dict]) -> dict[str, str]:
    """Mount path → the cache mode its CSI volume declares (``volumeAttributes.cacheMode``, as
    parallel file system CSI drivers take it): what the storage recommendation reads."""
    modes_by_volume = {}
    for volume in _list(pod_spec, "volumes"):
        csi = volume.get("csi") if isinstance(volume, dict) else None
        attributes = csi.get("volumeAttributes") if isinstance(csi, dict) else None
        mode = attributes.get("cacheMode") if isinstance(attributes, dict) else None
        if isinstance(mode, str) and isinstance(volume.get("name"), str):
            modes_by_volume[volume["name"]] = mode[:100]
    modes: dict[str, str] = {}
    for container in containers:
        for mount in _list(container, "volumeMounts"):
            if not isinstance(mount, dict):
                continue
            name, path = mount.get("name"), mount.get("mountPath")
            if name in modes_by_volume and isinstance(path, str):
                modes.setdefault(path, modes_by_volume[name])
    return modes


def _env_value(variable: Mapping[str, Any]) -> str:
    value_from = variable.get("valueFrom")
    if isinstance(value_from, dict) and value_from:
        # Record where the value comes from, never the value: resolving a secret here would
        # copy it into the portal's database.
        return f"<from {next(iter(value_from))}>"
    value = variable.get("value", "")
    return value if isinstance(value, str) else str(value)


# MIG devices under the device plugin's "mixed" strategy: ``nvidia.com/mig-3g.20gb: 2`` asks for two
# instances of 3 compute slices and 20 GB each (NVIDIA/k8s-device-plugin v0.7.0 release notes).
MIG_RESOURCE = re.compile(r"nvidia\.com/mig-(?P<slices>[1-7])g\.(?P<memory>\d+)gb(?:\+me)?")


def mig_share_milli(slices: int, memory_gb: int) -> int:
    """Thousandths of a GPU one MIG instance holds: its compute slices of the GPU's total. A100 and
    H100/H200 have 7 (``1g.10gb`` is 1/7); A30 has 4, and its profiles are the only ones with 6 GB
    per slice (``1g.6gb``, ``2g.12gb``, ``4g.24gb``)."""
    total = 4 if memory_gb == 6 * slices else 7
    return round(1000 * min(slices, total) / total)


def _pod_gpu_share(pod_spec: Mapping[str, Any]) -> tuple[int, int]:
    """(devices, thousandths of GPUs) a pod asks for: whole ``nvidia.com/gpu`` GPUs count 1,000
    each; a MIG instance (mixed strategy) counts as one device holding its share of a GPU."""
    devices = milli = 0
    for container in _list(pod_spec, "containers"):
        resources = _mapping(container, "resources") if isinstance(container, dict) else {}
        # Extended resources must have limits == requests when both are set; a pod may set either.
        for part in ("limits", "requests"):
            asked = _mapping(resources, part)
            found = False
            for name, quantity in asked.items():
                if name == GPU_RESOURCE:
                    count = _gpu_quantity(quantity, part, name)
                    devices, milli, found = devices + count, milli + count * 1000, True
                elif isinstance(name, str) and (mig := MIG_RESOURCE.fullmatch(name)):
                    count = _gpu_quantity(quantity, part, name)
                    share = mig_share_milli(int(mig["slices"]), int(mig["memory"]))
                    devices, milli, found = devices + count, milli + count * share, True
            if found:
                break
    return devices, milli


def _gpu_quantity(quantity: object, part: str, name: str = GPU_RESOURCE) -> int:
    text = str(quantity).strip()
    if not text.isdigit():
        raise _BadItem(f"resources.{part}[{name!r}] {quantity!r} is not a whole number of GPUs")
    return int(text)


def _gpu_model(pod_spec: Mapping[str, Any]) -> str:
    product = _mapping(pod_spec, "nodeSelector").get(GPU_PRODUCT_LABEL, "")
    return product if isinstance(product, str) else ""


def _images(pod_spec: Mapping[str, Any]) -> list[str]:
    return [
        c["image"]
        for c in _list(pod_spec, "containers")
        if isinstance(c, dict) and isinstance(c.get("image"), str)
    ]


def _user(metadata: Mapping[str, Any]) -> str:
    for part in ("labels", "annotations"):
        user = _mapping(metadata, part).get(USER_KEY)
        if isinstance(user, str) and user:
            return user
    return ""


def _submitted_at(metadata: Mapping[str, Any]) -> datetime:
    created = _timestamp(metadata, "creationTimestamp", where="metadata.")
    if created is None:
        raise _BadItem("metadata.creationTimestamp is missing")
    return created


def _true_conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {
        condition["type"]: condition
        for condition in _list(status, "conditions")
        if isinstance(condition, dict) and condition.get("status") == "True" and "type" in condition
    }


def _terminated_states(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    terminated = []
    for container_status in _list(status, "containerStatuses"):
        if isinstance(container_status, dict):
            state = _mapping(_mapping(container_status, "state"), "terminated")
            if state:
                terminated.append(state)
    return terminated


def _exit_code(terminated: Sequence[Mapping[str, Any]]) -> str:
    codes = [state.get("exitCode") for state in terminated if isinstance(state.get("exitCode"), int)]
    # The first failing container explains the failure; all zero means success.
    failing = [code for code in codes if code != 0]
    if failing:
        return str(failing[0])
    return "0" if codes else ""


def _timestamp(container: Mapping[str, Any], key: str, where: str = "") -> datetime | None:
    value = container.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _BadItem(f"{where}{key} {value!r} is not a timestamp")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _BadItem(f"{where}{key} {value!r} is not an RFC 3339 timestamp") from None
    if parsed.tzinfo is None:
        raise _BadItem(f"{where}{key} {value!r} has no time zone")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # year 1 east of UTC, year 9999 west of it
        raise _BadItem(f"{where}{key} {value!r} is out of range in UTC") from None


def _count(container: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = container.get(key, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _BadItem(f"{key} {value!r} is not a count")
    return value


def _mapping(container: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = container.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _BadItem(f"{key} is not an object")
    return value


def _list(container: Mapping[str, Any], key: str) -> list[Any]:
    value = container.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _BadItem(f"{key} is not a list")
    return value


def _strings(container: Mapping[str, Any], key: str) -> list[str]:
    return [str(part) for part in _list(container, key)]


def _identity_excerpt(item: Mapping[str, Any]) -> str:
    # Only kind and identity: the full item may hold literal credentials in its env.
    metadata = item.get("metadata")
    identity = {"kind": item.get("kind")}
    if isinstance(metadata, dict):
        identity.update({key: metadata[key] for key in ("namespace", "name", "uid") if key in metadata})
    return json.dumps(identity)


# --- Node list: kubectl get nodes -o json --------------------------------------------------------

KUBECTL_NODES_COMMAND = ("kubectl", "get", "nodes", "-o", "json")
# Set by NVIDIA GPU feature discovery: physical GPUs, and per-GPU memory in MiB.
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"  # time-slicing: capacity = GPUs x replicas
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
# Labels kept beside the node: GPU feature discovery's, topology and instance type; the rest
# (CPU flags, kernel version) says nothing about GPUs.
_KEPT_LABEL_PREFIXES = (
    "nvidia.com/gpu.",
    "nvidia.com/mig.",
    "topology.kubernetes.io/",
    "node.kubernetes.io/instance-type",
)


def parse_kubernetes_nodes(text: str) -> ParseOutcome[ObservedNode]:
    """Turn ``kubectl get nodes -o json`` (a NodeList, or one Node) into observed nodes.

    The GPU count is GPU feature discovery's ``nvidia.com/gpu.count`` label (physical GPUs),
    else ``status.capacity["nvidia.com/gpu"]`` divided by ``nvidia.com/gpu.replicas`` (with
    time-slicing the device plugin advertises each GPU that many times); the model is
    ``nvidia.com/gpu.product`` without GFD's ``-SHARED`` suffix; ``nvidia.com/gpu.memory`` is
    each GPU's memory in MiB. The state is what ``kubectl get nodes`` shows (``Ready``,
    ``NotReady``, ``Ready,SchedulingDisabled``), with the Ready condition's message as reason
    when not ready. The zone label is the suggested fault domain. Nodes without GPUs are kept
    (a node list names every node), with a GPU count of 0.
    """
    outcome = ParseOutcome[ObservedNode]()
    document = _json_object(text, outcome, "a NodeList")
    if document is None:
        return outcome
    items = document.get("items", [document])
    if not isinstance(items, list):
        outcome.reject("'items' is not a list", text)
        return outcome
    for index, item in enumerate(items):
        where = f"items[{index}]" if "items" in document else "object"
        if not isinstance(item, dict):
            outcome.reject(f"{where} is not a JSON object", json.dumps(item))
            continue
        kind = item.get("kind")
        if kind is not None and kind != "Node":
            # Pods or jobs in the node list's place: their names are no nodes.
            outcome.reject(
                f"{where} is a {excerpt(str(kind), 40)}, not a Node (expected `kubectl get nodes -o json`)",
                _identity_excerpt(item),
            )
            continue
        try:
            outcome.records.append(_node_record(item))
        except _BadItem as error:
            outcome.reject(f"{where}: {error}", _identity_excerpt(item))
    return outcome


def _node_record(item: Mapping[str, Any]) -> ObservedNode:
    metadata = _mapping(item, "metadata")
    status = _mapping(item, "status")
    labels = {str(key): str(value) for key, value in _mapping(metadata, "labels").items()}
    name = metadata.get("name")
    if not isinstance(name, str):
        raise _BadItem("metadata.name is missing")
    count = _label_count(labels, GPU_COUNT_LABEL)
    if count is None:
        advertised = _gpu_quantity(_mapping(status, "capacity").get(GPU_RESOURCE, 0), "status.capacity")
        replicas = _label_count(labels, GPU_REPLICAS_LABEL) or 1
        count = advertised // replicas
    model = labels.get(GPU_PRODUCT_LABEL, "").removesuffix("-SHARED")[:GPU_MODEL_MAX_CHARS]
    memory = _label_count(labels, GPU_MEMORY_LABEL)
    gpus = ()
    if 0 < count <= MAX_GPUS_PER_NODE:
        gpus = tuple(ObservedGpu(index=index, model=model, memory_mib=memory) for index in range(count))
    state, reason = _node_state(item, status)
    return ObservedNode(
        hostname=name,
        gpu_model=model,
        gpu_count=count,
        gpus=gpus,
        state=state,
        reason=reason,
        labels=clip_labels(
            {
                key: value
                for key, value in sorted(labels.items())
                if key.startswith(_KEPT_LABEL_PREFIXES) and not key.startswith("nvidia.com/gpu.deploy.")
            }
        ),
        fault_domain=next((labels[key] for key in ZONE_LABELS if labels.get(key)), ""),
    )


def _label_count(labels: Mapping[str, str], key: str) -> int | None:
    text = labels.get(key, "")
    if not text:
        return None
    if not text.isdigit():
        raise _BadItem(f"label {key} {text!r} is not a whole number")
    return int(text)


def _node_state(item: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[str, str]:
    ready = next(
        (c for c in _list(status, "conditions") if isinstance(c, dict) and c.get("type") == "Ready"), None
    )
    if ready is None:
        state, reason = "Unknown", ""
    elif ready.get("status") == "True":
        state, reason = "Ready", ""
    else:
        state, reason = "NotReady", str(ready.get("message") or ready.get("reason") or "")
    if _mapping(item, "spec").get("unschedulable") is True:
        state += ",SchedulingDisabled"
    return state, reason[:300]
