"""Collector for the Prometheus HTTP API: dcgm-exporter series in, one ``GpuReading`` per GPU and instant out.

Each configured PromQL query is run with ``/api/v1/query_range`` and the series of all queries are merged
into wide rows keyed by (hostname, GPU index, MIG instance, timestamp). Long windows (a backfill after an
outage) are split into chunks so that no query asks for more points per series than Prometheus allows.

Partial failures: ``fetch_chunks`` yields one ``ChunkResult`` per chunk, so a caller can store a chunk and
advance its watermark to ``chunk.end`` before fetching the next one. ``fetch_range`` collects all chunks;
when a chunk fails it raises ``PrometheusUnavailable`` / ``PrometheusQueryError`` whose ``.partial`` holds
the readings of the chunks fetched before the failure and whose ``.completed_until`` is the instant up to
which (exclusive) the window was fetched completely: store ``.partial``, move the watermark to
``.completed_until``, and let the task retry from there.
"""

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import requests

from efficiency.collectors.records import GpuReading, ParseOutcome, excerpt

# Prometheus refuses a range query when (end - start) / step > 11,000, i.e. more than 11,001 points.
PROMETHEUS_MAX_POINTS = 11_000

DEFAULT_QUERIES: dict[str, str] = {
    "util_pct": "DCGM_FI_DEV_GPU_UTIL",
    "gr_engine_active_pct": "DCGM_FI_PROF_GR_ENGINE_ACTIVE * 100",
    "sm_active_pct": "DCGM_FI_PROF_SM_ACTIVE * 100",
    "fb_used_mib": "DCGM_FI_DEV_FB_USED",
    "power_w": "DCGM_FI_DEV_POWER_USAGE",
    "temp_c": "DCGM_FI_DEV_GPU_TEMP",
    "xid_last": "DCGM_FI_DEV_XID_ERRORS",
}

DEFAULT_LABELS: dict[str, str] = {
    "hostname": "Hostname",
    "gpu": "gpu",
    "uuid": "UUID",
    "model": "modelName",
    "pci_bus_id": "pci_bus_id",
    "namespace": "namespace",
    "pod": "pod",
    "mig_instance": "GPU_I_ID",
}

# Label names tried, in this order, after the configured one (``PrometheusConfig.labels``): the variants
# met in the field. Old dcgm-exporter releases wrote ``uuid``, ``pod_name`` and ``pod_namespace``. When a
# series has no ``Hostname`` at all, the host part of ``instance`` (the scraped exporter's address) is the
# last resort: right for exporters scraped by node name, an IP address for pods scraped by pod IP.
LABEL_FALLBACKS: dict[str, tuple[str, ...]] = {
    "hostname": ("Hostname", "hostname", "instance"),
    "gpu": ("gpu",),
    "uuid": ("UUID", "uuid"),
    "model": ("modelName",),
    "pci_bus_id": ("pci_bus_id",),
    "namespace": ("namespace", "pod_namespace"),
    "pod": ("pod", "pod_name"),
    "mig_instance": ("GPU_I_ID",),
}

PERCENT_FIELDS = frozenset({"util_pct", "gr_engine_active_pct", "sm_active_pct"})
AMOUNT_FIELDS = frozenset({"fb_used_mib", "power_w", "temp_c"})
CODE_FIELDS = frozenset({"xid_last"})
QUERY_FIELDS = PERCENT_FIELDS | AMOUNT_FIELDS | CODE_FIELDS

# DCGM reports "no value" with sentinels instead of leaving the metric out: the int64 blanks start at
# 0x7ffffffffffffff0 (~9.22e18, e.g. 9223372036854775794) and the float64 blanks at 2**47 (1.4e14). No real
# GPU reading comes near 2**47, so everything from there up is treated as a sentinel.
DCGM_SENTINEL_MIN = float(2**47)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CONFIG_KEYS = ("base_url", "auth_header", "timeout_s", "step_s", "max_points", "queries", "labels")


class PrometheusConfigError(ValueError):
    """The Prometheus source settings are invalid; the message lists every problem found."""


class PrometheusError(Exception):
    """A Prometheus request failed.

    ``partial`` holds what ``fetch_range`` fetched before the failure (empty elsewhere) and
    ``completed_until`` the instant up to which (exclusive) the window was fetched completely, or ``None``
    when the failing call was not a ``fetch_range``/``fetch_chunks``.
    """

    def __init__(
        self,
        message: str,
        *,
        partial: ParseOutcome[GpuReading] | None = None,
        completed_until: datetime | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.partial: ParseOutcome[GpuReading] = partial if partial is not None else ParseOutcome()
        self.completed_until = completed_until


class PrometheusUnavailable(PrometheusError):
    """Transient: connection error, timeout, HTTP 5xx or 429. Retry later with backoff."""


class PrometheusQueryError(PrometheusError):
    """Permanent until the configuration changes: bad PromQL, rejected credentials, not a Prometheus API."""


@dataclass
class PrometheusConfig:
    """Where the Prometheus API is and what to ask it; validated on construction.

    ``queries`` maps ``GpuReading`` field names to PromQL and replaces the defaults as a whole (leave a
    metric out when the GPUs do not report it, e.g. no ``DCGM_FI_PROF_*`` on consumer cards). ``labels``
    maps our names to label names and is merged over ``DEFAULT_LABELS``. ``max_points`` is the number of
    instants per query; each query returns up to ``max_points`` x GPUs samples, and Prometheus refuses a
    query that loads more than ``--query.max-samples`` (50 million by default), so large clusters need
    smaller chunks than the 11,000-point API limit: the default (a day at a 60 s step) suits ~30,000 GPUs.
    """

    base_url: str
    auth_header: str = field(default="", repr=False)  # e.g. "Bearer xyz"; never logged or shown
    timeout_s: float = 30
    step_s: int = 60
    max_points: int = 1_440
    queries: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_QUERIES))
    labels: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_LABELS))

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not isinstance(self.base_url, str) or urlsplit(self.base_url).scheme not in ("http", "https"):
            problems.append("'base_url' must be an http:// or https:// URL")
        elif not urlsplit(self.base_url).hostname:
            problems.append("'base_url' has no host")
        if not isinstance(self.auth_header, str):
            problems.append("'auth_header' must be a string")
        if (
            not isinstance(self.timeout_s, int | float)
            or isinstance(self.timeout_s, bool)
            or not 0 < self.timeout_s <= 600
        ):
            problems.append(f"'timeout_s' must be a number of seconds in (0, 600], got {self.timeout_s!r}")
        if not isinstance(self.step_s, int) or isinstance(self.step_s, bool) or self.step_s <= 0:
            problems.append(f"'step_s' must be a positive whole number of seconds, got {self.step_s!r}")
        if (
            not isinstance(self.max_points, int)
            or isinstance(self.max_points, bool)
            or not 1 <= self.max_points <= PROMETHEUS_MAX_POINTS
        ):
            problems.append(
                f"'max_points' must be a whole number from 1 to {PROMETHEUS_MAX_POINTS}, "
                f"got {self.max_points!r}"
            )
        problems += _check_str_mapping("queries", self.queries, QUERY_FIELDS)
        problems += _check_str_mapping("labels", self.labels, frozenset(DEFAULT_LABELS))
        if isinstance(self.queries, dict) and not self.queries:
            problems.append("'queries' must name at least one metric")
        if problems:
            raise PrometheusConfigError("Invalid Prometheus settings: " + "; ".join(problems) + ".")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PrometheusConfig":
        """Build a config from the JSON an admin edits; ``PrometheusConfigError`` names every problem."""
        if not isinstance(data, Mapping):
            raise PrometheusConfigError("Invalid Prometheus settings: expected a JSON object.")
        unknown = sorted(set(data) - set(_CONFIG_KEYS))
        if unknown:
            raise PrometheusConfigError(
                f"Invalid Prometheus settings: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(_CONFIG_KEYS)}."
            )
        if "base_url" not in data:
            raise PrometheusConfigError("Invalid Prometheus settings: 'base_url' is required.")
        kwargs: dict[str, Any] = {key: data[key] for key in _CONFIG_KEYS if key in data}
        if isinstance(kwargs.get("queries"), Mapping):
            kwargs["queries"] = dict(kwargs["queries"])
        if isinstance(kwargs.get("labels"), Mapping):
            kwargs["labels"] = {**DEFAULT_LABELS, **kwargs["labels"]}
        return cls(**kwargs)


def _check_str_mapping(name: str, value: object, allowed: frozenset[str]) -> list[str]:
    if not isinstance(value, dict):
        return [f"'{name}' must be an object mapping names to strings"]
    problems = []
    unknown = sorted(str(key) for key in value if key not in allowed)
    if unknown:
        problems.append(
            f"'{name}' has unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
        )
    for key, text in value.items():
        if not isinstance(text, str) or not text.strip():
            problems.append(f"'{name}.{key}' must be a non-empty string")
    return problems


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """The readings of one chunk of the window: every instant in [start, end) has been asked for."""

    start: datetime
    end: datetime
    outcome: ParseOutcome[GpuReading]


def plan_chunks(
    start: datetime, end: datetime, step_s: int, *, max_points: int = PROMETHEUS_MAX_POINTS
) -> list[tuple[datetime, datetime]]:
    """Split [start, end) into chunks of at most ``max_points`` evaluation instants each.

    Instants are the multiples of ``step_s`` since the Unix epoch, so a window fetched twice (a retry, an
    overlapping backfill) yields the same timestamps. The chunks partition [start, end) exactly: the first
    begins at ``start``, the last ends at ``end``, the boundaries between them fall on instants. A window
    holding no instant gives no chunk.
    """
    _require_aware(start, "start")
    _require_aware(end, "end")
    if step_s <= 0 or max_points <= 0:
        raise ValueError("step_s and max_points must be positive")
    first = _first_instant_at_or_after(start, step_s)
    stop = _first_instant_at_or_after(end, step_s)
    chunks = []
    for index in range(first, stop, max_points):
        chunk_start = start if index == first else _instant(index, step_s)
        chunk_end = end if index + max_points >= stop else _instant(index + max_points, step_s)
        chunks.append((chunk_start, chunk_end))
    return chunks


def fetch_chunks(
    config: PrometheusConfig,
    start: datetime,
    end: datetime,
    *,
    session: requests.Session | None = None,
) -> Iterator[ChunkResult]:
    """Fetch [start, end) chunk by chunk, oldest first, yielding each chunk's readings once complete.

    A failing chunk raises ``PrometheusUnavailable`` or ``PrometheusQueryError`` with ``completed_until``
    set to that chunk's start; every chunk yielded before it is complete.
    """
    own_session = session is None
    http = requests.Session() if session is None else session
    try:
        for chunk_start, chunk_end in plan_chunks(start, end, config.step_s, max_points=config.max_points):
            try:
                outcome = _fetch_chunk(config, http, chunk_start, chunk_end)
            except PrometheusError as exc:
                exc.completed_until = chunk_start
                raise
            yield ChunkResult(start=chunk_start, end=chunk_end, outcome=outcome)
    finally:
        if own_session:
            http.close()


def fetch_range(
    config: PrometheusConfig,
    start: datetime,
    end: datetime,
    *,
    session: requests.Session | None = None,
) -> ParseOutcome[GpuReading]:
    """Fetch every configured metric over [start, end) as one ``GpuReading`` per GPU and instant.

    Readings come ordered by chunk, then hostname, GPU, MIG instance and time. Unusable values (NaN, ±Inf,
    DCGM sentinels, negative amounts, percentages over 100) leave their field ``None`` and add one
    ``Rejected`` per series and kind of problem, its reason carrying the count. On failure the exception's
    ``.partial`` holds the readings of the complete chunks and ``.completed_until`` where they end.
    """
    collected: ParseOutcome[GpuReading] = ParseOutcome()
    try:
        for chunk in fetch_chunks(config, start, end, session=session):
            collected.records.extend(chunk.outcome.records)
            collected.rejected.extend(chunk.outcome.rejected)
    except PrometheusError as exc:
        exc.partial = collected
        raise
    return collected


# --- one chunk -----------------------------------------------------------------------------------------

_Key = tuple[str, int, str, int]  # hostname, gpu index, MIG instance, timestamp_ms


def _fetch_chunk(
    config: PrometheusConfig, http: requests.Session, chunk_start: datetime, chunk_end: datetime
) -> ParseOutcome[GpuReading]:
    step = config.step_s
    first = _first_instant_at_or_after(chunk_start, step) * step
    last = (_first_instant_at_or_after(chunk_end, step) - 1) * step
    outcome: ParseOutcome[GpuReading] = ParseOutcome()
    rows: dict[_Key, dict[str, Any]] = {}
    for field_name, promql in config.queries.items():
        where = f"query {field_name} = {promql!r} for {_iso(chunk_start)} – {_iso(chunk_end)}"
        params = {
            "query": promql,
            "start": str(first),
            "end": str(last),
            "step": str(step),
            # Ask Prometheus to give up when we do, rather than keep evaluating for nobody.
            "timeout": f"{config.timeout_s:g}",
        }
        payload = _get_json(config, http, "/api/v1/query_range", params, where)
        for warning in payload.get("warnings") or ():
            outcome.reject(f"Prometheus warning for {field_name} (data kept): {warning}", promql)
        data = payload["data"]
        if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise PrometheusQueryError(
                f"Prometheus returned result type {data.get('resultType')!r} instead of 'matrix' for {where}."
            )
        for series in data["result"]:
            _merge_series(config, field_name, series, rows, outcome)
    for key in sorted(rows):
        hostname, gpu_index, mig_instance, timestamp_ms = key
        outcome.records.append(
            GpuReading(
                hostname=hostname,
                gpu_index=gpu_index,
                mig_instance=mig_instance,
                timestamp_ms=timestamp_ms,
                **rows[key],
            )
        )
    return outcome


def _merge_series(
    config: PrometheusConfig,
    field_name: str,
    series: object,
    rows: dict[_Key, dict[str, Any]],
    outcome: ParseOutcome[GpuReading],
) -> None:
    if (
        not isinstance(series, dict)
        or not isinstance(series.get("metric"), dict)
        or not isinstance(series.get("values"), list)
    ):
        outcome.reject(f"{field_name}: malformed series in the response", json.dumps(series, default=str))
        return
    metric: dict[str, str] = series["metric"]
    shown = _series_text(metric)
    hostname = _label(config, metric, "hostname")
    gpu_text = _label(config, metric, "gpu")
    if not hostname or not gpu_text:
        missing = " and ".join(name for name, text in (("hostname", hostname), ("gpu", gpu_text)) if not text)
        outcome.reject(f"{field_name}: series without a {missing} label, ignored", shown)
        return
    if not gpu_text.isdigit():
        outcome.reject(f"{field_name}: gpu label {gpu_text!r} is not a GPU index, series ignored", shown)
        return
    gpu_index = int(gpu_text)
    mig_instance = _label(config, metric, "mig_instance")
    meta = {
        name: _label(config, metric, name) for name in ("uuid", "model", "pci_bus_id", "namespace", "pod")
    }
    problems: dict[str, list[str]] = {}
    for point in series["values"]:
        try:
            timestamp_ms = round(float(point[0]) * 1000)
            raw = str(point[1])
        except (TypeError, ValueError, IndexError, OverflowError):
            problems.setdefault("is a malformed point", []).append(str(point))
            continue
        value, problem = _clean_value(field_name, raw)
        row = rows.setdefault((hostname, gpu_index, mig_instance, timestamp_ms), {})
        for name, text in meta.items():
            if text and not row.get(name):
                row[name] = text
        if problem:
            problems.setdefault(problem, []).append(f"{_iso_ms(timestamp_ms)} {raw!r}")
        elif field_name in row:
            problems.setdefault(
                "duplicate another series for the same GPU and time (kept the first)", []
            ).append(f"{_iso_ms(timestamp_ms)} {raw!r}")
        else:
            row[field_name] = value
    # One entry per series and kind of problem: a GPU that reports NaN for a day must not flood the page.
    for problem, examples in problems.items():
        outcome.reject(f"{field_name}: {len(examples)} value(s) {problem}", f"{shown} first at {examples[0]}")


def _clean_value(field_name: str, raw: str) -> tuple[float | int | None, str]:
    """The field's value and "" if usable, else None and the problem in words."""
    try:
        value = float(raw)
    except ValueError:
        return None, "not a number"
    if not math.isfinite(value):
        return None, "NaN or ±Inf, kept as not reported"
    if value >= DCGM_SENTINEL_MIN:
        return None, "DCGM's no-value sentinel, kept as not reported"
    if value < 0:
        return None, "negative, kept as not reported"
    if field_name in PERCENT_FIELDS and value > 100:
        return None, "above 100 %, kept as not reported"
    if field_name in CODE_FIELDS:
        if not value.is_integer():
            return None, "not a whole Xid code, kept as not reported"
        return int(value), ""
    return value, ""


def _label(config: PrometheusConfig, metric: Mapping[str, str], name: str) -> str:
    candidates = dict.fromkeys((config.labels.get(name, DEFAULT_LABELS[name]), *LABEL_FALLBACKS[name]))
    for label in candidates:
        text = metric.get(label, "")
        if text:
            return _host_part(text) if label == "instance" else text
    return ""


def _host_part(instance: str) -> str:
    """``10.0.0.5:9400`` → ``10.0.0.5``, ``[fd00::5]:9400`` → ``fd00::5``, ``gpu-a01`` → ``gpu-a01``."""
    if instance.startswith("["):
        return instance[1:].split("]", 1)[0]
    host, sep, port = instance.rpartition(":")
    return host if sep and port.isdigit() and ":" not in host else instance


def _series_text(metric: Mapping[str, str]) -> str:
    name = metric.get("__name__", "")
    labels = ",".join(f'{key}="{value}"' for key, value in sorted(metric.items()) if key != "__name__")
    return f"{name}{{{labels}}}"


# --- HTTP ----------------------------------------------------------------------------------------------


def _get_json(
    config: PrometheusConfig, http: requests.Session, path: str, params: Mapping[str, str], where: str
) -> dict[str, Any]:
    """GET an API path and return the decoded success payload, or raise the fitting PrometheusError."""
    url = config.base_url.rstrip("/") + path
    shown_url = _safe_url(url)
    if config.auth_header:
        # requests would replace our Authorization header with Basic auth built from user:password@.
        url = shown_url
    headers = {"Accept": "application/json"}
    if config.auth_header:
        headers["Authorization"] = config.auth_header
    try:
        response = http.get(url, params=params, headers=headers, timeout=config.timeout_s)
    except requests.Timeout as exc:
        raise PrometheusUnavailable(
            f"Prometheus at {shown_url} did not answer within {config.timeout_s} s ({where})."
        ) from exc
    except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
        raise PrometheusUnavailable(
            f"Cannot reach Prometheus at {shown_url} ({type(exc).__name__}) ({where})."
        ) from exc
    except requests.RequestException as exc:
        raise PrometheusQueryError(
            f"Cannot send the request to {shown_url} ({type(exc).__name__}); check base_url ({where})."
        ) from exc

    status = response.status_code
    payload = _decode(response)
    detail = _error_detail(payload)
    if status == 429 or status >= 500:
        raise PrometheusUnavailable(f"Prometheus at {shown_url} answered HTTP {status}{detail} ({where}).")
    if status in (401, 403):
        raise PrometheusQueryError(
            f"Prometheus at {shown_url} refused the request with HTTP {status}: "
            f"check the auth header ({where})."
        )
    if status == 404:
        raise PrometheusQueryError(f"{shown_url} answered HTTP 404: check base_url ({where}).")
    if status >= 400:
        # Prometheus answers 422 when a query would load more than --query.max-samples.
        hint = "; lower max_points" if "too many samples" in detail else ""
        raise PrometheusQueryError(
            f"Prometheus at {shown_url} rejected the query: HTTP {status}{detail}{hint} ({where})."
        )
    if payload is None:
        raise PrometheusQueryError(
            f"{shown_url} answered HTTP {status} with something other than JSON "
            f"({excerpt(response.text, 120)!r}); is base_url the Prometheus server? ({where})."
        )
    if payload.get("status") != "success" or not isinstance(payload.get("data"), dict):
        raise PrometheusQueryError(
            f"{shown_url} did not return a Prometheus API success response{detail} ({where})."
        )
    return payload


def _decode(response: requests.Response) -> dict[str, Any] | None:
    try:
        payload = response.json()
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def _error_detail(payload: Mapping[str, Any] | None) -> str:
    if not payload or payload.get("status") != "error":
        return ""
    return f" ({payload.get('errorType', 'error')}: {excerpt(str(payload.get('error', '')), 300)})"


def _safe_url(url: str) -> str:
    """The URL without user:password, so messages can be stored and shown."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return parts._replace(netloc=netloc, query="", fragment="").geturl()


# --- time ----------------------------------------------------------------------------------------------


def _require_aware(moment: datetime, name: str) -> None:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")


def _first_instant_at_or_after(moment: datetime, step_s: int) -> int:
    """Index n of the first instant n * step_s (Unix seconds) at or after ``moment``, in exact arithmetic."""
    micros = (moment - _EPOCH) // timedelta(microseconds=1)
    return -(-micros // (step_s * 1_000_000))


def _instant(index: int, step_s: int) -> datetime:
    return _EPOCH + timedelta(seconds=index * step_s)


def _unix(moment: datetime) -> str:
    micros = (moment - _EPOCH) // timedelta(microseconds=1)
    seconds, fraction = divmod(micros, 1_000_000)
    return f"{seconds}.{fraction:06d}" if fraction else str(seconds)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _iso_ms(timestamp_ms: int) -> str:
    """The instant for a message; the bare number when it lies beyond what a datetime holds."""
    try:
        return _iso(_EPOCH + timedelta(milliseconds=timestamp_ms))
    except OverflowError:
        return f"{timestamp_ms} ms since the epoch"
