"""Detection: faults in the jobs' progress lines and in the GPU metrics, stored as signals."""

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from django.db.models import Q
from django.utils import timezone

from efficiency import dispatch
from efficiency.analysis.faults.detectors import (
    SPIKE,
    detect_flat_gpus,
    detect_hang,
    detect_loss_anomalies,
    detect_slowdown,
    straggler_by_activity,
)
from efficiency.analysis.faults.progress import parse_progress
from efficiency.analysis.faults.signatures import SIGNATURES_BY_ID
from efficiency.analysis.stats import percentile
from efficiency.choices import FaultCategory, Severity, SignalSource
from efficiency.fault_messages import message, render_english
from efficiency.models import Cluster, FaultSignal, GpuSample, Job, LogChunk, Node
from efficiency.services.faults.evidence import job_on_node, signals_store
from efficiency.services.faults.incidents import incidents_group

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
    stored = signals_store(cluster, signals, now=now, seen_after=seen_after)
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
    stored = signals_store(cluster, signals, now=now)
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
    stored = signals_store(cluster, signals, now=now)
    if stored:
        dispatch.incidents_group(cluster.pk)
    return stored


def _metric_xid_signal(cluster, node: Node, gpu: int, xid: int, at: datetime, key: str, facts: dict):
    """A signal for an Xid the metrics report on a GPU, classified by the signature catalog."""
    signature = SIGNATURES_BY_ID.get(f"xid-{xid}") or SIGNATURES_BY_ID["xid-other"]
    return _gpu_metric_signal(
        cluster, node, gpu, at, key, facts,
        signature_id=signature.id, category=signature.category, severity=signature.severity, code=str(xid),
    )  # fmt: skip


def _ecc_signal(cluster, node: Node, gpu: int, at: datetime, new_errors: float) -> FaultSignal:
    facts = message("metric_ecc_dbe", errors=new_errors, gpu=gpu)
    return _gpu_metric_signal(
        cluster, node, gpu, at, f"metric:ecc-dbe:{node.pk}:{gpu}:{at.isoformat()}", facts,
        signature_id="ecc-dbe-counter", category=FaultCategory.HARDWARE_MEMORY_ECC,
        severity=Severity.CRITICAL, code="DBE",
    )  # fmt: skip


def _gpu_metric_signal(
    cluster,
    node: Node,
    gpu: int,
    at: datetime,
    key: str,
    facts: dict,
    *,
    signature_id,
    category,
    severity,
    code,
) -> FaultSignal:
    """Evidence from the exporter's metrics about one GPU: trusted (the exporter runs on the node,
    not in a job), charged to the job that held the node then."""
    job = job_on_node(node, at)
    return FaultSignal(
        cluster=cluster,
        evidence_key=key,
        source=SignalSource.METRIC,
        signature_id=signature_id,
        category=category,
        severity=severity,
        code=code,
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


# Where a slowdown comes from: the GPUs' activity this long before it is each node's own baseline.
STRAGGLER_BASELINE = timedelta(minutes=30)
STRAGGLER_STEP_S = 60.0


def _straggler_node(job: Job, since: datetime, now: datetime) -> Node | None:
    """The job's node that straggles since its slowdown began, by its GPUs' SM activity
    (``analysis.faults.detectors.straggler_by_activity``); None with fewer than three nodes or
    when none stands out."""
    nodes = {node.pk: node for node in job.nodes.all()}
    if len(nodes) < 3:
        return None
    activity: dict[int, list] = defaultdict(list)
    for node_id, ts, sm in GpuSample.objects.filter(
        node__in=list(nodes), ts__gte=since - STRAGGLER_BASELINE, ts__lt=now, sm_active_pct__isnull=False
    ).values_list("node_id", "ts", "sm_active_pct"):
        activity[node_id].append((ts, sm))
    # The slowdown itself is already sustained (SUSTAINED slow iterations): one step of activity
    # that stands out is enough to say where, as early as the detection that reports it.
    node_id = straggler_by_activity(activity, since=since, bucket_s=STRAGGLER_STEP_S, min_run=1)
    return nodes.get(node_id)


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
    signal.seen_at = seen_at  # not stored: read by signals_store for a replay's detection time
    return signal
