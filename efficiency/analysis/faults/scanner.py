"""Find fault lines in job and kernel logs, at a good fraction of grep's speed, in plain Python.

``scan_bytes`` / ``scan_file`` report one ``Finding`` per line that a signature of
``signatures.SIGNATURES`` matches: the first signature in catalog order, so the most specific
one (see the catalog's docstring). The result is exactly what matching every decoded line
against every signature would give; only the work is spread differently:

1. **Prefilter over blocks.** Every signature lists literals, one of which is in any line it
   matches. They reduce to a handful of *anchors* (``rror`` stands for ``CUDA error:``,
   ``ncclSystemError``, ``Input/output error`` ...; ``Xid`` for all Xids), each searched with
   one pass over ~512 KiB blocks (cache-resident, so passes are cheap): an anchor holding a
   byte that is rare in these logs (``X`` of ``Xid``, judged from a sample of each buffer) is
   found by searching that byte alone, at memchr speed, and checking each hit; the others with
   ``bytes.find`` or the regex engine's literal search. A signature whose literals fill healthy
   logs (``loss``) runs its ``chunk_pattern`` over the block instead. Blocks end at a newline,
   so no anchor straddles two.
2. **Candidate lines only.** The lines around hits are cut out, decoded (UTF-8, errors replaced)
   and matched against the signatures whose literals they contain, in catalog order.

Lines are ``\\n``-terminated; a last line without one is scanned all the same. Bytes are never
rejected: binary garbage, NUL and invalid UTF-8 simply match nothing, or match where the text
around them does. **A line longer than 128 KiB is matched on its first and last 64 KiB only**
(``LINE_EDGE_BYTES``): a runaway progress bar or a dumped tensor cannot make one line cost
megabytes of regex work, and the fault text of such a line is at its start or its end.

``Finding.text`` is the line (its first 1,000 characters, or a 1,000-character window around
the match when that lies further in), without the trailing ``\\r``, NUL shown as U+FFFD.
"""

import os
import re
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import BinaryIO

from efficiency.analysis.faults.context import METRICS, StreamContext, metric_value, slow_value_pattern
from efficiency.analysis.faults.signatures import SIGNATURES, THROUGHPUT_DROP, Signature

try:  # Hyperscan: Intel's multi-pattern engine; the pure-Python prefilter is the fallback
    import hyperscan
except ImportError:  # pragma: no cover - the wheel is in requirements.txt
    hyperscan = None
try:  # counts newlines (for line numbers) several times faster than bytes.count
    import numpy
except ImportError:  # pragma: no cover - in requirements.txt
    numpy = None

MiB = 1024 * 1024
DEFAULT_CHUNK_BYTES = 8 * MiB
LINE_EDGE_BYTES = 64 * 1024
MAX_TEXT_CHARS = 1000
# Prefilter passes run over blocks of this size, so each pass re-reads cached bytes.
BLOCK_BYTES = 512 * 1024
HS_BLOCK_BYTES = 4 * MiB
# Shared anchors: every literal containing one of these is found through it. A literal that
# contains none becomes an anchor itself (see ``_anchors``), so this list only tunes speed.
PREFERRED_ANCHORS = (b"Xid", b"rror", b"NCCL WARN", b"Socket")
REPLACEMENT = "\N{REPLACEMENT CHARACTER}"


class LogFileError(OSError):
    """A log file that cannot be scanned (missing, unreadable, not a regular file)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One log line matched by a signature, with what the line says about where and when.

    ``line_no`` is 1-based, ``offset`` the byte offset of the line's start. ``node`` is the host
    of a syslog line (kernel logs), ``rank`` the rank the line names (``[Rank 3]``, ``rank3``,
    ``rank 3``), ``pci`` the GPU's PCI address of an Xid line, ``loss`` the value of a NaN/Inf
    loss line. ``timestamp`` is naive unless the line carries a UTC offset.
    """

    signature_id: str
    category: str
    code: str | None
    severity: str
    line_no: int
    offset: int
    text: str
    node: str | None
    rank: int | None
    pci: str | None
    loss: float | None
    timestamp: datetime | None
    value: float | None = None  # a throughput drop: the value that completed it
    baseline: float | None = None  # ... and the baseline it fell from


# ------------------------------------------------------------------------------------------------
# Prefilter


def _anchors(signatures: tuple[Signature, ...]) -> tuple[bytes, ...]:
    """The substrings whose occurrences make a line a candidate, fewest and longest possible."""
    chosen: set[bytes] = set()
    for signature in signatures:
        if signature.chunk_pattern is not None:
            continue
        for literal in signature.literals:
            raw = literal.encode()
            preferred = [anchor for anchor in PREFERRED_ANCHORS if anchor in raw]
            chosen.add(preferred[0] if preferred else raw)
    # An anchor containing another one finds nothing the shorter one does not.
    return tuple(sorted(a for a in chosen if not any(b != a and b in a for b in chosen)))


ANCHORS = _anchors(SIGNATURES)
CHUNK_PATTERNS = tuple(s.chunk_pattern for s in SIGNATURES if s.chunk_pattern is not None)
# Each signature with the anchors its literals contain (None: a chunk-pattern signature, whose
# literals need not contain one): a line is tried against a signature only when one of those
# anchors is in it, which (each literal containing an anchor) is exactly when a literal may be.
_ANCHOR_TEXTS = {anchor: anchor.decode() for anchor in ANCHORS}
_LITERALS = tuple(
    (
        signature,
        signature.literals,
        None
        if signature.chunk_pattern is not None
        else frozenset(
            text
            for anchor, text in _ANCHOR_TEXTS.items()
            if any(anchor in lit.encode() for lit in signature.literals)
        ),
    )
    for signature in SIGNATURES
)
_ALWAYS_TRIED = frozenset(position for position, (_, _, anchors) in enumerate(_LITERALS) if anchors is None)
_TRIED_BY_ANCHOR = {
    text: frozenset(
        position for position, (_, _, anchors) in enumerate(_LITERALS) if anchors and text in anchors
    )
    for text in _ANCHOR_TEXTS.values()
}
_ANCHOR_PATTERNS = {anchor: re.compile(re.escape(anchor)) for anchor in ANCHORS}
# A byte seen at most this often (per byte of sample) is searched with memchr, and each hit
# checked for the whole anchor; a commoner one would cost more in hits than the search saves.
PROBE_MAX_RATE = 1 / 1500
# Anchors searched whole: ``bytes.find`` (two-way search) is faster for long ones, the regex
# engine's literal search for short ones.
LONG_ANCHOR = 8
SAMPLE_BYTES = 32 * 1024


@dataclass(frozen=True, slots=True)
class _Plan:
    """How to find the anchors in one buffer: a rare byte each (``probes``), or the whole anchor."""

    probes: tuple[tuple[bytes, tuple[tuple[bytes, int], ...]], ...]
    literals: tuple[bytes, ...]


def _plan(data: bytes | bytearray, begin: int, end: int) -> _Plan:
    """Choose, from a sample of the buffer, the rarest byte of each anchor to search for.

    Searching one byte runs at memchr speed, several times faster than searching a string;
    it pays off when the byte is rare in these logs (``X`` of ``Xid``, ``W`` of ``Watchdog``),
    which depends on the logs, hence a sample rather than a fixed table.
    """
    sample_end = min(end, begin + SAMPLE_BYTES)
    size = sample_end - begin
    if size < SAMPLE_BYTES // 4:  # too little to judge: a short buffer costs little anyway
        return _Plan((), ANCHORS)
    counts: dict[int, int] = {}
    probes: dict[bytes, list[tuple[bytes, int]]] = {}
    literals = []
    for anchor in ANCHORS:
        for byte in set(anchor):
            if byte not in counts:
                counts[byte] = data.count(bytes((byte,)), begin, sample_end)
        rarest = min(set(anchor), key=lambda byte: (counts[byte], anchor.index(byte)))
        if counts[rarest] <= size * PROBE_MAX_RATE:
            probes.setdefault(bytes((rarest,)), []).append((anchor, anchor.index(rarest)))
        else:
            literals.append(anchor)
    return _Plan(tuple((probe, tuple(members)) for probe, members in probes.items()), tuple(literals))


def _candidate_starts(data: bytes | bytearray, begin: int, end: int, plan: _Plan) -> set[int]:
    """Start offsets of the lines in ``data[begin:end]`` (whole lines) that may match."""
    starts: set[int] = set()
    for probe, members in plan.probes:
        at = data.find(probe, begin, end)
        while at != -1:
            for anchor, index in members:
                if at - index >= begin and data.startswith(anchor, at - index, end):
                    starts.add(data.rfind(b"\n", begin, at) + 1 or begin)
                    line_end = data.find(b"\n", at, end)
                    at = end if line_end == -1 else line_end
                    break
            at = data.find(probe, at + 1, end)
    for anchor in plan.literals:
        if len(anchor) < LONG_ANCHOR:
            continue
        at = data.find(anchor, begin, end)
        while at != -1:
            starts.add(data.rfind(b"\n", begin, at) + 1 or begin)
            line_end = data.find(b"\n", at, end)
            if line_end == -1:
                break
            at = data.find(anchor, line_end, end)
    short = (_ANCHOR_PATTERNS[anchor] for anchor in plan.literals if len(anchor) < LONG_ANCHOR)
    for pattern in (*short, *CHUNK_PATTERNS):
        match = pattern.search(data, begin, end)
        while match is not None:
            at = match.start()
            starts.add(data.rfind(b"\n", begin, at) + 1 or begin)
            line_end = data.find(b"\n", at, end)
            if line_end == -1:
                break
            match = pattern.search(data, line_end, end)
    return starts


# ------------------------------------------------------------------------------------------------
# One line


def matchable_parts(raw: bytes) -> tuple[str, ...]:
    """The decoded text signatures are matched against: the line, or its two edges if huge."""
    if len(raw) <= 2 * LINE_EDGE_BYTES:
        return (raw.decode("utf-8", "replace"),)
    return (
        raw[:LINE_EDGE_BYTES].decode("utf-8", "replace"),
        raw[-LINE_EDGE_BYTES:].decode("utf-8", "replace"),
    )


def _classify(
    parts: tuple[str, ...], seen: frozenset[str] | set[str] = frozenset()
) -> tuple[Signature, re.Match[str], int] | None:
    """The first signature (catalog order) matching any part, its match and the part's index.

    ``seen``: the ``Signature.after`` literals of earlier lines of the log.
    """
    present = [frozenset(text for text in _ANCHOR_TEXTS.values() if text in part) for part in parts]
    tried = sorted(_ALWAYS_TRIED.union(*(_TRIED_BY_ANCHOR[text] for found in present for text in found)))
    for position in tried:
        signature, literals, anchors = _LITERALS[position]
        if signature.after is not None and signature.after not in seen:
            continue
        for index, part in enumerate(parts):
            if anchors is not None and anchors.isdisjoint(present[index]):
                continue
            if not any(literal in part for literal in literals):
                continue
            match = signature.pattern.search(part)
            if match is not None and (signature.accept is None or signature.accept(match)):
                return signature, match, index
    return None


def _finding_for_line(
    raw: bytes, *, line_no: int, offset: int, year: int | None, seen: frozenset[str] | set[str] = frozenset()
) -> Finding | None:
    return _finding_for_parts(matchable_parts(raw), line_no=line_no, offset=offset, year=year, seen=seen)


def _finding_for_parts(
    parts: tuple[str, ...],
    *,
    line_no: int,
    offset: int,
    year: int | None,
    seen: frozenset[str] | set[str] = frozenset(),
) -> Finding | None:
    classified = _classify(parts, seen)
    if classified is None:
        return None
    signature, match, index = classified
    part = parts[index]
    groups = match.groupdict()
    loss = groups.get("value")
    head = parts[0]
    return Finding(
        signature_id=signature.id,
        category=signature.category,
        code=signature.code or groups.get("code"),
        severity=signature.severity,
        line_no=line_no,
        offset=offset,
        text=_display_text(part, match),
        node=_syslog_host(head),
        rank=_rank(head) if index == 0 else _rank(part),
        pci=_pci(part),
        loss=float(loss) if loss is not None else None,
        timestamp=line_timestamp(head, year=year),
    )


def _display_text(part: str, match: re.Match[str]) -> str:
    if part.endswith("\r"):
        part = part[:-1]
    if len(part) <= MAX_TEXT_CHARS or match.end() <= MAX_TEXT_CHARS:
        text = part[:MAX_TEXT_CHARS]
    else:
        # A window around the match, with some context before it, as full as the line allows.
        begin = max(0, min(match.start() - 200, len(part) - (MAX_TEXT_CHARS - 1)))
        text = "…" + part[begin : begin + MAX_TEXT_CHARS - 1]
    return text.replace("\x00", REPLACEMENT)


_RANK_RE = re.compile(r"(?<![A-Za-z_])[Rr][Aa][Nn][Kk][ \t]*[:=]?[ \t]*([0-9]{1,9})(?![0-9])", re.ASCII)
_PCI_RE = re.compile(
    r"Xid \((?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)", re.ASCII
)


def _rank(text: str) -> int | None:
    match = _RANK_RE.search(text)
    return int(match[1]) if match else None


def _pci(text: str) -> str | None:
    match = _PCI_RE.search(text)
    return match[1] if match else None


# ------------------------------------------------------------------------------------------------
# Time stamps

_MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_MONTH_RE = "(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_CLOCK_RE = r"(?P<h>[0-9]{2}):(?P<m>[0-9]{2}):(?P<s>[0-9]{2})(?:[.,](?P<frac>[0-9]{1,9}))?"
# ``Nov 30 12:34:56 gpu-node-7 kernel: ...`` (host omitted when the line has none: ``... kernel:``).
_SYSLOG_RE = re.compile(
    rf"^(?:<[0-9]{{1,3}}>)?{_MONTH_RE} {{1,2}}(?P<day>[0-9]{{1,2}}) {_CLOCK_RE} "
    r"(?:(?P<host>[^\s:\[\]]+) (?=\S))?",
    re.ASCII,
)
# ``dmesg -T``: ``[Sat Oct 12 18:35:32 2024] NVRM: ...``
_DMESG_T_RE = re.compile(
    rf"^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) {_MONTH_RE} {{1,2}}(?P<day>[0-9]{{1,2}}) {_CLOCK_RE} "
    r"(?P<year>[0-9]{4})\]",
    re.ASCII,
)
# ISO 8601 and friends: ``2026-11-30T12:34:56.123Z``, Megatron's ``[2026-11-30 12:34:56]``,
# Python logging's ``2026-11-30 12:34:56,789``.
_ISO_RE = re.compile(
    rf"(?<![0-9])(?P<year>[0-9]{{4}})-(?P<month>[0-9]{{2}})-(?P<day>[0-9]{{2}})[T ]{_CLOCK_RE}"
    r"(?P<tz>Z|[+-][0-9]{2}:?[0-9]{2})?(?![0-9])",
    re.ASCII,
)
# glog: ``[rank3]:[E1130 12:34:56.789012 ...]``, ``I0618 15:59:02.634000 139633 torch/...``;
# PyTorch's c10 logging drops the month's leading zero (``[W520 21:12:22.80 ...]`` is 20 May).
_GLOG_RE = re.compile(
    rf"(?:^|[\[\]: ])[IWEF](?P<month>1[0-2]|0?[1-9])(?P<day>[0-3][0-9]) {_CLOCK_RE}(?![0-9])",
    re.ASCII,
)
_TIME_SEARCH_CHARS = 80


def line_timestamp(text: str, *, year: int | None = None, tz: tzinfo | None = None) -> datetime | None:
    """The time a log line starts with, if any: syslog, ``dmesg -T``, ISO 8601, Megatron, glog.

    Syslog and glog times carry no year: ``year`` supplies it (no year, no time stamp). A time
    written without an offset is naive, or in ``tz`` when given; one with an offset is aware.
    """
    head = text[:_TIME_SEARCH_CHARS]
    try:
        if match := _SYSLOG_RE.match(head):
            if year is None:
                return None
            return _moment(year, _MONTHS[match["mon"]], match, tz)
        if match := _DMESG_T_RE.match(head):
            return _moment(int(match["year"]), _MONTHS[match["mon"]], match, tz)
        if match := _ISO_RE.search(head):
            moment = _moment(int(match["year"]), int(match["month"]), match, tz)
            return _with_offset(moment, match["tz"])
        if match := _GLOG_RE.search(head):
            if year is None:
                return None
            return _moment(year, int(match["month"]), match, tz)
    except ValueError:  # 31 Feb, hour 25: looks like a time stamp, is not one
        return None
    return None


def _moment(year: int, month: int, match: re.Match[str], tz: tzinfo | None) -> datetime:
    fraction = (match["frac"] or "").ljust(6, "0")[:6]
    return datetime(
        year,
        month,
        int(match["day"]),
        int(match["h"]),
        int(match["m"]),
        int(match["s"]),
        int(fraction),
        tzinfo=tz,
    )


def _with_offset(moment: datetime, offset: str | None) -> datetime:
    if offset is None:
        return moment
    if offset == "Z":
        return moment.replace(tzinfo=UTC)
    sign = -1 if offset[0] == "-" else 1
    digits = offset[1:].replace(":", "")
    delta = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return moment.replace(tzinfo=timezone(sign * delta))


def _syslog_host(text: str) -> str | None:
    match = _SYSLOG_RE.match(text[:_TIME_SEARCH_CHARS])
    return match["host"] if match else None


# ------------------------------------------------------------------------------------------------
# Entry points


def scan_bytes(
    data: bytes | bytearray,
    *,
    start_offset: int = 0,
    start_line: int = 1,
    year: int | None = None,
    context: StreamContext | None = None,
    engine: str | None = None,
) -> list[Finding]:
    """Findings in ``data``, lines numbered from ``start_line`` and offsets from ``start_offset``.

    Meant for complete lines (a tailer keeps a partial last line for later); an unterminated
    last line is scanned as a line all the same. ``context``: what earlier pieces of the same log
    left (updated in place), for a log scanned piece by piece; a fresh one when omitted.
    """
    findings: list[Finding] = []
    scan = _Scan(context or StreamContext(), engine_for(engine), year)
    scan.region(data, 0, len(data), start_line, start_offset, findings)
    return findings


def scan_file(
    path: str | os.PathLike[str],
    *,
    year: int | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    engine: str | None = None,
) -> Iterator[Finding]:
    """Stream the findings of a log file, reading ``chunk_bytes`` at a time.

    Raises ``LogFileError`` at once when the file is missing, unreadable or not a regular
    file. Memory stays bounded by the chunk size whatever the line lengths.
    """
    if chunk_bytes < 1:
        raise ValueError("chunk_bytes must be positive")
    scan = _Scan(StreamContext(), engine_for(engine), year)
    path = Path(path)
    try:
        # Checked before opening: opening a FIFO would block until someone writes to it.
        if not stat.S_ISREG(path.stat().st_mode):
            raise LogFileError(f"cannot read {path}: not a regular file")
        handle = path.open("rb", buffering=0)
    except LogFileError:
        raise
    except OSError as error:
        raise LogFileError(f"cannot read {path}: {error.strerror or error}") from error
    return _scan_stream(handle, scan=scan, chunk_bytes=chunk_bytes)


def _scan_stream(handle: BinaryIO, *, scan: "_Scan", chunk_bytes: int) -> Iterator[Finding]:
    # One buffer for the whole file: the start of an unfinished line (at most two line edges;
    # a longer line goes to ``_LongLine``) followed by the next read, so no chunk is copied.
    carry_max = 2 * LINE_EDGE_BYTES
    buffer = bytearray(carry_max + chunk_bytes)
    view = memoryview(buffer)
    with handle, view:
        offset = 0  # file offset of ``buffer[0]``
        line_no = 1
        carried = 0  # bytes of an unfinished line at the start of ``buffer``
        long_line: _LongLine | None = None
        while read := handle.readinto(view[carried : carried + chunk_bytes]):
            filled = carried + read
            begin = 0
            if long_line is not None:
                newline = buffer.find(b"\n", 0, filled)
                if newline == -1:
                    long_line.extend(view[:filled])
                    offset += filled
                    continue
                long_line.extend(view[:newline])
                finding = long_line.finding(line_no=line_no, scan=scan)
                if finding is not None:
                    yield finding
                line_no += 1
                long_line = None
                begin = newline + 1
            cut = buffer.rfind(b"\n", begin, filled) + 1 or begin
            findings: list[Finding] = []
            line_no = scan.region(buffer, begin, cut, line_no, offset, findings)
            yield from findings
            carried = filled - cut
            if carried > carry_max:
                long_line = _LongLine(offset + cut, view[cut:filled])
                carried = 0
                offset += filled
            else:
                buffer[:carried] = bytes(view[cut:filled])
                offset += cut
        if long_line is not None:
            finding = long_line.finding(line_no=line_no, scan=scan)
            if finding is not None:
                yield finding
        elif carried:
            findings = []
            scan.region(bytes(view[:carried]), 0, carried, line_no, offset, findings)
            yield from findings


class _LongLine:
    """A line too long to hold: its first and last ``LINE_EDGE_BYTES`` and its length."""

    def __init__(self, offset: int, start: memoryview) -> None:
        self.offset = offset
        self.head = bytes(start[:LINE_EDGE_BYTES])
        self.tail = bytes(start[-LINE_EDGE_BYTES:])
        self.size = len(start)

    def extend(self, more: memoryview) -> None:
        self.size += len(more)
        if len(more) >= LINE_EDGE_BYTES:
            self.tail = bytes(more[-LINE_EDGE_BYTES:])
        else:
            self.tail = (self.tail + bytes(more))[-LINE_EDGE_BYTES:]

    def finding(self, *, line_no: int, scan: "_Scan") -> Finding | None:
        # The same two edges ``matchable_parts`` cuts from the whole line; a huge line gives no
        # context (no throughput value, no ``after`` literal), as in ``_Scan.region``.
        parts = (self.head.decode("utf-8", "replace"), self.tail.decode("utf-8", "replace"))
        return _finding_for_parts(
            parts, line_no=line_no, offset=self.offset, year=scan.year, seen=scan.context.seen
        )


# ------------------------------------------------------------------------------------------------
# Engines: where the candidate lines and the throughput values are


ENGINES = ("hyperscan", "python")


def engine_for(name: str | None = None) -> str:
    """The engine to use: ``name``, else ``PORTAL_SCAN_ENGINE``, else Hyperscan where it is installed."""
    name = name or os.environ.get("PORTAL_SCAN_ENGINE") or ("hyperscan" if hyperscan else "python")
    if name not in ENGINES:
        raise ValueError(f"unknown scan engine {name!r} (choose from {', '.join(ENGINES)})")
    if name == "hyperscan" and hyperscan is None:
        raise ValueError("the hyperscan engine needs the hyperscan package")
    return name


AFTER_LITERALS = tuple(sorted({s.after for s in SIGNATURES if s.after is not None}))
# The metrics of each series (tqdm's it/s and s/it are one), in catalog order.
SERIES: dict[str, tuple[int, ...]] = {}
for _index, _metric in enumerate(METRICS):
    SERIES[_metric.key] = (*SERIES.get(_metric.key, ()), _index)
_AFTER_BYTES = tuple(literal.encode() for literal in AFTER_LITERALS)


def _compile(expressions: list[bytes], flags: list[int]):
    database = hyperscan.Database()
    database.compile(
        expressions=expressions, ids=list(range(len(expressions))), elements=len(expressions), flags=flags
    )
    return database


class _HyperscanDatabase:
    """The compiled Hyperscan databases: the catalog's (every signature, exact or in prefilter
    mode where it has lookarounds; the lines it finds are then matched exactly in Python), and one
    per state of a log's context (``context_database``)."""

    def __init__(self) -> None:
        expressions = [signature.pattern.pattern.encode() for signature in SIGNATURES]
        self.database = _compile(expressions, [_hs_flag(expression) for expression in expressions])
        self.contexts: dict[tuple, object] = {}

    def context_database(
        self, frozen: tuple[tuple[int, float], ...], forming: tuple[int, ...], unseen: tuple[int, ...]
    ):
        """What a log's context needs from a block, in one pass: the slow values of the metrics
        whose baseline is ``frozen`` (id: the metric's index), the first occurrence of the words
        of the metrics still ``forming`` theirs (id: ``FORMING + index``), and of the ``after``
        literals not yet seen (id: ``UNSEEN + index``). Few distinct states: each is compiled once."""
        key = (frozen, forming, unseen)
        database = self.contexts.get(key)
        if database is None:
            if len(self.contexts) > 4096:
                self.contexts.clear()
            expressions = [slow_value_pattern(METRICS[index], baseline) for index, baseline in frozen]
            ids = [index for index, _ in frozen]
            expressions += [re.escape(METRICS[index].literal) for index in forming]
            ids += [FORMING + index for index in forming]
            expressions += [re.escape(_AFTER_BYTES[index]) for index in unseen]
            ids += [UNSEEN + index for index in unseen]
            flags = [0] * len(frozen) + [hyperscan.HS_FLAG_SINGLEMATCH] * (len(forming) + len(unseen))
            database = hyperscan.Database()
            database.compile(expressions=expressions, ids=ids, elements=len(ids), flags=flags)
            self.contexts[key] = database
        return database


FORMING, UNSEEN = 1000, 2000


def _hs_flag(expression: bytes) -> int:
    """Exact where Hyperscan supports the pattern (a faster database), prefilter mode otherwise
    (lookarounds: a superset of the pattern's matches). Either way each hit is checked in Python."""
    try:
        _compile([expression], [0])
    except hyperscan.error:
        return hyperscan.HS_FLAG_PREFILTER
    return 0


_HS_DATABASE: _HyperscanDatabase | None = None


def _hs_database() -> _HyperscanDatabase:
    global _HS_DATABASE
    if _HS_DATABASE is None:
        _HS_DATABASE = _HyperscanDatabase()
    return _HS_DATABASE


class _Scan:
    """One log's scan: its engine, its context, and the year for times without one."""

    def __init__(self, context: StreamContext, engine: str, year: int | None) -> None:
        self.context = context
        self.engine = engine
        self.year = year

    def region(
        self,
        data: bytes | bytearray,
        begin: int,
        end: int,
        line_no: int,
        base_offset: int,
        findings: list[Finding],
    ) -> int:
        """Append the findings of the lines in ``data[begin:end]``; return the next line number.

        ``base_offset`` is the offset of ``data[0]``. The region is scanned in cache-sized blocks
        that end after a newline (or at ``end``), so no line is split between two blocks.
        """
        plan, replan_at = None, begin
        # The Python engine's passes re-read cache-sized blocks; Hyperscan makes one pass and is
        # best called on large ones.
        block_bytes = HS_BLOCK_BYTES if self.engine == "hyperscan" else BLOCK_BYTES
        while begin < end:
            if self.engine == "python" and begin >= replan_at:  # logs change character: re-sample
                plan, replan_at = _plan(data, begin, end), begin + DEFAULT_CHUNK_BYTES
            block_end = _block_end(data, begin, end, block_bytes)
            line_no = self._block(data, begin, block_end, line_no, base_offset, findings, plan)
            begin = block_end
        return line_no

    def _block(self, data, begin, end, line_no, base_offset, findings, plan) -> int:
        block = _Block(data, begin, end)
        if self.engine == "hyperscan":
            starts = self._hyperscan(block)
            prescanned, first_metric, after_hits = self._context_scan(block)
        else:
            starts, prescanned, first_metric, after_hits = (
                _candidate_starts(data, begin, end, plan),
                {},
                None,
                None,
            )
        # ``after`` literals: where each first occurs in this block, in a line of normal size.
        seen = self.context.seen
        first_after: dict[str, int] = {}
        for literal, raw in zip(AFTER_LITERALS, _AFTER_BYTES, strict=True):
            if literal in seen:
                continue
            at = after_hits.get(literal, -1) if after_hits is not None and not block.huge else None
            if at is None:
                at = block.find(raw, begin)
            if at != -1:
                first_after[literal] = at
        slow: dict[int, tuple[str, float, float]] = {}
        for key, indices in SERIES.items():
            if first_metric is None or key in prescanned:
                start = begin
            else:
                start = min((first_metric[i] for i in indices if i in first_metric), default=-1)
            self._throughput(block, key, indices, start, slow, prescanned.get(key))
        counted_to = begin
        for line_start in sorted(starts.union(slow) if slow else starts):
            line_no += _newlines(data, counted_to, line_start)
            counted_to = line_start
            line_end = data.find(b"\n", line_start, end)
            if line_end == -1:
                line_end = end
            earlier = seen.union(literal for literal, at in first_after.items() if at < line_start)
            raw = bytes(data[line_start:line_end])
            finding = None
            if line_start in starts:
                finding = _finding_for_line(
                    raw, line_no=line_no, offset=base_offset + line_start, year=self.year, seen=earlier
                )
            if finding is None and line_start in slow:
                finding = _slowdown_finding(
                    raw, *slow[line_start], line_no=line_no, offset=base_offset + line_start, year=self.year
                )
            if finding is not None:
                findings.append(finding)
        seen.update(first_after)
        return line_no + _newlines(data, counted_to, end)

    def _hyperscan(self, block: "_Block") -> set[int]:
        """The starts of the lines the catalog's database finds in the block."""
        begin, data = block.begin, block.data
        ends: list[int] = []

        def on_match(pattern: int, start: int, stop: int, flags: int, context: object) -> None:
            ends.append(stop)

        with memoryview(data) as view:
            _hs_database().database.scan(view[begin : block.end], match_event_handler=on_match)
        starts = set()
        for stop in ends:
            # A prefilter match ends in (or just after) the line it found; a line's own match never
            # crosses a newline, so the line holding its last byte is the candidate.
            starts.add(data.rfind(b"\n", begin, begin + stop - 1) + 1 or begin)
        return starts

    def _context_scan(self, block: "_Block"):
        """One pass for the context: the slow values of every series whose baseline is frozen as
        the block starts ({series: (baseline, [(end of match, metric index)])}), the first
        occurrence of the other metrics' words ({index: offset}) and of the ``after`` literals
        not seen yet ({literal: offset})."""
        trackers = self.context.trackers
        frozen = {
            key: (indices, tracker.frozen)
            for key, indices in SERIES.items()
            if (tracker := trackers.get(key)) is not None and tracker.frozen is not None
        }
        forming = tuple(index for key, indices in SERIES.items() if key not in frozen for index in indices)
        unseen = tuple(i for i, literal in enumerate(AFTER_LITERALS) if literal not in self.context.seen)
        series = tuple((index, baseline) for indices, baseline in frozen.values() for index in indices)
        hits: dict[str, list[tuple[int, int]]] = {key: [] for key in frozen}
        key_of = {index: key for key, (indices, _) in frozen.items() for index in indices}
        first_metric: dict[int, int] = {}
        after_hits: dict[str, int] = {}
        begin = block.begin

        def on_match(pattern: int, start: int, stop: int, flags: int, context: object) -> None:
            if pattern < FORMING:
                hits[key_of[pattern]].append((begin + stop, pattern))
            elif pattern < UNSEEN:
                index = pattern - FORMING
                first_metric[index] = begin + stop - len(METRICS[index].literal)
            else:
                index = pattern - UNSEEN
                after_hits[AFTER_LITERALS[index]] = begin + stop - len(_AFTER_BYTES[index])

        if series or forming or unseen:
            database = _hs_database().context_database(series, forming, unseen)
            with memoryview(block.data) as view:
                database.scan(view[begin : block.end], match_event_handler=on_match)
        prescanned = {key: (baseline, hits[key]) for key, (_, baseline) in frozen.items()}
        return prescanned, first_metric, after_hits

    def _throughput(
        self,
        block: "_Block",
        key: str,
        indices: tuple[int, ...],
        start: int,
        slow: dict,
        prescanned: tuple[float, list[tuple[int, int]]] | None = None,
    ) -> None:
        """Feed the series' values in the block to its tracker, in order; note the lines that
        complete a drop (their start: series, value, baseline).

        A tracker with a frozen baseline needs only its slow values: the Hyperscan engine finds
        them with ``slow_value_pattern`` (a superset, each hit checked) and counts a run broken
        where any value lies between two slow ones. Everything else reads every value.
        """
        tracker = self.context.trackers.get(key)
        if start == -1 and (tracker is None or tracker.run == 0):
            return  # not in this block, and no run to break
        # From the line of the first occurrence: a value may stand before its words.
        at = block.begin if start == -1 else block.line_start(start)
        while at < block.end:
            tracker = self.context.tracker(METRICS[indices[0]])
            if self.engine == "hyperscan" and tracker.frozen is not None:
                # The block's one pass found these slow values, unless a drop since then made a
                # new baseline: then this series is looked at again from here.
                hits = prescanned[1] if prescanned and prescanned[0] == tracker.frozen else None
                at = self._slow_values(block, key, indices, tracker, at, slow, hits)
                prescanned = None
                continue
            at = self._every_value(block, key, indices, tracker, at, slow)

    def _every_value(self, block: "_Block", key: str, indices, tracker, at: int, slow: dict) -> int:
        """Read each value from ``at``; where the baseline froze (the Hyperscan engine then
        looks for slow values only), or the block's end."""
        for where, index in block.occurrences(indices, at):
            value = metric_value(block.data, METRICS[index], where, block.begin)
            if value is None:
                continue
            baseline = tracker.add(value)
            if baseline is not None:
                slow.setdefault(block.line_start(where), (key, value, baseline))
            if self.engine == "hyperscan" and tracker.frozen is not None:
                return where + 1
        return block.end

    def _slow_values(
        self, block: "_Block", key: str, indices, tracker, at: int, slow: dict, hits: list | None = None
    ) -> int:
        """Past a frozen baseline: the slow values from ``at`` (``hits``: where the block's pass
        found them); where reading every value resumes (after a reported drop), or the block's end."""
        data, begin, end = block.data, block.begin, block.end
        baseline = tracker.frozen
        if hits is None:
            hits = []

            def on_match(pattern: int, start: int, stop: int, flags: int, context: object) -> None:
                hits.append((at + stop, pattern))

            database = _hs_database().context_database(tuple((index, baseline) for index in indices), (), ())
            with memoryview(data) as view:
                database.scan(view[at:end], match_event_handler=on_match)
        occurrences = set()
        for stop, index in hits:
            literal = METRICS[index].literal
            # A value after the words: the words are the last before the match's end.
            occurrence = data.rfind(literal, at, stop) if METRICS[index].after else stop - len(literal)
            if occurrence >= at:
                occurrences.add((occurrence, index))
        last = at  # the values before this are taken into account
        for occurrence, index in sorted(occurrences):
            if occurrence < last or (block.huge and block.in_huge_line(occurrence)):
                continue
            value = metric_value(data, METRICS[index], occurrence, begin)
            if value is None or not tracker.is_slow(value, baseline):
                continue
            if tracker.run and block.has_value(indices, last, occurrence):
                tracker.run = 0  # a normal value lay between: the run was broken
            last = occurrence + 1
            reported = tracker.add(value)
            if reported is not None:
                slow.setdefault(block.line_start(occurrence), (key, value, reported))
                return last  # the baseline forms anew from the values that follow
        if tracker.run and block.has_value(indices, last, end):
            tracker.run = 0
        return end


class _Block:
    """A block of whole lines, ``data[begin:end]``, and what the throughput rules ask of it."""

    def __init__(self, data: bytes | bytearray, begin: int, end: int) -> None:
        self.data, self.begin, self.end = data, begin, end
        self.huge = _may_hold_huge_line(data, begin, end)

    def line_start(self, at: int) -> int:
        return self.data.rfind(b"\n", self.begin, at) + 1 or self.begin

    def in_huge_line(self, at: int) -> bool:
        return _in_huge_line(self.data, self.begin, self.end, at)

    def find(self, literal: bytes, at: int, end: int | None = None) -> int:
        """The next occurrence of ``literal`` from ``at`` in a line of normal size, or -1.

        A line longer than two line edges gives no context: only its edges are matched, and its
        throughput values and ``after`` literals are not read."""
        end = self.end if end is None else end
        at = self.data.find(literal, at, end)
        while at != -1 and self.huge and self.in_huge_line(at):
            at = self.data.find(literal, at + 1, end)
        return at

    def occurrences(
        self, indices: tuple[int, ...], at: int, end: int | None = None
    ) -> Iterator[tuple[int, int]]:
        """The occurrences of these metrics' words from ``at`` on, in order: (offset, index)."""
        heads = {index: self.find(METRICS[index].literal, at, end) for index in indices}
        while True:
            live = [(where, index) for index, where in heads.items() if where != -1]
            if not live:
                return
            where, index = min(live)
            yield where, index
            heads[index] = self.find(METRICS[index].literal, where + 1, end)

    def has_value(self, indices: tuple[int, ...], start: int, end: int) -> bool:
        """Whether an occurrence of one of these metrics with a value starts in ``[start, end)``."""
        return any(
            metric_value(self.data, METRICS[index], at, self.begin) is not None
            for at, index in self.occurrences(indices, start, end)
        )


_COUNT_BUFFERS = threading.local()


def _newlines(data: bytes | bytearray, begin: int, end: int) -> int:
    """How many newlines ``data[begin:end]`` holds (numpy compares the bytes in one pass, into a
    buffer kept per thread rather than a new array each time)."""
    size = end - begin
    if numpy is None or size < 4096:
        return data.count(b"\n", begin, end)
    buffer = getattr(_COUNT_BUFFERS, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = _COUNT_BUFFERS.buffer = numpy.empty(
            max(size, HS_BLOCK_BYTES + 2 * LINE_EDGE_BYTES), numpy.bool_
        )
    with memoryview(data) as view:
        numpy.equal(numpy.frombuffer(view[begin:end], numpy.uint8), 10, out=buffer[:size])
        return int(numpy.count_nonzero(buffer[:size]))


def _may_hold_huge_line(data: bytes | bytearray, begin: int, end: int) -> bool:
    """Whether ``data[begin:end]`` may hold a line longer than two line edges: it holds one only
    if some aligned stretch of ``LINE_EDGE_BYTES`` has no newline (a cheap, one-sided test)."""
    for at in range(begin, end - LINE_EDGE_BYTES + 1, LINE_EDGE_BYTES):
        if data.find(b"\n", at, at + LINE_EDGE_BYTES) == -1:
            return True
    return False


def _in_huge_line(data: bytes | bytearray, begin: int, end: int, at: int) -> bool:
    line_start = data.rfind(b"\n", begin, at) + 1 or begin
    line_end = data.find(b"\n", at, end)
    return (end if line_end == -1 else line_end) - line_start > 2 * LINE_EDGE_BYTES


def _slowdown_finding(
    raw: bytes, metric: str, value: float, baseline: float, *, line_no: int, offset: int, year: int | None
) -> Finding:
    parts = matchable_parts(raw)
    head = parts[0]
    text = head[:-1] if head.endswith("\r") else head
    return Finding(
        signature_id=THROUGHPUT_DROP.id,
        category=THROUGHPUT_DROP.category,
        code=metric,
        severity=THROUGHPUT_DROP.severity,
        line_no=line_no,
        offset=offset,
        text=text[:MAX_TEXT_CHARS].replace("\x00", REPLACEMENT),
        node=_syslog_host(head),
        rank=_rank(head),
        pci=None,
        loss=None,
        timestamp=line_timestamp(head, year=year),
        value=value,
        baseline=baseline,
    )


def _block_end(data: bytes | bytearray, begin: int, end: int, size: int | None = None) -> int:
    """End of the block starting at ``begin``: about ``size`` (``BLOCK_BYTES``) on, after a newline."""
    limit = begin + (size or BLOCK_BYTES)
    if limit >= end:
        return end
    newline = data.rfind(b"\n", begin, limit)
    if newline == -1:
        newline = data.find(b"\n", limit, end)
        return end if newline == -1 else newline + 1
    return newline + 1
