"""Collector for the Prometheus HTTP API: dcgm-exporter series in, one ``GpuReading`` per GPU and step out.

Steps: time is cut into steps [a, a + step_s) at the multiples ``a`` of ``step_s`` since the Unix epoch.
Each configured PromQL query is run with ``/api/v1/query_range`` and the series of all queries are merged
into wide rows keyed by (hostname, GPU index, MIG instance, step start ``a``).

What a step's reading holds: the default queries average the raw samples of the step
(``avg_over_time(DCGM_FI_DEV_GPU_UTIL[$window])``), so every sample Prometheus holds is counted exactly
once, a step without samples gives no reading (a gap stays a gap) and a series that stops gets no reading
after its last sample. A plain ``query_range`` of ``DCGM_FI_DEV_GPU_UTIL`` would instead repeat the last
sample within Prometheus' 5-minute lookback into every step: gaps shorter than 5 minutes filled with the
last value, samples between two instants dropped, and a 5-minute tail after a series stops.

``$window`` is the step as a range selector. Prometheus 2.x range selectors are closed ([t - r, t]) and
3.x ones left-open ((t - r, t]), so the collector asks ``/api/v1/status/buildinfo`` once per fetch and
evaluates each step at ``a + step - 1 ms`` with ``r = step - 1 ms`` (2.x) or ``r = step`` (3.x): either
way the window is exactly [a, a + step) for Prometheus' millisecond timestamps.

Weights: each reading stands for ``samples x sample interval`` seconds (``ChunkResult.interval_s``), where
``samples`` is the count of raw samples in the step (query ``samples``, ``count_over_time``) and the sample
interval is ``sample_interval_s`` or, by default, measured: the median gap between the raw samples of the
GPU with the most samples in two hours, lowered to ``3600 // ceil(3600 / gap)`` (60 s stays 60 s, 57 s
becomes 56 s). Weighted so, the mean over any range equals the mean of the raw samples, and an hour never
holds more than an hour of samples (the rollups cap a node-hour's sampled time at the hour).

Long windows (a backfill after an outage) are split into chunks so that no query asks for more points per
series than Prometheus allows.

Partial failures: ``fetch_chunks`` yields one ``ChunkResult`` per chunk, so a caller can store a chunk and
advance its watermark to ``chunk.end`` before fetching the next one. ``fetch_range`` collects all chunks;
when a chunk fails it raises ``PrometheusUnavailable`` / ``PrometheusQueryError`` whose ``.partial`` holds
the readings of the chunks fetched before the failure and whose ``.completed_until`` is the instant up to
which (exclusive) the window was fetched completely: store ``.partial``, move the watermark to
``.completed_until``, and let the task retry from there.
"""

import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import requests

from efficiency.collectors.records import GpuReading, ParseOutcome, excerpt

# Prometheus refuses a range query when (end - start) / step > 11,000, i.e. more than 11,001 points.
PROMETHEUS_MAX_POINTS = 11_000

# ``$window`` stands for the step as a range selector (see the module docstring); ``samples`` counts the
# raw samples of each step and weights the reading.
WINDOW = "$window"
DEFAULT_QUERIES: dict[str, str] = {
    "util_pct": "avg_over_time(DCGM_FI_DEV_GPU_UTIL[$window])",
    "gr_engine_active_pct": "avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[$window]) * 100",
    "sm_active_pct": "avg_over_time(DCGM_FI_PROF_SM_ACTIVE[$window]) * 100",
    "fb_used_mib": "avg_over_time(DCGM_FI_DEV_FB_USED[$window])",
    "power_w": "avg_over_time(DCGM_FI_DEV_POWER_USAGE[$window])",
    "temp_c": "avg_over_time(DCGM_FI_DEV_GPU_TEMP[$window])",
    "xid_last": "last_over_time(DCGM_FI_DEV_XID_ERRORS[$window])",
    "samples": "count_over_time(DCGM_FI_DEV_GPU_UTIL[$window])",
}
SAMPLES = "samples"
# Fields whose samples count weights the reading when ``samples`` is not configured, in this order.
ACTIVITY_FIELDS = ("util_pct", "gr_engine_active_pct", "sm_active_pct")
# The window over which the sample interval is measured (``sample_interval_s`` left out).
SAMPLE_INTERVAL_PROBE_S = 2 * 3600

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
QUERY_KEYS = QUERY_FIELDS | {SAMPLES}

# DCGM reports "no value" with sentinels instead of leaving the metric out: the int64 blanks start at
# 0x7ffffffffffffff0 (~9.22e18, e.g. 9223372036854775794) and the float64 blanks at 2**47 (1.4e14). No real
# GPU reading comes near 2**47, so everything from there up is treated as a sentinel.
DCGM_SENTINEL_MIN = float(2**47)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CONFIG_KEYS = (
    "base_url",
    "auth_header",
    "timeout_s",
    "step_s",
    "max_points",
    "queries",
    "labels",
    "sample_interval_s",
)


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

    ``queries`` maps ``GpuReading`` field names (and ``samples``) to PromQL and replaces the defaults as a
    whole (leave a metric out when the GPUs do not report it, e.g. no ``DCGM_FI_PROF_*`` on consumer cards).
    ``$window`` in a query is the step as a range selector. A query that is a bare series selector, maybe
    times a number (``DCGM_FI_DEV_GPU_UTIL{cluster="a"}``, ``DCGM_FI_PROF_SM_ACTIVE * 100``: what the
    defaults were before), is averaged over each step like the defaults; any other query without
    ``$window`` is sent as written and evaluated at the end of each step, with Prometheus' lookback (the last
    sample up to 5 minutes old). Without a ``samples`` query one is derived from the first activity query
    that names a bare selector; without one at all, every reading stands for ``step_s``.
    ``sample_interval_s`` is how long one raw sample stands for (the scrape interval); ``None`` measures
    it (see the module docstring). ``labels``
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
    sample_interval_s: int | None = None

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
        if self.sample_interval_s is not None and (
            not isinstance(self.sample_interval_s, int)
            or isinstance(self.sample_interval_s, bool)
            or not 1 <= self.sample_interval_s <= 86_400
        ):
            problems.append(
                "'sample_interval_s' must be a whole number of seconds from 1 to 86400 (or left out to "
                f"measure it), got {self.sample_interval_s!r}"
            )
        problems += _check_str_mapping("queries", self.queries, QUERY_KEYS)
        problems += _check_str_mapping("labels", self.labels, frozenset(DEFAULT_LABELS))
        if isinstance(self.queries, dict) and not set(self.queries) & QUERY_FIELDS:
            problems.append("'queries' must name at least one metric")
        if problems:
            raise PrometheusConfigError("Invalid Prometheus settings: " + "; ".join(problems) + ".")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PrometheusConfig":
        """Build a config from the JSON an admin edits; ``PrometheusConfigError`` names every problem."""
        if not isinstance(data, Mapping):
            raise PrometheusConfigError("Invalid Prometheus settings: expected a JSON object.")
        unknown = sorted(set(data) - set(CONFIG_KEYS))
        if unknown:
            raise PrometheusConfigError(
                f"Invalid Prometheus settings: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(CONFIG_KEYS)}."
            )
        if "base_url" not in data:
            raise PrometheusConfigError("Invalid Prometheus settings: 'base_url' is required.")
        kwargs: dict[str, Any] = {key: data[key] for key in CONFIG_KEYS if key in data}
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
    """The readings of one chunk of the window: every step [a, a + step) inside [start, end) was asked for.

    ``interval_s[i]`` is how many seconds ``outcome.records[i]`` stands for: its raw samples x the sample
    interval, or the step when the samples were not counted.
    """

    start: datetime
    end: datetime
    outcome: ParseOutcome[GpuReading]
    interval_s: list[int] = field(default_factory=list)

    def by_interval(self) -> list[tuple[int, list[GpuReading]]]:
        """The readings grouped by the seconds they stand for, shortest first."""
        groups: dict[int, list[GpuReading]] = {}
        for reading, seconds in zip(self.outcome.records, self.interval_s, strict=True):
            groups.setdefault(seconds, []).append(reading)
        return sorted(groups.items(), key=lambda item: item[0])


def plan_chunks(
    start: datetime, end: datetime, step_s: int, *, max_points: int = PROMETHEUS_MAX_POINTS
) -> list[tuple[datetime, datetime]]:
    """Split [start, end) into chunks of at most ``max_points`` whole steps each.

    Steps are [a, a + step_s) for the multiples ``a`` of ``step_s`` since the Unix epoch, so a window
    fetched twice (a retry, an overlapping backfill) yields the same steps. Only steps that lie wholly
    inside [start, end) are planned: the first chunk begins at ``start``, the boundaries between chunks
    and the end of the last one fall on step starts, and the part of the window after the last whole step
    is left for the next fetch (its samples may still be arriving). A window holding no whole step gives
    no chunk.
    """
    _require_aware(start, "start")
    _require_aware(end, "end")
    if step_s <= 0 or max_points <= 0:
        raise ValueError("step_s and max_points must be positive")
    first = _first_instant_at_or_after(start, step_s)
    stop = _last_instant_at_or_before(end, step_s)  # index of the first step that does not fit
    chunks = []
    for index in range(first, stop, max_points):
        chunk_start = start if index == first else _instant(index, step_s)
        chunk_end = _instant(min(index + max_points, stop), step_s)
        chunks.append((chunk_start, chunk_end))
    return chunks


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """What one fetch asks Prometheus: the PromQL per field, ``$window`` filled in."""

    window: str  # the step as a range selector, e.g. "59999ms" (2.x) or "60s" (3.x)
    queries: dict[str, str]  # field (and "samples") -> PromQL as sent
    probe_selector: str | None  # series whose sample interval is measured; None: configured or not counted
    probe_window: str  # the range over which it is measured


def step_window(step_s: int, *, left_open: bool) -> str:
    """The range selector for one step evaluated at its last millisecond: [a, a + step) either way."""
    return f"{step_s}s" if left_open else f"{step_s * 1000 - 1}ms"


# A series selector: a metric name and/or {label matchers} (quoted values may hold anything but quotes).
_SELECTOR = (
    r'(?:[A-Za-z_:][A-Za-z0-9_:]*\s*(?:\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\})?|\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\})'
)
_BARE = re.compile(
    rf"^\s*(?P<selector>{_SELECTOR})\s*(?P<scale>[*/]\s*[0-9]+(?:\.[0-9]*)?(?:e[+-]?[0-9]+)?)?\s*$"
)
_COUNTED = re.compile(rf"^\s*count_over_time\(\s*(?P<selector>{_SELECTOR})\s*\[\s*\$window\s*\]\s*\)\s*$")
_WRAPPED = re.compile(rf"^\s*avg_over_time\(\s*(?P<selector>{_SELECTOR})\s*\[\s*\$window\s*\]\s*\)")


def query_plan(config: PrometheusConfig, *, left_open: bool) -> QueryPlan:
    """The queries a fetch sends, for a server whose range selectors are left-open (3.x) or closed (2.x)."""
    window = step_window(config.step_s, left_open=left_open)
    templates = dict(config.queries)
    for field_name, promql in config.queries.items():
        bare = _BARE.match(promql)
        if bare and WINDOW not in promql:
            over = {SAMPLES: "count_over_time", "xid_last": "last_over_time"}.get(field_name, "avg_over_time")
            scale = f" {bare['scale'][0]} {bare['scale'][1:].strip()}" if bare["scale"] else ""
            templates[field_name] = f"{over}({bare['selector'].strip()}[{WINDOW}]){scale}"
    if SAMPLES not in templates:
        for field_name in ACTIVITY_FIELDS:
            wrapped = _WRAPPED.match(templates.get(field_name, ""))
            if wrapped:
                templates[SAMPLES] = f"count_over_time({wrapped['selector'].strip()}[{WINDOW}])"
                break
    queries = {name: promql.replace(WINDOW, window) for name, promql in templates.items()}
    probe_selector = None
    counted = _COUNTED.match(templates.get(SAMPLES, ""))
    if counted and config.sample_interval_s is None:
        probe_selector = counted["selector"].strip()
    probe_window = step_window(SAMPLE_INTERVAL_PROBE_S, left_open=left_open)
    return QueryPlan(window, queries, probe_selector, probe_window)


def server_left_open(config: PrometheusConfig, http: requests.Session) -> bool:
    """Whether the server's range selectors are left-open: Prometheus 3.x yes, 2.x no (closed).

    Asked at ``/api/v1/status/buildinfo``; a server that does not say (Thanos, VictoriaMetrics, a proxy)
    is taken as closed, whose window (step - 1 ms) can never count a sample twice (on a left-open server it
    would miss a sample that falls exactly on a step's first millisecond).
    """
    try:
        payload = _get_json(config, http, "/api/v1/status/buildinfo", {}, "build information")
    except PrometheusError:
        return False  # the queries that follow say what is wrong, if anything is
    version = str(payload["data"].get("version", ""))
    major = version.split(".", 1)[0]
    return major.isdigit() and int(major) >= 3


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
        plan: QueryPlan | None = None
        for chunk_start, chunk_end in plan_chunks(start, end, config.step_s, max_points=config.max_points):
            try:
                if plan is None:
                    plan = query_plan(config, left_open=server_left_open(config, http))
                outcome, interval_s = _fetch_chunk(config, plan, http, chunk_start, chunk_end)
            except PrometheusError as exc:
                exc.completed_until = chunk_start
                raise
            yield ChunkResult(start=chunk_start, end=chunk_end, outcome=outcome, interval_s=interval_s)
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
    """Fetch every configured metric over [start, end) as one ``GpuReading`` per GPU and step.

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

_Key = tuple[str, int, str, int]  # hostname, gpu index, MIG instance, step start in ms


def _fetch_chunk(
    config: PrometheusConfig,
    plan: QueryPlan,
    http: requests.Session,
    chunk_start: datetime,
    chunk_end: datetime,
) -> tuple[ParseOutcome[GpuReading], list[int]]:
    step = config.step_s
    first = _first_instant_at_or_after(chunk_start, step) * step
    last = (_last_instant_at_or_before(chunk_end, step) - 1) * step
    outcome: ParseOutcome[GpuReading] = ParseOutcome()
    rows: dict[_Key, dict[str, Any]] = {}
    counts: dict[_Key, int] = {}
    for field_name, promql in plan.queries.items():
        where = f"query {field_name} = {promql!r} for {_iso(chunk_start)} – {_iso(chunk_end)}"
        # Each step [a, a + step) is evaluated at its last millisecond, a + step - 1 ms.
        params = {
            "query": promql,
            "start": _eval_instant(first, step),
            "end": _eval_instant(last, step),
            "step": str(step),
            # Ask Prometheus to give up when we do, rather than keep evaluating for nobody.
            "timeout": f"{config.timeout_s:g}",
        }
        for series in _matrix(config, http, params, field_name, where, outcome):
            if field_name == SAMPLES:
                _merge_counts(config, series, counts, outcome, step)
            else:
                _merge_series(config, field_name, series, rows, outcome, step)
    sample_s = config.sample_interval_s
    if sample_s is None and plan.probe_selector is not None and counts:
        sample_s = _measure_sample_interval(config, plan, http, first, last, outcome)
    weights: dict[tuple[str, int, int], int] = {}
    for (hostname, gpu_index, _mig, timestamp_ms), count in counts.items():
        weight_key = (hostname, gpu_index, timestamp_ms)
        weights[weight_key] = max(weights.get(weight_key, 0), count)
    interval_s: list[int] = []
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
        count = weights.get((hostname, gpu_index, timestamp_ms))
        interval_s.append(count * sample_s if count and sample_s else step)
    return outcome, interval_s


def _matrix(
    config: PrometheusConfig,
    http: requests.Session,
    params: Mapping[str, str],
    field_name: str,
    where: str,
    outcome: ParseOutcome[GpuReading],
) -> list[object]:
    payload = _get_json(config, http, "/api/v1/query_range", params, where)
    for warning in payload.get("warnings") or ():
        outcome.reject(f"Prometheus warning for {field_name} (data kept): {warning}", params["query"])
    data = payload["data"]
    if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise PrometheusQueryError(
            f"Prometheus returned result type {data.get('resultType')!r} instead of 'matrix' for {where}."
        )
    return data["result"]


def _measure_sample_interval(
    config: PrometheusConfig,
    plan: QueryPlan,
    http: requests.Session,
    first: int,
    last: int,
    outcome: ParseOutcome[GpuReading],
) -> int | None:
    """Seconds one raw sample stands for, measured on the GPU with the most samples in two hours.

    The median gap between its raw samples, lowered to the next whole divisor-like value that keeps any
    hour at or under an hour: ``3600 // ceil(3600 / gap)`` (60 s stays 60 s, 57 s becomes 56 s, since an
    hour can hold 64 samples 57 s apart). Looked for in the two hours before the end of the chunk, then in
    the two hours after its start (a trace that begins with the chunk); ``None`` when neither has samples.
    """
    step = config.step_s
    for at in (last, first + SAMPLE_INTERVAL_PROBE_S - step):
        when = _eval_instant(at, step)
        try:
            busiest = _instant_query(
                config, http, f"topk(1, count_over_time({plan.probe_selector}[{plan.probe_window}]))", when
            )
            if (
                not busiest
                or not isinstance(busiest[0], dict)
                or not isinstance(busiest[0].get("metric"), dict)
            ):
                continue
            selector = _with_matchers(plan.probe_selector or "", busiest[0]["metric"])
            raw = _instant_query(config, http, f"{selector}[{plan.probe_window}]", when)
        except PrometheusQueryError as error:  # a transient failure still fails the chunk, to be retried
            outcome.reject(
                f"samples: the sample interval could not be measured ({error.message}); "
                "each reading stands for the whole step; set sample_interval_s",
                plan.probe_selector or "",
            )
            return None
        times = sorted(
            {
                float(point[0])
                for series in raw
                if isinstance(series, dict) and isinstance(series.get("values"), list)
                for point in series["values"]
                if isinstance(point, list | tuple) and point and isinstance(point[0], int | float)
            }
        )
        gaps = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
        if not gaps:
            continue
        gap = gaps[len(gaps) // 2]
        if gap >= 3600:
            return int(gap)
        return max(1, 3600 // math.ceil(3600 / gap - 1e-9))
    outcome.reject(
        "samples: the sample interval could not be measured (no GPU has two samples in two hours); "
        "each reading stands for the whole step; set sample_interval_s",
        plan.probe_selector or "",
    )
    return None


def _instant_query(config: PrometheusConfig, http: requests.Session, promql: str, when: str) -> list[Any]:
    params = {"query": promql, "time": when, "timeout": f"{config.timeout_s:g}"}
    payload = _get_json(config, http, "/api/v1/query", params, f"sample interval probe {promql!r}")
    result = payload["data"].get("result")
    return result if isinstance(result, list) else []


def _with_matchers(selector: str, labels: Mapping[str, str]) -> str:
    """``selector`` narrowed to the series with exactly these labels."""
    matchers = ",".join(f"{name}={json.dumps(str(value))}" for name, value in sorted(labels.items()))
    selector = selector.strip()
    if selector.endswith("}"):
        inner = selector[:-1].rstrip()
        joiner = "" if inner.endswith(("{", ",")) else ","
        return f"{inner}{joiner}{matchers}}}"
    return f"{selector}{{{matchers}}}"


def _series_key(
    config: PrometheusConfig, field_name: str, series: object, outcome: ParseOutcome[GpuReading]
) -> tuple[str, int, str, dict[str, str], str] | None:
    """(hostname, GPU index, MIG instance, metadata labels, shown series) or None, rejected with why."""
    if (
        not isinstance(series, dict)
        or not isinstance(series.get("metric"), dict)
        or not isinstance(series.get("values"), list)
    ):
        outcome.reject(f"{field_name}: malformed series in the response", json.dumps(series, default=str))
        return None
    metric: dict[str, str] = series["metric"]
    shown = _series_text(metric)
    hostname = _label(config, metric, "hostname")
    gpu_text = _label(config, metric, "gpu")
    if not hostname or not gpu_text:
        missing = " and ".join(name for name, text in (("hostname", hostname), ("gpu", gpu_text)) if not text)
        outcome.reject(f"{field_name}: series without a {missing} label, ignored", shown)
        return None
    if not gpu_text.isdigit():
        outcome.reject(f"{field_name}: gpu label {gpu_text!r} is not a GPU index, series ignored", shown)
        return None
    mig_instance = _label(config, metric, "mig_instance")
    meta = {
        name: _label(config, metric, name) for name in ("uuid", "model", "pci_bus_id", "namespace", "pod")
    }
    return hostname, int(gpu_text), mig_instance, meta, shown


def _points(series: dict[str, Any], step: int, problems: dict[str, list[str]]) -> Iterator[tuple[int, str]]:
    """(step start in ms, raw value) of each point; a malformed point is noted in ``problems``."""
    for point in series["values"]:
        try:
            evaluated_ms = round(float(point[0]) * 1000)
            raw = str(point[1])
        except (TypeError, ValueError, IndexError, OverflowError):
            problems.setdefault("is a malformed point", []).append(str(point))
            continue
        yield evaluated_ms + 1 - step * 1000, raw


def _merge_counts(
    config: PrometheusConfig,
    series: object,
    counts: dict[_Key, int],
    outcome: ParseOutcome[GpuReading],
    step: int,
) -> None:
    found = _series_key(config, SAMPLES, series, outcome)
    if found is None:
        return
    hostname, gpu_index, mig_instance, _meta, shown = found
    problems: dict[str, list[str]] = {}
    for timestamp_ms, raw in _points(series, step, problems):  # type: ignore[arg-type]
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        key = (hostname, gpu_index, mig_instance, timestamp_ms)
        if not (math.isfinite(value) and value.is_integer() and 1 <= value <= 10**9):
            problems.setdefault("not a count of samples, the step stands for the whole step", []).append(
                f"{_iso_ms(timestamp_ms)} {raw!r}"
            )
        elif key not in counts:
            counts[key] = int(value)
    for problem, examples in problems.items():
        outcome.reject(f"{SAMPLES}: {len(examples)} value(s) {problem}", f"{shown} first at {examples[0]}")


def _merge_series(
    config: PrometheusConfig,
    field_name: str,
    series: object,
    rows: dict[_Key, dict[str, Any]],
    outcome: ParseOutcome[GpuReading],
    step: int,
) -> None:
    found = _series_key(config, field_name, series, outcome)
    if found is None:
        return
    hostname, gpu_index, mig_instance, meta, shown = found
    problems: dict[str, list[str]] = {}
    for timestamp_ms, raw in _points(series, step, problems):  # type: ignore[arg-type]
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


def _last_instant_at_or_before(moment: datetime, step_s: int) -> int:
    """Index n of the last instant n * step_s (Unix seconds) at or before ``moment``, in exact arithmetic."""
    micros = (moment - _EPOCH) // timedelta(microseconds=1)
    return micros // (step_s * 1_000_000)


def _eval_instant(step_start_s: int, step_s: int) -> str:
    """The last millisecond of the step [a, a + step), where Prometheus evaluates it, in Unix seconds."""
    return f"{step_start_s + step_s - 1}.999"


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
