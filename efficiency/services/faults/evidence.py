"""Fault evidence, stored: each signal once, and where a job ran (which job held a node, which
node ran a rank)."""

from datetime import datetime, timedelta

from django.db.models import Q

from efficiency.analysis.faults.root_cause import rank_host_index
from efficiency.models import Cluster, FaultSignal, Job, LogChunk, Node


def job_on_node(node: Node, at: datetime) -> Job | None:
    """The job that held GPUs of ``node`` at ``at`` (kernel lines name a node, not a job)."""
    return (
        Job.objects.filter(nodes=node, started_at__lte=at)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gte=at - timedelta(minutes=10)))
        .order_by("-gpu_count", "-started_at")
        .first()
    )


def signals_store(
    cluster: Cluster, signals: list[FaultSignal], *, now: datetime, seen_after: timedelta | None = None
) -> int:
    """Store signals, each evidence once, stamped detected; returns how many were new.

    Detected is ``now``, when the portal saw the evidence. In a replay (``seen_after``) it is when
    the live portal would have: that long after the evidence was complete (a detector's
    ``seen_at``, else the moment it occurred), never before it occurred and never after ``now``.
    """
    fresh: dict[str, FaultSignal] = {}
    for signal in signals:
        signal.occurred_at = min(signal.occurred_at, now)
        if seen_after is None:
            signal.detected_at = now
        else:
            seen_at = max(signal.occurred_at, getattr(signal, "seen_at", signal.occurred_at))
            signal.detected_at = min(now, seen_at + seen_after)
        fresh.setdefault(signal.evidence_key, signal)
    known = set(
        FaultSignal.objects.filter(cluster=cluster, evidence_key__in=list(fresh)).values_list(
            "evidence_key", flat=True
        )
    )
    new = [signal for key, signal in fresh.items() if key not in known]
    FaultSignal.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)


def node_of_rank(job: Job, rank: int) -> Node | None:
    """The node a rank ran on: from its own log chunks, else from the launch layout (ranks are
    laid out node by node over the job's nodes in hostname order, as srun and torchrun do)."""
    nodes = list(job.nodes.order_by("hostname"))
    # A chunk's node is the job's own word (its path, its pushed field): only one of its nodes counts.
    hostnames = {n.hostname: n for n in nodes}
    for hostname in (
        LogChunk.objects.filter(job=job, rank=rank)
        .exclude(node="")
        .order_by()
        .values_list("node", flat=True)
        .distinct()
    ):
        if hostname in hostnames:
            return hostnames[hostname]
    index = rank_host_index(rank, world_size=job.gpu_count, hosts=len(nodes))
    return nodes[index] if index is not None else None
