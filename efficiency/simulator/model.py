"""The cluster simulator's core: node classes, job stream, scheduler, faults and per-GPU values.

Everything is derived from the seed, so the same seed and start give the same cluster:

- **Node classes** (the reference scenario): departments are laid out in a seeded order and the
  classes hot → fluctuating → steady → idle are painted over their nodes in that order, with
  counts from the designed shares. Demand therefore follows departments: the first ones are short
  of GPUs (hot, with a queue), the last ones hardly use theirs (idle). Each (department, class,
  GPU model) group of nodes is a *pool*, scheduled on its own like a fixed partition.
- **Jobs** arrive per pool as a Poisson stream whose rate is set so the pool sees the load its
  class is designed for; sizes, runtimes and final states come from the calibration tables.
  A FIFO scheduler with backfill places them (single-node jobs best fit, multi-node jobs on whole
  nodes). Users behave as real ones do when the queue is long: fewer of them submit, and each
  job is cancelled if it waits longer than its user's patience (calibrated on the share of jobs
  cancelled before they start in Alibaba's trace), so queues stay within a few pools' worth.
- **Time is simulated in fixed epochs** (6 h). Arrivals and faults of an epoch are drawn from
  an RNG seeded by (seed, pool or "faults", epoch), and epochs are always simulated in order from
  the beginning, so asking for any time gives the same history whatever was asked before.
- **Job families** (one user's runs of one name pattern, digits as ``*``) train the same model:
  their speed and the slowdown of their misconfiguration are the family's, within ±2% a run.
  ``fix_family`` (or ``fixes=`` at construction) fixes a family's misconfiguration from a time
  on: runs submitted after it are healthy, whenever the simulator learns of it.
- **Per-GPU samples** at time t are a function of the job holding the GPU (found by bisection in
  per-GPU allocation lists) and of a hash of (seed, hostname, gpu, minute): no shared RNG.

Times are UTC seconds (floats) inside; public methods take and return aware datetimes.
"""

import copy
import hashlib
import math
import random
import re
from bisect import bisect_right, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from functools import cache
from heapq import heappop, heappush
from pathlib import Path
from typing import Any

from efficiency.collectors.records import JobRecord
from efficiency.simulator.calibration import Calibration, calibration
from efficiency.simulator.scenario import NodeSpec, gpu_uuid

# Every event time is a whole second (as Slurm and syslog print them), so datetimes round-trip.
EPOCH_S = 6 * 3600
WARMUP_S = 3 * 86_400  # simulated before ``start`` so the cluster is already in its steady state
BUCKET_S = 60  # per-GPU samples change once a minute
HOUR_S = 3600
TIME_LIMIT_S = 7 * 86_400  # partition MaxTime: longer jobs end in TIMEOUT
REPAIR_S = (1 * HOUR_S, 6 * HOUR_S)  # drained node back after a hardware fault
RESUBMIT_DELAY_S = (1 * HOUR_S, 5 * HOUR_S)  # manual recovery today: MTTR around 3 h (DESIGN.md)
# Once the portal requests restarts (detect + locate within a minute, the restart actuator
# requeues the job from its last checkpoint), a faulted job runs again within minutes.
AUTOMATED_RESUBMIT_DELAY_S = (5 * 60.0, 15 * 60.0)
# Users give up on a job that waits too long: each job's patience is its planned run time times
# this ratio, times a draw from the shape of Alibaba's 2023 trace (how long its pods that were
# deleted before being scheduled had waited, as a multiple of their median). The ratio is fitted
# so that the reference scenario cancels about the trace's share of jobs before they start
# (11.0%; data/README.md). At least a minute: a user who retracts a job at once still needs one.
PATIENCE_RUNTIME_RATIO = 0.85
MIN_PATIENCE_S = 60.0
RESERVE_AFTER_S = 1800.0  # a job waiting this long gets a reservation (EASY backfill)
RESERVATION_TTL_S = 600.0
OOM_RAMP_S = 600  # FB_USED climbs this long before a CUDA OOM
LOOKAHEAD_S = OOM_RAMP_S + 60
NCCL_TIMEOUT_MS = 600_000
XID_WINDOW_MS = 300_000  # dcgm-exporter's default --xid-count-window-size (5 minutes)

NODE_CLASSES = ("idle", "hot", "fluctuating", "steady")
DESIGNED_SHARES = {"idle": 0.20, "hot": 0.20, "fluctuating": 0.30, "steady": 0.30}
# Painted over the seeded department order from the busiest class to the emptiest.
LAYOUT_ORDER = ("hot", "fluctuating", "steady", "idle")

FAULT_KINDS = ("xid79", "xid48", "xid74", "nccl_timeout", "loss_nan", "straggler", "cuda_oom")
FAULT_WEIGHTS = (0.14, 0.12, 0.12, 0.20, 0.14, 0.14, 0.14)
FAULT_XID = {"xid79": 79, "xid48": 48, "xid74": 74}
MISCONFIG_KINDS = ("nccl_socket", "storage_metadata_only", "stock_framework")

IB_HCAS = ",".join(f"mlx5_{i}" for i in range(8))
IMAGE_ACCELERATED = "registry.internal/ai-platform/accel-train:24.05-py3"
IMAGE_STOCK = "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime"
DRIVER_VERSION = "535.161.08"

# What a GPU that fell off the bus reads until its node reboots: DCGM's int64 sentinel
# (INT64_MAX - 13) as real exporters print it; parsers must map values >= 9.2e18 to "missing".
DCGM_BLANK = 9223372036854775794


@dataclass(frozen=True, slots=True)
class GpuModelSpec:
    """Static properties of a GPU model: short name, power envelope, clocks, PCI layout."""

    short: str
    tdp_w: float
    idle_w: float
    temp_rise_c: float
    sm_clock_max_mhz: int
    sm_clock_idle_mhz: int
    mem_clock_mhz: int
    bus_ids: tuple[str, ...]


def _model_spec(model_name: str, cal: Calibration) -> GpuModelSpec:
    # Acme's GPUs are A100-class: its 5th power percentile is the idle draw, its 99th the ceiling.
    a100_idle_w = cal.power_w.at(0.05)
    a100_rise_c = cal.temp_c.at(0.99) - cal.temp_c.at(0.10)
    if "H100" in model_name:
        return GpuModelSpec(
            short="h100",
            tdp_w=700.0,
            idle_w=a100_idle_w * 1.2,
            temp_rise_c=a100_rise_c * 1.25,
            sm_clock_max_mhz=1980,
            sm_clock_idle_mhz=345,
            mem_clock_mhz=2619,
            # HGX H100 8-GPU baseboard bus numbers.
            bus_ids=("18", "2a", "3a", "5d", "9a", "ab", "ba", "db"),
        )
    short = "a100" if "A100" in model_name else "gpu"
    return GpuModelSpec(
        short=short,
        tdp_w=min(400.0, cal.power_w.at(0.99)),
        idle_w=a100_idle_w,
        temp_rise_c=a100_rise_c,
        sm_clock_max_mhz=1410,
        sm_clock_idle_mhz=210,
        mem_clock_mhz=1593,
        # DGX A100 bus numbers.
        bus_ids=("07", "0f", "47", "4e", "87", "90", "b7", "bd"),
    )


@dataclass(frozen=True, slots=True)
class ClassProfile:
    """How a node class is produced: the load its pools see and the jobs they run."""

    name: str
    load: float  # offered GPU load / pool capacity while submissions are "on"
    # Users submit less while the queue is long: a job is submitted with probability
    # 1 - pending GPUs / (queue_cap x capacity), so none once that many GPUs wait.
    queue_cap: float
    on_share_day: float  # probability a 3-hour block has submissions, 09:00-21:00 local
    on_share_night: float
    diurnal: float  # submission rate is (1 + diurnal) x mean by day, (1 - diurnal) x mean by night
    runtime_q: tuple[float, float]  # slice of the Philly runtime quantiles
    target_mean_gpus: float | None  # Acme mean GPUs per job; None: Alibaba sizes as they are
    activity: tuple[float, float]  # job GR_ENGINE_ACTIVE level while computing
    zero_share: tuple[float, float]  # per-minute share of stall samples (data, checkpoints)
    hour_jitter: float  # hour-to-hour relative change of a job's activity
    interactive_share: float  # jobs following the GenAI serving duty-cycle profile
    kind: str  # job kind of the non-interactive jobs


def _class_profiles(cal: Calibration) -> dict[str, ClassProfile]:
    return {
        # Hot pools are offered half again their capacity: their queues stay long enough that
        # the demand a fixed partition cannot serve is visible, as waiting jobs, to quota
        # planning, while users' patience and reluctance keep it within a few pools' worth.
        "hot": ClassProfile(
            "hot", 1.5, 2.0, 1.0, 1.0, 0.3, (0.80, 0.995), cal.kalos_mean_gpus,
            (0.86, 0.96), (0.01, 0.03), 0.03, 0.0, "pretrain",
        ),
        "steady": ClassProfile(
            "steady", 1.1, 2.0, 1.0, 1.0, 0.2, (0.85, 0.995), None,
            (0.22, 0.42), (0.02, 0.06), 0.04, 0.0, "finetune",
        ),
        "fluctuating": ClassProfile(
            "fluctuating", 1.6, 1.0, 0.6, 0.15, 0.0, (0.55, 0.95), cal.seren_mean_gpus,
            (0.65, 0.93), (0.02, 0.08), 0.10, 0.2, "experiment",
        ),
        "idle": ClassProfile(
            "idle", 0.0, 1.0, 1.0, 1.0, 0.5, (0.30, 0.80), None,
            (0.0, 0.0), (0.0, 0.0), 0.0, 1.0, "interactive",
        ),
    }  # fmt: skip


IDLE_JOBS_PER_NODE_HOUR = 0.01


DEPARTMENT_PROJECTS = {
    "vision": ("lane-seg", "traffic-light", "mono3d-det"),
    "radar": ("radar-pointnet", "radar-fusion"),
    "data": ("auto-label", "dedup-embed", "scene-mining"),
    "bev": ("bevformer", "occ-net"),
    "mapping": ("hdmap-vec", "mapless-nav"),
    "sim": ("nerf-recon", "scene-gen"),
    "pnc": ("traj-pred", "motion-plan"),
    "e2e": ("uniad-e2e", "vla-pretrain", "world-model"),
    "cabin": ("cabin-llm", "asr-finetune", "dms-vision"),
}
USER_NAMES = (
    "zhang.wei", "wang.fang", "li.na", "liu.yang", "chen.jie", "yang.li", "zhao.lei", "huang.min",
    "zhou.tao", "wu.hao", "xu.jing", "sun.qiang", "ma.lin", "zhu.hui", "hu.bo", "guo.xin",
    "he.yan", "lin.feng", "luo.kai", "gao.ying", "zheng.yu", "liang.chao", "xie.dan", "song.peng",
    "tang.rui", "han.xue", "feng.jun", "deng.hua", "cao.yi", "peng.bin", "zeng.lu", "xiao.ming",
)  # fmt: skip


def _hash_int(*parts: object) -> int:
    """A 64-bit integer from a tuple of values: the seed of every independent random stream."""
    text = "|".join(str(part) for part in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def _rng(*parts: object) -> random.Random:
    # A simulation, not cryptography: reproducible streams are the point.
    return random.Random(_hash_int(*parts))  # noqa: S311


def _unit(*parts: object) -> float:
    """One uniform number in [0, 1) from a hash of ``parts``."""
    return _hash_int(*parts) / 2**64


def _ts(at: datetime) -> float:
    if at.tzinfo is None:
        raise ValueError("the simulator needs timezone-aware datetimes")
    return at.timestamp()


def _dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@dataclass(frozen=True, slots=True)
class FaultTruth:
    """Ground truth of one injected fault: which job, what kind, where, and when it occurred.

    ``kind`` is one of ``FAULT_KINDS``; ``gpu``/``rank`` are None when the fault is not tied to
    one GPU (a straggler node, a NaN loss); ``xid`` is set for the Xid kinds.
    """

    job_external_id: str
    kind: str
    node: str
    gpu: int | None
    rank: int | None
    occurred_at: datetime
    xid: int | None = None


FamilyKey = tuple[str, str, str]  # (department, user, family pattern as ``family_name`` writes it)


@dataclass(frozen=True, slots=True)
class _Healthy:
    """A job's draws before its misconfiguration was applied, and what its config is made of."""

    activity: float
    zero_share: float
    sm_ratio: float
    tensor_ratio: float
    iteration_s: float
    iters_factor: float  # train_iters = planned_s / iteration_s × this
    variant: float  # _job_config's draw


def _family_key(job: "SimJob") -> FamilyKey:
    return (job.department, job.user_name, re.sub(r"[0-9]+", "*", job.name))


def _without_misconfig(job: "SimJob", healthy: _Healthy) -> None:
    """Make ``job`` the run its family gives once fixed: no misconfiguration, healthy speed and
    activity, more iterations in the same planned time, the fixed config (IB settings, the
    accelerated image, the full-data cache)."""
    job.misconfig, job.slowdown = "", 1.0
    job.activity = min(healthy.activity, 0.95 / (1 + job.hour_jitter))
    job.zero_share, job.sm_ratio, job.tensor_ratio = (
        healthy.zero_share,
        healthy.sm_ratio,
        healthy.tensor_ratio,
    )
    job.iteration_s = healthy.iteration_s
    job.train_iters = max(100, int(job.planned_s / job.iteration_s * healthy.iters_factor))
    job.log_interval = _log_interval(job.iteration_s)
    job.framework = "accelerated"
    job.config = _job_config(
        kind=job.kind,
        rdma=job.rdma,
        misconfig="",
        nodes=job.node_count,
        gpus_per_node=job.gpus_per_node,
        name=job.name,
        global_batch=job.global_batch,
        train_iters=job.train_iters,
        variant=healthy.variant,
    )


def _log_interval(iteration_s: float) -> int:
    """Megatron's --log-interval: a line every few minutes at most."""
    return next((n for n in (1000, 500, 200, 100, 50, 20, 10, 5, 2) if n * iteration_s <= 600), 1)


@dataclass(slots=True, eq=False)
class SimJob:
    """One simulated job with everything the simulator knows about it (read-only ground truth).

    Times are UTC seconds; ``start_s``/``end_s`` are None until the scheduler starts the job.
    ``allocation`` lists (node index, GPU indices) in rank order: rank r is the r-th GPU.
    """

    job_id: int
    pool_key: str
    department: str
    node_class: str
    kind: str  # pretrain | finetune | experiment | interactive
    name: str
    user_name: str
    uid: int
    gpu_count: int
    node_count: int
    gpus_per_node: int
    submit_s: float
    run_s: float  # how long it runs once started, outcome included (faults may change end_s)
    planned_s: float  # how long it would have needed to finish
    outcome: str  # COMPLETED | FAILED | CANCELLED | TIMEOUT without faults
    gpu_model: str
    rdma: bool
    misconfig: str  # "" or one of MISCONFIG_KINDS
    slowdown: float  # iteration time factor caused by the misconfig
    activity: float  # GR_ENGINE_ACTIVE while computing (0-1), misconfig included
    zero_share: float  # share of minutes at 0 (stalls), misconfig included
    serving: bool  # duty cycle follows the GenAI serving trace instead
    sm_ratio: float  # SM_ACTIVE / GR_ENGINE_ACTIVE
    tensor_ratio: float
    dram_ratio: float
    fb_fraction: float  # of the GPU's memory
    hour_jitter: float
    iteration_s: float  # seconds per training iteration, misconfig included
    global_batch: int
    train_iters: int
    log_interval: int
    config: dict[str, Any]
    framework: str
    resubmit_of: int | None = None
    start_s: float | None = None
    end_s: float | None = None
    allocation: tuple[tuple[int, tuple[int, ...]], ...] = ()
    fault: FaultTruth | None = None
    fault_s: float | None = None
    fault_node: int | None = None
    fault_gpu: int | None = None
    hang_end_s: float | None = None  # NCCL hang: GPUs spin from fault_s until the watchdog fires
    straggler_factor: float = 1.0
    patience_s: float = math.inf  # the user cancels the job if it waits longer than this
    final_state: str = ""
    exit_code: str = "0:0"
    pod_labels: dict[int, str] = field(default_factory=dict)
    # What the job would be without its family's misconfiguration (``_Healthy``): a fix learned
    # after the job was drawn rewrites it from these, never from a new draw.
    healthy: "_Healthy | None" = None

    @property
    def external_id(self) -> str:
        """The Slurm job id as text."""
        return str(self.job_id)

    @property
    def k8s_name(self) -> str:
        """The Kubernetes Job name of the same job (``kubernetes_jobs_json``)."""
        return f"{self.name}-{self.job_id}"

    @property
    def namespace(self) -> str:
        """The Kubernetes namespace of the job's department."""
        return f"team-{self.department}"

    def node_indices(self) -> list[int]:
        """The indices of the nodes the job runs on, in rank order."""
        return [node for node, _ in self.allocation]

    def ranks_on(self, node: int) -> list[tuple[int, int]]:
        """(rank, gpu index) pairs of the job on one node."""
        pairs = []
        rank = 0
        for alloc_node, gpus in self.allocation:
            for gpu in gpus:
                if alloc_node == node:
                    pairs.append((rank, gpu))
                rank += 1
        return pairs

    def rank_location(self, rank: int) -> tuple[int, int]:
        """(node index, gpu index) of a rank."""
        for node, gpus in self.allocation:
            if rank < len(gpus):
                return node, gpus[rank]
            rank -= len(gpus)
        raise IndexError(rank)

    def state_at(self, at_s: float) -> tuple[str, float | None, float | None]:
        """(Slurm state, start, end) as ``sacct`` run at ``at_s`` would report them."""
        if self.start_s is None and self.end_s is not None and self.end_s <= at_s:
            return "CANCELLED", None, self.end_s  # its user gave up waiting
        if self.start_s is None or self.start_s >= at_s:
            return "PENDING", None, None
        assert self.end_s is not None
        if self.end_s > at_s:
            return "RUNNING", self.start_s, None
        return self.final_state, self.start_s, self.end_s


def family_name(project: str, suffix: str) -> str:
    """A job name's family pattern: its digits as ``*`` ("bev-exp12" → "bev-exp*")."""
    return re.sub(r"[0-9]+", "*", f"{project}-{suffix}")


def _family_misconfig(
    seed: int,
    share: float,
    department: str,
    user: str,
    project: str,
    suffix: str,
    kind: str,
    interactive: bool,
) -> str:
    """The misconfiguration of a job family, the same for every run of it (see ``_draw``); a run
    shows it where it can (sockets between RDMA nodes, the cache outside pretraining)."""
    if interactive:
        return ""
    rng = _rng(seed, "family-misconfig", department, user, family_name(project, suffix))
    if rng.random() >= share:
        return ""
    # The same draw whatever pool or shape a run gets: a family's runs land on different pools.
    # Sockets come up twice as often as each other kind, so that the fintech case is always present.
    # A pretraining family (its name says so: the kind follows from the name) reads pre-staged
    # shards, so its cache mode is never the problem.
    kinds = ("stock_framework", "nccl_socket", "nccl_socket")
    if kind != "pretrain":
        kinds += ("storage_metadata_only",)
    return kinds[rng.randrange(len(kinds))]


def _family_iteration_s(seed: int, department: str, user: str, name: str, kind: str) -> float:
    """A job family's healthy seconds per iteration: 2–6 s for pretraining, 0.5–3 s otherwise."""
    low, high = (2.0, 6.0) if kind == "pretrain" else (0.5, 3.0)
    return low + (high - low) * _unit(seed, "family-speed", department, user, re.sub(r"[0-9]+", "*", name))


# How much slower a misconfigured family runs, drawn per family from these ranges.
SLOWDOWNS = {"nccl_socket": (1.8, 2.3), "stock_framework": (1.5, 4.0), "storage_metadata_only": (10.0, 40.0)}


def _family_slowdown(seed: int, department: str, user: str, name: str):
    """``slowdown(kind, jitter)``: the family's iteration-time factor for a misconfiguration kind,
    times a run's jitter."""
    draw = _unit(seed, "family-slowdown", department, user, re.sub(r"[0-9]+", "*", name))

    def slowdown(kind: str, jitter: float) -> float:
        low, high = SLOWDOWNS[kind]
        return (low + (high - low) * draw) * jitter

    return slowdown


def misconfig_truth(job: SimJob) -> str:
    """The misconfiguration a job really has: ``""`` or one of ``MISCONFIG_KINDS``.

    The answer a tuning recommendation is scored against. The evidence lies elsewhere: the
    config snapshot (``job.config``), the logs and the metrics. ``nccl_socket`` jobs run on two or
    more RDMA nodes without the NCCL IB settings, so their channels between nodes go over
    ``NET/Socket``; ``storage_metadata_only`` jobs mount the datasets with ``metadata-only``
    caching; ``stock_framework`` jobs run the stock PyTorch image.
    """
    return job.misconfig


@dataclass(slots=True, eq=False)
class _Pool:
    key: str
    department: str
    node_class: str
    profile: ClassProfile
    model: GpuModelSpec
    rdma: bool
    nodes: list[int]
    gpus_per_node: int
    rate_per_s: float = 0.0
    multi_share: float = 0.0
    node_weights: tuple[tuple[int, float], ...] = ()
    queue: list[SimJob] = field(default_factory=list)
    pending_gpus: int = 0
    by_free: list[list[int]] = field(default_factory=list)
    # (job id, computed at, nodes, start): reused for a while, it is the scheduler's costliest step
    reservation: tuple[int, float, frozenset[int], float] | None = None

    @property
    def capacity_gpus(self) -> int:
        return len(self.nodes) * self.gpus_per_node


@dataclass(slots=True, eq=False)
class _NodeState:
    spec: NodeSpec
    index: int
    pool: _Pool | None
    node_class: str
    model: GpuModelSpec
    free: list[bool]
    status: str = "up"  # up | draining
    boot_s: list[float] = field(default_factory=list)  # every boot, in order
    xids: list[tuple[float, int, int, float]] = field(default_factory=list)  # (time, gpu, xid, reboot)
    seg_starts: list[list[float]] = field(default_factory=list)  # per GPU
    seg_jobs: list[list[SimJob]] = field(default_factory=list)
    ambient_c: float = 28.0
    idle_w: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # dcgm label prefix per GPU
    pids_base: int = 1000
    running: dict[int, tuple[SimJob, int]] = field(default_factory=dict)  # job id -> (job, GPUs here)
    n_free: int = 0

    def free_count(self) -> int:
        return self.n_free


@dataclass(slots=True)
class SimulatedReading:
    """One GPU's values at one instant, in dcgm-exporter's units (ratios 0-1 for PROF fields).

    ``blank`` means the GPU cannot be read (fallen off the bus): dcgm reports its blank value.
    """

    util_pct: int
    gr_active: float
    sm_active: float
    sm_occupancy: float
    tensor_active: float
    dram_active: float
    fb_used_mib: int
    fb_free_mib: int
    power_w: float
    temp_c: int
    sm_clock_mhz: int
    mem_clock_mhz: int
    mem_copy_util_pct: int
    xid_last: int
    xid_counts: tuple[tuple[int, int], ...]
    job: SimJob | None
    blank: bool = False


def _largest_remainder(total: int, shares: dict[str, float], order: Sequence[str]) -> dict[str, int]:
    exact = {name: shares[name] * total for name in order}
    counts = {name: int(exact[name]) for name in order}
    leftovers = sorted(order, key=lambda name: (-(exact[name] - counts[name]), order.index(name)))
    for name in leftovers[: total - sum(counts.values())]:
        counts[name] += 1
    return counts


class ClusterSimulator:
    """A deterministic, seeded GPU cluster that emits the real sources' formats.

    ``fault_rate_per_day`` is the expected number of injected faults per day across the whole
    simulated cluster (each hits a running job); ``misconfig_share`` is the probability that a
    non-interactive job carries one of the three misconfigurations. ``local_utc_offset_h`` sets
    the users' working day for the diurnal submission pattern. ``fixes`` maps job families
    (department, user, name pattern) to the time their misconfiguration was fixed (``fix_family``).
    """

    def __init__(
        self,
        nodes: list[NodeSpec],
        *,
        seed: int,
        start: datetime,
        fault_rate_per_day: float = 2.0,
        misconfig_share: float = 0.2,
        local_utc_offset_h: int = 8,
        automated_recovery_from: datetime | None = None,
        fixes: dict[FamilyKey, datetime] | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("the simulator needs at least one node")
        self.seed = seed
        self.start = start
        self.start_s = _ts(start)
        self.fault_rate_per_day = fault_rate_per_day
        self.misconfig_share = misconfig_share
        self.local_utc_offset_s = local_utc_offset_h * HOUR_S
        # Faults that end a job from this time on are recovered by the portal's restart request
        # (minutes), before it by hand (hours): the demo shows MTTR falling when it takes over.
        self.automated_recovery_from_s = (
            math.inf if automated_recovery_from is None else _ts(automated_recovery_from)
        )
        self.cal = calibration()
        self.profiles = _class_profiles(self.cal)
        self.nodes = list(nodes)
        self._origin_s = self.start_s - WARMUP_S
        self._next_epoch = 0
        self._heap: list[tuple[float, int, int, str, Any]] = []
        self._seq = 0
        self._next_job_id = 100_000 + _hash_int(seed, "first-job-id") % 800_000
        self._jobs: list[SimJob] = []
        self._job_by_id: dict[int, SimJob] = {}
        self._running: dict[int, SimJob] = {}
        self._faults: list[FaultTruth] = []
        self._index = {spec.hostname: i for i, spec in enumerate(self.nodes)}
        self._model_specs: dict[str, GpuModelSpec] = {}
        self._classes = self._assign_classes()
        self._node_states = [self._make_node(i, spec) for i, spec in enumerate(self.nodes)]
        self._pools = self._make_pools()
        self._pool_by_key = {pool.key: pool for pool in self._pools}
        self._submit_s: list[float] = []  # parallel to _jobs, ascending
        self._max_lifetime_s = 0.0  # longest submit-to-start or submit-to-end seen so far
        self._hour_factor_cache: dict[tuple[int, int], float] = {}
        # Job families whose misconfiguration was fixed, and from when (see ``fix_family``).
        self._fixes: dict[FamilyKey, float] = {}
        for key, at in (fixes or {}).items():
            self.fix_family(*key, at=at)

    # ----------------------------------------------------------------------------------------
    # Layout: classes and pools

    def _assign_classes(self) -> list[str]:
        departments: dict[str, list[int]] = {}
        for index, spec in enumerate(self.nodes):
            departments.setdefault(spec.owner, []).append(index)
        order = sorted(departments)
        _rng(self.seed, "layout").shuffle(order)
        counts = _largest_remainder(len(self.nodes), DESIGNED_SHARES, LAYOUT_ORDER)
        labels = [name for name in LAYOUT_ORDER for _ in range(counts[name])]
        classes = [""] * len(self.nodes)
        position = 0
        for department in order:
            for index in departments[department]:
                classes[index] = labels[position]
                position += 1
        return classes

    def _model(self, model_name: str) -> GpuModelSpec:
        if model_name not in self._model_specs:
            self._model_specs[model_name] = _model_spec(model_name, self.cal)
        return self._model_specs[model_name]

    def _make_node(self, index: int, spec: NodeSpec) -> _NodeState:
        model = self._model(spec.gpu_model)
        state = _NodeState(
            spec=spec,
            index=index,
            pool=None,
            node_class=self._classes[index],
            model=model,
            free=[True] * spec.gpu_count,
            n_free=spec.gpu_count,
        )
        rng = _rng(self.seed, "node", spec.hostname)
        state.boot_s.append(self._origin_s - rng.uniform(5, 60) * 86_400)
        state.seg_starts = [[] for _ in range(spec.gpu_count)]
        state.seg_jobs = [[] for _ in range(spec.gpu_count)]
        state.ambient_c = self.cal.temp_c.window(rng.random(), 0.05, 0.25)
        state.idle_w = [model.idle_w * rng.uniform(0.95, 1.08) for _ in range(spec.gpu_count)]
        state.pids_base = rng.randrange(2000, 60_000)
        state.labels = [
            f'gpu="{gpu}",UUID="{gpu_uuid(spec.hostname, gpu)}",pci_bus_id="{self._pci_bus_id(model, gpu)}",'
            f'device="nvidia{gpu}",modelName="{spec.gpu_model}",Hostname="{spec.hostname}",'
            f'DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"'
            for gpu in range(spec.gpu_count)
        ]
        return state

    @staticmethod
    def _pci_bus_id(model: GpuModelSpec, gpu: int) -> str:
        bus = model.bus_ids[gpu] if gpu < len(model.bus_ids) else f"{0x20 + gpu * 0x10:02x}"
        return f"00000000:{bus.upper()}:00.0"

    def pci_address(self, hostname: str, gpu: int) -> str:
        """The GPU's PCI address as the kernel log prints it (``0000:18:00``)."""
        model = self._node_states[self._index[hostname]].model
        bus = model.bus_ids[gpu] if gpu < len(model.bus_ids) else f"{0x20 + gpu * 0x10:02x}"
        return f"0000:{bus}:00"

    def _make_pools(self) -> list[_Pool]:
        groups: dict[tuple[str, str, str], list[int]] = {}
        for index, spec in enumerate(self.nodes):
            key = (spec.owner, self._classes[index], spec.gpu_model)
            groups.setdefault(key, []).append(index)
        pools = []
        for (department, node_class, model_name), members in groups.items():
            model = self._model(model_name)
            gpus_per_node = min(self.nodes[i].gpu_count for i in members)
            pool = _Pool(
                key=f"{department or 'shared'}/{node_class}/{model.short}",
                department=department or "shared",
                node_class=node_class,
                profile=self.profiles[node_class],
                model=model,
                rdma=all(self.nodes[i].rdma_capable for i in members),
                nodes=members,
                gpus_per_node=gpus_per_node,
            )
            pool.by_free = [[] for _ in range(gpus_per_node + 1)]
            pool.by_free[gpus_per_node] = sorted(members)
            for i in members:
                self._node_states[i].pool = pool
            self._calibrate_pool(pool)
            pools.append(pool)
        return pools

    def _single_node_sizes(self, pool: _Pool, interactive: bool) -> tuple[tuple[int, int], ...]:
        weights = self.cal.gpu_count_weights_default if interactive else self.cal.gpu_count_weights_multigpu
        return tuple((size, weight) for size, weight in weights if size <= pool.gpus_per_node)

    def _calibrate_pool(self, pool: _Pool) -> None:
        """Set the pool's share of whole-node jobs and its arrival rate from its class profile.

        Single-node jobs take Alibaba's GPU counts per pod. Where the class has a target mean
        (Acme: Kalos for hot pools, Seren for fluctuating ones), a share of jobs instead takes
        whole nodes (1, 2, 4 or 8 of them, at most half the pool), chosen so that the mean GPUs
        per job meets the target. The rate then makes the offered load match the profile, using
        the mean GPU-seconds per job over a fixed sample of jobs from the same generator.
        """
        profile = pool.profile
        # Jobs wider than half the pool would leave it draining for hours before each start.
        max_nodes = max(1, min(8, len(pool.nodes) // 2))
        options = [n for n in (1, 2, 4, 8) if n <= max_nodes]
        pool.node_weights = tuple((n, 1.0 / len(options)) for n in options)
        sizes = self._single_node_sizes(pool, interactive=False)
        single_mean = sum(s * w for s, w in sizes) / sum(w for _, w in sizes)
        if profile.target_mean_gpus:
            wide_mean = sum(n * w for n, w in pool.node_weights) * pool.gpus_per_node
            share = (profile.target_mean_gpus - single_mean) / max(wide_mean - single_mean, 1e-9)
            pool.multi_share = min(max(share, 0.0), 0.9)
        if profile.name == "idle":
            pool.rate_per_s = IDLE_JOBS_PER_NODE_HOUR * len(pool.nodes) / HOUR_S
            return
        rng = _rng("calibration", pool.key, len(pool.nodes))
        samples = [self._draw_shape(pool, rng) for _ in range(3000)]
        mean_gpu_s = sum(gpus * run_s for gpus, _, run_s, *_ in samples) / len(samples)
        pool.rate_per_s = profile.load * pool.capacity_gpus / mean_gpu_s

    def _draw_shape(self, pool: _Pool, rng: random.Random) -> tuple[int, int, float, float, str, bool]:
        """(gpus, nodes, run_s, planned_s, outcome, interactive) of one job of this pool."""
        profile = pool.profile
        interactive = rng.random() < profile.interactive_share
        if not interactive and rng.random() < pool.multi_share:
            nodes = _weighted(rng, pool.node_weights)
            gpus = nodes * pool.gpus_per_node
        else:
            sizes = self._single_node_sizes(pool, interactive)
            gpus = int(_weighted(rng, sizes))
            nodes = 1
        low_q, high_q = (0.30, 0.80) if interactive else profile.runtime_q
        planned_s = max(300.0, self.cal.runtime_s.window(rng.random(), low_q, high_q))
        outcome = _weighted(rng, self.cal.final_state_shares)
        if outcome == "FAILED":
            run_s = planned_s * rng.uniform(0.02, 0.5)  # failed jobs fail early (Acme)
        elif outcome == "CANCELLED":
            run_s = planned_s * rng.uniform(0.1, 0.9)
        else:
            run_s = planned_s
        if run_s > TIME_LIMIT_S:
            run_s, outcome = TIME_LIMIT_S, "TIMEOUT"
        return gpus, nodes, float(max(round(run_s), 120)), planned_s, outcome, interactive

    # ----------------------------------------------------------------------------------------
    # Public ground truth about the layout

    def node_class(self, hostname: str) -> str:
        """The designed behaviour class of a node: idle, hot, fluctuating or steady."""
        return self._classes[self._index[hostname]]

    def designed_shares(self) -> dict[str, float]:
        """Share of nodes per designed class (sums to 1)."""
        total = len(self.nodes)
        return {name: sum(1 for c in self._classes if c == name) / total for name in NODE_CLASSES}

    def hostnames(self) -> list[str]:
        """All node hostnames, in the order the simulator was given them."""
        return [spec.hostname for spec in self.nodes]

    # ----------------------------------------------------------------------------------------
    # Fixes

    def fix_family(self, department: str, user: str, pattern: str, *, at: datetime) -> int:
        """Fix a job family's misconfiguration from ``at`` on: every run of the family submitted
        at or after ``at`` runs without it (a run submitted before keeps its config to its end,
        and so do its resubmissions submitted before ``at``). ``pattern`` is the family's name
        pattern (digits as ``*``, as ``family_name`` and the portal write it).

        The result does not depend on when the simulator learns the fix: runs already drawn
        (the simulator draws whole epochs ahead) are rewritten from their healthy draws, as if the
        fix had been known from the start; the same seed and fixes give the same jobs. A fix is
        never undone; fixing again with an earlier time moves it earlier. Returns how many drawn
        runs were rewritten.
        """
        key, at_s = (department, user, pattern), _ts(at)
        previous = self._fixes.get(key)
        if previous is not None and previous <= at_s:
            return 0
        self._fixes[key] = at_s
        rewritten = 0
        for job in self._jobs[bisect_right(self._submit_s, at_s - 1e-9) :]:
            if job.healthy is not None and _family_key(job) == key:
                _without_misconfig(job, job.healthy)
                rewritten += 1
        return rewritten

    def _fixed(self, job: SimJob) -> SimJob:
        """``job`` as its family runs it at its submit time: fixed or not."""
        fixed_at = self._fixes.get(_family_key(job)) if self._fixes else None
        if job.healthy is not None and fixed_at is not None and job.submit_s >= fixed_at:
            _without_misconfig(job, job.healthy)
        return job

    def fixes(self) -> dict[FamilyKey, datetime]:
        """The families fixed so far, and from when."""
        return {key: _dt(at_s) for key, at_s in self._fixes.items()}

    # ----------------------------------------------------------------------------------------
    # Event simulation

    def _push(self, time_s: float, priority: int, kind: str, payload: Any) -> None:
        self._seq += 1
        heappush(self._heap, (time_s, priority, self._seq, kind, payload))

    def advance_to(self, at: datetime) -> None:
        """Simulate every epoch up to and including the one holding ``at`` (normally implicit)."""
        self._advance(_ts(at))

    def _advance(self, until_s: float) -> None:
        # Look a little ahead: a GPU's memory climbs for 10 minutes before its CUDA OOM, so a
        # sample must already know about a fault just past the epoch it falls in.
        while self._origin_s + self._next_epoch * EPOCH_S <= until_s + LOOKAHEAD_S:
            self._run_epoch(self._next_epoch)
            self._next_epoch += 1

    def _run_epoch(self, epoch: int) -> None:
        begin = self._origin_s + epoch * EPOCH_S
        end = begin + EPOCH_S
        for pool in self._pools:
            self._generate_arrivals(pool, epoch, begin, end)
        self._generate_faults(epoch, begin, end)
        while self._heap and self._heap[0][0] < end:
            time_s, _, _, kind, payload = heappop(self._heap)
            if kind == "end":
                self._on_end(payload, time_s)
            elif kind == "node_up":
                self._on_node_up(payload, time_s)
            elif kind == "arrival":
                self._on_arrival(payload, time_s)
            elif kind == "fault":
                self._on_fault(payload, time_s)
            elif kind == "give_up":
                self._on_give_up(payload, time_s)

    def _block_rate(self, pool: _Pool, block_start_s: float, rng: random.Random) -> float:
        """Arrival rate (jobs/s) of a 3-hour block: diurnal, and on/off for bursty classes."""
        local_hour = ((block_start_s + self.local_utc_offset_s) % 86_400) / HOUR_S
        day = 9 <= local_hour < 21
        profile = pool.profile
        on = rng.random() < (profile.on_share_day if day else profile.on_share_night)
        if not on:
            return 0.0
        return pool.rate_per_s * (1 + profile.diurnal if day else 1 - profile.diurnal)

    def _generate_arrivals(self, pool: _Pool, epoch: int, begin: float, end: float) -> None:
        if pool.rate_per_s <= 0:
            return
        rng = _rng(self.seed, "arrivals", pool.key, epoch)
        block_s = 3 * HOUR_S
        index = 0
        block = begin
        while block < end:
            count = _poisson(rng, self._block_rate(pool, block, rng) * block_s)
            times = sorted(float(math.floor(block + rng.random() * block_s)) for _ in range(count))
            for time_s in times:
                self._push(time_s, 1, "arrival", (pool, epoch, index, None))
                index += 1
            block += block_s

    def _on_arrival(self, payload: tuple[_Pool, int, int, SimJob | None], time_s: float) -> None:
        pool, epoch, index, parent = payload
        if parent is None and not self._submits(pool, epoch, index):
            return  # the user saw the queue and did not submit
        job = self._new_job(pool, time_s, epoch, index, parent)
        job.patience_s = self._patience_s(job)
        self._jobs.append(job)
        self._submit_s.append(job.submit_s)
        self._job_by_id[job.job_id] = job
        if parent is not None and parent.end_s is not None and parent.end_s >= self.automated_recovery_from_s:
            pool.queue.insert(0, job)  # a requeue keeps the job's place; a user's resubmission does not
        else:
            pool.queue.append(job)
        pool.pending_gpus += job.gpu_count
        if math.isfinite(job.patience_s):
            self._push(time_s + job.patience_s, 2, "give_up", job)
        self._schedule(pool, time_s)

    def _submits(self, pool: _Pool, epoch: int, index: int) -> bool:
        """Whether a user submits into the pool's queue: fewer do the longer it is, none once
        ``queue_cap`` × capacity GPUs wait."""
        discouraged = pool.pending_gpus / (pool.profile.queue_cap * pool.capacity_gpus)
        return _unit(self.seed, "submits", pool.key, epoch, index) >= discouraged

    def _patience_s(self, job: SimJob) -> float:
        """How long the job's user lets it wait before cancelling it (see PATIENCE_RUNTIME_RATIO)."""
        shape = self.cal.pending_cancel_wait_s
        median = shape.at(0.5)
        draw = shape.at(_unit(self.seed, "patience", job.job_id)) / median if median > 0 else 1.0
        return float(max(MIN_PATIENCE_S, round(PATIENCE_RUNTIME_RATIO * job.planned_s * draw)))

    def _on_give_up(self, job: SimJob, time_s: float) -> None:
        """The user cancels a job that is still waiting: it leaves the queue, never having run."""
        if job.start_s is not None or job.end_s is not None:
            return  # it started (or was cancelled) in time
        pool = self._pool_by_key[job.pool_key]
        pool.queue.remove(job)
        pool.pending_gpus -= job.gpu_count
        job.end_s = time_s
        job.final_state, job.exit_code = "CANCELLED", "0:15"
        self._max_lifetime_s = max(self._max_lifetime_s, time_s - job.submit_s)
        self._schedule(pool, time_s)

    def _new_job(self, pool: _Pool, time_s: float, epoch: int, index: int, parent: SimJob | None) -> SimJob:
        job_id = self._next_job_id
        self._next_job_id += 1
        if parent is not None:
            rng = _rng(self.seed, "resubmit", parent.job_id)
            # The same work from its last checkpoint: what is left, the same shape and config.
            done_s = (parent.end_s or time_s) - (parent.start_s or time_s)
            left_s = float(max(600, round(parent.planned_s - done_s)))
            outcome = parent.outcome if parent.outcome != "TIMEOUT" else "COMPLETED"
            run_s = (
                left_s
                if outcome == "COMPLETED"
                else min(left_s, float(max(round(parent.run_s - done_s), 600)))
            )
            if run_s > TIME_LIMIT_S:
                run_s, outcome = TIME_LIMIT_S, "TIMEOUT"
            # A fresh copy of the parent: run state, fault and caches start empty again.
            # A resubmission after the family's fix runs with the fixed set-up.
            return self._fixed(
                replace(
                    parent,
                    job_id=job_id,
                    submit_s=time_s,
                    run_s=run_s,
                    planned_s=left_s,
                    outcome=outcome,
                    fb_fraction=parent.fb_fraction * rng.uniform(0.9, 1.0),
                    resubmit_of=parent.job_id,
                    start_s=None,
                    end_s=None,
                    allocation=(),
                    fault=None,
                    fault_s=None,
                    fault_node=None,
                    fault_gpu=None,
                    hang_end_s=None,
                    straggler_factor=1.0,
                    final_state="",
                    exit_code="0:0",
                    pod_labels={},
                )
            )
        rng = _rng(self.seed, "job", pool.key, epoch, index)
        gpus, nodes, run_s, planned_s, outcome, interactive = self._draw_shape(pool, rng)
        profile = pool.profile
        kind = "interactive" if interactive else profile.kind
        department = pool.department
        projects = DEPARTMENT_PROJECTS.get(department, ("model-train", "experiment"))
        project = projects[rng.randrange(len(projects))]
        suffix = {
            "pretrain": "pretrain",
            "finetune": rng.choice(("sft", "finetune", "eval")),
            "experiment": f"exp{rng.randrange(1, 40)}",
            "interactive": rng.choice(("notebook", "debug", "serve")),
        }[kind]
        users = _department_users(self.seed, department)
        user = users[rng.randrange(len(users))]
        # A misconfiguration belongs to a job family (one user's runs of one name pattern): their
        # container and dataset set-up is the same from run to run. It shows in a run where it can:
        # sockets only between nodes of an RDMA pool, the dataset cache only where data is read
        # in bulk (not pretraining on pre-staged shards).
        family = _family_misconfig(
            self.seed, self.misconfig_share, department, user, project, suffix, kind, interactive
        )
        misconfig = ""
        if family == "nccl_socket":
            misconfig = "nccl_socket" if nodes >= 2 and pool.rdma else ""
        elif family == "storage_metadata_only":
            misconfig = family if kind != "pretrain" else ""
        else:
            misconfig = family
        if interactive:
            activity = 0.0
            zero_share = self.cal.serving_zero_share.at(rng.random())
            jitter = 0.0
        else:
            activity = rng.uniform(*profile.activity)
            zero_share = rng.uniform(*profile.zero_share)
            jitter = profile.hour_jitter
        # Acme busy samples: median SM_ACTIVE / median GPU_UTIL is 0.66 (Seren) to 0.72 (Kalos).
        sm_ratio = rng.uniform(0.60, 0.78)
        tensor_ratio = rng.uniform(0.35, 0.7)
        unfixed = (activity, zero_share, sm_ratio, tensor_ratio)
        slowdown = 1.0
        # The slowdown is the family's too (the same model on the same set-up), within ±2% a run.
        family_slowdown = _family_slowdown(self.seed, department, user, f"{project}-{suffix}")
        if misconfig == "nccl_socket":
            slowdown = family_slowdown("nccl_socket", rng.uniform(0.98, 1.02))
            sm_ratio *= 0.55  # NCCL kernels spin waiting for the network: engine busy, SMs not
            activity *= 0.95
        elif misconfig == "stock_framework":
            slowdown = family_slowdown("stock_framework", rng.uniform(0.98, 1.02))
            sm_ratio *= 0.6
            tensor_ratio *= 0.5
            activity *= 0.92
        elif misconfig == "storage_metadata_only":
            slowdown = family_slowdown("storage_metadata_only", rng.uniform(0.98, 1.02))
            # The GPU waits on reads: fewer busy minutes and less work in each.
            zero_share = 1 - (1 - zero_share) / math.sqrt(slowdown)
            activity /= math.sqrt(slowdown)
        activity = min(activity, 0.95 / (1 + jitter))
        # A family trains the same model run after run: its speed is the family's, within ±2%.
        healthy_iteration_s = _family_iteration_s(self.seed, department, user, f"{project}-{suffix}", kind)
        healthy_iteration_s *= rng.uniform(0.98, 1.02)
        iteration_s = healthy_iteration_s * slowdown
        global_batch = rng.choice((256, 512, 1024, 2048))
        iters_factor = rng.uniform(1.0, 1.2)
        train_iters = max(100, int(planned_s / iteration_s * iters_factor))
        log_interval = _log_interval(iteration_s)
        framework = "pytorch" if misconfig == "stock_framework" else "accelerated"
        variant = rng.random()
        healthy = (
            _Healthy(*unfixed, iteration_s=healthy_iteration_s, iters_factor=iters_factor, variant=variant)
            if family
            else None
        )
        config = _job_config(
            kind=kind,
            rdma=pool.rdma,
            misconfig=family,
            nodes=nodes,
            gpus_per_node=min(gpus, pool.gpus_per_node),
            name=f"{project}-{suffix}",
            global_batch=global_batch,
            train_iters=train_iters,
            variant=variant,
        )
        job = SimJob(
            job_id=job_id,
            pool_key=pool.key,
            department=department,
            node_class=pool.node_class,
            kind=kind,
            name=f"{project}-{suffix}",
            user_name=user,
            uid=10_000 + _hash_int("uid", user) % 50_000,
            gpu_count=gpus,
            node_count=nodes,
            gpus_per_node=min(gpus, pool.gpus_per_node),
            submit_s=time_s,
            run_s=run_s,
            planned_s=planned_s,
            outcome=outcome,
            gpu_model=pool.model.short,
            rdma=pool.rdma,
            misconfig=misconfig,
            slowdown=slowdown,
            activity=activity,
            zero_share=zero_share,
            serving=interactive,
            sm_ratio=sm_ratio,
            tensor_ratio=tensor_ratio,
            dram_ratio=rng.uniform(0.2, 0.5),
            fb_fraction=self.cal.busy_fb_used_pct.at(rng.random()) / 100,
            hour_jitter=jitter,
            iteration_s=iteration_s,
            global_batch=global_batch,
            train_iters=train_iters,
            log_interval=log_interval,
            config=config,
            framework=framework,
            healthy=healthy,
        )
        return self._fixed(job)

    def _schedule(self, pool: _Pool, time_s: float) -> None:
        """Start queued jobs in submit order, backfilling around the first one that must wait.

        EASY backfill: the first job that does not fit and has waited ``RESERVE_AFTER_S`` gets a
        reservation on the nodes that free up soonest; later jobs may use those nodes only if they
        end before the reservation starts. The simulator knows each job's real end, where Slurm
        would use time limits.
        """
        position = 0
        examined = 0
        reserved: frozenset[int] = frozenset()
        shadow_s = math.inf
        while position < len(pool.queue) and examined < 32:
            if not any(pool.by_free[1:]):
                return  # nothing free: no job can start, skip the search
            job = pool.queue[position]
            if self._try_start(pool, job, time_s, reserved, shadow_s):
                pool.queue.pop(position)
                pool.pending_gpus -= job.gpu_count
                continue
            # Reserve only for a job that has waited a while: short waits need no protection,
            # and the reservation search is the scheduler's most expensive step.
            if not reserved and position + 1 < len(pool.queue) and time_s - job.submit_s >= RESERVE_AFTER_S:
                cached = pool.reservation
                if cached is not None and cached[0] == job.job_id and time_s - cached[1] < RESERVATION_TTL_S:
                    reserved, shadow_s = cached[2], cached[3]
                else:
                    reserved, shadow_s = self._reservation(pool, job, time_s)
                    pool.reservation = (job.job_id, time_s, reserved, shadow_s)
            position += 1
            examined += 1

    def _reservation(self, pool: _Pool, job: SimJob, time_s: float) -> tuple[frozenset[int], float]:
        """The nodes ``job`` will start on and when, if nothing else starts before it."""
        need = pool.gpus_per_node if job.node_count > 1 else job.gpu_count
        ready: list[tuple[float, int]] = []
        for index in pool.nodes:
            node = self._node_states[index]
            if node.status != "up":
                continue
            free = node.free_count()
            ready_s = time_s
            for end_s, gpus in sorted((j.end_s or math.inf, n) for j, n in node.running.values()):
                if free >= need:
                    break
                free += gpus
                ready_s = end_s
            if free >= need:
                ready.append((ready_s, index))
        ready.sort()
        chosen = ready[: job.node_count]
        if len(chosen) < job.node_count:
            return frozenset(pool.nodes), math.inf
        return frozenset(index for _, index in chosen), chosen[-1][0]

    def _set_free(self, pool: _Pool, node: _NodeState, gpu: int, free: bool) -> None:
        before = node.n_free
        node.free[gpu] = free
        node.n_free += 1 if free else -1
        if node.status != "up":
            return
        bucket = pool.by_free[before]
        del bucket[bisect_right(bucket, node.index) - 1]
        insort(pool.by_free[node.free_count()], node.index)

    def _try_start(
        self, pool: _Pool, job: SimJob, time_s: float, reserved: frozenset[int], shadow_s: float
    ) -> bool:
        per_node = pool.gpus_per_node
        # A node held for the reserved job is usable only by work that is gone before it starts.
        fits_before_reservation = time_s + job.run_s <= shadow_s
        chosen: list[int] = []
        if job.node_count > 1:
            candidates = [i for i in pool.by_free[per_node] if fits_before_reservation or i not in reserved]
            if len(candidates) < job.node_count:
                return False
            chosen = candidates[: job.node_count]
        else:
            for free in range(job.gpu_count, per_node + 1):
                usable = (i for i in pool.by_free[free] if fits_before_reservation or i not in reserved)
                first = next(usable, None)
                if first is not None:
                    chosen = [first]
                    break
            if not chosen:
                return False
        allocation = []
        for index in chosen:
            node = self._node_states[index]
            need = per_node if job.node_count > 1 else job.gpu_count
            gpus = tuple(g for g in range(len(node.free)) if node.free[g])[:need]
            for gpu in gpus:
                self._set_free(pool, node, gpu, False)
                node.seg_starts[gpu].append(time_s)
                node.seg_jobs[gpu].append(job)
            node.running[job.job_id] = (job, len(gpus))
            allocation.append((index, gpus))
        job.allocation = tuple(allocation)
        job.start_s = time_s
        job.end_s = time_s + job.run_s
        job.final_state = job.outcome
        job.exit_code = {"COMPLETED": "0:0", "FAILED": "1:0", "CANCELLED": "0:15", "TIMEOUT": "0:0"}[
            job.outcome
        ]
        self._running[job.job_id] = job
        self._max_lifetime_s = max(self._max_lifetime_s, job.end_s - job.submit_s)
        self._push(job.end_s, 0, "end", job)
        return True

    def _on_end(self, job: SimJob, time_s: float) -> None:
        if job.end_s != time_s or job.job_id not in self._running:
            return  # a fault moved the end: this event is stale
        del self._running[job.job_id]
        pool = self._node_states[job.allocation[0][0]].pool
        assert pool is not None
        for index, gpus in job.allocation:
            node = self._node_states[index]
            for gpu in gpus:
                self._set_free(pool, node, gpu, True)
            del node.running[job.job_id]
            if node.status == "draining" and node.free_count() == len(node.free):
                self._start_repair(node, time_s)
        if job.fault is not None and job.fault.kind not in ("straggler",):
            automated = time_s >= self.automated_recovery_from_s
            delays = AUTOMATED_RESUBMIT_DELAY_S if automated else RESUBMIT_DELAY_S
            delay = _rng(self.seed, "resubmit-delay", job.job_id).uniform(*delays)
            self._push(time_s + round(delay), 1, "arrival", (pool, -1, job.job_id, job))
        self._schedule(pool, time_s)

    def _drain(self, node: _NodeState) -> None:
        if node.status != "up":
            return
        pool = node.pool
        assert pool is not None
        bucket = pool.by_free[node.free_count()]
        del bucket[bisect_right(bucket, node.index) - 1]
        node.status = "draining"

    def _start_repair(self, node: _NodeState, time_s: float) -> None:
        repair = _rng(self.seed, "repair", node.spec.hostname, time_s).uniform(*REPAIR_S)
        up_s = time_s + round(repair)
        node.status = "repair"
        node.xids = [(t, g, x, up_s if r == math.inf else r) for t, g, x, r in node.xids]
        self._push(up_s, 0, "node_up", node)

    def _on_node_up(self, node: _NodeState, time_s: float) -> None:
        pool = node.pool
        assert pool is not None
        node.status = "up"
        node.boot_s.append(time_s - 240.0)  # the reboot finished a few minutes before it rejoined
        insort(pool.by_free[node.free_count()], node.index)
        self._schedule(pool, time_s)

    # ----------------------------------------------------------------------------------------
    # Faults

    def _generate_faults(self, epoch: int, begin: float, end: float) -> None:
        rng = _rng(self.seed, "faults", epoch)
        count = _poisson(rng, self.fault_rate_per_day * EPOCH_S / 86_400)
        for index in range(count):
            self._push(float(math.floor(begin + rng.random() * EPOCH_S)), 2, "fault", (epoch, index))

    def _on_fault(self, payload: tuple[int, int], time_s: float) -> None:
        epoch, index = payload
        if time_s < self.start_s:
            return  # the warm-up only fills the cluster; faults start with the history
        rng = _rng(self.seed, "fault", epoch, index)
        kind = _weighted(rng, tuple(zip(FAULT_KINDS, FAULT_WEIGHTS, strict=True)))
        candidates = [job for job in self._running.values() if job.fault is None and _eligible(job, kind)]
        if not candidates:
            candidates = [job for job in self._running.values() if job.fault is None and not job.serving]
            kind = "cuda_oom"
            if not candidates:
                return
        candidates.sort(key=lambda job: job.job_id)
        job = _weighted(rng, tuple((job, float(job.gpu_count)) for job in candidates))
        self._apply_fault(job, kind, time_s, rng)

    def _apply_fault(self, job: SimJob, kind: str, time_s: float, rng: random.Random) -> None:
        assert job.start_s is not None
        assert job.end_s is not None
        rank = rng.randrange(job.gpu_count)
        node_index, gpu = job.rank_location(rank)
        gpu_or_none: int | None = gpu
        rank_or_none: int | None = rank
        if kind == "straggler":
            node_index = job.allocation[rng.randrange(1, job.node_count)][0]
            rank_or_none = job.ranks_on(node_index)[0][0]
            gpu_or_none = None
            job.straggler_factor = rng.uniform(1.5, 2.5)
            new_end = time_s + round((job.end_s - time_s) * job.straggler_factor)
            if new_end - job.start_s > TIME_LIMIT_S:
                new_end = job.start_s + TIME_LIMIT_S
                job.final_state, job.exit_code = "TIMEOUT", "0:0"
        elif kind == "loss_nan":
            node_index = job.allocation[0][0]
            gpu_or_none = rank_or_none = None
            new_end = min(job.end_s, time_s + round(rng.uniform(0.5, 3.0) * HOUR_S))
            if new_end < job.end_s:
                job.final_state, job.exit_code = "CANCELLED", "0:15"  # the user kills the NaN run
        elif kind == "nccl_timeout":
            job.hang_end_s = time_s + NCCL_TIMEOUT_MS // 1000 + round(rng.uniform(5, 40))
            new_end = job.hang_end_s + round(rng.uniform(10, 60))
            job.final_state, job.exit_code = "FAILED", "1:0"
        elif kind == "cuda_oom":
            new_end = time_s + round(rng.uniform(10, 60))
            job.final_state, job.exit_code = "FAILED", "1:0"
        else:
            xid = FAULT_XID[kind]
            new_end = time_s + round(rng.uniform(30, 120) if xid == 79 else rng.uniform(5, 90))
            job.final_state, job.exit_code = ("NODE_FAIL", "0:0") if xid == 79 else ("FAILED", "1:0")
            node = self._node_states[node_index]
            node.xids.append((time_s, gpu, xid, math.inf))
            self._drain(node)
        job.fault = FaultTruth(
            job_external_id=job.external_id,
            kind=kind,
            node=self.nodes[node_index].hostname,
            gpu=gpu_or_none,
            rank=rank_or_none,
            occurred_at=_dt(time_s),
            xid=FAULT_XID.get(kind),
        )
        job.fault_s = time_s
        job.fault_node = node_index
        job.fault_gpu = gpu_or_none
        self._faults.append(job.fault)
        if new_end != job.end_s:
            job.end_s = new_end
            self._max_lifetime_s = max(self._max_lifetime_s, new_end - job.submit_s)
            self._push(new_end, 0, "end", job)

    # ----------------------------------------------------------------------------------------
    # Ground truth queries

    def _jobs_between(self, since_s: float, until_s: float) -> list[SimJob]:
        """Jobs submitted before ``until`` that were pending at ``until`` or had not ended by ``since``."""
        self._advance(until_s)
        # Only jobs submitted after this can still matter: older ones ended (or started) long ago,
        # except those still waiting in a queue now.
        oldest_queued = min((pool.queue[0].submit_s for pool in self._pools if pool.queue), default=math.inf)
        lower = min(since_s - self._max_lifetime_s, oldest_queued)
        first = bisect_right(self._submit_s, lower - 1e-6)
        last = bisect_right(self._submit_s, until_s - 1e-9)
        return [
            job
            for job in self._jobs[first:last]
            if job.submit_s < until_s
            and (
                job.end_s is None
                or job.end_s > since_s
                or (job.start_s is not None and job.start_s >= until_s)
            )
        ]

    def sim_jobs(self, since: datetime, until: datetime) -> list[SimJob]:
        """Internal job objects (ground truth) submitted before ``until`` and not ended by ``since``."""
        return self._jobs_between(_ts(since), _ts(until))

    def sim_job(self, job_id: str | int) -> SimJob:
        """One job's ground truth by Slurm id."""
        return self._job_by_id[int(job_id)]

    def jobs(self, since: datetime, until: datetime) -> list[JobRecord]:
        """Jobs active in ``[since, until)`` as records, states as ``sacct`` would show at ``until``.

        Includes jobs still pending at ``until``; ``source`` is "slurm", ``account`` the
        department code, ``gpu_model`` "h100"/"a100".
        """
        until_s = _ts(until)
        return [self._record(job, until_s) for job in self._jobs_between(_ts(since), until_s)]

    def _record(self, job: SimJob, at_s: float) -> JobRecord:
        state, start_s, end_s = job.state_at(at_s)
        nodes = tuple(self.nodes[i].hostname for i in job.node_indices()) if start_s is not None else ()
        return JobRecord(
            source="slurm",
            external_id=job.external_id,
            account=job.department,
            user_name=job.user_name,
            name=job.name,
            state=state.lower(),
            gpu_count=job.gpu_count,
            submitted_at=_dt(job.submit_s),
            started_at=_dt(start_s) if start_s is not None else None,
            ended_at=_dt(end_s) if end_s is not None else None,
            gpu_model=job.gpu_model,
            node_count=job.node_count,
            node_names=nodes,
            framework=job.framework,
            config=copy.deepcopy(job.config),
            # sacct prints 0:0 until a job ends; the record says what sacct says.
            exit_code=job.exit_code if end_s is not None else "0:0",
        )

    def faults(self, since: datetime, until: datetime) -> list[FaultTruth]:
        """Injected faults that occurred in ``[since, until)``, in time order."""
        since_s, until_s = _ts(since), _ts(until)
        self._advance(until_s)
        return [f for f in self._faults if since_s <= f.occurred_at.timestamp() < until_s]

    def job_on_gpu(self, hostname: str, gpu: int, at: datetime) -> SimJob | None:
        """The job holding a GPU at an instant, or None."""
        at_s = _ts(at)
        self._advance(at_s)
        return self._job_at(self._node_states[self._index[hostname]], gpu, at_s)

    @staticmethod
    def _job_at(node: _NodeState, gpu: int, at_s: float) -> SimJob | None:
        starts = node.seg_starts[gpu]
        position = bisect_right(starts, at_s) - 1
        if position < 0:
            return None
        job = node.seg_jobs[gpu][position]
        assert job.end_s is not None
        return job if job.end_s > at_s else None

    def _hour_factor(self, job: SimJob, hour: int) -> float:
        key = (job.job_id, hour)
        factor = self._hour_factor_cache.get(key)
        if factor is None:
            factor = 1 + job.hour_jitter * (2 * _unit(self.seed, "hour", job.job_id, hour) - 1)
            if len(self._hour_factor_cache) > 500_000:
                self._hour_factor_cache.clear()
            self._hour_factor_cache[key] = factor
        return factor

    def _expected_activity(self, job: SimJob, node: int, gpu: int, begin_s: float, end_s: float) -> float:
        """Integral of the expected GR_ENGINE_ACTIVE of ``job`` on one GPU over [begin, end) (s)."""
        assert job.start_s is not None
        assert job.end_s is not None
        begin_s, end_s = max(begin_s, job.start_s), min(end_s, job.end_s)
        if end_s <= begin_s:
            return 0.0
        if job.hang_end_s is not None and job.fault_s is not None:
            hang_begin, hang_end = max(begin_s, job.fault_s), min(end_s, job.hang_end_s)
            if hang_end > hang_begin:
                culprit = node == job.fault_node and gpu == job.fault_gpu
                spin = 0.0 if culprit else HANG_ACTIVITY_MEAN
                return (
                    self._expected_activity_plain(job, begin_s, hang_begin)
                    + spin * (hang_end - hang_begin)
                    + self._expected_activity_plain(job, hang_end, end_s)
                )
        return self._expected_activity_plain(job, begin_s, end_s)

    def _expected_activity_plain(self, job: SimJob, begin_s: float, end_s: float) -> float:
        if end_s <= begin_s:
            return 0.0
        if job.serving:
            return (1 - job.zero_share) * self._serving_mean() * (end_s - begin_s)
        total = 0.0
        position = begin_s
        while position < end_s:
            hour = int(position // HOUR_S)
            step_end = min(end_s, (hour + 1) * HOUR_S)
            total += job.activity * self._hour_factor(job, hour) * (step_end - position)
            position = step_end
        return total * (1 - job.zero_share)

    def _serving_mean(self) -> float:
        return self.cal.serving_duty_pct.mean() / 100

    def _gpu_window(self, node: _NodeState, gpu: int, begin_s: float, end_s: float) -> tuple[float, float]:
        """(activity integral, allocated seconds) of one GPU over [begin, end)."""
        starts = node.seg_starts[gpu]
        jobs = node.seg_jobs[gpu]
        position = bisect_right(starts, end_s - 1e-9) - 1
        busy = allocated = 0.0
        while position >= 0:
            job = jobs[position]
            assert job.start_s is not None
            assert job.end_s is not None
            if job.end_s <= begin_s:
                break
            allocated += min(end_s, job.end_s) - max(begin_s, job.start_s)
            busy += self._expected_activity(job, node.index, gpu, begin_s, end_s)
            position -= 1
        return busy, allocated

    def node_hour_activity(self, hostname: str, hour_start: datetime) -> float:
        """Expected mean GR_ENGINE_ACTIVE (0-1) over a node's GPUs for one hour."""
        begin_s = _ts(hour_start)
        self._advance(begin_s + HOUR_S)
        node = self._node_states[self._index[hostname]]
        total = sum(self._gpu_window(node, g, begin_s, begin_s + HOUR_S)[0] for g in range(len(node.free)))
        return total / (HOUR_S * len(node.free))

    def sample(self, hostname: str, gpu: int, at: datetime) -> SimulatedReading:
        """The values one GPU reports at ``at`` (what ``exposition`` prints for it)."""
        at_s = _ts(at)
        self._advance(at_s)
        return self._sample(self._node_states[self._index[hostname]], gpu, at_s)

    def _sample(self, node: _NodeState, gpu: int, at_s: float) -> SimulatedReading:
        bucket = int(at_s // BUCKET_S)
        digest = hashlib.blake2b(
            f"{self.seed}|{node.spec.hostname}|{gpu}|{bucket}".encode(), digest_size=16
        ).digest()
        u = [int.from_bytes(digest[i : i + 2], "big") / 65536 for i in range(0, 16, 2)]
        model = node.model
        memory = node.spec.gpu_memory_mib
        xid_last, xid_counts, blank = self._xid_state(node, gpu, at_s)
        job = self._job_at(node, gpu, at_s)
        fb_reserved = 512
        if blank:
            return SimulatedReading(
                util_pct=DCGM_BLANK, gr_active=DCGM_BLANK, sm_active=DCGM_BLANK, sm_occupancy=DCGM_BLANK,
                tensor_active=DCGM_BLANK, dram_active=DCGM_BLANK, fb_used_mib=DCGM_BLANK,
                fb_free_mib=DCGM_BLANK, power_w=DCGM_BLANK, temp_c=DCGM_BLANK, sm_clock_mhz=DCGM_BLANK,
                mem_clock_mhz=DCGM_BLANK, mem_copy_util_pct=DCGM_BLANK, xid_last=xid_last,
                xid_counts=xid_counts, job=job, blank=True,
            )  # fmt: skip
        idle_w = node.idle_w[gpu]
        if job is None:
            power = idle_w * (0.98 + 0.04 * u[5])
            return SimulatedReading(
                util_pct=0, gr_active=0.0, sm_active=0.0, sm_occupancy=0.0, tensor_active=0.0,
                dram_active=0.0, fb_used_mib=0, fb_free_mib=memory - fb_reserved, power_w=power,
                temp_c=round(node.ambient_c + 1.5 * u[6]), sm_clock_mhz=model.sm_clock_idle_mhz,
                mem_clock_mhz=model.mem_clock_mhz, mem_copy_util_pct=0, xid_last=xid_last,
                xid_counts=xid_counts, job=job,
            )  # fmt: skip
        gr, sm, util = self._activity_sample(job, node.index, gpu, at_s, u)
        straggling = job.straggler_factor > 1 and job.fault_s is not None and at_s >= job.fault_s
        if straggling and node.index != job.fault_node:
            sm *= 0.6  # healthy ranks wait in NCCL for the slow node
        fb_fraction = job.fb_fraction
        oom_at = job.fault_s if job.fault is not None and job.fault.kind == "cuda_oom" else None
        if (
            oom_at is not None
            and node.index == job.fault_node
            and gpu == job.fault_gpu
            and at_s >= oom_at - OOM_RAMP_S
        ):
            fb_fraction = 0.985 + 0.01 * u[7]  # memory climbs until the allocation that fails
        fb_used = round(max(fb_fraction, 0.02) * (memory - fb_reserved) * (0.995 + 0.005 * u[7]))
        tensor = sm * job.tensor_ratio
        dram = gr * job.dram_ratio * (0.9 + 0.2 * u[4])
        load = min(1.0, 0.3 * gr + 0.9 * sm)
        clock_scale = 1.0
        if job.fault_node == node.index and job.straggler_factor > 1 and at_s >= (job.fault_s or 0):
            clock_scale = 0.7  # the straggler throttles
        power = idle_w + (model.tdp_w * 0.95 - idle_w) * load**0.9 * clock_scale * (0.97 + 0.06 * u[5])
        heat = (power - idle_w) / (model.tdp_w - idle_w)
        temp = node.ambient_c + model.temp_rise_c * heat + 1.5 * u[6] + (9 if clock_scale < 1 else 0)
        sm_clock = model.sm_clock_max_mhz if gr > 0 else model.sm_clock_idle_mhz
        return SimulatedReading(
            util_pct=util,
            gr_active=gr,
            sm_active=sm,
            sm_occupancy=sm * 0.28 * (0.9 + 0.2 * u[4]),  # Acme: busy occupancy / SM_ACTIVE ~ 0.28
            tensor_active=tensor,
            dram_active=dram,
            fb_used_mib=fb_used,
            fb_free_mib=memory - fb_reserved - fb_used,
            power_w=power,
            temp_c=round(temp),
            sm_clock_mhz=round(sm_clock * clock_scale),
            mem_clock_mhz=model.mem_clock_mhz,
            mem_copy_util_pct=round(dram * 100),
            xid_last=xid_last,
            xid_counts=xid_counts,
            job=job,
        )

    def _activity_sample(
        self, job: SimJob, node: int, gpu: int, at_s: float, u: list[float]
    ) -> tuple[float, float, int]:
        """(GR_ENGINE_ACTIVE, SM_ACTIVE, GPU_UTIL) of a held GPU; expectation = ``_expected_activity``."""
        if job.hang_end_s is not None and job.fault_s is not None and job.fault_s <= at_s < job.hang_end_s:
            if node == job.fault_node and gpu == job.fault_gpu:
                return 0.0, 0.0, 0  # the stuck rank never launched the collective
            # Everyone else spins in an NCCL kernel: busy engine, almost no SM work.
            return HANG_ACTIVITY_LOW + HANG_ACTIVITY_SPAN * u[1], 0.01 + 0.02 * u[2], 100
        if u[0] < job.zero_share:
            return 0.0, 0.0, 0
        if job.serving:
            gr = self.cal.serving_duty_pct.at(u[1]) / 100
        else:
            gr = job.activity * self._hour_factor(job, int(at_s // HOUR_S)) * (0.95 + 0.1 * u[1])
        sm = gr * job.sm_ratio * (0.95 + 0.1 * u[2])
        # GPU_UTIL counts any kernel in the sample period, so it reads high whenever work runs:
        # most active samples take Acme's busy GPU_UTIL distribution (median 99%).
        if u[3] < min(1.0, 2.5 * gr):
            util = round(self.cal.busy_gpu_util_pct.at(u[4]))
        else:
            util = min(100, round(100 * gr * (1 + u[4])))
        return gr, sm, max(util, 1)

    def _xid_state(
        self, node: _NodeState, gpu: int, at_s: float
    ) -> tuple[int, tuple[tuple[int, int], ...], bool]:
        """(last Xid on this GPU since the exporter started, counts in the window, fallen off)."""
        if not node.xids:
            return 0, (), False
        last = 0
        counts: dict[int, int] = {}
        blank = False
        window_s = XID_WINDOW_MS / 1000
        for time_s, xid_gpu, xid, reboot_s in node.xids:
            if xid_gpu != gpu or time_s > at_s or at_s >= reboot_s:
                continue
            last = xid
            if at_s - time_s < window_s:
                counts[xid] = counts.get(xid, 0) + 1
            if xid == 79:
                blank = True
        return last, tuple(sorted(counts.items())), blank

    # ----------------------------------------------------------------------------------------
    # Output formats (implemented in formats.py and logs.py)

    def exposition(self, at: datetime, *, nodes: list[str] | None = None) -> str:
        """dcgm-exporter ``/metrics`` text for all nodes (or the given ones) at ``at``."""
        from efficiency.simulator.formats import exposition

        return exposition(self, at, nodes=nodes)

    def sacct_text(
        self, since: datetime, until: datetime, *, timezone: tzinfo, fields: Sequence[str] | None = None
    ) -> str:
        """``sacct --parsable2 --allocations`` output for ``[since, until)``, as run at ``until``."""
        from efficiency.simulator.formats import sacct_text

        return sacct_text(self, since, until, timezone=timezone, fields=fields)

    def kubernetes_jobs_json(self, since: datetime, until: datetime) -> str:
        """``kubectl get jobs -A -o json`` for the same jobs, as seen at ``until``."""
        from efficiency.simulator.formats import kubernetes_jobs_json

        return kubernetes_jobs_json(self, since, until)

    def job_log_lines(self, job_id: str | int, rank: int, since: datetime, until: datetime) -> list[str]:
        """Lines rank ``rank`` of a job writes in ``[since, until)``, in time order."""
        from efficiency.simulator.logs import job_log_lines

        return job_log_lines(self, self.sim_job(job_id), rank, _ts(since), _ts(until))

    def write_job_logs(self, root: Path, since: datetime, until: datetime) -> int:
        """Append every job's rank logs for ``[since, until)`` under ``root/<job>/rank-<N>.log``."""
        from efficiency.simulator.logs import write_job_logs

        return write_job_logs(self, root, since, until)

    def kernel_log_lines(
        self, hostname: str, since: datetime, until: datetime, *, timezone: tzinfo = UTC
    ) -> list[str]:
        """Kernel log (``/var/log/kern.log``) lines of one node in ``[since, until)``."""
        from efficiency.simulator.logs import kernel_log_lines

        return kernel_log_lines(self, hostname, since, until, timezone=timezone)

    def write_kernel_logs(
        self, root: Path, since: datetime, until: datetime, *, timezone: tzinfo = UTC
    ) -> int:
        """Append every node's kernel log lines for ``[since, until)`` to ``root/kern/<host>.log``."""
        from efficiency.simulator.logs import write_kernel_logs

        return write_kernel_logs(self, root, since, until, timezone=timezone)


HANG_ACTIVITY_LOW = 0.97
HANG_ACTIVITY_SPAN = 0.03
HANG_ACTIVITY_MEAN = HANG_ACTIVITY_LOW + HANG_ACTIVITY_SPAN / 2


def _eligible(job: SimJob, kind: str) -> bool:
    if job.serving:
        return kind in ("xid79", "xid48")
    if kind == "straggler":
        return job.node_count >= 2
    if kind in ("nccl_timeout", "xid74"):
        return job.gpu_count >= 2
    return True


def _weighted(rng: random.Random, options: Sequence[tuple[Any, float]] | Iterable[tuple[Any, float]]) -> Any:
    items = list(options)
    total = sum(weight for _, weight in items)
    pick = rng.random() * total
    for value, weight in items:
        pick -= weight
        if pick < 0:
            return value
    return items[-1][0]


def _poisson(rng: random.Random, mean: float) -> int:
    if mean <= 0:
        return 0
    if mean > 50:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit = math.exp(-mean)
    count = 0
    product = rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count


@cache
def _department_users(seed: int, department: str) -> list[str]:
    rng = _rng(seed, "users", department)
    return rng.sample(USER_NAMES, k=rng.randint(4, 7))


def _job_config(
    *,
    kind: str,
    rdma: bool,
    misconfig: str,
    nodes: int,
    gpus_per_node: int,
    name: str,
    global_batch: int,
    train_iters: int,
    variant: float,
) -> dict[str, Any]:
    """The config snapshot captured at submit: env, image, mounts, cache mode, launcher args."""
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_SOCKET_IFNAME": "eth0",
        "OMP_NUM_THREADS": "8",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    }
    if rdma and misconfig != "nccl_socket":
        env.update({"NCCL_IB_HCA": IB_HCAS, "NCCL_IB_GID_INDEX": "3", "NCCL_NET_GDR_LEVEL": "PHB"})
    elif rdma and variant < 0.5:
        env["NCCL_IB_DISABLE"] = "1"  # copied from an old single-node recipe
    image = IMAGE_STOCK if misconfig == "stock_framework" else IMAGE_ACCELERATED
    if kind == "interactive":
        launcher = ["jupyter", "lab", "--no-browser", "--port=8888"]
    else:
        launcher = [
            "torchrun",
            f"--nnodes={nodes}",
            f"--nproc_per_node={gpus_per_node}",
            "--rdzv_backend=c10d",
            f"--rdzv_id={name}",
            "train.py",
            f"--global-batch-size={global_batch}",
            f"--train-iters={train_iters}",
            "--bf16",
        ]
    return {
        "env": env,
        "image": image,
        "mounts": ["/mnt/pfs/datasets", "/mnt/pfs/checkpoints", "/dev/shm"],  # noqa: S108 - a container mount
        "storage_cache_mode": "metadata-only" if misconfig == "storage_metadata_only" else "full-data",
        "launcher_args": launcher,
    }
