"""Typed records that collectors produce and ingest services consume (no Django imports)."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

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


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample of Prometheus text exposition: ``name{labels} value [timestamp_ms]``."""

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


@dataclass(frozen=True, slots=True)
class LogChunk:
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
