"""Job log facts: what each job's log lines say about its setup, read once per chunk.

Each run reads the log chunks stored since the last one (by id, per source: ``LogFactsCursor``),
feeds them to the job's ``LogFactsBuilder`` resumed from the stored facts, and stores the facts
again with the source's cursor moved past them. Line numbers are the line's number in its
stream, counted over the stream's chunks in offset order, so the evidence says "rank-3.log
line 42" as an editor would.

A chunk whose stream has a gap before it (a shipper delivered a later batch before an earlier one)
waits: its line numbers are not known until the gap fills. It is read when the earlier chunk
arrives, in offset order, or after ``PENDING_GRACE`` with the numbers the stored chunks give (the
earlier part was lost). A part retention pruned is no gap: ``PrunedLogSpan`` says how many lines
it held, and the numbering goes on after them.
"""

import json
import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from efficiency.analysis.recommendations.logfacts import LogFacts, LogFactsBuilder
from efficiency.models import DataSource, JobLogFacts, LogChunk, LogFactsCursor
from efficiency.selectors.log_lines import pruned_heads

logger = logging.getLogger(__name__)

BATCH_CHUNKS = 2_000
# Long enough for a shipper's retry of an earlier batch, short beside the engine's cadence; a
# shipper that starts reading mid-file (tail) has its first chunk wait this long once.
PENDING_GRACE = timedelta(minutes=10)
PENDING_KEY = "_pending"  # in the stored facts: ids of the job's chunks waiting for a gap to fill


def job_log_facts_update(*, max_chunks: int = 200_000, now: datetime | None = None) -> set[int]:
    """Fold the log chunks stored since the last run into their jobs' facts; returns the ids of
    the jobs whose facts were read (their families are re-evaluated).

    Each source's chunks are read after its cursor, in id order, a batch at a time; the batch's
    facts and the cursor move in one transaction, with the cursor's row locked, so two runs at
    once read no chunk twice and a run that stops midway leaves no chunk half read.
    """
    now = now or timezone.now()
    touched: set[int] = set()
    read = 0
    for source_id in DataSource.objects.order_by("pk").values_list("pk", flat=True):
        while read < max_chunks:
            with transaction.atomic():
                cursor, _ = LogFactsCursor.objects.select_for_update().get_or_create(source_id=source_id)
                chunks = list(
                    LogChunk.objects.filter(
                        source_id=source_id, pk__gt=cursor.last_chunk_id, job__isnull=False
                    )
                    .order_by("pk")
                    .values_list("pk", "job_id")[: min(BATCH_CHUNKS, max_chunks - read)]
                )
                if not chunks:
                    break
                unread: dict[int, set[int]] = defaultdict(set)
                for pk, job_id in chunks:
                    unread[job_id].add(pk)
                _jobs_update(unread, now=now)
                cursor.last_chunk_id = chunks[-1][0]
                cursor.save(update_fields=["last_chunk_id"])
            read += len(chunks)
            touched |= unread.keys()
    # Jobs whose waiting chunks no new chunk will release (the gap was lost): read them past grace.
    waiting = set(
        JobLogFacts.objects.filter(facts__has_key=PENDING_KEY)
        .exclude(job_id__in=touched)
        .values_list("job_id", flat=True)
    )
    if waiting:
        _jobs_update({job_id: set() for job_id in waiting}, now=now)
        touched |= waiting
    return touched


def _jobs_update(unread: dict[int, set[int]], *, now: datetime) -> None:
    """Fold each job's ``unread`` chunks (and those waiting for a gap) into its stored facts."""
    stored = {row.job_id: row for row in JobLogFacts.objects.filter(job_id__in=list(unread))}
    rows_new, rows_changed = [], []
    for job_id in sorted(unread):
        row = stored.get(job_id)
        facts = dict(row.facts) if row is not None and row.facts else {}
        pending = set(facts.pop(PENDING_KEY, []))
        to_read, waiting = _chunks_to_read(job_id, unread=unread[job_id] | pending, now=now)
        try:
            builder = LogFactsBuilder.from_facts(LogFacts.from_dict(facts)) if facts else LogFactsBuilder()
            texts = dict(LogChunk.objects.filter(pk__in=[pk for pk, *_ in to_read]).values_list("pk", "text"))
            for pk, stream, base in to_read:
                # feed_text passes over a chunk that holds no word a fact could come from
                builder.feed_text(stream, base, texts.get(pk, ""))
            facts = builder.facts().to_dict()
            json.dumps(facts, allow_nan=False)  # what the database's JSON column will take
        except Exception:  # a chunk the parser cannot take must not stop every later run
            logger.exception("Log facts of job %s: chunks %s skipped", job_id, sorted(unread[job_id]))
            facts = (
                {k: v for k, v in (row.facts or {}).items() if k != PENDING_KEY} if row is not None else {}
            )
        if waiting:
            facts[PENDING_KEY] = sorted(waiting)
        newest = max(unread[job_id], default=0)  # for the admin: the newest chunk read
        if row is None:
            rows_new.append(JobLogFacts(job_id=job_id, facts=facts, last_chunk_id=newest))
        else:
            row.facts, row.last_chunk_id = facts, max(newest, row.last_chunk_id)
            rows_changed.append(row)
    with transaction.atomic():
        JobLogFacts.objects.bulk_create(rows_new, ignore_conflicts=True)
        JobLogFacts.objects.bulk_update(rows_changed, ["facts", "last_chunk_id"])


def _chunks_to_read(
    job_id: int, *, unread: set[int], now: datetime
) -> tuple[list[tuple[int, str, int]], set[int]]:
    """Of the job's ``unread`` chunks (new since the last run, or waiting), those to read now in
    offset order with their first line numbers, and those that wait for a gap before them to fill."""
    to_read, waiting = [], set()
    chunks = list(
        LogChunk.objects.filter(job_id=job_id)
        .order_by("stream", "file_id", "start_offset")
        .values_list(
            "pk", "source_id", "stream", "file_id", "start_offset", "end_offset", "line_count", "received_at"
        )
    )
    # A file whose head retention pruned goes on from there: its kept chunks keep their numbers.
    pruned = pruned_heads((source, stream, file_id) for _, source, stream, file_id, *_ in chunks)
    counted: dict[tuple[int, str, str], int] = {key: lines for key, (_, lines) in pruned.items()}
    reached: dict[tuple[int, str, str], int | None] = {key: end for key, (end, _) in pruned.items()}
    for pk, source, stream, file_id, start, end, lines, received in chunks:
        key = (source, stream, file_id)
        counted.setdefault(key, 0)
        upto = reached.get(key, 0)
        contiguous = upto is not None and start <= upto
        base = counted[key] + 1
        counted[key] += lines
        reached[key] = max(end, upto) if contiguous else None
        if pk not in unread:
            continue
        if contiguous or received < now - PENDING_GRACE:
            to_read.append((pk, stream, base))
        else:
            waiting.add(pk)
    return to_read, waiting
