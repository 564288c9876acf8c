"""The rule catalog: each rule compares what a job (or a node, or a department) shows with the
ideal and, where they differ, returns a finding with its evidence, the change to apply and the
expected gain.

A rule reads a ``JobView`` (config snapshot, the facts its logs establish, its metrics and what the
inventory knows of its nodes) and returns a ``Finding`` or ``None``. Rules are pure: the portal's
service builds the views from the database, ``manage.py audit_logs`` builds them from files.
Findings carry machine values (``observed``, ``ideal``, ``change``: variables, settings, commands,
the same in every language); the sentences around them are rendered in the reader's language by
``efficiency.recommendation_messages``.

Activity is judged by SM activity (or the graphics engine's) where the exporter reports it, never by
GPU_UTIL alone: public traces show GPU_UTIL medians of 97–99% where SM_ACTIVE medians are 33–50%.
The network transport is judged from what carries a multi-node job's data (NCCL's channel lines),
not from bootstrap or plugin-probe lines that every NCCL run prints; a single-node job needs none.

Expected gains are a share of the job's GPU time the change would save: ``1 - 1/speedup`` for a
published speedup, or the measured waste (idle GPU-hours) where the finding measures it.
"""

import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from efficiency.analysis.recommendations.evidence import EvidenceLine

if TYPE_CHECKING:
    from efficiency.analysis.recommendations.logfacts import LogFacts

HIGH, MEDIUM, LOW = "high", "medium", "low"
CONFIDENCE_ORDER = {HIGH: 3, MEDIUM: 2, LOW: 1}

# Subjects a recommendation is about.
JOB_FAMILY, USER, DEPARTMENT, NODE = "job_family", "user", "department", "node"

# NCCL variables that are debugging or tuning overrides: NCCL's documentation says ALGO and PROTO
# "should not be set" outside debugging; TRACE logging and blocking waits slow every collective.
DEBUG_OVERRIDES = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_BLOCKING_WAIT", "TORCH_NCCL_BLOCKING_WAIT")
# GPUs with tensor cores (Volta and later): fp32 training leaves them unused.
TENSOR_CORE_MODELS = re.compile(r"V100|T4|A\d{1,3}|A800|H\d{2,3}|H800|H20|L4|L40|B\d{2,3}|GB\d{3}|RTX", re.I)


@dataclass(frozen=True, slots=True)
class Settings:
    """Thresholds a deployment may tune (settings.PORTAL_RECOMMENDATIONS)."""

    idle_activity_pct: float = 1.0  # an hour at or below this activity is "near 0%"
    idle_warn_min: float = 60.0  # Princeton's Job Defense Shield: first warning
    idle_final_warn_min: float = 105.0  # second warning
    idle_release_min: float = 120.0  # propose releasing the GPUs
    low_efficiency_pct: float = 25.0  # below this activity over the window …
    low_efficiency_min_gpu_h: float = 50.0  # … for a family that held at least this much
    starved_activity_pct: float = 35.0  # SM activity below this: the GPU waits on something
    overrequest_ratio: float = 0.5  # GPUs used / held below this
    checkpoint_ratio: float = 2.0  # observed / optimal interval above this (or below its inverse)
    min_gpu_h: float = 1.0  # a job family below this per window is not worth a recommendation
    min_gain_pct: float = 2.0  # a change that saves less than this share is not proposed
    accelerated_images: tuple[str, ...] = ("registry.internal/ai-platform/accel-train",)
    stock_images: tuple[str, ...] = (
        "pytorch/pytorch",
        "docker.io/pytorch/pytorch",
        "huggingface/transformers-pytorch-gpu",
    )


@dataclass(frozen=True, slots=True)
class JobMetrics:
    """A job's metric window from the rollups: GPU-hours held and how busy they were."""

    start: datetime | None
    end: datetime | None
    allocated_gpu_h: float
    busy_gpu_h: float  # activity (GR_ENGINE_ACTIVE, else GPU_UTIL) integrated over time
    sm_busy_gpu_h: float | None  # SM activity integrated; None where the exporter has none
    idle_minutes: float = 0.0  # the longest stretch held near 0% activity
    idle_until: datetime | None = None  # when that stretch ended (None: still going on)
    gpus_active: int | None = None  # GPUs with activity above the idle line over the window
    # The job shared its nodes with other jobs: its activity is its share of the nodes' activity,
    # an estimate (busier neighbours lift it), not a measurement of its own GPUs.
    shared: bool = False

    @property
    def activity(self) -> float | None:
        """SM activity where known (it is the truer measure), else engine activity; 0–1."""
        if self.allocated_gpu_h <= 0:
            return None
        busy = self.sm_busy_gpu_h if self.sm_busy_gpu_h is not None else self.busy_gpu_h
        return min(1.0, busy / self.allocated_gpu_h)


@dataclass(frozen=True, slots=True)
class JobView:
    """Everything the rules read about one job."""

    key: str
    name: str = ""
    user: str = ""
    department: str = ""
    gpu_count: int = 0
    node_count: int = 0
    gpu_model: str = ""
    rdma: bool | None = None  # every node of the job RDMA-capable (None: not known)
    config: Mapping = field(default_factory=dict)
    framework: str = ""
    log: "LogFacts | None" = None
    metrics: JobMetrics | None = None
    checkpoint_mtbf_h: float | None = None  # measured mean time between failures for its size

    # The config's environment as text, read once (the rules look at it many times).
    env: Mapping[str, str] = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.env is None:
            env = self.config.get("env") or {}
            normal = {str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else {}
            object.__setattr__(self, "env", normal)

    @property
    def launcher_args(self) -> list[str]:
        """The command line: Slurm's and the simulator's ``launcher_args``, or the main
        container's command and args (Kubernetes)."""
        args = self.config.get("launcher_args")
        if not args:
            containers = self.config.get("containers") or []
            main = containers[0] if containers and isinstance(containers[0], Mapping) else {}
            args = [*(main.get("command") or []), *(main.get("args") or [])]
        return [str(a) for a in args] if isinstance(args, list | tuple) else []

    @property
    def image(self) -> str:
        image = self.config.get("image")
        if not image:
            images = self.config.get("images") or []
            image = images[0] if isinstance(images, list | tuple) and images else ""
        return str(image or "")

    @property
    def storage_cache_mode(self) -> str:
        """The dataset cache mode: one value, or the worst of the mounts' (Kubernetes volumes)."""
        mode = self.config.get("storage_cache_mode")
        if not mode:
            modes = self.config.get("storage_cache_modes") or {}
            values = [str(v).lower() for v in modes.values()] if isinstance(modes, Mapping) else []
            mode = next((v for v in values if v.startswith("metadata")), values[0] if values else "")
        return str(mode or "").strip().lower()

    def env_value(self, name: str) -> tuple[str, str | EvidenceLine] | None:
        """The value of an NCCL / torch variable and where it was seen: the config snapshot first,
        else the line where NCCL reported it as set by the environment."""
        if name in self.env:
            return self.env[name], "config"
        if self.log is not None and name in self.log.nccl_env:
            value, line = self.log.nccl_env[name]
            return value, line
        return None

    @property
    def multi_node(self) -> bool | None:
        if self.log is not None:
            if self.log.net_socket or self.log.net_ib:
                return True
            if self.log.n_nodes is not None:
                return self.log.n_nodes > 1
        if self.node_count:
            return self.node_count > 1
        return None


@dataclass(frozen=True, slots=True)
class Finding:
    """What a rule found on one subject."""

    rule: str
    observed: str  # the observed value: settings, transports, measured figures
    ideal: str
    change: str  # the concrete change: variables to set, a setting, a command
    gain_share: float  # share of the subject's GPU time the change saves (0–1)
    confidence: str
    evidence: tuple[EvidenceLine, ...] = ()
    config: tuple[tuple[str, str, str], ...] = ()  # (setting, observed value, ideal value)
    params: Mapping = field(default_factory=dict)  # figures the sentences quote
    gain_gpu_h: float | None = None  # measured waste in the window, where the rule measures it

    def fingerprint(self) -> str:
        """What identifies the condition: a rejected recommendation comes back only when this
        changes (the evidence changed materially), not when the same lines are seen again."""
        parts = [self.rule, self.observed, *(f"{k}={v}" for k, v, _ in self.config)]
        return "|".join(parts)


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    area: str
    subject: str
    reads: tuple[str, ...]  # what the rule reads: config, logs, metrics, inventory, faults
    speedup: float | None  # the published speedup its expected gain comes from (None: measured)
    check: Callable[..., Finding | None]
    # Whether the job shows enough to judge (a single-node job says nothing about the network, a
    # job without metrics nothing about activity): the family's latest job the rule can judge
    # decides whether its recommendation still holds.
    judges: Callable[..., bool] = lambda job, settings: True
    # Where the cause is a setting, whether a job still has it (the rule's metric gate aside):
    # None means the rule's own finding decides.
    cause: Callable[..., bool] | None = None


def _gain(speedup: float) -> float:
    return 1.0 - 1.0 / speedup


def _first(lines: Iterable[EvidenceLine], limit: int = 3) -> tuple[EvidenceLine, ...]:
    return tuple(list(lines)[:limit])


def _env_evidence(job: JobView, names: Sequence[str]) -> tuple[list, list[EvidenceLine]]:
    """(setting, value, where) rows and the log lines among them, for variables that are set."""
    rows, lines = [], []
    for name in names:
        found = job.env_value(name)
        if found is None:
            continue
        value, where = found
        rows.append((name, value))
        if isinstance(where, EvidenceLine):
            lines.append(where)
    return rows, lines


# --- Network ---------------------------------------------------------------------------------


def nccl_socket_on_rdma(job: JobView, settings: Settings) -> Finding | None:
    """A multi-node job whose NCCL traffic goes over TCP sockets on RDMA-capable nodes."""
    if job.multi_node is not True:
        return None
    log = job.log
    ib_disabled = job.env_value("NCCL_IB_DISABLE")
    net_socket = job.env_value("NCCL_NET")
    forced = (ib_disabled is not None and ib_disabled[0].strip().rstrip(".") == "1") or (
        net_socket is not None and net_socket[0].strip().lower() == "socket"
    )
    transport = log.transport if log is not None else None
    channels_socket = transport == "socket"
    rdma = job.rdma
    if rdma is None and log is not None and log.ib_devices is not None:
        rdma = True  # NCCL found IB devices on the node
    if rdma is False:
        return None
    if transport in ("ib", "mixed", "other"):
        return None  # data goes over IB (or another fabric), whatever a probe line said
    if not channels_socket and not forced:
        return None
    rows, env_lines = _env_evidence(job, ("NCCL_IB_DISABLE", "NCCL_NET", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"))
    evidence = list(_first(log.net_socket if log else ()))
    if log is not None and log.ib_no_device is not None:
        evidence.append(log.ib_no_device)
    evidence.extend(env_lines)
    confidence = HIGH if channels_socket and rdma else MEDIUM
    observed = "channels via NET/Socket" if channels_socket else "; ".join(f"{k}={v}" for k, v in rows[:2])
    config = [(k, v, "unset" if k in ("NCCL_IB_DISABLE", "NCCL_NET") else v) for k, v in rows]
    if "NCCL_IB_HCA" not in dict(rows):
        config.append(("NCCL_IB_HCA", "unset", "the node's HCAs, e.g. mlx5_0,mlx5_1"))
    return Finding(
        rule="network.nccl-socket-on-rdma",
        observed=observed,
        ideal="channels via NET/IB/…/GDRDMA",
        change="unset NCCL_IB_DISABLE NCCL_NET; export NCCL_IB_HCA=<mlx5 devices> NCCL_NET_GDR_LEVEL=PHB",
        gain_share=_gain(2.0),
        confidence=confidence,
        evidence=tuple(evidence),
        config=tuple(config),
        params={"rdma_known": rdma is True},
    )


def gdrdma_off(job: JobView, settings: Settings) -> Finding | None:
    """InfiniBand carries the data but not by GPUDirect RDMA: every message is staged in host
    memory."""
    log = job.log
    if log is None or log.transport != "ib" or log.gdrdma or job.multi_node is not True:
        return None
    rows, env_lines = _env_evidence(job, ("NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ"))
    config = tuple((k, v, "PHB" if k == "NCCL_NET_GDR_LEVEL" else "1") for k, v in rows)
    return Finding(
        rule="network.gdrdma-off",
        observed="channels via NET/IB, no GDRDMA",
        ideal="channels via NET/IB/…/GDRDMA",
        change="modprobe nvidia-peermem; export NCCL_NET_GDR_LEVEL=PHB",
        gain_share=_gain(1.1),
        evidence=_first(log.net_ib) + ((log.gdr_disabled,) if log.gdr_disabled else ()) + tuple(env_lines),
        config=config,
        confidence=HIGH if log.gdr_disabled is not None else MEDIUM,
    )


def p2p_disabled(job: JobView, settings: Settings) -> Finding | None:
    """NVLink / PCIe peer-to-peer switched off: intra-node traffic goes through host memory."""
    if job.gpu_count and job.gpu_count < 2:
        return None
    rows, env_lines = _env_evidence(job, ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"))
    values = dict(rows)
    disabled = values.get("NCCL_P2P_DISABLE", "").strip() == "1"
    local_only = values.get("NCCL_P2P_LEVEL", "").strip().upper() in ("LOC", "0")
    if not (disabled or local_only):
        return None
    evidence = list(env_lines)
    if job.log is not None:
        evidence.extend(_first(job.log.shm, 2))
    config = tuple((k, v, "unset") for k, v in rows if k in values)
    return Finding(
        rule="network.p2p-disabled",
        observed="; ".join(f"{k}={v}" for k, v in rows),
        ideal="P2P via NVLink / PCIe (default)",
        change="unset NCCL_P2P_DISABLE NCCL_P2P_LEVEL",
        gain_share=_gain(1.2),
        confidence=HIGH if job.log is not None and job.log.shm else MEDIUM,
        evidence=tuple(evidence),
        config=config,
    )


def nccl_debug_overrides(job: JobView, settings: Settings) -> Finding | None:
    """Debugging overrides left on in production."""
    rows, env_lines = _env_evidence(job, (*DEBUG_OVERRIDES, "NCCL_DEBUG"))
    rows = [
        (k, v)
        for k, v in rows
        if k != "NCCL_DEBUG" or v.strip().upper() == "TRACE"
        if k not in ("NCCL_BLOCKING_WAIT", "TORCH_NCCL_BLOCKING_WAIT") or v.strip() == "1"
    ]
    if not rows:
        return None
    names = {k for k, _ in rows}
    lines = [line for line in env_lines if any(name in line.text for name in names)]
    return Finding(
        rule="network.nccl-debug-overrides",
        observed="; ".join(f"{k}={v}" for k, v in rows),
        ideal="unset; NCCL_DEBUG=WARN or INFO",
        change="unset " + " ".join(sorted(names)),
        gain_share=_gain(1.05),
        confidence=HIGH,
        evidence=tuple(lines),
        config=tuple((k, v, "unset") for k, v in rows),
    )


# --- Storage and input -----------------------------------------------------------------------


def _starved(job: JobView, settings: Settings) -> float | None:
    """The job's activity when it is below the starved line (its GPUs wait on something)."""
    metrics = job.metrics
    if metrics is None or metrics.activity is None or metrics.allocated_gpu_h < settings.min_gpu_h:
        return None
    if metrics.shared:
        return None  # its share of busier neighbours' activity says nothing of its own input
    activity = metrics.activity
    return activity if activity * 100 < settings.starved_activity_pct else None


def storage_cache_metadata_only(job: JobView, settings: Settings) -> Finding | None:
    """Dataset read through a parallel file system cache in metadata-only mode (or never warmed)
    while the GPUs wait on input.

    A job that had its nodes to itself must show it (activity below the starved line); for a job
    that shared its nodes the activity is only an estimate that busier neighbours lift, so the
    setting alone is reported, with low confidence.
    """
    mode = job.storage_cache_mode
    if mode not in ("metadata-only", "metadata_only", "metadata", "cold", "not-warmed"):
        return None
    metrics = job.metrics
    if metrics is None or metrics.activity is None or metrics.allocated_gpu_h < settings.min_gpu_h:
        return None
    activity = metrics.activity
    line = settings.starved_activity_pct / 100
    if activity >= line and not metrics.shared:
        return None
    wait_share = max(0.0, 1.0 - activity / line)
    return Finding(
        rule="storage.cache-metadata-only",
        observed=f"storage_cache_mode={mode}; activity {activity * 100:.0f}%"
        + (" (shared nodes: estimate)" if metrics.shared else ""),
        ideal=f"storage_cache_mode=full-data; activity ≥ {settings.starved_activity_pct:.0f}%",
        change="storage_cache_mode=full-data",
        gain_share=max(0.0, min(0.95, wait_share * _gain(40.0))),
        confidence=LOW if metrics.shared else HIGH,
        config=(("storage_cache_mode", mode, "full-data"),),
        params={"activity_pct": round(activity * 100, 1), "shared": metrics.shared},
    )


def _launcher_value(args: Sequence[str], names: Sequence[str]) -> str | None:
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def input_pipeline_starved(job: JobView, settings: Settings) -> Finding | None:
    """Low SM activity with a data loader that runs in the training process (num_workers=0) or
    copies from pageable memory (no pin_memory)."""
    if job.storage_cache_mode.startswith("metadata"):
        return None  # the storage rule explains it
    activity = _starved(job, settings)
    if activity is None:
        return None
    rows, evidence = [], []
    workers = _launcher_value(
        job.launcher_args, ("--num-workers", "--num_workers", "--dataloader_num_workers")
    )
    if workers is None and job.log is not None and job.log.num_workers is not None:
        workers, line = str(job.log.num_workers[0]), job.log.num_workers[1]
        evidence.append(line)
    if workers is not None and workers.strip() == "0":
        rows.append(("num_workers", "0", "≥ 4 (a few per GPU)"))
    if job.log is not None and job.log.pin_memory is not None and job.log.pin_memory[0] is False:
        rows.append(("pin_memory", "False", "True"))
        evidence.append(job.log.pin_memory[1])
    if not rows:
        return None
    return Finding(
        rule="input.pipeline-starved",
        observed="; ".join(f"{k}={v}" for k, v, _ in rows) + f"; activity {activity * 100:.0f}%",
        ideal="num_workers ≥ 4, pin_memory=True",
        change="DataLoader(num_workers=8, pin_memory=True, persistent_workers=True)",
        gain_share=max(0.0, min(0.9, (1.0 - activity / (settings.starved_activity_pct / 100)) * 0.5)),
        confidence=MEDIUM,
        evidence=tuple(evidence),
        config=tuple(rows),
        params={"activity_pct": round(activity * 100, 1)},
    )


# --- Precision and kernels -------------------------------------------------------------------


def fp32_on_tensor_cores(job: JobView, settings: Settings) -> Finding | None:
    """fp32 training on GPUs with tensor cores."""
    if not job.gpu_model or not TENSOR_CORE_MODELS.search(job.gpu_model):
        return None
    args = job.launcher_args
    if any(
        a in ("--bf16", "--fp16", "--amp", "--fp8")
        or a.startswith(("--bf16=", "--fp16=", "--mixed_precision=b", "--mixed_precision=f"))
        for a in args
    ):
        return None
    if job.log is None or job.log.precision is None or job.log.precision[0] != "fp32":
        return None
    return Finding(
        rule="precision.fp32-on-tensor-cores",
        observed=f"fp32 on {job.gpu_model}",
        ideal="bf16 mixed precision",
        change="--bf16 (Megatron) · bf16=True (Trainer) · torch.autocast('cuda', dtype=torch.bfloat16)",
        gain_share=_gain(2.0),
        confidence=HIGH,
        evidence=(job.log.precision[1],),
        config=(("precision", "fp32", "bf16"),),
    )


def _image_matches(image: str, prefixes: Sequence[str]) -> bool:
    """Whether an image reference is one of these repositories (any tag or digest)."""
    name = image.strip().lower()
    for prefix in (p.strip().lower().rstrip("/") for p in prefixes):
        if prefix and (name == prefix or name.startswith((prefix + ":", prefix + "@", prefix + "/"))):
            return True
    return False


def stock_framework(job: JobView, settings: Settings) -> Finding | None:
    """A stock framework image where the acceleration library ships an optimized version."""
    if job.framework == "accelerated" or not job.image:
        return None
    if _image_matches(job.image, settings.accelerated_images):
        return None
    stock_image = _image_matches(job.image, settings.stock_images)
    if not stock_image and job.framework != "pytorch":
        return None
    if "jupyter" in " ".join(job.launcher_args):
        return None  # an interactive session: nothing to train faster
    ideal = settings.accelerated_images[0] if settings.accelerated_images else "accelerated image"
    return Finding(
        rule="kernels.stock-framework",
        observed=job.image,
        ideal=ideal,
        change=f"image: {ideal}",
        gain_share=_gain(2.0),
        confidence=HIGH if stock_image else MEDIUM,
        config=(("image", job.image, ideal),),
    )


# --- Allocation --------------------------------------------------------------------------------


def idle_held(job: JobView, settings: Settings) -> Finding | None:
    """GPUs held at near 0% for long: warn at 60 and 105 minutes, propose release at 120."""
    metrics = job.metrics
    if metrics is None or metrics.idle_minutes < settings.idle_warn_min:
        return None
    minutes = metrics.idle_minutes
    if minutes >= settings.idle_release_min:
        level, confidence = "release", HIGH
    elif minutes >= settings.idle_final_warn_min:
        level, confidence = "final-warning", MEDIUM
    else:
        level, confidence = "warning", LOW
    gpus = max(job.gpu_count, 1)
    wasted = gpus * minutes / 60
    share = min(1.0, wasted / metrics.allocated_gpu_h) if metrics.allocated_gpu_h > 0 else 0.0
    return Finding(
        rule="allocation.idle-held",
        observed=f"{minutes:.0f} min ≤ {settings.idle_activity_pct:g}%, {gpus} GPU",
        ideal=f"≤ {settings.idle_release_min:.0f} min",
        change=f"scancel {job.key}",
        gain_share=share,
        confidence=confidence,
        params={"minutes": round(minutes), "level": level, "gpus": gpus},
        gain_gpu_h=wasted,
    )


def overrequested(job: JobView, settings: Settings) -> Finding | None:
    """GPUs requested far above the GPUs used."""
    metrics = job.metrics
    if metrics is None or metrics.gpus_active is None or job.gpu_count < 2:
        return None
    if metrics.allocated_gpu_h < settings.min_gpu_h:
        return None
    if metrics.gpus_active / job.gpu_count >= settings.overrequest_ratio:
        return None
    unused = job.gpu_count - metrics.gpus_active
    return Finding(
        rule="allocation.overrequested",
        observed=f"{metrics.gpus_active} of {job.gpu_count} GPUs active",
        ideal=f"{max(metrics.gpus_active, 1)} GPU",
        change=f"--gres=gpu:{max(metrics.gpus_active, 1)}",
        gain_share=unused / job.gpu_count,
        confidence=HIGH,
        config=(("GPUs", str(job.gpu_count), str(max(metrics.gpus_active, 1))),),
        gain_gpu_h=metrics.allocated_gpu_h * unused / job.gpu_count,
    )


def _multi_node(job: JobView, settings: Settings) -> bool:
    return job.multi_node is True


def _multi_gpu(job: JobView, settings: Settings) -> bool:
    return job.gpu_count != 1


def _measured(job: JobView, settings: Settings) -> bool:
    return job.metrics is not None and job.metrics.allocated_gpu_h >= settings.min_gpu_h


def _cache_mode_known(job: JobView, settings: Settings) -> bool:
    return bool(job.storage_cache_mode)


def _metadata_only(job: JobView, settings: Settings) -> bool:
    """The storage rule holds while the family's runs keep the cache mode: a run that happens to
    be busier does not close it, a run with full-data caching does."""
    return job.storage_cache_mode.startswith(("metadata", "cold", "not-warmed"))


def _precision_known(job: JobView, settings: Settings) -> bool:
    return job.log is not None and job.log.precision is not None


def _has_image(job: JobView, settings: Settings) -> bool:
    return bool(job.image)


def _has_metrics(job: JobView, settings: Settings) -> bool:
    return job.metrics is not None


JOB_RULES: tuple[Rule, ...] = (
    # id, area, subject, what it reads, the published speedup its gain comes from (None: measured).
    # Titles, plain-language explanations and sources: efficiency.recommendation_messages.
    Rule(
        "network.nccl-socket-on-rdma",
        "network",
        JOB_FAMILY,
        ("config", "logs", "inventory"),
        2.0,
        nccl_socket_on_rdma,
        _multi_node,
    ),
    Rule("network.gdrdma-off", "network", JOB_FAMILY, ("logs", "config"), 1.1, gdrdma_off, _multi_node),
    Rule("network.p2p-disabled", "network", JOB_FAMILY, ("config", "logs"), 1.2, p2p_disabled, _multi_gpu),
    Rule(
        "network.nccl-debug-overrides", "network", JOB_FAMILY, ("config", "logs"), 1.05, nccl_debug_overrides
    ),
    Rule(
        "storage.cache-metadata-only",
        "storage",
        JOB_FAMILY,
        ("config", "metrics"),
        40.0,
        storage_cache_metadata_only,
        _cache_mode_known,
        _metadata_only,
    ),
    Rule(
        "input.pipeline-starved",
        "input",
        JOB_FAMILY,
        ("config", "logs", "metrics"),
        None,
        input_pipeline_starved,
        _measured,
    ),
    Rule(
        "precision.fp32-on-tensor-cores",
        "precision",
        JOB_FAMILY,
        ("logs", "config", "inventory"),
        2.0,
        fp32_on_tensor_cores,
        _precision_known,
    ),
    Rule("kernels.stock-framework", "kernels", JOB_FAMILY, ("config",), 2.0, stock_framework, _has_image),
    Rule("allocation.idle-held", "allocation", JOB_FAMILY, ("metrics",), None, idle_held, _has_metrics),
    Rule(
        "allocation.overrequested", "allocation", JOB_FAMILY, ("metrics",), None, overrequested, _has_metrics
    ),
)


# --- Rules over many jobs ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FamilyWindow:
    """A job family's metrics over the window (days)."""

    days: float
    allocated_gpu_h: float
    busy_gpu_h: float
    sm_busy_gpu_h: float | None

    @property
    def activity(self) -> float | None:
        """Engine activity (GR_ENGINE_ACTIVE, else GPU_UTIL): the portal's utilization, which is
        what "efficiency" means to Job Defense Shield; SM activity would call most healthy
        fine-tuning inefficient (public traces: SM_ACTIVE medians of 33–50%)."""
        if self.allocated_gpu_h <= 0:
            return None
        return min(1.0, self.busy_gpu_h / self.allocated_gpu_h)


def low_efficiency(window: FamilyWindow, settings: Settings) -> Finding | None:
    """Low efficiency over days: below 25% over the window for a family above 50 GPU-hours."""
    activity = window.activity
    if activity is None or window.allocated_gpu_h < settings.low_efficiency_min_gpu_h:
        return None
    if activity * 100 >= settings.low_efficiency_pct:
        return None
    target = settings.low_efficiency_pct / 100
    return Finding(
        rule="allocation.low-efficiency",
        observed=f"activity {activity * 100:.0f}%, {window.days:g} days, {window.allocated_gpu_h:.0f} GPU-h",
        ideal=f"activity ≥ {settings.low_efficiency_pct:.0f}%",
        change="",
        gain_share=1.0 - activity / target,
        confidence=MEDIUM,
        params={"activity_pct": round(activity * 100, 1), "days": window.days},
        gain_gpu_h=window.allocated_gpu_h * (1.0 - activity / target),
    )


def young_daly_interval_s(mtbf_s: float, checkpoint_cost_s: float) -> float:
    """The checkpoint interval that minimises lost time: √(2 · MTBF · C) (Young 1974, Daly 2006)."""
    return math.sqrt(2.0 * mtbf_s * checkpoint_cost_s)


def checkpoint_waste(interval_s: float, mtbf_s: float, checkpoint_cost_s: float) -> float:
    """Share of time lost to checkpoints and to re-done work at a given interval (first order):
    C/T for writing, T/(2·MTBF) for the half interval lost on average per failure."""
    return checkpoint_cost_s / interval_s + interval_s / (2.0 * mtbf_s)


def checkpoint_interval(job: JobView, settings: Settings) -> Finding | None:
    """Checkpoint interval far from the Young/Daly optimum for the failure rate of its size."""
    log, mtbf_h = job.log, job.checkpoint_mtbf_h
    if log is None or mtbf_h is None or mtbf_h <= 0 or log.checkpoint_cost_s is None:
        return None
    times = sorted(t for t, _ in log.checkpoint_saves if t is not None)
    if len(times) < 3 or log.checkpoint_cost_s <= 0:
        return None
    gaps = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
    if not gaps:
        return None
    interval = gaps[len(gaps) // 2]
    mtbf_s, cost = mtbf_h * 3600, log.checkpoint_cost_s
    optimum = young_daly_interval_s(mtbf_s, cost)
    ratio = interval / optimum
    if 1 / settings.checkpoint_ratio <= ratio <= settings.checkpoint_ratio:
        return None
    share = checkpoint_waste(interval, mtbf_s, cost) - checkpoint_waste(optimum, mtbf_s, cost)
    return Finding(
        rule="reliability.checkpoint-interval",
        observed=f"{interval / 60:.0f} min (save {cost:.0f} s)",
        ideal=f"{optimum / 60:.0f} min (MTBF {mtbf_h:.0f} h)",
        change=f"--save-interval ≈ {optimum / 60:.0f} min",
        gain_share=max(0.0, min(1.0, share)),
        confidence=MEDIUM,
        evidence=_first((line for _, line in log.checkpoint_saves), 2),
        config=(("checkpoint interval (min)", f"{interval / 60:.0f}", f"{optimum / 60:.0f}"),),
        params={"ratio": round(ratio, 2), "mtbf_h": mtbf_h},
    )


# Every rule id, job rules first; ids are stable (stored on recommendations, used in URLs and filters).
ALL_RULE_IDS = (
    *(rule.id for rule in JOB_RULES),
    "allocation.low-efficiency",
    "reliability.checkpoint-interval",
    "capacity.idle-node",
    "capacity.hot-node",
    "capacity.guarantee-mismatch",
)


def judged_rules(job: JobView, settings: Settings | None = None) -> dict[str, bool | None]:
    """The job rules that can judge this job (see ``Rule.judges``), each with whether the job has
    the rule's cause where the rule names one (else None: the finding decides)."""
    settings = settings or Settings()
    judged = {
        rule.id: (rule.cause(job, settings) if rule.cause is not None else None)
        for rule in JOB_RULES
        if rule.judges(job, settings)
    }
    if _checkpoints_timed(job):
        judged["reliability.checkpoint-interval"] = None
    return judged


def _checkpoints_timed(job: JobView) -> bool:
    """Enough timed saves and a measured failure rate to judge the checkpoint interval."""
    log = job.log
    if log is None or job.checkpoint_mtbf_h is None or log.checkpoint_cost_s is None:
        return False
    return sum(1 for moment, _ in log.checkpoint_saves if moment is not None) >= 3


def audit_job(job: JobView, settings: Settings | None = None) -> list[Finding]:
    """Every job rule's finding for one job (the checkpoint rule too when its MTBF is known)."""
    settings = settings or Settings()
    findings = [finding for rule in JOB_RULES if (finding := rule.check(job, settings)) is not None]
    if (finding := checkpoint_interval(job, settings)) is not None:
        findings.append(finding)
    return findings


# --- Capacity --------------------------------------------------------------------------------


def node_class_finding(
    *, hostname: str, node_class: str, gpu_count: int, util_pct: float | None, cycle_days: float
) -> Finding | None:
    """Idle nodes (below the idle line most hours) give capacity back; hot nodes queue work."""
    if node_class == "idle":
        gpu_h = gpu_count * 24 * cycle_days
        return Finding(
            rule="capacity.idle-node",
            observed=f"{hostname}: idle, {util_pct or 0:.0f}% over {cycle_days:g} days",
            ideal="shared pool",
            change="",
            gain_share=1.0,
            confidence=MEDIUM,
            gain_gpu_h=gpu_h,
            params={"node_class": node_class},
        )
    if node_class == "hot":
        return Finding(
            rule="capacity.hot-node",
            observed=f"{hostname}: hot, {util_pct or 0:.0f}% over {cycle_days:g} days",
            ideal="",
            change="",
            gain_share=0.0,
            confidence=LOW,
            params={"node_class": node_class},
        )
    return None


def guarantee_finding(
    *, department: str, guaranteed_gpus: float, demand_p90_gpus: float, proposed_gpus: float | None
) -> Finding | None:
    """A guarantee far above (or below) demand: the quota proposal has the numbers."""
    if guaranteed_gpus <= 0 and demand_p90_gpus <= 0:
        return None
    high = guaranteed_gpus >= 2 * max(demand_p90_gpus, 1)
    low = demand_p90_gpus >= 2 * max(guaranteed_gpus, 1)
    if not (high or low):
        return None
    unused = max(0.0, guaranteed_gpus - demand_p90_gpus)
    return Finding(
        rule="capacity.guarantee-mismatch",
        observed=f"guaranteed {guaranteed_gpus:g} GPUs, demand p90 {demand_p90_gpus:g}",
        ideal=f"{proposed_gpus:g} GPUs" if proposed_gpus is not None else "",
        change="",
        gain_share=unused / guaranteed_gpus if guaranteed_gpus else 0.0,
        confidence=MEDIUM,
        params={"direction": "above" if high else "below"},
        gain_gpu_h=unused * 24 * 7,
    )
