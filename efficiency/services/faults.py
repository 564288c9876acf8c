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

The rules of trust (DESIGN.md) hold here, each in one place:

- *Time only moves forward in an incident*: every phase is stamped through ``_phase_stamp``.
- *One fault seen by several signal paths is one incident*: ``_incident_for`` joins evidence on the
  same node (and GPU) within ``SAME_FAULT_WINDOW`` to the incident that already holds the fault.
- *Closing is not recovering*: ``incident_close`` ends an incident without a recovery time.
- *Dry run changes nothing* but the log: ``_carry_out`` says whether an action was really done, and
  only then does the inventory or an incident's phase change. With no actuator configured for an
  action, the automatic policy does nothing (and logs so), while a platform admin's own action is
  recorded as done by hand: the admin is the actuator.

Which operations an incident offers in its state is ``incident_operations``, used by the page, the
API and the services themselves (an operation that does not apply raises ``IncidentActionRefused``).
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
from django.utils.translation import gettext as _

from efficiency import dispatch
from efficiency.actuators import ActionRequest, actuator_from_config
from efficiency.analysis.faults import trust
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
from efficiency.analysis.faults.trust import job_output_node, kernel_log_node, source_has_kernel_logs
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
from efficiency.fault_messages import message, render_english
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
    NodeStateChange,
)
from efficiency.models.faults import PHASES
from efficiency.selectors.faults import node_isolating_incident, rollback_s

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
# Evidence about a node's hardware this close in time, on the same node and GPU, is one fault seen
# by several paths (the kernel's line, the exporter's Xid count, the last-Xid field, the ECC counter).
SAME_FAULT_WINDOW = timedelta(minutes=10)
# A job that does not run again (requeued or resubmitted) this long after it ended is not coming back.
RUN_AGAIN_WITHIN = timedelta(days=1)
NODE_FAULTS = {
    FaultCategory.HARDWARE_GPU,
    FaultCategory.HARDWARE_MEMORY_ECC,
    FaultCategory.NVLINK,
    FaultCategory.NETWORK_RDMA,
}
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


def fault_scan_source(
    *, source: DataSource, now: datetime | None = None, seen_after: timedelta | None = None
) -> ScanSummary:
    """Scan the log chunks of ``source`` stored since the last scan, then group and act.

    ``seen_after`` is for replays of history (the demo): each line is stamped detected that long
    after it was written, as the live portal would have seen it, instead of at ``now``.
    """
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
            signals_stored += _signals_store(source.cluster, signals, now=now, seen_after=seen_after)
            chunks_seen += len(chunks)
            cursor.last_chunk_id = chunks[-1].pk
            cursor.scanned_at = now
            cursor.save(update_fields=["last_chunk_id", "scanned_at"])
    incidents = incidents_group(cluster=source.cluster, now=now) if chunks_seen else 0
    return ScanSummary(chunks=chunks_seen, signals=signals_stored, incidents=incidents)


def _signals_from_chunks(
    source: DataSource, chunks: list[LogChunk], *, now: datetime, line_zone
) -> list[FaultSignal]:
    """One signal per finding, with the trust of the stream it came from (``analysis.faults.trust``).

    A node's kernel log is trusted about that node (not about the host a line names). A job's own
    output is a suspicion, and a node it names (by its path, its pushed ``node``, a syslog host in
    a line, or a rank) is kept only when it is one of the job's nodes; else it is refused, and the
    reason kept on the signal.
    """
    nodes = {n.hostname: n for n in Node.objects.filter(cluster=source.cluster)}
    job_nodes: dict[int, frozenset[str]] = {}
    rank_nodes: dict[tuple[int, int], Node | None] = {}
    kernel_logs = source_has_kernel_logs(kind=source.kind, config=source.config)
    signals = []
    for chunk in chunks:
        kernel_node = (
            kernel_log_node(stream=chunk.stream, node=chunk.node, job=chunk.job_external_id)
            if kernel_logs
            else None
        )
        if kernel_node is None and chunk.job is not None and chunk.job.pk not in job_nodes:
            job_nodes[chunk.job.pk] = frozenset(chunk.job.nodes.values_list("hostname", flat=True))
        findings = scan_bytes(chunk.text.encode("utf-8"), start_offset=chunk.start_offset, year=now.year)
        for finding in findings:
            occurred = _aware(finding.timestamp, line_zone) or chunk.received_at
            occurred = min(occurred, now)
            rank = finding.rank if finding.rank is not None else chunk.rank
            if kernel_node is not None:
                node = nodes.get(kernel_node)
                job = _job_on_node(node, occurred) if node is not None else None
                note = {}
            else:
                job = chunk.job
                claim = job_output_node(
                    claims=[chunk.node, finding.node or ""], job_nodes=job_nodes.get(job.pk) if job else None
                )
                node = nodes.get(claim.node) if claim.node else None
                if claim.refused:
                    note = message(
                        claim.refused, node=claim.refused_name[:100], job=job.external_id if job else "—"
                    )
                else:
                    note = message("job_output_only")
                if node is None and claim.refused is None and job is not None and rank is not None:
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
                    message=finding.text[:1000],
                    location=f"{chunk.stream}@{finding.offset}"[:600],
                    trusted=kernel_node is not None,
                    trust_note=note,
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
SUSTAINED = 3  # slow iterations in a row that make a slowdown


def fault_detect_jobs(
    *, cluster: Cluster, now: datetime | None = None, seen_after: timedelta | None = None
) -> int:
    """Run the progress detectors over recent jobs' iteration lines; store what they find.

    *Slowdown*: iteration time sustained 30% above the job's own baseline (a straggler in
    synchronous training slows every rank; the node is located by its GPUs' activity, which
    stands apart from its peers'). *Hang*: a running job whose logs show no progress for ten
    median iterations while other jobs' logs move on. *Loss spike*: a loss above its rolling
    median + 6 robust standard deviations (NaN/Inf lines are the scanner's, with the line).
    *GPUs flat*: every GPU of a running training job below 1% SM activity for ten minutes.
    Returns how many new signals were stored. ``seen_after``: as in ``fault_scan_source``, for a
    replay; a finding is then detected that long after its evidence was complete.
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
        for slow in detect_slowdown(samples, baseline_steps=10, threshold_pct=30, sustained_steps=SUSTAINED):
            at = next(p.timestamp for p in series if p.iteration == slow.start_step)
            # Complete once it was sustained: the line of its SUSTAINED-th slow iteration.
            seen = [p.timestamp for p in series if p.iteration >= slow.start_step][:SUSTAINED][-1]
            node = _straggler_node(job, at, now)
            facts = message("slowdown", median_s=slow.median_s, step=slow.start_step, ratio=slow.ratio,
                            baseline_s=slow.baseline_s)  # fmt: skip
            signals.append(_detector_signal(
                job, "slowdown", FaultCategory.SLOWDOWN, Severity.WARNING, at, seen, node, facts,
                key=f"slowdown:{slow.start_step}",
            ))  # fmt: skip
        losses = [(p.iteration, p.loss) for p in series if p.loss is not None]
        for anomaly in detect_loss_anomalies(losses):
            if anomaly.kind != SPIKE:
                continue  # NaN / Inf lines are the scanner's (loss-nan-inf), with the line itself
            at = next(p.timestamp for p in series if p.iteration == anomaly.first_step)
            facts = message("loss_spike", loss=anomaly.peak_loss, step=anomaly.first_step,
                            limit=anomaly.threshold, median=anomaly.median)  # fmt: skip
            signals.append(_detector_signal(
                job, "loss-spike", FaultCategory.LOSS_NAN_INF, Severity.WARNING, at, at, None, facts,
                key=f"loss-spike:{anomaly.first_step}",
            ))  # fmt: skip
        if job.ended_at is None:
            flat = _flat_gpus(job, now=now)
            if flat is not None:
                facts = message("gpus_flat", gpus=len(flat.gpus), flat_s=flat.flat_s, peak_pct=flat.peak_pct)
                signals.append(_detector_signal(
                    job, "gpus-flat", FaultCategory.NCCL_TIMEOUT_HANG, Severity.ERROR, flat.since,
                    flat.since + FLAT_WINDOW, None, facts, key=f"flat:{flat.since.isoformat()}",
                ))  # fmt: skip
            # Jobs log every few iterations: silence is judged against the gap between lines.
            gaps = [(b.timestamp - a.timestamp).total_seconds() for a, b in pairwise(series)]
            median_s = percentile([gap for gap in gaps if gap > 0], 50) or 0.0
            hang = detect_hang({0: series[-1].timestamp}, now=log_clock, median_iteration_s=median_s)
            if hang is not None:
                facts = message("no_progress", silent_s=hang.silent_s, threshold_s=hang.threshold_s)
                signals.append(_detector_signal(
                    job, "no-progress", FaultCategory.NCCL_TIMEOUT_HANG, Severity.ERROR, hang.since,
                    hang.since + timedelta(seconds=hang.threshold_s), None, facts,
                    key=f"hang:{hang.since.isoformat()}",
                ))  # fmt: skip
    stored = _signals_store(cluster, signals, now=now, seen_after=seen_after)
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
    kernel log line (scanned separately) is the record of every occurrence. A GPU's first sample in
    the window is its baseline: a code that was already set when the window began is not new.
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
                signals.append(_ecc_signal(cluster, nodes[node_id], gpu, ts, ecc - ecc_before))
        first = (node_id, gpu) not in previous
        before = previous.get((node_id, gpu))
        previous[(node_id, gpu)] = xid
        if first or not xid or xid == before:
            continue
        facts = message("metric_xid_last", xid=xid, gpu=gpu)
        key = f"metric:xid:{node_id}:{gpu}:{ts.isoformat()}"
        signals.append(_metric_xid_signal(cluster, nodes[node_id], gpu, xid, ts, key, facts))
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
        facts = message("metric_xid_count", xid=xid, gpu=gpu)
        key = f"metric:xidcount:{node_id}:{gpu}:{xid}:{ts_ms // XID_COUNT_BUCKET_MS}"
        signals.append(_metric_xid_signal(cluster, nodes[node_id], gpu, xid, at, key, facts))
    stored = _signals_store(cluster, signals, now=now)
    if stored:
        dispatch.incidents_group(cluster.pk)
    return stored


def _metric_xid_signal(cluster, node: Node, gpu: int, xid: int, at: datetime, key: str, facts: dict):
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
        message=render_english(facts),
        facts=facts,
        location=f"{node.hostname}/gpu{gpu}",
        trusted=True,
    )


def _ecc_signal(cluster, node: Node, gpu: int, at: datetime, new_errors: float) -> FaultSignal:
    job = _job_on_node(node, at)
    facts = message("metric_ecc_dbe", errors=new_errors, gpu=gpu)
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
        message=render_english(facts),
        facts=facts,
        location=f"{node.hostname}/gpu{gpu}",
        trusted=True,
    )


def _signals_store(
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


def _detector_signal(job, signature, category, severity, at, seen_at, node, facts, *, key) -> FaultSignal:
    """A detector's finding about ``job`` that began ``at`` and was complete at ``seen_at``."""
    # Only the GPUs' own activity comes from a trusted stream (the exporter); slowdowns, loss
    # spikes and silences are read from the job's output.
    trusted = signature == "gpus-flat"
    signal = FaultSignal(
        trusted=trusted,
        trust_note={} if trusted else message("job_output_only"),
        cluster_id=job.cluster_id,
        evidence_key=f"det:{job.pk}:{key}"[:600],
        source=SignalSource.DETECTOR,
        signature_id=signature,
        category=category,
        severity=severity,
        job=job,
        department_id=job.department_id,
        node=node,
        occurred_at=at,
        message=render_english(facts),
        facts=facts,
    )
    signal.seen_at = seen_at  # not stored: read by _signals_store for a replay's detection time
    return signal


# --- Incidents ----------------------------------------------------------------------------------


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
    return Incident.objects.create(
        cluster=cluster,
        job=job,
        department_id=job.department_id if job else None,
        node=signal.node,
        gpu_index=signal.gpu_index,
        category=signal.category,
        severity=signal.severity,
        code=signal.code,
        title=signal.signature_id,
        occurred_at=signal.occurred_at,
        detected_at=signal.detected_at,
        gpu_count=job.gpu_count if job else (signal.node.gpu_count if signal.node else 0),
    )


def _phase_stamp(incident: Incident, phase: str, at: datetime) -> None:
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
    rank_of = {category: index for index, category in enumerate(ROOT_PRIORITY)}
    # Job output cannot outrank trusted evidence: with any of it, the cause and place come from it.
    trusted = [s for s in signals if s.trusted]
    root = min(
        trusted or signals, key=lambda s: (rank_of.get(s.category, len(ROOT_PRIORITY)), s.occurred_at, s.pk)
    )
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
        silent = _silent_ranks(incident.job, signals)
        if silent:
            rank = silent[0]
            node = _node_of_rank(incident.job, rank) or node
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
    _phase_stamp(incident, "occurred_at", min(incident.occurred_at, signals[0].occurred_at))
    _phase_stamp(incident, "detected_at", min(incident.detected_at, *(s.detected_at for s in signals)))
    if incident.located_at is None or changed:
        _phase_stamp(incident, "located_at", decided_at)
    incident.reasoning = reasoning
    incident.save()
    return changed or not incident.actions.exists()


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
    if not nodes or job.gpu_count % len(nodes):
        return None
    per_node = job.gpu_count // len(nodes)
    return nodes[rank // per_node] if rank // per_node < len(nodes) else None


# --- What may be done, and doing it ---------------------------------------------------------------

ISOLATE, RESTART, RETURN_TO_SERVICE, CLOSE = "isolate", "restart", "return-to-service", "close"
OPERATIONS = (ISOLATE, RESTART, RETURN_TO_SERVICE, CLOSE)
# A job in these states can be requeued from its checkpoint (Slurm requeues finished batch jobs too);
# a completed job has nothing to redo, a cancelled one was stopped by its user, a pending one waits.
RESTARTABLE = {JobState.RUNNING, JobState.FAILED, JobState.NODE_FAIL, JobState.TIMEOUT, JobState.PREEMPTED}


class IncidentActionRefused(Exception):
    """An operation that does not apply to the incident (or node) in its state; nothing was done."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def incident_operations(*, incident: Incident) -> dict[str, str | None]:
    """What a platform admin may do with ``incident`` now: each operation with None when it
    applies, else why not (in the reader's language). Pages offer only the first kind; the API
    and the services refuse the second with the reason."""
    node, job = incident.node, incident.job
    over = {
        IncidentStatus.RESOLVED: _("The incident has recovered."),
        IncidentStatus.CLOSED: _("The incident is closed."),
    }.get(incident.status)
    why: dict[str, str | None] = dict.fromkeys(OPERATIONS)
    if node is None:
        why[ISOLATE] = why[RETURN_TO_SERVICE] = _("The incident has no suspected node.")
    else:
        if node.state != NodeState.ACTIVE:
            why[ISOLATE] = _("Node %(node)s is not in service (%(state)s).") % {
                "node": node.hostname,
                "state": node.get_state_display(),
            }
        elif incident.status == IncidentStatus.CLOSED:
            why[ISOLATE] = over
        if node.state != NodeState.ISOLATED:
            why[RETURN_TO_SERVICE] = _("Node %(node)s is not isolated.") % {"node": node.hostname}
    if job is None:
        why[RESTART] = _("The incident has no job.")
    elif over:
        why[RESTART] = over
    elif incident.restart_requested_at is not None:
        why[RESTART] = _("A restart was already requested.")
    elif job.state not in RESTARTABLE:
        why[RESTART] = _("Job %(job)s is %(state)s: there is nothing to restart.") % {
            "job": job.external_id,
            "state": job.get_state_display().lower(),
        }
    why[CLOSE] = over
    return why


def _check(incident: Incident, operation: str) -> None:
    why_not = incident_operations(incident=incident)[operation]
    if why_not is not None:
        raise IncidentActionRefused(why_not)


def incident_policy_apply(*, incident: Incident, now: datetime | None = None) -> list[IncidentAction]:
    """Run the category's policy once: isolate, request a restart, notify (each logged).

    What does not apply in the incident's state (a node already out, a job that completed) is
    skipped; what applies runs through the actuators, and takes effect only when one really did it.
    An unconfirmed incident (only the job's own output as evidence) of the machine (GPU, ECC,
    NVLink, network) does nothing; one of the job itself (NCCL timeout, OOM, NaN loss, …) may
    requeue that same job and notify, but never acts on a node. Only a node named by trusted
    evidence is isolated automatically.
    """
    now = now or timezone.now()
    policy = FaultPolicy.objects.filter(category=incident.category).first()
    if policy is None:
        return []
    if not incident.confirmed and not trust.job_output_may_restart(incident.category):
        return []  # a suspicion of the machine waits for a trusted signal
    done = set(incident.actions.values_list("kind", flat=True))
    can = incident_operations(incident=incident)
    # Only a node that trusted evidence names is taken out automatically, whatever the job said.
    node_vouched = incident.signals.filter(trusted=True, node_id=incident.node_id).exists()
    actions = []
    if policy.isolate_node and ActionKind.ISOLATE_NODE not in done and can[ISOLATE] is None and node_vouched:
        actions += node_isolate(incident=incident, now=now)
    if policy.restart_job and ActionKind.RESTART_JOB not in done and can[RESTART] is None:
        actions += job_restart_request(incident=incident, now=now)
    if policy.notify and ActionKind.NOTIFY not in done and not incident.is_finished:
        actions += _carry_out(incident, ActionKind.NOTIFY, now=now)[0]
    return actions


def node_isolate(*, incident: Incident, actor=None, now: datetime | None = None) -> list[IncidentAction]:
    """Take the suspected node out of scheduling: the scheduler (actuators), then our inventory
    and the node's history, when it was really done."""
    now = now or timezone.now()
    _check(incident, ISOLATE)
    actions, done = _carry_out(incident, ActionKind.ISOLATE_NODE, now=now, actor=actor)
    if done:
        _node_state_change(
            incident.node, NodeState.ACTIVE, NodeState.ISOLATED, incident=incident, actor=actor, now=now
        )
    return actions


def job_restart_request(
    *, incident: Incident, actor=None, now: datetime | None = None
) -> list[IncidentAction]:
    """Requeue the job from its last checkpoint (actuators); the phase is stamped when it was done."""
    now = now or timezone.now()
    _check(incident, RESTART)
    actions, done = _carry_out(incident, ActionKind.RESTART_JOB, now=now, actor=actor)
    if done:
        _phase_stamp(incident, "restart_requested_at", now)
        incident.status = IncidentStatus.RECOVERING
        incident.save(update_fields=["restart_requested_at", "status", "updated_at"])
    return actions


def node_return_to_service(
    *, node: Node | None, incident: Incident | None = None, actor=None, now: datetime | None = None
) -> list[IncidentAction]:
    """Put an isolated node back into scheduling (``scontrol update … State=RESUME``, ``kubectl
    uncordon``), logged on the incident that isolated it; the inventory and the node's history
    change when it was really done."""
    now = now or timezone.now()
    if node is None:
        raise IncidentActionRefused(_("The incident has no suspected node."))
    node.refresh_from_db()
    if node.state != NodeState.ISOLATED:
        raise IncidentActionRefused(_("Node %(node)s is not isolated.") % {"node": node.hostname})
    incident = incident or node_isolating_incident(node=node)
    if incident is None:
        raise IncidentActionRefused(
            _("No incident isolated node %(node)s: change its state in the inventory.")
            % {"node": node.hostname}
        )
    actions, done = _carry_out(incident, ActionKind.RESUME_NODE, now=now, actor=actor, node=node)
    if done:
        _node_state_change(
            node, NodeState.ISOLATED, NodeState.ACTIVE, incident=incident, actor=actor, now=now
        )
    return actions


def incident_close(*, incident: Incident, reason: str, actor=None, now: datetime | None = None) -> Incident:
    """End an incident by hand without a recovery: who, when and why are recorded, and it counts in
    no MTTR (closing is not recovering)."""
    now = now or timezone.now()
    reason = (reason or "").strip()
    if not reason:
        raise IncidentActionRefused(_("Say why the incident is closed: a reason is required."))
    _check(incident, CLOSE)
    return _close(incident, now=now, actor=actor, reason=reason, facts=message("closed", reason=reason))


def _close(incident: Incident, *, now: datetime, actor, reason: str, facts: dict) -> Incident:
    incident.status = IncidentStatus.CLOSED
    incident.closed_at = max(now, incident.detected_at)
    incident.closed_by = actor
    incident.close_reason = reason
    incident.save()
    _log_action(incident, ActionKind.CLOSE, "", True, False, facts, now=now, actor=actor)
    return incident


NO_ACTUATOR = {
    ActionKind.ISOLATE_NODE: "no_isolate_actuator",
    ActionKind.RESTART_JOB: "no_restart_actuator",
    ActionKind.RESUME_NODE: "no_resume_actuator",
    ActionKind.NOTIFY: "no_notify_actuator",
}
BY_HAND = {
    ActionKind.ISOLATE_NODE: "isolated_by_hand",
    ActionKind.RESTART_JOB: "restart_by_hand",
    ActionKind.RESUME_NODE: "resumed_by_hand",
}


def _carry_out(
    incident: Incident, kind: str, *, now: datetime, actor=None, node: Node | None = None
) -> tuple[list[IncidentAction], bool]:
    """Run the action's enabled actuators, each logged; whether it was really done.

    Done means an actuator out of dry run succeeded. With none configured, the automatic policy
    does nothing (logged as such), while a platform admin's own action is recorded as done by hand.
    """
    node = node or incident.node
    configs = list(ActuatorConfig.objects.filter(action=kind, enabled=True))
    if not configs:
        facts = {
            "node": node.hostname if node else "—",
            "job": incident.job.external_id if incident.job else "—",
        }
        if actor is not None and kind in BY_HAND:
            return [
                _log_action(
                    incident, kind, "", True, False, message(BY_HAND[kind], **facts), now=now, actor=actor
                )
            ], True
        return [
            _log_action(
                incident, kind, "", False, False, message(NO_ACTUATOR[kind], **facts), now=now, actor=actor
            )
        ], False
    actions = []
    for config in configs:
        request = ActionRequest(
            kind=kind,
            incident_id=incident.pk,
            node=node.hostname if node else None,
            gpu=incident.gpu_index,
            job_id=incident.job.external_id if incident.job else None,
            category=incident.category,
            reason=f"portal incident {incident.pk}: {incident.title}",
            extra={"cluster": incident.cluster.slug},
        )
        try:
            result = actuator_from_config(config.config).run(request, dry_run=config.dry_run)
        except ValueError as error:
            facts = message("bad_actuator_config", error=str(error))
            actions.append(
                _log_action(incident, kind, config.name, False, config.dry_run, facts, now=now, actor=actor)
            )
            continue
        facts = {"code": result.code, "params": dict(result.params)} if result.code else {}
        actions.append(_log_action(
            incident, kind, config.name, result.ok, result.dry_run, facts, summary=result.summary,
            detail=result.detail, duration_s=result.duration_s, now=now, actor=actor,
        ))  # fmt: skip
    return actions, any(action.ok and not action.dry_run for action in actions)


def _node_state_change(
    node: Node, before: str, after: str, *, incident: Incident, actor, now: datetime
) -> bool:
    """Move ``node`` from ``before`` to ``after`` in the inventory and its history; False when it
    was not in ``before`` any more (someone else changed it meanwhile)."""
    reason = f"incident {incident.pk}: {incident.title}"[:300] if after == NodeState.ISOLATED else ""
    with transaction.atomic():
        changed = Node.objects.filter(pk=node.pk, state=before).update(
            state=after, state_reason=reason, updated_at=timezone.now()
        )
        if changed:
            NodeStateChange.objects.create(
                node=node, at=now, state=after, previous_state=before, incident=incident, actor=actor
            )
    node.refresh_from_db(fields=["state", "state_reason", "updated_at"])
    return bool(changed)


def _log_action(
    incident, kind, actuator, ok, dry_run, facts, *, now, actor, summary="", detail="", duration_s=0.0
) -> IncidentAction:
    return IncidentAction.objects.create(
        incident=incident,
        kind=kind,
        actuator=actuator,
        ok=ok,
        dry_run=dry_run,
        summary=(summary or render_english(facts))[:1000],
        message=facts,
        detail=detail,
        requested_at=now,
        duration_s=duration_s,
        actor=actor,
    )


# --- Recovery -----------------------------------------------------------------------------------


def incidents_refresh(*, cluster: Cluster, now: datetime | None = None) -> int:
    """Mark incidents recovered when their job (requeued) or its resubmission runs again; close
    those whose job ended and did not run again within a day (closed, not recovered)."""
    now = now or timezone.now()
    recovered = 0
    for incident in (
        Incident.objects.filter(cluster=cluster)
        .exclude(status__in=IncidentStatus.finished())
        .select_related("job", "cluster")
    ):
        job = incident.job
        if job is None:
            continue
        back = _running_again(job, incident.occurred_at, now)
        if back is None:
            if job.state in JobState.finished() and job.ended_at and now - job.ended_at > RUN_AGAIN_WITHIN:
                incident.gpu_hours_lost = _gpu_hours_lost(incident, max(job.ended_at, incident.occurred_at))
                _close(incident, now=now, actor=None, reason="", facts=message("closed_not_run_again"))
            continue
        _phase_stamp(incident, "recovered_at", back)
        incident.status = IncidentStatus.RESOLVED
        incident.gpu_hours_lost = _gpu_hours_lost(incident, incident.recovered_at)
        incident.save(update_fields=["recovered_at", "status", "gpu_hours_lost", "updated_at"])
        recovered += 1
    return recovered


def _running_again(job: Job, occurred: datetime, now: datetime) -> datetime | None:
    """When the job ran again after the fault: requeued under its id, or resubmitted under its
    name within ``RUN_AGAIN_WITHIN`` of its end (a job of the same name days later is another
    run, not a recovery). Never after ``now``: a start the portal cannot have seen yet."""
    if job.started_at and occurred < job.started_at <= now:  # requeued under the same id
        return job.started_at
    ended = max(job.ended_at or occurred, occurred)
    successor = (
        Job.objects.filter(cluster=job.cluster, name=job.name, department_id=job.department_id)
        .filter(submitted_at__gte=occurred - timedelta(minutes=1), submitted_at__lte=ended + RUN_AGAIN_WITHIN)
        .filter(started_at__isnull=False, started_at__lte=now)
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
