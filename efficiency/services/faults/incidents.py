"""Incidents: signals grouped into the incident of their fault, located, their phases stamped."""

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from efficiency import dispatch
from efficiency.analysis.faults import root_cause
from efficiency.choices import FaultCategory, IncidentStatus
from efficiency.models import Cluster, FaultSignal, Incident
from efficiency.models.faults import PHASES
from efficiency.services.faults.evidence import node_of_rank
from efficiency.services.notifications import notification_emit

# Which evidence is the cause when several kinds come together: the most fundamental first.
ROOT_PRIORITY = [FaultCategory(category) for category in root_cause.ROOT_PRIORITY]
# Evidence that is a configuration finding, not a fault: kept as signals, opens no incident.
NOT_INCIDENTS = {FaultCategory.NCCL_SOCKET_FALLBACK}
# Signals this close to an open incident of the same job belong to it.
INCIDENT_WINDOW = timedelta(hours=6)
# Evidence about a node's hardware this close in time, on the same node and GPU, is one fault seen
# by several paths (the kernel's line, the exporter's Xid count, the last-Xid field, the ECC counter).
SAME_FAULT_WINDOW = timedelta(minutes=10)
# A job that does not run again (requeued or resubmitted) this long after it ended is not coming back.


NODE_FAULTS = {
    FaultCategory.HARDWARE_GPU,
    FaultCategory.HARDWARE_MEMORY_ECC,
    FaultCategory.NVLINK,
    FaultCategory.NETWORK_RDMA,
}


def incidents_group(*, cluster: Cluster, now: datetime | None = None) -> int:
    """Attach each unassigned signal to the incident of its fault, or open one; locate; act.

    Signals are taken one by one in the order they occurred (``_incident_for`` says where each
    belongs), so that evidence grouped late, or many days of it at once, still goes to the fault it
    belongs to. Returns how many incidents were opened.
    """
    now = now or timezone.now()
    pending = list(
        FaultSignal.objects.filter(cluster=cluster, incident__isnull=True)
        .exclude(category__in=NOT_INCIDENTS)
        .select_related("job", "node")
        .order_by("occurred_at", "pk")
    )
    opened = 0
    touched: dict[int, Incident] = {}
    for signal in pending:
        with transaction.atomic():
            incident = _incident_for(signal)
            if incident is None:
                incident = _incident_create(cluster, signal)
                opened += 1
            elif incident.job_id is None and signal.job_id is not None:
                # The scheduler's record of the job came after the first evidence: the job was hit.
                job = signal.job
                incident.job, incident.department_id, incident.gpu_count = (
                    job,
                    job.department_id,
                    job.gpu_count,
                )
                incident.save(update_fields=["job", "department", "gpu_count", "updated_at"])
            FaultSignal.objects.filter(pk=signal.pk).update(incident=incident)
            touched[incident.pk] = incident
    for incident in touched.values():
        with transaction.atomic():
            if _locate(incident):
                dispatch.incident_policy(incident.pk)
    return opened


def _incident_for(signal: FaultSignal) -> Incident | None:
    """The incident a new signal belongs to, if any.

    1. The same fault seen by another path: hardware evidence (or any evidence with no job) on the
       same node and GPU within ``SAME_FAULT_WINDOW`` of evidence already in an incident.
    2. The job's incident: its latest one not yet over, within ``INCIDENT_WINDOW``.
    3. With no job: the node's latest incident without a job not yet over, within the window.
    """
    if signal.node_id is not None and (signal.job_id is None or signal.category in NODE_FAULTS):
        nearby = (
            FaultSignal.objects.filter(
                cluster_id=signal.cluster_id,
                node_id=signal.node_id,
                incident__isnull=False,
                occurred_at__gte=signal.occurred_at - SAME_FAULT_WINDOW,
                occurred_at__lte=signal.occurred_at + SAME_FAULT_WINDOW,
            )
            .filter(Q(job__isnull=True) | Q(category__in=NODE_FAULTS))
            .select_related("incident")
        )
        if signal.gpu_index is not None:
            nearby = nearby.filter(Q(gpu_index__isnull=True) | Q(gpu_index=signal.gpu_index))
        closest = min(nearby, key=lambda s: abs(s.occurred_at - signal.occurred_at), default=None)
        if closest is not None:
            return closest.incident
    recent = (
        Incident.objects.filter(
            cluster_id=signal.cluster_id, occurred_at__gte=signal.occurred_at - INCIDENT_WINDOW
        )
        .exclude(status__in=IncidentStatus.finished())
        .order_by("-occurred_at")
    )
    if signal.job_id is not None:
        return recent.filter(job_id=signal.job_id).first()
    return recent.filter(job__isnull=True, node_id=signal.node_id).first()


def _incident_create(cluster: Cluster, signal: FaultSignal) -> Incident:
    job = signal.job
    incident = Incident.objects.create(
        cluster=cluster,
        job=job,
        department_id=job.department_id if job else None,
        node=signal.node,
        gpu_index=signal.gpu_index,
        category=signal.category,
        severity=signal.severity,
        code=signal.code,
        root_signature_id=signal.signature_id,
        occurred_at=signal.occurred_at,
        detected_at=signal.detected_at,
        gpu_count=job.gpu_count if job else (signal.node.gpu_count if signal.node else 0),
    )
    # Recorded in this transaction; routed to the department's channels once it commits.
    notification_emit("incident_opened", incident=incident, now=incident.detected_at)
    return incident


def phase_stamp(incident: Incident, phase: str, at: datetime) -> None:
    """Set one phase of ``incident`` to ``at``, kept between the phases already stamped around it.

    Time only moves forward in an incident (DESIGN.md), whatever order evidence and actions come
    in: a job the scheduler requeued before the portal asked recovered, for the record, when the
    restart was requested; evidence detected late is not located before it was detected. The
    database refuses phases out of order (``incident_phases_in_order``).
    """
    index = PHASES.index(phase)
    before = [moment for name in PHASES[:index] if (moment := getattr(incident, name)) is not None]
    after = [moment for name in PHASES[index + 1 :] if (moment := getattr(incident, name)) is not None]
    if before:
        at = max(at, *before)
    if after:
        at = min(at, *after)
    setattr(incident, phase, at)


def _locate(incident: Incident) -> bool:
    """Decide the root cause and its place from all the incident's signals; True when it changed.

    Located is when the portal had the evidence that decided it: the root signal's detection (for
    a hang located by its silent ranks, the last timeout's), so a replay or a late grouping stamps
    the moment the live portal located it.
    """
    signals = list(incident.signals.select_related("node").order_by("occurred_at", "pk"))
    if not signals:
        return False
    # Job output cannot outrank trusted evidence: with any of it, the cause and place come from it.
    trusted = [s for s in signals if s.trusted]
    root = root_cause.root_evidence(signals, priority=ROOT_PRIORITY)
    reasoning = {
        "root_signal": root.pk,
        "why": "most_fundamental",
        "categories": sorted({s.category for s in signals}),
        "signals": len(signals),
    }
    decided_at = root.detected_at
    node, rank = root.node, root.rank
    if rank is None:
        # A kernel line names the node, not the rank: take it from the same fault's CUDA error.
        rank = next(
            (
                s.rank
                for s in signals
                if s.category == root.category and s.rank is not None and s.node == node
            ),
            None,
        )
    if root.category == FaultCategory.NCCL_TIMEOUT_HANG and incident.job is not None:
        reported = (s.rank for s in signals if s.category == FaultCategory.NCCL_TIMEOUT_HANG)
        silent = root_cause.silent_ranks(reported, world_size=incident.job.gpu_count)
        if silent:
            rank = silent[0]
            node = node_of_rank(incident.job, rank) or node
            reasoning["why"] = "silent_ranks"
            reasoning["silent_ranks"] = silent
            decided_at = max(s.detected_at for s in signals if s.category == FaultCategory.NCCL_TIMEOUT_HANG)
    changed = (incident.category, incident.node_id, incident.rank, incident.code, incident.confirmed) != (
        root.category,
        node.pk if node else None,
        rank,
        root.code,
        bool(trusted),
    )
    incident.confirmed = bool(trusted)
    incident.category, incident.severity, incident.code = root.category, root.severity, root.code
    incident.root_signature_id = root.signature_id
    incident.node, incident.rank = node, rank
    incident.gpu_index = next(
        (
            s.gpu_index
            for s in signals
            if s.gpu_index is not None and s.node == node and s.category == root.category
        ),
        incident.gpu_index,
    )
    phase_stamp(incident, "occurred_at", min(incident.occurred_at, signals[0].occurred_at))
    phase_stamp(incident, "detected_at", min(incident.detected_at, *(s.detected_at for s in signals)))
    if incident.located_at is None or changed:
        phase_stamp(incident, "located_at", decided_at)
    incident.reasoning = reasoning
    incident.save()
    return changed or not incident.actions.exists()
