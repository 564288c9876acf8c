"""Scanning: new log chunks → fault signals, each with the trust of the stream it came from."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.db import transaction
from django.utils import timezone

from efficiency.analysis.faults.context import StreamContext
from efficiency.analysis.faults.scanner import scan_bytes
from efficiency.analysis.faults.trust import job_output_node, kernel_log_node, source_has_kernel_logs
from efficiency.choices import SignalSource, SourceKind
from efficiency.fault_messages import message
from efficiency.models import (
    DataSource,
    FaultScanCursor,
    FaultSignal,
    Job,
    LogChunk,
    LogStreamContext,
    Node,
)
from efficiency.services.faults.evidence import job_on_node, node_of_rank, signals_store
from efficiency.services.faults.incidents import incidents_group

SCAN_BATCH = 500
# A log file quiet this long is over: its context (throughput baseline) is forgotten.
CONTEXT_KEPT = timedelta(days=14)


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
            contexts = _contexts(source, chunks)
            signals = _signals_from_chunks(source, chunks, now=now, line_zone=line_zone, contexts=contexts)
            _contexts_save(source, contexts, now=now)
            signals_stored += signals_store(source.cluster, signals, now=now, seen_after=seen_after)
            chunks_seen += len(chunks)
            cursor.last_chunk_id = chunks[-1].pk
            cursor.scanned_at = now
            cursor.save(update_fields=["last_chunk_id", "scanned_at"])
    incidents = incidents_group(cluster=source.cluster, now=now) if chunks_seen else 0
    if chunks_seen:
        LogStreamContext.objects.filter(source=source, updated_at__lt=now - CONTEXT_KEPT).delete()
    return ScanSummary(chunks=chunks_seen, signals=signals_stored, incidents=incidents)


def _contexts(source: DataSource, chunks: list[LogChunk]) -> dict[tuple[str, str], StreamContext]:
    """The stored context of each log file the chunks belong to (a fresh one for a new file)."""
    files = {(chunk.stream, chunk.file_id) for chunk in chunks}
    stored = LogStreamContext.objects.filter(
        source=source, stream__in={stream for stream, _ in files}, file_id__in={file for _, file in files}
    )
    contexts = {(row.stream, row.file_id): StreamContext.from_json(row.context) for row in stored}
    return {key: contexts.get(key) or StreamContext() for key in files}


def _contexts_save(
    source: DataSource, contexts: dict[tuple[str, str], StreamContext], *, now: datetime
) -> None:
    LogStreamContext.objects.bulk_create(
        [
            LogStreamContext(
                source=source, stream=stream, file_id=file_id, context=ctx.as_json(), updated_at=now
            )
            for (stream, file_id), ctx in contexts.items()
        ],
        update_conflicts=True,
        unique_fields=["source", "stream", "file_id"],
        update_fields=["context", "updated_at"],
    )


def _signals_from_chunks(
    source: DataSource,
    chunks: list[LogChunk],
    *,
    now: datetime,
    line_zone,
    contexts: dict[tuple[str, str], StreamContext],
) -> list[FaultSignal]:
    """One signal per finding, with the trust of the stream it came from (``analysis.faults.trust``).

    A node's kernel log is trusted about that node (not about the host a line names). A job's own
    output is a suspicion, and a node it names (by its path, its pushed ``node``, a syslog host in
    a line, or a rank) is kept only when it is one of the job's nodes; else it is refused, and the
    reason kept on the signal.
    """
    nodes = {n.hostname: n for n in Node.objects.filter(cluster=source.cluster)}
    job_nodes = _job_hostnames({chunk.job_id for chunk in chunks if chunk.job_id is not None})
    rank_nodes: dict[tuple[int, int], Node | None] = {}
    kernel_logs = source_has_kernel_logs(kind=source.kind, config=source.config)
    signals = []
    for chunk in chunks:
        kernel_node = (
            kernel_log_node(stream=chunk.stream, node=chunk.node, job=chunk.job_external_id)
            if kernel_logs
            else None
        )
        findings = scan_bytes(
            chunk.text.encode("utf-8"),
            start_offset=chunk.start_offset,
            year=now.year,
            context=contexts[(chunk.stream, chunk.file_id)],
        )
        for finding in findings:
            occurred = _aware(finding.timestamp, line_zone) or chunk.received_at
            occurred = min(occurred, now)
            rank = finding.rank if finding.rank is not None else chunk.rank
            if kernel_node is not None:
                node = nodes.get(kernel_node)
                job = job_on_node(node, occurred) if node is not None else None
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
                        rank_nodes[(job.pk, rank)] = node_of_rank(job, rank)
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


def _job_hostnames(job_ids: set[int]) -> dict[int, frozenset[str]]:
    """The hostnames of each job's nodes, in one query for a batch of chunks (not one a job)."""
    hostnames: dict[int, set[str]] = {job_id: set() for job_id in job_ids}
    rows = Job.nodes.through.objects.filter(job_id__in=job_ids).values_list("job_id", "node__hostname")
    for job_id, hostname in rows:
        hostnames[job_id].add(hostname)
    return {job_id: frozenset(names) for job_id, names in hostnames.items()}


def _aware(moment: datetime | None, zone) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment.astimezone(UTC)
