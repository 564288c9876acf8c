"""Typed records that collectors produce and ingest services consume (no Django imports)."""

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Generic, NamedTuple, TypeVar

T = TypeVar("T")

EXCERPT_CHARS = 200


def excerpt(raw: str | bytes, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable version of offending input, safe to store and show on a page."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    cleaned = "".join(ch if ch.isprintable() else "\N{REPLACEMENT CHARACTER}" for ch in raw[: limit + 1])
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Rejected:
    """One piece of input that could not be used, and why (shown on the Data sources page)."""

    reason: str
    excerpt: str = ""
    line_no: int | None = None


@dataclass(slots=True)
class ParseOutcome(Generic[T]):
    """What a parser made of its input: the usable records and the rejected pieces."""

    records: list[T] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)

    def reject(self, reason: str, raw: str | bytes = "", line_no: int | None = None) -> None:
        self.rejected.append(Rejected(reason=reason, excerpt=excerpt(raw), line_no=line_no))


class Sample(NamedTuple):
    """One sample of Prometheus text exposition: ``name{labels} value [timestamp_ms]``.

    A named tuple rather than a frozen dataclass: a dcgm page has hundreds of thousands of
    samples, and building a tuple costs a fraction of a frozen dataclass's ``__init__``.
    """

    name: str
    labels: Mapping[str, str]
    value: float
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job as a scheduler reports it, normalised; times are timezone-aware UTC.

    ``account`` is the Slurm account or the Kubernetes namespace: the department comes from the
    ``DepartmentMapping`` table at ingest, not from the collector. ``state`` and ``source`` are
    values of ``efficiency.choices.JobState`` / ``JobSource``.
    """

    source: str
    external_id: str
    account: str
    user_name: str
    name: str
    state: str
    gpu_count: int
    submitted_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    gpu_model: str = ""
    node_count: int = 0
    node_names: tuple[str, ...] = ()
    framework: str = "unknown"
    config: Mapping[str, object] = field(default_factory=dict)
    exit_code: str = ""
    # Thousandths of a GPU held in all (500: half of one shared GPU); None: all of its
    # ``gpu_count`` GPUs, whole. GPU-hours are counted from this.
    gpu_milli: int | None = None


@dataclass(frozen=True, slots=True)
class LogLines:
    """A run of complete lines read from one log stream (a file, or a shipper's stream).

    ``file_id`` tells two generations of a rotated file apart (device:inode for files);
    ``start_offset``/``end_offset`` are byte offsets in that generation, so a chunk read twice
    has the same identity and is stored once.
    """

    stream: str
    file_id: str
    start_offset: int
    end_offset: int
    text: str
    line_count: int
    job_external_id: str = ""
    node: str = ""
    rank: int | None = None


@dataclass(slots=True)
class GpuReading:
    """One GPU's metrics at one instant: the wide row the raw store keeps.

    Not frozen on purpose: a scrape builds one per GPU, and a frozen dataclass's ``__init__``
    (one ``object.__setattr__`` per field) was a measurable share of the ingest time.

    Units are the portal's, not DCGM's: the profiling ratios (``DCGM_FI_PROF_*``, 0-1) are
    turned into percent like ``DCGM_FI_DEV_GPU_UTIL`` (0-100). ``None`` means "not reported"
    (metric absent, or DCGM's "no value" sentinel), never 0.
    """

    hostname: str
    gpu_index: int
    timestamp_ms: int
    uuid: str = ""
    model: str = ""
    pci_bus_id: str = ""  # dcgm-exporter's pci_bus_id label, e.g. 00000000:3B:00.0
    namespace: str = ""
    pod: str = ""
    mig_instance: str = ""  # GPU_I_ID of a MIG instance; "" for a whole GPU
    util_pct: float | None = None  # DCGM_FI_DEV_GPU_UTIL
    gr_engine_active_pct: float | None = None  # DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100
    sm_active_pct: float | None = None  # DCGM_FI_PROF_SM_ACTIVE x 100
    fb_used_mib: float | None = None  # DCGM_FI_DEV_FB_USED
    power_w: float | None = None  # DCGM_FI_DEV_POWER_USAGE
    temp_c: float | None = None  # DCGM_FI_DEV_GPU_TEMP
    ecc_dbe_total: float | None = None  # DCGM_FI_DEV_ECC_DBE_VOL_TOTAL: double-bit ECC errors (a counter)
    xid_last: int | None = None  # DCGM_FI_DEV_XID_ERRORS: only the last Xid code seen
    xid_counts: tuple[tuple[int, float], ...] = ()  # DCGM_EXP_XID_ERRORS_COUNT per xid label


# --- Checks at the record boundary ---------------------------------------------------------------
#
# Every job collector's records pass ``job_record_check`` before they are stored, so a value the
# raw store cannot hold (a GPU count past PostgreSQL's ``integer``, a date in year 9999) is one
# rejected record with its reason, never a ``DataError`` that fails the whole batch.

MAX_STORED_INT = 2**31 - 1  # PositiveIntegerField is a PostgreSQL ``integer``
# A job's GPU share is stored in thousandths of a GPU (``Job.gpu_milli``), in the same column type.
MAX_JOB_GPUS = MAX_STORED_INT // 1000
EARLIEST_JOB_TIME = datetime(1970, 1, 1, tzinfo=UTC)
# A pending job's expected start may lie ahead; nothing a scheduler reports lies years ahead.
MAX_JOB_TIME_AHEAD = timedelta(days=366)
# Column lengths of efficiency.models.Job; tests/services/test_ingest_hostile.py checks they agree.
JOB_TEXT_LIMITS: Mapping[str, int] = {
    "external_id": 200,
    "account": 200,
    "user_name": 150,
    "name": 500,
    "gpu_model": 100,
}


@dataclass(frozen=True, slots=True)
class RecordCheck:
    """What ``job_record_check`` made of a record: the record to store (or ``None``) and why."""

    record: JobRecord | None
    problem: str = ""
    warnings: tuple[str, ...] = ()


def job_record_check(record: JobRecord, *, now: datetime) -> RecordCheck:
    """Check a job record against the raw store's column ranges and a sane time window.

    Rejected (``record`` is ``None``, ``problem`` says why): an empty or over-long job id, a
    negative or too large GPU or node count, a GPU share (``gpu_milli``) below 0 or above 1000 per
    GPU, a time before 1970 or more than a year after ``now``,
    text PostgreSQL cannot hold (NUL, lone surrogates) anywhere in the record or its config.
    Kept with a warning: text fields longer than their column, cut to fit.
    """
    job = record.external_id
    if not job or len(job) > JOB_TEXT_LIMITS["external_id"]:
        return RecordCheck(
            None, f"job id is empty or longer than {JOB_TEXT_LIMITS['external_id']} characters"
        )
    for label, count, most in (
        ("GPU count", record.gpu_count, MAX_JOB_GPUS),
        ("node count", record.node_count, MAX_STORED_INT),
    ):
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= most:
            return RecordCheck(None, f"job {job}: {label} {count!r} is outside 0..{most}")
    share = record.gpu_milli
    if share is not None and (
        not isinstance(share, int) or isinstance(share, bool) or not 0 <= share <= record.gpu_count * 1000
    ):
        return RecordCheck(
            None,
            f"job {job}: GPU share {share!r} thousandths is outside 0..{record.gpu_count * 1000} "
            f"(at most 1000 for each of its {record.gpu_count} GPUs)",
        )
    latest = now + MAX_JOB_TIME_AHEAD
    for label, moment in (
        ("submit time", record.submitted_at),
        ("start time", record.started_at),
        ("end time", record.ended_at),
    ):
        if moment is None:
            continue
        if moment.tzinfo is None or not EARLIEST_JOB_TIME <= moment <= latest:
            return RecordCheck(
                None,
                f"job {job}: {label} {moment.isoformat()} is outside "
                f"{EARLIEST_JOB_TIME.date().isoformat()} .. {latest.date().isoformat()}",
            )
    unstorable = _unstorable_text(record)
    if unstorable:
        return RecordCheck(None, f"job {job}: {unstorable} holds a character the database cannot store")
    warnings, cut = [], {}
    for name, limit in JOB_TEXT_LIMITS.items():
        value = getattr(record, name)
        if len(value) > limit:
            cut[name] = value[:limit]
            warnings.append(f"job {job}: {name} of {len(value)} characters cut to {limit}")
    return RecordCheck(replace(record, **cut) if cut else record, "", tuple(warnings))


def _unstorable_text(record: JobRecord) -> str:
    """The first field holding NUL or a lone surrogate (invalid in PostgreSQL text), or ""."""
    fields = {
        name: getattr(record, name)
        for name in (
            "external_id",
            "account",
            "user_name",
            "name",
            "state",
            "gpu_model",
            "framework",
            "exit_code",
        )
    }
    fields.update({f"node name {i}": host for i, host in enumerate(record.node_names)})
    for name, value in fields.items():
        if not _storable(value):
            return name
    stack: list[object] = [record.config]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not _storable(item):
                return "config"
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return ""


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
