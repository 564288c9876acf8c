"""Job records from the portal's CSV import format (documented in docs/jobs-csv-format.md).

The format lets a site without a supported scheduler, or with an export from an old one, load
its job history. Each row is checked on its own: a bad row becomes a rejection naming the
column and the value, and the other rows are kept.
"""

import csv
import io
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, tzinfo

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
OPTIONAL_COLUMNS = ("gpu_model", "node_names", "framework", "gpu_milli")

# The values of efficiency.choices.JobState and Framework, repeated here because collectors
# import nothing from Django; tests/collectors/test_jobs_csv.py checks that they agree.
JOB_STATES = frozenset(
    {"pending", "running", "completed", "failed", "cancelled", "timeout", "preempted", "node_fail"}
)
FRAMEWORKS = frozenset({"unknown", "pytorch", "megatron", "deepspeed", "accelerated", "other"})

_EPOCH_SECONDS = re.compile(r"[+-]?\d+(?:\.\d*)?")
_NODE_SEPARATORS = re.compile(r"[\s,]+")


class _BadCell(ValueError):
    """A cell that makes its row unusable; the message is the rejection reason."""


def parse_jobs_csv(text: str, *, default_timezone: tzinfo = UTC) -> ParseOutcome[JobRecord]:
    """Turn a jobs CSV (header row first) into job records with ``source="csv"``.

    Times are ISO 8601, with an offset or without one (then read in ``default_timezone``), or
    seconds since the Unix epoch. A missing required column rejects the whole file; a bad row
    rejects that row only. Columns not in the format are ignored; a UTF-8 BOM is tolerated.
    """
    outcome = ParseOutcome[JobRecord]()
    # Split as csv would (on \n, \r\n or \r) so that a rejection can quote the row's own text.
    lines = list(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    reader = csv.reader(lines)
    header: list[str] | None = None
    previous_line = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            outcome.reject(
                f"unreadable CSV: {error}", _raw(lines, previous_line, reader.line_num), reader.line_num
            )
            previous_line = reader.line_num
            continue
        first_line, previous_line = previous_line + 1, reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        raw = _raw(lines, first_line - 1, reader.line_num)
        if header is None:
            header = [name.strip().lower() for name in row]
            missing = [column for column in REQUIRED_COLUMNS if column not in header]
            if missing:
                outcome.reject("header lacks required column(s) " + ", ".join(missing), raw, first_line)
                return outcome
            continue
        if "\x00" in raw:
            # PostgreSQL text cannot hold NUL; such a row would fail the whole ingest later.
            outcome.reject("row contains a NUL character", raw, first_line)
            continue
        if len(row) != len(header):
            outcome.reject(f"expected {len(header)} fields as in the header, got {len(row)}", raw, first_line)
            continue
        # The first of two same-named columns wins, as a reader of the file would expect.
        cells = {name: value.strip() for name, value in reversed(list(zip(header, row, strict=True)))}
        try:
            outcome.records.append(_record(cells, default_timezone))
        except _BadCell as error:
            outcome.reject(str(error), raw, first_line)
    return outcome


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
    if gpu_milli is not None:
        if gpu_milli > 1000:
            raise _BadCell(f"column 'gpu_milli': value {cells['gpu_milli']!r} is more than 1000")
        config["gpu_milli"] = gpu_milli
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


def _raw(lines: Sequence[str], start: int, end: int) -> str:
    """The source text of lines ``start + 1`` to ``end`` (1-based), without the final newline."""
    return "".join(lines[start:end]).rstrip("\r\n")
