"""Log chunks however a shipper delivers them: what is stored, with what retention pruned, is the
file, once.

A shipper sends a file's lines in chunks, each from its cursor: the file's start, or where an
earlier chunk ended. It retries, replays after a crash from an older cursor reaching further than
before, sends the same chunk twice, and retention prunes what came before some moment. For any
file and any such deliveries, the chunks stored, in offset order, hold the file's bytes from where
retention pruned it up to the furthest end delivered, each byte once, with no gap; every chunk
counts its own lines; and the lines before a chunk (pruned ones included) are the lines before
its offset in the file, which is how the log facts worker and the page number lines. A stored
chunk is never changed: the workers read each one once, by id.
"""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.collectors.records import LogLines
from efficiency.models import LogChunk, PrunedLogSpan
from efficiency.services.ingest import log_chunks_ingest
from efficiency.services.rollups import retention_prune
from tests.factories import DataSourceFactory

pytestmark = pytest.mark.django_db

STREAM = "job-7/rank-0.log"
# Any text but a line end and lone surrogates (no file holds those): NUL, tabs, CJK, emoji.
LINE = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\n"), max_size=6)
DELIVERY = st.tuples(st.integers(0, 40), st.integers(1, 8))  # (which cursor, how many lines)


@pytest.fixture
def source(db):
    return DataSourceFactory()


def _bounds(lines: list[str]) -> list[int]:
    """The byte offset where each line starts, and the file's end."""
    bounds = [0]
    for line in lines:
        bounds.append(bounds[-1] + len(line.encode()) + 1)
    return bounds


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(LINE, min_size=1, max_size=14),
    deliveries=st.lists(DELIVERY, min_size=1, max_size=12),
    pruned_after=st.integers(0, 12),
)
def test_stored_and_pruned_chunks_hold_the_file_once_in_order(source, lines, deliveries, pruned_after):
    now = timezone.now()
    old = now - timedelta(days=30)  # past any retention setting, a whole day included
    bounds = _bounds(lines)
    data = "".join(f"{line}\n" for line in lines).encode()
    with transaction.atomic():
        cursors, furthest, rejected = [0], 0, []
        for number, (pick, count) in enumerate(deliveries):
            if number == pruned_after:
                retention_prune(now=now)
            start = cursors[pick % len(cursors)]
            end = min(start + count, len(lines))
            text = "".join(f"{line}\n" for line in lines[start:end])
            chunk = LogLines(STREAM, "f1", bounds[start], bounds[end], text, end - start, job_external_id="7")
            result = log_chunks_ingest(
                source=source, chunks=[chunk], now=old if number < pruned_after else now
            )
            rejected += result.rejected
            assert result.stored + result.duplicates == 1
            cursors.append(end)
            furthest = max(furthest, end)
        if pruned_after >= len(deliveries):
            retention_prune(now=now)

        assert rejected == []
        span = PrunedLogSpan.objects.filter(source=source, stream=STREAM, file_id="f1").first()
        pruned_end = span.end_offset if span else 0
        pruned_lines = span.line_count if span else 0
        assert pruned_lines == data[:pruned_end].count(b"\n")
        chunks = list(LogChunk.objects.filter(source=source).order_by("start_offset"))
        # From where retention pruned up to the furthest end delivered, with no gap or overlap.
        offsets = [pruned_end] + [
            offset for chunk in chunks for offset in (chunk.start_offset, chunk.end_offset)
        ]
        assert offsets == sorted(offsets)
        assert all(a == b for a, b in zip(offsets[::2], offsets[1::2], strict=False))
        assert (chunks[-1].end_offset if chunks else pruned_end) == bounds[furthest]
        expected = data[pruned_end : bounds[furthest]].decode().replace("\x00", "\N{REPLACEMENT CHARACTER}")
        assert "".join(chunk.text for chunk in chunks) == expected
        before = pruned_lines
        for chunk in chunks:
            assert chunk.line_count == chunk.text.count("\n")
            assert before == data[: chunk.start_offset].count(
                b"\n"
            )  # the chunk's first line is number before + 1
            before += chunk.line_count
        transaction.set_rollback(True)
