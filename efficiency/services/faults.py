"""Faults, the write side: scan new log chunks, group evidence into incidents, locate, act, recover.

The path of a fault: a log line is collected (log files or log push) → ``fault_scan_source`` runs
the signature scanner over the new chunks and stores one ``FaultSignal`` per finding (the same
line is stored once however often it is scanned) → ``incidents_group`` attaches the signals of a
job to its open incident or opens one, and locates the root cause: the most fundamental category
present (hardware before network before software before the NCCL timeouts that follow them), its
earliest signal's node and rank; for a hang with only watchdog timeouts, the ranks that did *not*
report one (they never entered the collective) → the category's ``FaultPolicy`` isolates the
node, requests a restart from the last checkpoint and notifies, through the configured actuators
(each call and its outcome logged on the incident) → ``incidents_refresh`` marks an incident
recovered when the job, or its resubmission, runs again, and computes the GPU-hours lost.
"""

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

from django.db import transaction
from django.db.models import Avg, Q
from django.utils import timezone

from efficiency.actuators import ActionRequest, actuator_from_config
from efficiency.analysis.faults.detectors import (
    SPIKE,
    detect_flat_gpus,
    detect_hang,
    detect_loss_anomalies,
    detect_slowdown,
)
from efficiency.analysis.faults.progress import parse_progress
from efficiency.analysis.faults.scanner import scan_bytes
from efficiency.analysis.faults.signatures import SIGNATURES_BY_ID
from efficiency.analysis.stats import percentile
from efficiency.choices import (
    ActionKind,
    FaultCategory,
    IncidentStatus,
    JobState,
    NodeState,
    Severity,
    SignalSource,
    SourceKind,
)
from efficiency.models import (
    ActuatorConfig,
    Cluster,
    DataSource,
    FaultPolicy,
    FaultScanCursor,
    FaultSignal,
    GpuSample,
    Incident,
    IncidentAction,
    Job,
    LogChunk,
    Node,
)
from efficiency.selectors.faults import rollback_s

logger = logging.getLogger(__name__)

# Which evidence is the cause when several kinds come together: the most fundamental first.
ROOT_PRIORITY = [
    FaultCategory.HARDWARE_GPU,
    FaultCategory.HARDWARE_MEMORY_ECC,
    FaultCategory.NVLINK,
    FaultCategory.NETWORK_RDMA,
    FaultCategory.STORAGE_IO,
    FaultCategory.CUDA_ILLEGAL_ACCESS,
    FaultCategory.CUDA_OOM,
    FaultCategory.LOSS_NAN_INF,
    FaultCategory.SOFTWARE_ERROR,
    FaultCategory.NCCL_TIMEOUT_HANG,
    FaultCategory.SLOWDOWN,
]
# Evidence that is a configuration finding, not a fault: kept as signals, opens no incident.
NOT_INCIDENTS = {FaultCategory.NCCL_SOCKET_FALLBACK}
# Signals this close to an open incident of the same job belong to it.
INCIDENT_WINDOW = timedelta(hours=6)
SCAN_BATCH = 500


@dataclass(frozen=True)
class ScanSummary:
    chunks: int
    signals: int
    incidents: int


def fault_scan_sources(*, now: datetime | None = None) -> dict[str, ScanSummary]:
    """Scan every log source's new chunks (the periodic task and the collectors call this)."""
    now = now or timezone.now()
    sources = DataSource.objects.filter(kind__in=[SourceKind.LOG_FILES, SourceKind.LOG_PUSH])
    return {str(source): fault_scan_source(source=source, now=now) for source in sources}


def fault_scan_source(*, source: DataSource, now: datetime | None = None) -> ScanSummary:
    """Scan the log chunks of ``source`` stored since the last scan, then group and act."""
    now = now or timezone.now()
    line_zone = ZoneInfo(source.config.get("timezone", "UTC"))
    chunks_seen = signals_stored = 0
    while True:
        with transaction.atomic():
            cursor, _ = FaultScanCursor.objects.select_for_update().get_or_create(source=source)
            chunks = list(
                LogChunk.objects.filter(source=source, pk__gt=cursor.last_chunk_id)
                .select_related("job")
                .order_by("pk")[:SCAN_BATCH]
            )
            if not chunks:
                break
            signals = _signals_from_chunks(source, chunks, now=now, line_zone=line_zone)
            signals_stored += _signals_store(source.cluster, signals, now=now)
            chunks_seen += len(chunks)
            cursor.last_chunk_id = chunks[-1].pk
            cursor.scanned_at = now
            cursor.save(update_fields=["last_chunk_id", "scanned_at"])
    incidents = incidents_group(cluster=source.cluster, now=now) if chunks_seen else 0
    return ScanSummary(chunks=chunks_seen, signals=signals_stored, incidents=incidents)


def _signals_from_chunks(
    source: DataSource, chunks: list[LogChunk], *, now: datetime, line_zone
) -> list[FaultSignal]:
    nodes = {n.hostname: n for n in Node.objects.filter(cluster=source.cluster)}
    rank_nodes: dict[tuple[int, int], Node | None] = {}
    signals = []
    for chunk in chunks:
        findings = scan_bytes(chunk.text.encode("utf-8"), start_offset=chunk.start_offset, year=now.year)
        for finding in findings:
            hostname = finding.node or chunk.node
            node = nodes.get(hostname) if hostname else None
            occurred = _aware(finding.timestamp, line_zone) or chunk.received_at
            occurred = min(occurred, now)
            job = chunk.job
            if job is None and node is not None:
                job = _job_on_node(node, occurred)
            rank = finding.rank if finding.rank is not None else chunk.rank
            if node is None and job is not None and rank is not None:
                if (job.pk, rank) not in rank_nodes:
                    rank_nodes[(job.pk, rank)] = _node_of_rank(job, rank)
                node = rank_nodes[(job.pk, rank)]
            signals.append(
                FaultSignal(
                    cluster=source.cluster,
                    evidence_key=f"log:{source.pk}:{chunk.stream}:{chunk.file_id}:{finding.offset}:"
                    f"{finding.signature_id}"[:600],
                    source=SignalSource.LOG,
                    signature_id=finding.signature_id,
                    category=finding.category,
                    severity=finding.severity,
                    code=finding.code or "",
                    job=job,
                    department_id=job.department_id if job else None,
                    node=node,
                    rank=rank,
                    occurred_at=occurred,
                    detected_at=now,
                    message=finding.text[:1000],
                    location=f"{chunk.stream}@{finding.offset}"[:600],
                )
            )
    return signals


def _aware(moment: datetime | None, zone) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment.astimezone(UTC)


def _job_on_node(node: Node, at: datetime) -> Job | None:
    """The job that held GPUs of ``node`` at ``at`` (kernel lines name a node, not a job)."""
    return (
        Job.objects.filter(nodes=node, started_at__lte=at)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gte=at - timedelta(minutes=10)))
        .order_by("-gpu_count", "-started_at")
        .first()
    )


# --- Detectors on progress (iteration lines) ------------------------------------------------------

PROGRESS_LOOKBACK = timedelta(hours=12)


def fault_detect_jobs(*, cluster: Cluster, now: datetime | None = None) -> int:
    """Run the progress detectors over recent jobs' iteration lines; store what they find.

    *Slowdown*: iteration time sustained 30% above the job's own baseline (a straggler in
    synchronous training slows every rank; the node is located by its GPUs' activity, which
    stands apart from its peers'). *Hang*: a running job whose logs show no progress for ten
    median iterations while other jobs' logs move on. *Loss spike*: a loss above its rolling
    median + 6 robust standard deviations (NaN/Inf lines are the scanner's, with the line).
    *GPUs flat*: every GPU of a running training job below 1% SM activity for ten minutes.
    Returns how many new signals were stored.
    """
    now = now or timezone.now()
    jobs = (
        Job.objects.filter(cluster=cluster, started_at__isnull=False)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gte=now - timedelta(hours=1)))
        .filter(log_chunks__received_at__gte=now - PROGRESS_LOOKBACK)
        .distinct()
    )
    signals = []
    progress = {job: _progress(job, since=now - PROGRESS_LOOKBACK) for job in jobs}
    # The log clock: the newest iteration line of any job. Silence is measured against it, not
    # the wall clock, so that a log collection that lags is not mistaken for hung jobs.
    log_clock = max((series[-1].timestamp for series in progress.values() if series), default=None)
    for job, series in progress.items():
        if len(series) < 10:
            continue
        samples = [(p.iteration, p.iteration_time_s) for p in series if p.iteration_time_s]
        for slow in detect_slowdown(samples, baseline_steps=10, threshold_pct=30, sustained_steps=3):
            at = next(p.timestamp for p in series if p.iteration == slow.start_step)
            node = _straggler_node(job, at, now)
            signals.append(_detector_signal(
                job, "slowdown", FaultCategory.SLOWDOWN, Severity.WARNING, at, now, node,
                f"iteration time {slow.median_s:.2f} s from iteration {slow.start_step}, "
                f"{slow.ratio:.2f}x the job's baseline of {slow.baseline_s:.2f} s",
                key=f"slowdown:{slow.start_step}",
            ))  # fmt: skip
        losses = [(p.iteration, p.loss) for p in series if p.loss is not None]
        for anomaly in detect_loss_anomalies(losses):
            if anomaly.kind != SPIKE:
                continue  # NaN / Inf lines are the scanner's (loss-nan-inf), with the line itself
            at = next(p.timestamp for p in series if p.iteration == anomaly.first_step)
            message = (
                f"loss {anomaly.peak_loss:.4g} at iteration {anomaly.first_step}, above the robust limit "
                f"{anomaly.threshold:.4g} (rolling median {anomaly.median:.4g})"
            )
            signals.append(_detector_signal(
                job, "loss-spike", FaultCategory.LOSS_NAN_INF, Severity.WARNING, at, now, None, message,
                key=f"loss-spike:{anomaly.first_step}",
            ))  # fmt: skip
        if job.ended_at is None:
            flat = _flat_gpus(job, now=now)
            if flat is not None:
                message = (
                    f"SM activity of all {len(flat.gpus)} GPUs below 1% for {flat.flat_s:.0f} s "
                    f"(highest {flat.peak_pct:.2f}%)"
                )
                signals.append(_detector_signal(
                    job, "gpus-flat", FaultCategory.NCCL_TIMEOUT_HANG, Severity.ERROR, flat.since, now, None,
                    message, key=f"flat:{flat.since.isoformat()}",
                ))  # fmt: skip
            # Jobs log every few iterations: silence is judged against the gap between lines.
            gaps = [(b.timestamp - a.timestamp).total_seconds() for a, b in pairwise(series)]
            median_s = percentile([gap for gap in gaps if gap > 0], 50) or 0.0
            hang = detect_hang({0: series[-1].timestamp}, now=log_clock, median_iteration_s=median_s)
            if hang is not None:
                message = (
                    f"no iteration logged for {hang.silent_s:.0f} s "
                    f"({hang.threshold_s:.0f} s = 10 median intervals between its iteration lines)"
                )
                signals.append(_detector_signal(
                    job, "no-progress", FaultCategory.NCCL_TIMEOUT_HANG, Severity.ERROR, hang.since, now,
                    None, message, key=f"hang:{hang.since.isoformat()}",
                ))  # fmt: skip
    stored = _signals_store(cluster, signals, now=now)
    if stored:
        incidents_group(cluster=cluster, now=now)
    return stored


def fault_detect_metrics(
    *, cluster: Cluster, now: datetime | None = None, lookback=timedelta(hours=1)
) -> int:
    """Faults in the GPU metrics, beside the kernel log lines: a signal where a GPU's
    ``DCGM_FI_DEV_XID_ERRORS`` turns to a new non-zero code, and where its double-bit ECC counter
    (``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL``) goes up.

    The Xid field holds only the *last* Xid, so the same code twice in a row is one signal; the
    kernel log line (scanned separately) is the record of every occurrence.
    """
    now = now or timezone.now()
    rows = (
        GpuSample.objects.filter(node__cluster=cluster, ts__gte=now - lookback, ts__lt=now)
        .order_by("node_id", "gpu_index", "ts")
        .values_list("node_id", "gpu_index", "ts", "xid_last", "ecc_dbe_total")
    )
    nodes = {n.pk: n for n in Node.objects.filter(cluster=cluster)}
    signals = []
    previous: dict[tuple[int, int], int | None] = {}
    previous_ecc: dict[tuple[int, int], float] = {}
    for node_id, gpu, ts, xid, ecc in rows.iterator(chunk_size=10_000):
        if ecc is not None:
            ecc_before = previous_ecc.get((node_id, gpu))
            previous_ecc[(node_id, gpu)] = ecc
            if ecc_before is not None and ecc > ecc_before:
                signals.append(_ecc_signal(cluster, nodes[node_id], gpu, ts, now, ecc - ecc_before))
        before = previous.get((node_id, gpu))
        previous[(node_id, gpu)] = xid
        if not xid or xid == before:
            continue
        message = f"DCGM_FI_DEV_XID_ERRORS = {xid} on GPU {gpu}"
        key = f"metric:xid:{node_id}:{gpu}:{ts.isoformat()}"
        signals.append(_metric_xid_signal(cluster, nodes[node_id], gpu, xid, ts, now, key, message))
    stored = _signals_store(cluster, signals, now=now)
    if stored:
        incidents_group(cluster=cluster, now=now)
    return stored


XID_COUNT_BUCKET_MS = 600_000  # twice dcgm-exporter's default 5-minute count window


def xid_count_signals_record(
    *, cluster: Cluster, events: list[tuple[int, int, int, int]], now: datetime
) -> int:
    """``DCGM_EXP_XID_ERRORS_COUNT{xid="79"} 1`` from a scrape: how often each Xid occurred on a
    GPU in the exporter's window. Consecutive scrapes inside one window report the same event,
    so it is stored once per GPU, Xid and ten minutes (at most twice per event)."""
    nodes = {n.pk: n for n in Node.objects.filter(pk__in={node_id for node_id, *_ in events})}
    signals = []
    for node_id, gpu, xid, ts_ms in events:
        at = datetime.fromtimestamp(ts_ms / 1000, tz=UTC)
        message = f'DCGM_EXP_XID_ERRORS_COUNT{{xid="{xid}"}} > 0 on GPU {gpu}'
        key = f"metric:xidcount:{node_id}:{gpu}:{xid}:{ts_ms // XID_COUNT_BUCKET_MS}"
        signals.append(_metric_xid_signal(cluster, nodes[node_id], gpu, xid, at, now, key, message))
    stored = _signals_store(cluster, signals, now=now)
    if stored:
        transaction.on_commit(lambda: _enqueue_grouping(cluster.pk))
    return stored


def _enqueue_grouping(cluster_id: int) -> None:
    from efficiency.tasks import incidents_group_task

    incidents_group_task.delay(cluster_id)


def _metric_xid_signal(cluster, node: Node, gpu: int, xid: int, at: datetime, now, key: str, message: str):
    """A signal for an Xid the metrics report on a GPU, classified by the signature catalog."""
    signature = SIGNATURES_BY_ID.get(f"xid-{xid}") or SIGNATURES_BY_ID["xid-other"]
    job = _job_on_node(node, at)
    return FaultSignal(
        cluster=cluster,
        evidence_key=key,
        source=SignalSource.METRIC,
        signature_id=signature.id,
        category=signature.category,
        severity=signature.severity,
        code=str(xid),
        job=job,
        department_id=job.department_id if job else None,
        node=node,
        gpu_index=gpu,
        occurred_at=at,
        detected_at=now,
        message=message,
        location=f"{node.hostname}/gpu{gpu}",
    )


def _ecc_signal(cluster, node: Node, gpu: int, at: datetime, now: datetime, new_errors: float) -> FaultSignal:
    job = _job_on_node(node, at)
    return FaultSignal(
        cluster=cluster,
        evidence_key=f"metric:ecc-dbe:{node.pk}:{gpu}:{at.isoformat()}",
        source=SignalSource.METRIC,
        signature_id="ecc-dbe-counter",
        category=FaultCategory.HARDWARE_MEMORY_ECC,
        severity=Severity.CRITICAL,
        code="DBE",
        job=job,
        department_id=job.department_id if job else None,
        node=node,
        gpu_index=gpu,
        occurred_at=at,
        detected_at=now,
        message=f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL rose by {new_errors:g} on GPU {gpu}",
        location=f"{node.hostname}/gpu{gpu}",
    )


def _signals_store(cluster: Cluster, signals: list[FaultSignal], *, now: datetime) -> int:
    """Store signals, each evidence once; returns how many were new. (``ignore_conflicts``
    returns every object passed, so count what the table gained at this ``now``.)"""
    before = FaultSignal.objects.filter(cluster=cluster, detected_at=now).count()
    FaultSignal.objects.bulk_create(signals, ignore_conflicts=True)
    return FaultSignal.objects.filter(cluster=cluster, detected_at=now).count() - before


def _progress(job: Job, *, since: datetime) -> list:
    """The job's iteration lines (from any rank), one per iteration, in order."""
    by_iteration = {}
    for text in (
        LogChunk.objects.filter(job=job, received_at__gte=since).order_by("pk").values_list("text", flat=True)
    ):
        if "iteration" not in text and "step" not in text:
            continue
        for line in text.splitlines():
            found = parse_progress(line)
            if found is not None and found.iteration is not None and found.timestamp is not None:
                by_iteration[found.iteration] = found
    return [by_iteration[i] for i in sorted(by_iteration)]


FLAT_WINDOW = timedelta(minutes=10)


def _flat_gpus(job: Job, *, now: datetime):
    """Every GPU of a training job (one that logs iterations) idle in SM activity for ten minutes:
    in an NCCL hang the waiting kernels keep GPU_UTIL busy while SM_ACTIVE drops."""
    samples: dict[tuple[int, int], list] = defaultdict(list)
    rows = GpuSample.objects.filter(
        node__in=job.nodes.all(), ts__gte=now - 2 * FLAT_WINDOW, ts__lt=now, sm_active_pct__isnull=False
    ).values_list("node_id", "gpu_index", "ts", "sm_active_pct")
    for node_id, gpu, ts, sm in rows:
        samples[(node_id, gpu)].append((ts, sm))
    if not samples:
        return None
    latest = max(ts for series in samples.values() for ts, _ in series)
    return detect_flat_gpus(samples, now=latest, window_s=FLAT_WINDOW.total_seconds())


def _straggler_node(job: Job, since: datetime, now: datetime) -> Node | None:
    """The job's node whose GPUs' SM activity stands furthest from its peers' median."""
    nodes = list(job.nodes.all())
    if len(nodes) < 3:
        return None
    activity = {
        row["node_id"]: row["sm"]
        for row in GpuSample.objects.filter(node__in=nodes, ts__gte=since, ts__lt=now)
        .values("node_id")
        .annotate(sm=Avg("sm_active_pct"))
        if row["sm"] is not None
    }
    if len(activity) < 3:
        return None
    middle = percentile(list(activity.values()), 50)
    node_id, value = max(activity.items(), key=lambda item: abs(item[1] - middle))
    spread = percentile([abs(v - middle) for v in activity.values()], 50) or 1.0
    return next((n for n in nodes if n.pk == node_id), None) if abs(value - middle) > 3 * spread else None


def _detector_signal(job, signature, category, severity, at, now, node, message, *, key) -> FaultSignal:
    return FaultSignal(
        cluster_id=job.cluster_id,
        evidence_key=f"det:{job.pk}:{key}"[:600],
        source=SignalSource.DETECTOR,
        signature_id=signature,
        category=category,
        severity=severity,
        job=job,
        department_id=job.department_id,
        node=node,
        occurred_at=min(at, now),
        detected_at=now,
        message=message,
    )


# --- Incidents ----------------------------------------------------------------------------------


def incidents_group(*, cluster: Cluster, now: datetime | None = None) -> int:
    """Attach unassigned signals to their job's open incident or open one; locate; act.

    Returns how many incidents were opened.
    """
    now = now or timezone.now()
    pending = list(
        FaultSignal.objects.filter(cluster=cluster, incident__isnull=True)
        .exclude(category__in=NOT_INCIDENTS)
        .select_related("job", "node")
        .order_by("occurred_at", "pk")
    )
    groups: dict[tuple, list[FaultSignal]] = defaultdict(list)
    for signal in pending:
        key = ("job", signal.job_id) if signal.job_id else ("node", signal.node_id)
        groups[key].append(signal)
    opened = 0
    for (kind, ident), signals in groups.items():
        with transaction.atomic():
            incident = _open_incident_for(cluster, kind, ident, signals[0].occurred_at)
            if incident is None:
                incident = _incident_create(cluster, signals, now=now)
                opened += 1
            FaultSignal.objects.filter(pk__in=[s.pk for s in signals]).update(incident=incident)
            changed = _locate(incident, now=now)
            if changed:
                transaction.on_commit(lambda pk=incident.pk: _enqueue_policy(pk))
    return opened


def _open_incident_for(cluster: Cluster, kind: str, ident, occurred: datetime) -> Incident | None:
    incidents = Incident.objects.filter(cluster=cluster, occurred_at__gte=occurred - INCIDENT_WINDOW)
    incidents = (
        incidents.filter(job_id=ident) if kind == "job" else incidents.filter(job__isnull=True, node_id=ident)
    )
    return incidents.exclude(status=IncidentStatus.RESOLVED).order_by("-occurred_at").first()


def _incident_create(cluster: Cluster, signals: list[FaultSignal], *, now: datetime) -> Incident:
    first = signals[0]
    job = first.job
    return Incident.objects.create(
        cluster=cluster,
        job=job,
        department_id=job.department_id if job else None,
        node=first.node,
        category=first.category,
        severity=first.severity,
        code=first.code,
        title=first.signature_id,
        occurred_at=min(s.occurred_at for s in signals),
        detected_at=min(s.detected_at for s in signals),
        gpu_count=job.gpu_count if job else (first.node.gpu_count if first.node else 0),
    )


def _locate(incident: Incident, *, now: datetime) -> bool:
    """Decide the root cause and its place from all the incident's signals; True when it changed."""
    signals = list(incident.signals.select_related("node").order_by("occurred_at", "pk"))
    if not signals:
        return False
    rank_of = {category: index for index, category in enumerate(ROOT_PRIORITY)}
    root = min(signals, key=lambda s: (rank_of.get(s.category, len(ROOT_PRIORITY)), s.occurred_at, s.pk))
    reasoning = {
        "root_signal": root.pk,
        "why": "most fundamental category present, earliest of it",
        "categories": sorted({s.category for s in signals}),
        "signals": len(signals),
    }
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
        silent = _silent_ranks(incident.job, signals)
        if silent:
            rank = silent[0]
            node = _node_of_rank(incident.job, rank) or node
            reasoning["why"] = "the ranks that reported no watchdog timeout never entered the collective"
            reasoning["silent_ranks"] = silent
    changed = (incident.category, incident.node_id, incident.rank, incident.code) != (
        root.category,
        node.pk if node else None,
        rank,
        root.code,
    )
    incident.category, incident.severity, incident.code = root.category, root.severity, root.code
    incident.title = root.signature_id
    incident.node, incident.rank = node, rank
    incident.gpu_index = next(
        (
            s.gpu_index
            for s in signals
            if s.gpu_index is not None and s.node == node and s.category == root.category
        ),
        incident.gpu_index,
    )
    incident.occurred_at = min(incident.occurred_at, signals[0].occurred_at)
    incident.detected_at = min(incident.detected_at, min(s.detected_at for s in signals))
    if incident.located_at is None or changed:
        incident.located_at = now
    incident.reasoning = reasoning
    incident.save()
    return changed or incident.actions.count() == 0


def _silent_ranks(job: Job, signals: list[FaultSignal]) -> list[int]:
    reported = {
        s.rank for s in signals if s.category == FaultCategory.NCCL_TIMEOUT_HANG and s.rank is not None
    }
    if not reported or job.gpu_count <= 1:
        return []
    return [rank for rank in range(job.gpu_count) if rank not in reported]


def _node_of_rank(job: Job, rank: int) -> Node | None:
    """The node a rank ran on: from its own log chunks, else from the launch layout (ranks are
    laid out node by node over the job's nodes in hostname order, as srun and torchrun do)."""
    hostname = (
        LogChunk.objects.filter(job=job, rank=rank).exclude(node="").values_list("node", flat=True).first()
    )
    if hostname:
        return Node.objects.filter(cluster=job.cluster, hostname=hostname).first()
    nodes = list(job.nodes.order_by("hostname"))
    if not nodes or job.gpu_count % len(nodes):
        return None
    per_node = job.gpu_count // len(nodes)
    return nodes[rank // per_node] if rank // per_node < len(nodes) else None


def _enqueue_policy(incident_id: int) -> None:
    from efficiency.tasks import incident_policy_task

    incident_policy_task.delay(incident_id)


# --- Policy and actions ---------------------------------------------------------------------------


def incident_policy_apply(*, incident: Incident, now: datetime | None = None) -> list[IncidentAction]:
    """Run the category's policy once: isolate, request a restart, notify (each logged)."""
    now = now or timezone.now()
    policy = FaultPolicy.objects.filter(category=incident.category).first()
    if policy is None:
        return []
    done = set(incident.actions.values_list("kind", flat=True))
    actions = []
    if policy.isolate_node and incident.node is not None and ActionKind.ISOLATE_NODE not in done:
        actions += node_isolate(incident=incident, now=now)
    if policy.restart_job and incident.job is not None and ActionKind.RESTART_JOB not in done:
        actions += job_restart_request(incident=incident, now=now)
    if policy.notify and ActionKind.NOTIFY not in done:
        actions += _run_actuators(incident, ActionKind.NOTIFY, now=now)
    return actions


def node_isolate(*, incident: Incident, actor=None, now: datetime | None = None) -> list[IncidentAction]:
    """Take the suspected node out of scheduling: our inventory, then the scheduler (actuators)."""
    now = now or timezone.now()
    node = incident.node
    if node.state == NodeState.ACTIVE:
        node.state = NodeState.ISOLATED
        node.state_reason = f"incident {incident.pk}: {incident.title}"[:300]
        node.save(update_fields=["state", "state_reason", "updated_at"])
    actions = _run_actuators(incident, ActionKind.ISOLATE_NODE, now=now, actor=actor)
    if not actions:
        summary = f"{node.hostname} marked isolated in the inventory"
        actions = [
            _log_action(
                incident, ActionKind.ISOLATE_NODE, "inventory", True, False, summary, "", now, 0.0, actor
            )
        ]
    return actions


def job_restart_request(
    *, incident: Incident, actor=None, now: datetime | None = None
) -> list[IncidentAction]:
    now = now or timezone.now()
    actions = _run_actuators(incident, ActionKind.RESTART_JOB, now=now, actor=actor)
    if not actions:
        actions = [_log_action(incident, ActionKind.RESTART_JOB, "none", True, False,
                               "no restart actuator configured", "", now, 0.0, actor)]  # fmt: skip
    incident.restart_requested_at = incident.restart_requested_at or now
    incident.status = IncidentStatus.RECOVERING
    incident.save(update_fields=["restart_requested_at", "status", "updated_at"])
    return actions


def _run_actuators(incident: Incident, kind: str, *, now: datetime, actor=None) -> list[IncidentAction]:
    actions = []
    for config in ActuatorConfig.objects.filter(action=kind, enabled=True):
        request = ActionRequest(
            kind=kind,
            incident_id=incident.pk,
            node=incident.node.hostname if incident.node else None,
            gpu=incident.gpu_index,
            job_id=incident.job.external_id if incident.job else None,
            category=incident.category,
            reason=f"portal incident {incident.pk}: {incident.title}",
            extra={"cluster": incident.cluster.slug},
        )
        try:
            result = actuator_from_config(config.config).run(request, dry_run=config.dry_run)
        except ValueError as error:
            summary = f"bad actuator configuration: {error}"
            actions.append(
                _log_action(incident, kind, config.name, False, config.dry_run, summary, "", now, 0.0, actor)
            )
            continue
        actions.append(_log_action(incident, kind, config.name, result.ok, result.dry_run, result.summary,
                                   result.detail, now, result.duration_s, actor))  # fmt: skip
    return actions


def _log_action(
    incident, kind, actuator, ok, dry_run, summary, detail, now, duration_s, actor
) -> IncidentAction:
    return IncidentAction.objects.create(
        incident=incident,
        kind=kind,
        actuator=actuator,
        ok=ok,
        dry_run=dry_run,
        summary=summary[:1000],
        detail=detail,
        requested_at=now,
        duration_s=duration_s,
        actor=actor,
    )


def incident_resolve(*, incident: Incident, actor=None, now: datetime | None = None) -> Incident:
    """Close an incident by hand (an operator saw the job run again); logged as an action."""
    now = now or timezone.now()
    incident.status = IncidentStatus.RESOLVED
    incident.recovered_at = incident.recovered_at or now
    incident.gpu_hours_lost = _gpu_hours_lost(incident, incident.recovered_at)
    incident.save(update_fields=["status", "recovered_at", "gpu_hours_lost", "updated_at"])
    _log_action(incident, ActionKind.NOTIFY, "operator", True, False, "closed by hand", "", now, 0.0, actor)
    return incident


# --- Recovery -----------------------------------------------------------------------------------


def incidents_refresh(*, cluster: Cluster, now: datetime | None = None) -> int:
    """Mark incidents recovered when their job (requeued) or its resubmission runs again."""
    now = now or timezone.now()
    recovered = 0
    for incident in (
        Incident.objects.filter(cluster=cluster).exclude(status=IncidentStatus.RESOLVED).select_related("job")
    ):
        job = incident.job
        if job is None:
            continue
        back = _running_again(job, incident.occurred_at)
        if back is None:
            if job.state in JobState.finished() and job.ended_at and now - job.ended_at > timedelta(days=1):
                incident.status = IncidentStatus.RESOLVED  # never resubmitted: nothing to wait for
                incident.gpu_hours_lost = _gpu_hours_lost(incident, job.ended_at)
                incident.save(update_fields=["status", "gpu_hours_lost", "updated_at"])
            continue
        incident.recovered_at = back
        incident.status = IncidentStatus.RESOLVED
        incident.gpu_hours_lost = _gpu_hours_lost(incident, back)
        incident.save(update_fields=["recovered_at", "status", "gpu_hours_lost", "updated_at"])
        recovered += 1
    return recovered


def _running_again(job: Job, occurred: datetime) -> datetime | None:
    if job.started_at and job.started_at > occurred:  # requeued under the same id
        return job.started_at
    successor = (
        Job.objects.filter(cluster=job.cluster, name=job.name, department_id=job.department_id)
        .filter(submitted_at__gte=occurred - timedelta(minutes=1), started_at__isnull=False)
        .exclude(pk=job.pk)
        .order_by("started_at")
        .first()
    )
    return successor.started_at if successor else None


def _gpu_hours_lost(incident: Incident, back: datetime) -> float:
    """GPUs x (work since the last checkpoint + time until running again)."""
    downtime_s = max(0.0, (back - incident.occurred_at).total_seconds())
    return incident.gpu_count * (rollback_s(incident) + downtime_s) / 3600


def fault_policies_ensure() -> None:
    """The default policies (editable in the admin): hardware faults isolate the node and
    restart the job; software faults restart; everything notifies."""
    isolate = {
        FaultCategory.HARDWARE_GPU,
        FaultCategory.HARDWARE_MEMORY_ECC,
        FaultCategory.NVLINK,
        FaultCategory.NETWORK_RDMA,
    }
    restart = isolate | {
        FaultCategory.NCCL_TIMEOUT_HANG,
        FaultCategory.STORAGE_IO,
        FaultCategory.SOFTWARE_ERROR,
        FaultCategory.CUDA_ILLEGAL_ACCESS,
    }
    for category in FaultCategory.values:
        if category in NOT_INCIDENTS:
            continue
        FaultPolicy.objects.get_or_create(
            category=category,
            defaults={
                "isolate_node": category in isolate,
                "restart_job": category in restart,
                "notify": True,
            },
        )
