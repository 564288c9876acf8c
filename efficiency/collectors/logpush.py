"""Job log lines pushed over HTTP by a log shipper (Fluent Bit, Vector) as NDJSON.

One JSON object per line::

    {"stream": "/var/log/jobs/8812/rank-0.log", "offset": 40960, "line": "step 120 loss 2.31",
     "job": "8812", "node": "gpu-a01", "rank": 0, "file_id": "2049:131", "ts": "2024-05-01T08:00:00Z"}

``stream`` (the shipper's stream id, usually the file path on the node), ``offset`` (byte offset
of the line in that stream, what deduplication relies on) and ``line`` (without its newline) are
required; ``job``, ``node``, ``rank``, ``file_id`` (default ``"push"``) and ``ts`` (ISO 8601 or
epoch seconds; checked, not used yet) are optional, and ``null`` counts as absent. Other keys are
ignored. A shipper's retry delivers the same (stream, file_id, offset) again: such lines are kept
once within a body, and across bodies the chunks have the same identity and are stored once.

Lines of one (stream, file_id, job, node, rank) whose offsets follow each other (``offset +
len(line in UTF-8) + 1``) merge into one ``LogLines``. Bad lines are rejected one by one with
their 1-based line number; the rest of the body is kept. The body is parsed whole, so its size
is capped before it gets here: ``push_body_read`` reads at most ``max_bytes`` from the request
(with or without a Content-Length) and ``push_body_decode`` inflates gzip or deflate to at most
``max_decoded_bytes``. A body refused as a whole (too large, too many lines, not decodable) raises
``PushRefused`` with the HTTP status a shipper acts on and the reason; nothing of it is stored.
"""

import json
import math
import re
import zlib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import BinaryIO

from efficiency.collectors.logfiles import (
    EXCERPT_BYTES,
    FILE_ID_MAX_CHARS,
    JOB_ID_MAX_CHARS,
    NODE_MAX_CHARS,
    RANK_MAX,
    STREAM_MAX_CHARS,
    MiB,
)
from efficiency.collectors.records import LogLines, ParseOutcome, Rejected

DEFAULT_FILE_ID = "push"
# Offsets are stored in BigIntegerField columns.
OFFSET_MAX = 2**63 - 1
# One bad shipper can send thousands of bad lines; past this many only a count is kept.
DEFAULT_MAX_REJECTED = 1000
_UTF8_BOM = b"\xef\xbb\xbf"
# NUL is refused by PostgreSQL text columns; lone surrogates (legal as JSON escapes) cannot be
# encoded as UTF-8 at all.
_UNSTORABLE_RE = re.compile("[\x00\ud800-\udfff]")
# What a compressed body may inflate to: a 2.5 MB gzip body of log lines is ~25 MB of text, and a
# gzip bomb (1 KB -> 1 GB) stops here instead of in the worker's memory.
DEFAULT_MAX_DECODED_BYTES = 32 * MiB
READ_BLOCK = 64 * 1024
# Content-Encoding values we inflate, with zlib's wbits for each.
_ENCODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class PushRefused(Exception):
    """A push body refused as a whole, with the HTTP status to answer and the reason.

    413: too large (bytes on the wire, once inflated, or lines), split the batch; 400: the body
    cannot be read (corrupt gzip, no lines); 411: a chunked body this server cannot read; 415: an
    encoding we do not inflate. Nothing of a refused body is stored.
    """

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


# A refused body is read on (and thrown away) up to this many times the limit before the answer:
# a server that answers and closes while the client is still sending makes the client's next
# write or read fail with "connection reset", and the shipper never sees the 413 and its reason.
# Beyond it (a client streaming without end) the connection is closed unread.
DRAIN_FACTOR = 8


def push_body_read(stream: BinaryIO, *, max_bytes: int) -> bytes:
    """Read a request body of unknown length (chunked transfer encoding) up to ``max_bytes``.

    Reads in blocks and stops one byte past the limit, so a client streaming gigabytes costs
    ``max_bytes`` of memory, then ``PushRefused(413)`` once the rest is drained
    (``push_body_drain``).
    """
    parts: list[bytes] = []
    size = 0
    while True:
        block = stream.read(min(READ_BLOCK, max_bytes + 1 - size))
        if not block:
            return b"".join(parts)
        parts.append(block)
        size += len(block)
        if size > max_bytes:
            parts.clear()
            push_body_drain(stream, max_bytes=max_bytes)
            raise PushRefused(
                413, f"body larger than {max_bytes} bytes: nothing stored; send smaller batches"
            )


def push_body_drain(stream: BinaryIO, *, max_bytes: int) -> None:
    """Read what is left of a refused body and drop it, up to ``DRAIN_FACTOR`` × ``max_bytes``,
    one block at a time (no more memory than a block)."""
    left = DRAIN_FACTOR * max_bytes
    while left > 0:
        block = stream.read(min(READ_BLOCK, left))
        if not block:
            return
        left -= len(block)


def push_body_decode(
    body: bytes, content_encoding: str, *, max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES
) -> bytes:
    """The body with its ``Content-Encoding`` (gzip, deflate, identity) undone, inflated in
    bounded steps: past ``max_decoded_bytes`` it is ``PushRefused(413)``, never a full inflate.

    Concatenated gzip members (what ``cat a.gz b.gz`` and some shippers produce) are all read.
    """
    encodings = [part.strip().lower() for part in content_encoding.split(",") if part.strip()]
    encodings = [name for name in encodings if name != "identity"]
    if not encodings:
        return body
    if len(encodings) > 1 or encodings[0] not in _ENCODINGS:
        raise PushRefused(
            415, f"Content-Encoding {content_encoding!r} is not supported; send gzip, deflate or none"
        )
    wbits = _ENCODINGS[encodings[0]]
    out = bytearray()
    data = body
    while data:
        inflater = zlib.decompressobj(wbits)
        try:
            while data:
                # In steps, so memory stays near the limit (not twice it) on the way there.
                out += inflater.decompress(data, min(MiB, max_decoded_bytes + 1 - len(out)))
                _check_inflated(out, max_decoded_bytes)
                data = inflater.unconsumed_tail
            out += inflater.flush()  # what one last match still held: a few KB at most
            _check_inflated(out, max_decoded_bytes)
        except zlib.error as exc:
            raise PushRefused(400, f"body is not valid {encodings[0]}: {exc}; nothing stored") from None
        if not inflater.eof:
            raise PushRefused(400, f"{encodings[0]} body is truncated; nothing stored")
        data = inflater.unused_data.lstrip(b"\x00")  # gzip members may be padded with NULs
    return bytes(out)


def _check_inflated(out: bytearray, max_decoded_bytes: int) -> None:
    if len(out) > max_decoded_bytes:
        raise PushRefused(
            413, f"body inflates to more than {max_decoded_bytes} bytes: nothing stored; send smaller batches"
        )


class _RecordError(ValueError):
    """One pushed line is unusable; the message is the reason shown to admins."""


@dataclass(frozen=True, slots=True)
class _PushedLine:
    stream: str
    file_id: str
    job: str
    node: str
    rank: int | None
    offset: int
    end_offset: int
    text: str


@dataclass(slots=True)
class _ChunkBuilder:
    first: _PushedLine
    end_offset: int
    lines: list[str] = field(default_factory=list)

    def chunk(self) -> LogLines:
        return LogLines(
            stream=self.first.stream,
            file_id=self.first.file_id,
            start_offset=self.first.offset,
            end_offset=self.end_offset,
            text="".join(line + "\n" for line in self.lines),
            line_count=len(self.lines),
            job_external_id=self.first.job,
            node=self.first.node,
            rank=self.first.rank,
        )


def parse_ndjson_push(
    body: bytes,
    *,
    max_line_bytes: int = MiB,
    max_records: int = 50_000,
    max_rejected: int = DEFAULT_MAX_REJECTED,
) -> ParseOutcome[LogLines]:
    """Turn one NDJSON push body into log chunks, rejecting bad lines one by one.

    A ``line`` longer than ``max_line_bytes`` (UTF-8) is cut to that length and reported; its
    offsets still count its full length, so the next line still joins the chunk. Past
    A body of more than ``max_records`` lines is refused as a whole (``PushRefused(413)``), so
    no line is dropped inside an accepted body. At most ``max_rejected`` problems are listed, then
    one more entry counts the others.
    """
    lines = body.split(b"\n")
    if len(lines) > max_records and (count := sum(1 for raw in lines if raw.strip())) > max_records:
        raise PushRefused(
            413, f"{count} lines in one body, at most {max_records}: nothing stored; send smaller batches"
        )
    outcome: ParseOutcome[LogLines] = ParseOutcome()
    listed = 0
    unlisted = 0
    builders: list[_ChunkBuilder] = []
    open_builders: dict[tuple[str, str, str, str, int | None], _ChunkBuilder] = {}
    seen: set[tuple[str, str, int]] = set()

    def reject(reason: str, raw: str | bytes, line_no: int) -> None:
        nonlocal listed, unlisted
        if listed < max_rejected:
            outcome.reject(reason, raw[:EXCERPT_BYTES], line_no)
            listed += 1
        else:
            unlisted += 1

    for line_no, raw_line in enumerate(lines, start=1):
        raw = raw_line.strip()
        if line_no == 1 and raw.startswith(_UTF8_BOM):
            raw = raw[len(_UTF8_BOM) :].strip()
        if not raw:
            continue
        try:
            pushed = _parse_line(raw)
        except _RecordError as exc:
            reject(str(exc), raw, line_no)
            continue
        if len(pushed.text.encode("utf-8")) > max_line_bytes:
            reject(f"line longer than {max_line_bytes} bytes truncated", pushed.text, line_no)
            pushed = _truncated(pushed, max_line_bytes)
        identity = (pushed.stream, pushed.file_id, pushed.offset)
        if identity in seen:
            continue
        seen.add(identity)
        key = (pushed.stream, pushed.file_id, pushed.job, pushed.node, pushed.rank)
        builder = open_builders.get(key)
        if builder is None or builder.end_offset != pushed.offset:
            builder = _ChunkBuilder(first=pushed, end_offset=pushed.offset)
            open_builders[key] = builder
            builders.append(builder)
        builder.lines.append(pushed.text)
        builder.end_offset = pushed.end_offset

    if unlisted:
        outcome.rejected.append(Rejected(reason=f"{unlisted} more rejected lines not listed"))
    outcome.records = [builder.chunk() for builder in builders]
    return outcome


def _parse_line(raw: bytes) -> _PushedLine:
    """Decode and validate one NDJSON line; ``_RecordError`` says what is wrong with it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _RecordError(f"not valid UTF-8 at byte {exc.start}") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise _RecordError("JSON nested too deeply") from None
    except ValueError as exc:
        # JSONDecodeError, and the int-digits limit of huge numbers, are both ValueError.
        raise _RecordError(f"invalid JSON: {str(exc)[:120]}") from None
    if not isinstance(value, dict):
        raise _RecordError(f"not a JSON object but {type(value).__name__}")

    stream = _text_field(value, "stream", STREAM_MAX_CHARS, required=True)
    file_id = _text_field(value, "file_id", FILE_ID_MAX_CHARS) or DEFAULT_FILE_ID
    job = _text_field(value, "job", JOB_ID_MAX_CHARS)
    node = _text_field(value, "node", NODE_MAX_CHARS)
    rank = None if value.get("rank") is None else _int_field("rank", value["rank"], RANK_MAX)
    offset = _int_field("offset", value.get("offset"), OFFSET_MAX)
    line = value.get("line")
    if not isinstance(line, str):
        raise _RecordError("'line' is missing or not a string")
    _check_time(value.get("ts"))

    # Some shippers keep the newline; the offset arithmetic counts it once, separately.
    line = line.removesuffix("\n")
    # Count the bytes as the shipper read them, before anything is replaced.
    end_offset = offset + len(line.encode("utf-8", errors="surrogatepass")) + 1
    if end_offset > OFFSET_MAX:
        raise _RecordError("'offset' out of range")
    return _PushedLine(
        stream=stream,
        file_id=file_id,
        job=job,
        node=node,
        rank=rank,
        offset=offset,
        end_offset=end_offset,
        text=_storable(line),
    )


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _storable(value: str) -> str:
    return _UNSTORABLE_RE.sub("\N{REPLACEMENT CHARACTER}", value)


def _text_field(record: dict[str, object], name: str, max_chars: int, *, required: bool = False) -> str:
    value = record.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise _RecordError(f"'{name}' is missing or not a string")
    if required and not value:
        raise _RecordError(f"'{name}' is empty")
    if len(value) > max_chars:
        raise _RecordError(f"'{name}' longer than {max_chars} characters")
    return _storable(value)


def _int_field(name: str, value: object, maximum: int) -> int:
    # bool is an int subclass, and 1.0 is no offset either.
    if not isinstance(value, int) or isinstance(value, bool):
        raise _RecordError(f"'{name}' is missing or not an integer")
    if not 0 <= value <= maximum:
        raise _RecordError(f"'{name}' out of range 0..{maximum}")
    return value


def _check_time(value: object) -> None:
    """Refuse a ``ts`` that is neither ISO 8601 text nor finite epoch seconds in datetime's range."""
    if value is None:
        return
    try:
        if isinstance(value, str):
            datetime.fromisoformat(value)
            return
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            datetime.fromtimestamp(value, tz=UTC)
            return
    except (ValueError, OverflowError, OSError):
        pass
    raise _RecordError("'ts' is neither an ISO 8601 time nor epoch seconds")


def _truncated(pushed: _PushedLine, max_line_bytes: int) -> _PushedLine:
    """The same line cut to ``max_line_bytes`` UTF-8 bytes; its offsets stay those of the full line."""
    # "ignore" only drops a character split by the cut.
    cut = pushed.text.encode("utf-8")[:max_line_bytes].decode("utf-8", errors="ignore")
    return replace(pushed, text=cut)
