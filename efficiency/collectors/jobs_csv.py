"""Job records from the portal's CSV import format (documented in docs/jobs-csv-format.md).

The format lets a site without a supported scheduler, or with an export from an old one, load
its job history. Each row is checked on its own: a bad row becomes a rejection naming the
column and the value, and the other rows are kept.
"""

import codecs
import csv
import io
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, tzinfo
from typing import BinaryIO

import charset_normalizer

from efficiency.collectors.records import JobRecord, ParseOutcome

REQUIRED_COLUMNS = (
    "job_id",
    "department",
    "account",
    "user",
    "name",
    "gpus",
    "nodes",
    "submit_time",
    "start_time",
    "end_time",
    "state",
)

# The values of efficiency.choices.JobState and Framework, repeated here because collectors
# import nothing from Django; tests/collectors/test_jobs_csv.py checks that they agree.
JOB_STATES = frozenset(
    {"pending", "running", "completed", "failed", "cancelled", "timeout", "preempted", "node_fail"}
)
FRAMEWORKS = frozenset({"unknown", "pytorch", "megatron", "deepspeed", "accelerated", "other"})

# What Excel writes for "CSV" on Simplified Chinese, Traditional Chinese and Western Windows
# (GB18030 is a superset of GBK / cp936). Anything else must be saved as UTF-8.
FALLBACK_ENCODINGS = ("gb18030", "big5", "cp1252")

_EPOCH_SECONDS = re.compile(r"[+-]?\d+(?:\.\d*)?")
_NODE_SEPARATORS = re.compile(r"[\s,]+")


class UnknownEncoding(ValueError):
    """A file that is not UTF-8 and whose encoding cannot be told: refused, with the reason."""


class _BadCell(ValueError):
    """A cell that makes its row unusable; the message is the rejection reason."""


def parse_jobs_csv(text: str, *, default_timezone: tzinfo = UTC) -> ParseOutcome[JobRecord]:
    """Turn a jobs CSV (header row first) into job records with ``source="csv"``.

    Times are ISO 8601, with an offset or without one (then read in ``default_timezone``), or
    seconds since the Unix epoch. A missing required column rejects the whole file; a bad row
    rejects that row only. Columns not in the format are ignored; a UTF-8 BOM is tolerated.
    """
    outcome = ParseOutcome[JobRecord]()
    for batch in iter_jobs_csv(io.StringIO(text, newline=""), default_timezone=default_timezone):
        outcome.records += batch.records
        outcome.rejected += batch.rejected
    return outcome


def iter_jobs_csv(
    lines: Iterable[str], *, default_timezone: tzinfo = UTC, batch_rows: int = 5000
) -> Iterator[ParseOutcome[JobRecord]]:
    """``parse_jobs_csv`` over a stream of lines (a file opened with ``newline=""``), in batches.

    Each batch holds about ``batch_rows`` rows (records and rejections), so a file of millions
    of rows is read in bounded memory. At least one batch is yielded, empty for an empty file.
    """
    raw_lines: list[str] = []

    def feed() -> Iterator[str]:
        for number, line in enumerate(lines):
            line = line.removeprefix("\ufeff") if number == 0 else line
            raw_lines.append(line)
            yield line

    reader = csv.reader(feed())
    outcome = ParseOutcome[JobRecord]()
    header: list[str] | None = None
    previous_line = 0
    yielded = False
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            outcome.reject(f"unreadable CSV: {error}", _raw(raw_lines), reader.line_num)
            previous_line = reader.line_num
            continue
        # The csv reader takes lines one at a time, so raw_lines holds this row's text only.
        first_line, previous_line = previous_line + 1, reader.line_num
        raw = _raw(raw_lines)
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [name.strip().lower() for name in row]
            missing = [column for column in REQUIRED_COLUMNS if column not in header]
            if missing:
                outcome.reject("header lacks required column(s) " + ", ".join(missing), raw, first_line)
                break
            continue
        if "\x00" in raw:
            # PostgreSQL text cannot hold NUL; such a row would fail the whole ingest later.
            outcome.reject("row contains a NUL character", raw, first_line)
        elif len(row) != len(header):
            outcome.reject(f"expected {len(header)} fields as in the header, got {len(row)}", raw, first_line)
        else:
            # The first of two same-named columns wins, as a reader of the file would expect.
            cells = {name: value.strip() for name, value in reversed(list(zip(header, row, strict=True)))}
            try:
                outcome.records.append(_record(cells, default_timezone))
            except _BadCell as error:
                outcome.reject(str(error), raw, first_line)
        if len(outcome.records) + len(outcome.rejected) >= batch_rows:
            yield outcome
            outcome, yielded = ParseOutcome[JobRecord](), True
    if outcome.records or outcome.rejected or not yielded:
        yield outcome


def csv_encoding_detect(stream: BinaryIO) -> str:
    """The encoding to read a jobs CSV with: ``utf-8-sig`` when the whole file is UTF-8.

    Otherwise charset-normalizer picks among ``FALLBACK_ENCODINGS`` (what Excel saves on
    Chinese and Western Windows) from the start of the file and the part around the first byte
    that is not UTF-8, and the whole file must decode with its choice. Raises
    ``UnknownEncoding`` with the reason when nothing fits. Reads the stream in chunks, so a
    large file costs time, not memory; leaves the stream at its start.
    """
    stream.seek(0)
    offset = _first_undecodable(stream, "utf-8")
    if offset is None:
        return "utf-8-sig"
    stream.seek(0)
    sample = stream.read(64 * 1024)
    if offset > len(sample):
        stream.seek(max(0, offset - 32 * 1024))
        around = stream.read(256 * 1024)
        # Start on a line so the sample does not open in the middle of a character.
        sample += b"\n" + around[around.find(b"\n") + 1 :]
    best = charset_normalizer.from_bytes(sample, cp_isolation=list(FALLBACK_ENCODINGS)).best()
    stream.seek(0)
    if best is None:
        raise UnknownEncoding(
            f"byte {offset} is not UTF-8, and the file is not {' / '.join(FALLBACK_ENCODINGS)} either: "
            "save it as UTF-8 (Excel: CSV UTF-8)"
        )
    encoding = codecs.lookup(best.encoding).name
    bad = _first_undecodable(stream, encoding)
    stream.seek(0)
    if bad is not None:
        raise UnknownEncoding(
            f"byte {offset} is not UTF-8 and byte {bad} is not {encoding}: save the file as UTF-8 "
            "(Excel: CSV UTF-8)"
        )
    return encoding


def _first_undecodable(stream: BinaryIO, encoding: str, chunk_bytes: int = 1 << 20) -> int | None:
    """The offset of the first byte ``encoding`` cannot decode, or ``None``."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    position = 0
    while True:
        chunk = stream.read(chunk_bytes)
        try:
            decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as error:
            # error.start counts from the start of what the decoder held, which may include the
            # unfinished character carried over from the previous chunk.
            carried = len(error.object) - len(chunk)
            return position - carried + error.start
        if not chunk:
            return None
        position += len(chunk)


def _record(cells: Mapping[str, str], default_timezone: tzinfo) -> JobRecord:
    job_id = _required(cells, "job_id")
    department = cells["department"]
    account = cells["account"]
    if not department and not account:
        raise _BadCell("column 'department' or 'account': one of them must have a value")
    state = cells["state"].lower()
    if state not in JOB_STATES:
        raise _BadCell(
            f"column 'state': value {cells['state']!r} is not one of {', '.join(sorted(JOB_STATES))}"
        )
    submitted = _time(cells, "submit_time", default_timezone)
    if submitted is None:
        raise _BadCell("column 'submit_time': a value is required")
    started = _time(cells, "start_time", default_timezone)
    ended = _time(cells, "end_time", default_timezone)
    if started is not None and started < submitted:
        raise _BadCell(f"column 'start_time': value {cells['start_time']!r} is before submit_time")
    if ended is not None and ended < (started or submitted):
        earlier = "start_time" if started is not None else "submit_time"
        raise _BadCell(f"column 'end_time': value {cells['end_time']!r} is before {earlier}")
    gpus = _whole_number(cells, "gpus")
    if gpus is None:
        raise _BadCell("column 'gpus': a value is required (0 for a job without GPUs)")
    node_names = _node_names(cells.get("node_names", ""))
    nodes = _whole_number(cells, "nodes")
    framework = cells.get("framework", "").lower() or "unknown"
    if framework not in FRAMEWORKS:
        raise _BadCell(
            f"column 'framework': value {cells['framework']!r} is not one of {', '.join(sorted(FRAMEWORKS))}"
        )
    config: dict[str, object] = {}
    if department:
        config["department_code"] = department
    gpu_milli = _whole_number(cells, "gpu_milli")
    held_milli = None  # whole GPUs
    if gpu_milli is not None:
        if gpu_milli > 1000:
            raise _BadCell(f"column 'gpu_milli': value {cells['gpu_milli']!r} is more than 1000")
        if gpu_milli and not gpus:
            raise _BadCell(
                f"column 'gpu_milli': value {cells['gpu_milli']!r} for a job without GPUs (gpus is 0)"
            )
        config["gpu_milli"] = gpu_milli
        held_milli = gpus * gpu_milli  # thousandths of each of its GPUs
    return JobRecord(
        source="csv",
        external_id=job_id,
        account=account,
        user_name=cells["user"],
        name=cells["name"],
        state=state,
        gpu_count=gpus,
        submitted_at=submitted,
        started_at=started,
        ended_at=ended,
        gpu_model=cells.get("gpu_model", ""),
        node_count=nodes if nodes is not None else len(node_names),
        node_names=node_names,
        framework=framework,
        config=config,
        gpu_milli=held_milli,
    )


def _required(cells: Mapping[str, str], column: str) -> str:
    value = cells[column]
    if not value:
        raise _BadCell(f"column {column!r}: a value is required")
    return value


def _whole_number(cells: Mapping[str, str], column: str) -> int | None:
    value = cells.get(column, "")
    if not value:
        return None
    if not value.isdecimal() or not value.isascii():
        raise _BadCell(f"column {column!r}: value {value!r} is not a whole number ≥ 0")
    return int(value)


def _time(cells: Mapping[str, str], column: str, default_timezone: tzinfo) -> datetime | None:
    value = cells[column]
    if not value:
        return None
    # A bare number is always epoch seconds, although ISO 8601 basic format would read
    # "20261101" as a date: exports from schedulers and traces use epoch seconds far more often.
    if _EPOCH_SECONDS.fullmatch(value):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise _BadCell(f"column {column!r}: value {value!r} is out of range as epoch seconds") from None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _BadCell(
            f"column {column!r}: value {value!r} is neither ISO 8601 nor seconds since the epoch"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=default_timezone)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # year 1 east of UTC, year 9999 west of it
        raise _BadCell(f"column {column!r}: value {value!r} is out of range in UTC") from None


def _node_names(value: str) -> tuple[str, ...]:
    return tuple(name for name in _NODE_SEPARATORS.split(value) if name)


def _raw(lines: list[str]) -> str:
    """The source text of the row just read, without the final newline; empties ``lines``."""
    text = "".join(lines).rstrip("\r\n")
    lines.clear()
    return text
