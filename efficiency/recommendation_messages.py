"""What each recommendation rule means, in the reader's language: title, why it matters, how to
apply the change, and where the ideal and the expected gain come from.

The rules (``efficiency.analysis.recommendations.rules``) store machine values: the observed and
ideal settings and the change as variables, settings and commands, the same in every language.
These sentences surround them on the pages, in the CSV and in the API.
"""

from dataclasses import dataclass

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from efficiency.analysis.recommendations.rules import ALL_RULE_IDS, JOB_RULES


@dataclass(frozen=True)
class RuleText:
    title: Promise
    why: Promise  # plain language: what goes wrong and what it costs
    how: Promise  # how to apply the change
    source: Promise  # published source of the ideal and of the expected impact (a citation)


RULES: dict[str, RuleText] = {
    "network.nccl-socket-on-rdma": RuleText(
        _("NCCL runs over TCP sockets on RDMA nodes"),
        _(
            "The job spans several nodes that have InfiniBand/RoCE, but NCCL moves its data over "
            "ordinary TCP sockets, usually because the container lacks the NCCL RDMA variables. "
            "Every gradient exchange is several times slower than it could be."
        ),
        _(
            "Put the NCCL RDMA settings into the job's container: remove NCCL_IB_DISABLE and "
            "NCCL_NET=Socket, set NCCL_IB_HCA to the node's HCAs. Check the next run's log for "
            "channel lines 'via NET/IB/…/GDRDMA'."
        ),
        _(
            "Reference scenario, fintech Y (fixing it doubled training efficiency); NCCL documentation, "
            "Environment Variables: NCCL_IB_DISABLE, NCCL_NET, NCCL_IB_HCA."
        ),
    ),
    "network.gdrdma-off": RuleText(
        _("InfiniBand without GPUDirect RDMA"),
        _(
            "NCCL uses InfiniBand but copies every message through host memory, because GPUDirect "
            "RDMA is not available (nvidia-peermem not loaded) or not allowed for this topology."
        ),
        _(
            "Load the nvidia-peermem kernel module on the nodes and allow GPUDirect RDMA with "
            "NCCL_NET_GDR_LEVEL; the channel lines then end in /GDRDMA."
        ),
        _(
            "NVIDIA GPUDirect RDMA documentation; NCCL documentation (NCCL_NET_GDR_LEVEL). A "
            "conservative 10%: the gain is the host-memory copy of each inter-node message."
        ),
    ),
    "network.p2p-disabled": RuleText(
        _("GPU peer-to-peer (NVLink) switched off"),
        _(
            "NCCL_P2P_DISABLE or NCCL_P2P_LEVEL keeps the GPUs of a node from talking over NVLink or "
            "PCIe directly; their traffic goes through host shared memory instead."
        ),
        _("Remove NCCL_P2P_DISABLE and NCCL_P2P_LEVEL from the job's environment."),
        _("NCCL documentation, NCCL_P2P_DISABLE and NCCL_P2P_LEVEL."),
    ),
    "network.nccl-debug-overrides": RuleText(
        _("NCCL debugging overrides left on"),
        _(
            "Variables meant for debugging force NCCL's algorithm or protocol, log every call, or "
            "make every collective wait on the host. They slow down normal training."
        ),
        _("Remove the variables listed from the job's environment."),
        _(
            "NCCL documentation: NCCL_ALGO and NCCL_PROTO are for debugging and should not be set in "
            "production; NCCL_DEBUG=TRACE; PyTorch: TORCH_NCCL_BLOCKING_WAIT."
        ),
    ),
    "storage.cache-metadata-only": RuleText(
        _("Dataset cache holds metadata only"),
        _(
            "The job reads its dataset through the parallel file system's cache, but the cache keeps "
            "only metadata: every read goes to the object store while the GPUs wait."
        ),
        _(
            "Switch the dataset's cache to full-data mode and warm it before the job starts; the "
            "GPUs' activity should rise at once."
        ),
        _(
            "Reference scenario, energy company H: metadata-only → full data made I/O-bound training "
            "~40× faster; the gain here is scaled by the measured waiting share."
        ),
    ),
    "input.pipeline-starved": RuleText(
        _("Input pipeline starves the GPUs"),
        _(
            "The GPUs are mostly idle while the data loader runs in the training process "
            "(num_workers=0) or copies from pageable memory (no pin_memory)."
        ),
        _("Give the DataLoader worker processes and pinned memory."),
        _(
            "PyTorch Performance Tuning Guide: asynchronous data loading and pinned memory; the gain is "
            "half the measured waiting share."
        ),
    ),
    "precision.fp32-on-tensor-cores": RuleText(
        _("fp32 training on tensor-core GPUs"),
        _("The job trains in fp32 on GPUs whose tensor cores run bf16/fp16 several times faster."),
        _("Train in bf16 mixed precision."),
        _(
            "NVIDIA Deep Learning Performance, Train With Mixed Precision (up to 3× on tensor cores); "
            "2× assumed."
        ),
    ),
    "kernels.stock-framework": RuleText(
        _("Stock framework instead of the acceleration library"),
        _(
            "The job runs a stock framework image although the acceleration library ships an "
            "optimized version of the model."
        ),
        _("Run the model from the acceleration library's image with its optimized model code."),
        _(
            "Reference scenario, car maker C: the acceleration library's versions gave up to 4× "
            "throughput (a fifth of the training time); 2× assumed."
        ),
    ),
    "allocation.idle-held": RuleText(
        _("GPUs held while idle"),
        _(
            "The job holds GPUs that have done (almost) nothing for a long time; nobody else can use "
            "them meanwhile. Warned at 60 and 105 minutes; release proposed at 120."
        ),
        _("End the job, or give it a time limit; for notebooks, an idle culler."),
        _(
            "Princeton Research Computing, Job Defense Shield (warnings at 60 and 105 minutes, "
            "cancellation at 120); the gain is the measured idle GPU-hours."
        ),
    ),
    "allocation.overrequested": RuleText(
        _("More GPUs requested than used"),
        _("The job holds GPUs of which only a few ever become active."),
        _("Request only the GPUs the job uses."),
        _("Princeton Research Computing, Job Defense Shield; the gain is the measured unused GPU-hours."),
    ),
    "allocation.low-efficiency": RuleText(
        _("Low efficiency over days"),
        _("The job family kept its GPUs busy less than a quarter of the time over the last 7 days."),
        _("Use fewer GPUs per job, or fix what the GPUs wait on (see this family's other findings)."),
        _("Princeton Research Computing, Job Defense Shield (low GPU efficiency over days)."),
    ),
    "reliability.checkpoint-interval": RuleText(
        _("Checkpoint interval far from the optimum"),
        _(
            "Checkpoints are written far more or far less often than the failure rate of jobs this "
            "size calls for: either time goes to writing them, or to redoing lost work."
        ),
        _("Checkpoint at the interval shown (the Young/Daly optimum √(2 · MTBF · cost))."),
        _(
            "J. W. Young, A first order approximation to the optimum checkpoint interval (CACM 1974); "
            "J. T. Daly, A higher order estimate of the optimum checkpoint interval (FGCS 2006)."
        ),
    ),
    "capacity.idle-node": RuleText(
        _("Idle node"),
        _("The node stayed idle through its last cycle: its GPUs are capacity nobody uses."),
        _("Move the node to the shared pool, or drain it for maintenance."),
        _("Reference scenario, car maker A (~20% of nodes below 1%)."),
    ),
    "capacity.hot-node": RuleText(
        _("Hot node"),
        _("The node ran above 80% most of its last cycle while others idle: work queues behind it."),
        _("Let the jobs pinned to this node run on any node of its pool."),
        _("Reference scenario, car maker A (~20% of nodes often above 80%)."),
    ),
    "capacity.guarantee-mismatch": RuleText(
        _("Guarantee far from demand"),
        _("The department's guaranteed GPUs are far above or below what it used."),
        _("Approve the next cycle's quota proposal."),
        _("The portal's quota proposal (percentile of last cycle's demand)."),
    ),
}

assert set(RULES) == set(ALL_RULE_IDS), "every rule has its text"

SPEEDUPS = {rule.id: rule.speedup for rule in JOB_RULES}


def rule_title(rule_id: str) -> str:
    text = RULES.get(rule_id)
    return str(text.title) if text else rule_id


def subject_text(rec) -> str:
    """What a recommendation is about: "user · job name pattern", a node's hostname."""
    if rec.subject_kind == "node":
        return rec.node.hostname if rec.node_id and rec.node else rec.subject_key
    if rec.subject_kind == "job_family":
        return f"{rec.user_name} · {rec.name_pattern}"
    return rec.subject_key


def rule_choices() -> list[tuple[str, str]]:
    """(id, title) of every rule, for filters."""
    return [(rule_id, rule_title(rule_id)) for rule_id in ALL_RULE_IDS]
