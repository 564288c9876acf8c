"""Job log facts: what each job's log lines say about its setup, read once per chunk.

Each run reads the log chunks stored since the last one (by id), feeds them to the job's
``LogFactsBuilder`` resumed from the stored facts, and stores the facts again with the chunk it got
to. Line numbers are the line's number in its stream, counted over the stream's chunks in offset
order, so the evidence says "rank-3.log line 42" as an editor would.
"""

import json
import logging
from collections import defaultdict

from django.db import transaction
from django.db.models import Max

from efficiency.analysis.recommendations.logfacts import LogFacts, LogFactsBuilder
from efficiency.models import JobLogFacts, LogChunk

logger = logging.getLogger(__name__)

BATCH_CHUNKS = 2_000
# Chunks without any of these words cannot change a job's facts: only their lines are counted.
_WORDS = ("NCCL", "num_workers", "pin_memory", "bf16", "fp16", "heckpoint", "dtype", "for parameters")


def job_log_facts_update(*, max_chunks: int = 200_000) -> set[int]:
    """Fold the log chunks stored since the last run into their jobs' facts; returns the ids of
    the jobs whose facts were read (their families are re-evaluated)."""
    cursor = JobLogFacts.objects.aggregate(last=Max("last_chunk_id"))["last"] or 0
    touched: set[int] = set()
    read = 0
    while read < max_chunks:
        chunks = list(
            LogChunk.objects.filter(pk__gt=cursor, job__isnull=False)
            .order_by("pk")
            .values("pk", "job_id", "stream", "file_id", "start_offset", "line_count")[:BATCH_CHUNKS]
        )
        if not chunks:
            break
        cursor = chunks[-1]["pk"]
        read += len(chunks)
        by_job: dict[int, list[dict]] = defaultdict(list)
        for chunk in chunks:
            by_job[chunk["job_id"]].append(chunk)
        _jobs_update(by_job, cursor)
        touched.update(by_job)
    return touched


def _jobs_update(by_job: dict[int, list[dict]], cursor: int) -> None:
    stored = {row.job_id: row for row in JobLogFacts.objects.filter(job_id__in=list(by_job))}
    # Line numbers: each stream's chunks of these jobs in offset order (no text read).
    bases: dict[int, int] = {}
    for job_id in by_job:
        counted: dict[tuple[str, str], int] = defaultdict(int)
        for pk, stream, file_id, lines in (
            LogChunk.objects.filter(job_id=job_id)
            .order_by("stream", "file_id", "start_offset")
            .values_list("pk", "stream", "file_id", "line_count")
        ):
            bases[pk] = counted[(stream, file_id)] + 1
            counted[(stream, file_id)] += lines
    wanted = [c["pk"] for chunks in by_job.values() for c in chunks]
    texts = dict(LogChunk.objects.filter(pk__in=wanted).values_list("pk", "text"))
    rows_new, rows_changed = [], []
    for job_id, chunks in by_job.items():
        row = stored.get(job_id)
        builder = (
            LogFactsBuilder.from_facts(LogFacts.from_dict(row.facts))
            if row is not None and row.facts
            else LogFactsBuilder()
        )
        last = row.last_chunk_id if row is not None else 0
        try:
            for chunk in sorted(chunks, key=lambda c: (c["stream"], c["file_id"], c["start_offset"])):
                if chunk["pk"] <= last:
                    continue
                text = texts.get(chunk["pk"], "")
                if any(word in text for word in _WORDS):
                    builder.feed_text(chunk["stream"], bases.get(chunk["pk"], 1), text)
            facts = builder.facts().to_dict()
            json.dumps(facts, allow_nan=False)  # what the database's JSON column will take
        except Exception:  # a chunk the parser cannot take must not stop every later run
            logger.exception("Log facts of job %s: chunks up to %s skipped", job_id, cursor)
            facts = row.facts if row is not None else {}
        if row is None:
            rows_new.append(JobLogFacts(job_id=job_id, facts=facts, last_chunk_id=cursor))
        else:
            row.facts, row.last_chunk_id = facts, cursor
            rows_changed.append(row)
    with transaction.atomic():
        JobLogFacts.objects.bulk_create(rows_new, ignore_conflicts=True)
        JobLogFacts.objects.bulk_update(rows_changed, ["facts", "last_chunk_id"])
