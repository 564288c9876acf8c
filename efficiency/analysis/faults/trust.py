"""Which evidence is trusted for what: the rules of trust of DESIGN.md, as plain functions.

Hardware evidence is trusted only from streams the node's users cannot write: the node's kernel
log, collected from the node (``kern/<host>.log`` under a log-files root, or a pushed stream of
that name), and the exporter's metrics. Everything else a log source delivers is a job's own
output (rank logs, launcher logs, pushed job lines), written by the job's user: it can raise a
suspicion, and may only name the nodes its job ran on.
"""

import re
from dataclasses import dataclass

_KERNEL_STREAM_RE = re.compile(r"kern/([^/]+)\.log")

# Reasons a job's output may not name a node (message codes of efficiency.fault_messages).
NODE_NOT_OF_JOB = "node_not_of_job"
NODE_WITHOUT_JOB = "node_without_job"


def kernel_log_node(*, stream: str, node: str, job: str) -> str | None:
    """The node whose kernel log ``stream`` is, or ``None`` when the stream is job output.

    A kernel log is ``kern/<host>.log`` of that host (the chunk's node) and no job: the layout
    the log-files collector reads (``kern`` is not a job id there) and the name a shipper gives
    the kernel stream it forwards.
    """
    match = _KERNEL_STREAM_RE.fullmatch(stream)
    if match is None or job or not node or match[1] != node:
        return None
    return node


def source_has_kernel_logs(*, kind: str, config: dict) -> bool:
    """Whether a log source may carry nodes' kernel logs at all.

    A log-files root does (its ``kern/`` folder, which only the nodes' log forwarder may write);
    a push source only when its config says ``"kernel_logs": true``: its token then belongs to a
    shipper that forwards kernel logs, and one that only ships job output cannot pass job lines
    off as a kernel's, whatever it names its streams.
    """
    if kind == "log_files":
        return True
    return kind == "log_push" and config.get("kernel_logs") is True


@dataclass(frozen=True, slots=True)
class NodeClaim:
    """What a job's output may say about a node: the node it is kept for, or which name was
    refused and why (a message code)."""

    node: str | None
    refused: str | None = None
    refused_name: str = ""


def job_output_node(*, claims: list[str], job_nodes: frozenset[str] | None) -> NodeClaim:
    """Check the nodes a job's output names (its path or pushed ``node``, then a line's syslog
    host), most specific last.

    Kept only when every name is one of the job's nodes (``job_nodes``, from the scheduler); the
    last one wins. With no job known (``None``) nothing can vouch for a name, so it is refused.
    """
    named = [claim for claim in claims if claim]
    if not named:
        return NodeClaim(node=None)
    for claim in named:
        if job_nodes is None:
            return NodeClaim(node=None, refused=NODE_WITHOUT_JOB, refused_name=claim)
        if claim not in job_nodes:
            return NodeClaim(node=None, refused=NODE_NOT_OF_JOB, refused_name=claim)
    return NodeClaim(node=named[-1])


# Faults of the machine: only trusted evidence (a node's kernel log, the exporter) may act on them.
# Every other category is a fault of the job itself (NCCL timeout, CUDA OOM, NaN loss, …), whose
# evidence is by nature the job's own output: it may requeue that job, never touch a node.
MACHINE_CATEGORIES = frozenset({"hardware_gpu", "hardware_memory_ecc", "nvlink", "network_rdma"})


def job_output_may_restart(category: str) -> bool:
    """Whether a fault seen only in a job's own output may requeue that job (never a node action)."""
    return category not in MACHINE_CATEGORIES
