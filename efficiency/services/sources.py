"""Running data sources: claim, collect, record the run, move the watermark.

Each kind's collector lives in ``efficiency.collectors``; the functions here wire one to the
ingest services and keep the books (``SourceRun`` rows and the source's health fields) that
the Data sources page shows.
"""

import io
import logging
import os
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import requests
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from efficiency.choices import JobSource, RunStatus, SourceKind
from efficiency.collectors.logpush import PushRefused
from efficiency.collectors.nodes import ObservedNode
from efficiency.collectors.records import GpuReading, ParseOutcome, Rejected, excerpt
from efficiency.config_secrets import secrets_check, secrets_placeholder, secrets_resolve
from efficiency.models import Cluster, DataSource, SourceRun
from efficiency.services.discovery import DiscoveryResult, nodes_discover
from efficiency.services.faults import xid_count_signals_record
from efficiency.services.ingest import IngestResult, gpu_readings_ingest, jobs_ingest, log_chunks_ingest

if TYPE_CHECKING:
    from efficiency.collectors.prometheus import PrometheusConfig

logger = logging.getLogger(__name__)

KEPT_REJECTS = 20
LEASE = timedelta(minutes=15)
INITIAL_BACKFILL = timedelta(days=7)  # how far back a new source starts
SOURCE_LOCK_SPACE = 0x50524F  # first key of the sources' advisory locks (the second is the id)


class SourceConfigError(ValueError):
    """The source's configuration is wrong: retrying will not help, an admin must fix it."""


class SourceOutsideRoots(SourceConfigError):
    """A file source's path lies outside ``PORTAL_SOURCE_ROOTS``."""

    def __init__(self, path: str, roots: str) -> None:
        super().__init__(f"{path} is outside the source roots (PORTAL_SOURCE_ROOTS: {roots})")
        self.path, self.roots = path, roots


class SourceUnavailable(RuntimeError):
    """The source did not answer (timeout, 5xx, connection refused): retry later."""


@dataclass
class RunRecorder:
    """Accumulates what one run did; saved into its ``SourceRun`` at the end."""

    run: SourceRun
    rejects: list[dict] = field(default_factory=list)
    watermark: datetime | None = None
    state: dict | None = None
    discovered: list[str] = field(default_factory=list)
    discovery_summary: str = ""

    def add(self, result: IngestResult, *, parse_rejected: list[Rejected] = ()) -> None:
        self.run.received += result.received
        self.run.stored += result.stored
        self.run.duplicates += result.duplicates
        problems = [*parse_rejected, *result.rejected]
        self.run.rejected += len(problems)
        for kind, items in (("rejected", problems), ("warning", result.warnings)):
            for item in items:
                if len(self.rejects) < KEPT_REJECTS:
                    self.rejects.append(
                        {"kind": kind, "reason": item.reason, "excerpt": item.excerpt, "line": item.line_no}
                    )
        if result.warnings and not self.run.message:
            self.run.message = result.warnings[0].reason
        if result.discovered:
            self.discovered += result.discovered

    def add_discovery(self, result: "DiscoveryResult") -> None:
        """Count what a node-list discovery did: its rejects like rejected input, its summary
        as the run's message when there is no other."""
        self.add(IngestResult(rejected=result.rejected))
        if result.created or result.retired or result.returned or result.notes:
            self.discovery_summary = result.summary()

    def message_finish(self) -> None:
        """The run's message names the nodes it discovered (an admin confirms them), retired and
        returned, first, then the run's first warning when it had one: a run with a warning
        still tells what it did to the inventory."""
        parts = []
        if self.discovery_summary:
            parts.append(f"nodes: {self.discovery_summary}")
        elif self.discovered:
            shown = ", ".join(self.discovered[:5]) + (" …" if len(self.discovered) > 5 else "")
            parts.append(f"discovered {len(self.discovered)} new node(s): {shown}")
        if parts:
            self.run.message = excerpt(
                "; ".join([*parts, self.run.message] if self.run.message else parts), 1000
            )


def due_slack() -> timedelta:
    """How long before its interval has passed a source counts as due: half the period of
    beat's collection pass (``PORTAL_COLLECTION_PASS_S``).

    A pass can only start runs when it comes round, and a run claims its source when a worker
    takes it from the queue, some seconds after the pass. With a fixed 5 s, a source whose last
    run was claimed more than 5 s after its pass (one worker working through ten sources' runs)
    was not due at the next pass and waited for the one after: every 15 s interval became 30 s
    for one run in ten in the live fleet run. Half a pass tolerates any queue delay below it and
    still never runs a source twice within one pass, nor a 60 s source at 45 s.
    """
    return timedelta(seconds=settings.PORTAL_COLLECTION_PASS_S / 2)


def source_claim(*, source_id: int, now: datetime, due_only: bool = False) -> DataSource | None:
    """Take the source for this run, unless another worker holds it.

    With ``due_only`` (the periodic collection), also unless its interval has not passed since
    its last attempt: a pass that queued it again while the queue was backed up, or a message
    delivered twice, finds it collected already and leaves it.

    On PostgreSQL the run also holds a session advisory lock, which the server drops as soon as
    the holder's connection goes: a worker killed half-way (SIGKILL, OOM) leaves ``running_since``
    set, and the lock tells that it is a dead run's, so the next run takes the source at once
    instead of waiting out the lease (which still keeps runs apart on SQLite).
    """
    free = Q(running_since__isnull=True) | Q(running_since__lt=now - LEASE)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [SOURCE_LOCK_SPACE, source_id])
            if not cursor.fetchone()[0]:
                return None
        free = Q()
    if due_only:
        interval_s = DataSource.objects.filter(pk=source_id).values_list("interval_s", flat=True).first() or 0
        free &= Q(last_attempt_at__isnull=True) | Q(
            last_attempt_at__lte=now - timedelta(seconds=interval_s) + due_slack()
        )
    claimed = DataSource.objects.filter(free, pk=source_id, enabled=True).update(
        running_since=now, last_attempt_at=now
    )
    if not claimed:
        source_release(source_id=source_id)
        return None
    return DataSource.objects.select_related("cluster").get(pk=source_id)


def source_release(*, source_id: int) -> None:
    """Drop the advisory lock ``source_claim`` took (``running_since`` is cleared with the run)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [SOURCE_LOCK_SPACE, source_id])


@contextmanager
def source_run_record(source: DataSource, *, now: datetime) -> Iterator[RunRecorder]:
    """Record a run: counts, rejected input, status; update the source's health and watermark."""
    run = SourceRun.objects.create(source=source, started_at=now)
    recorder = RunRecorder(run=run)
    try:
        yield recorder
    except Exception as error:
        run.status = RunStatus.FAILED
        run.message = excerpt(f"{type(error).__name__}: {error}", 1000)
        source.last_error = run.message
        source.last_error_at = timezone.now()
        source.consecutive_failures += 1
        # Expected failures (a source down, a bad configuration, a refused push) are a warning;
        # anything else is a bug in the portal and logged with its traceback.
        expected = isinstance(error, SourceUnavailable | SourceConfigError | PushRefused)
        logger.log(
            logging.WARNING if expected else logging.ERROR,
            "source %s (%s) failed: %s",
            source.pk,
            source.kind,
            run.message,
            exc_info=not expected,
            extra={"source_id": source.pk, "source_kind": source.kind, "reason": run.message},
        )
        raise
    else:
        recorder.message_finish()
        run.status = RunStatus.PARTIAL if run.rejected else RunStatus.OK
        source.last_success_at = timezone.now()
        source.consecutive_failures = 0
        if run.rejected:
            first = recorder.rejects[0] if recorder.rejects else {"reason": ""}
            source.last_error = f"{run.rejected} rejected; first: {first['reason']}"
            source.last_error_at = source.last_success_at
    finally:
        run.finished_at = timezone.now()
        run.rejects = recorder.rejects
        run.save()
        if recorder.watermark is not None and (
            source.watermark is None or recorder.watermark > source.watermark
        ):
            source.watermark = recorder.watermark
        if recorder.state is not None:
            source.state = recorder.state
        source.running_since = None
        source.save(
            update_fields=[
                "watermark",
                "state",
                "running_since",
                "last_success_at",
                "last_error",
                "last_error_at",
                "consecutive_failures",
            ]
        )


def source_collect(
    *, source_id: int, now: datetime | None = None, due_only: bool = False
) -> SourceRun | None:
    """Collect from one source once; ``None`` when another worker is already on it (or, with
    ``due_only``, when it is not due: see ``source_claim``)."""
    now = now or timezone.now()
    source = source_claim(source_id=source_id, now=now, due_only=due_only)
    if source is None:
        return None
    collector = _COLLECTORS.get(source.kind)
    try:
        with source_run_record(source, now=now) as recorder:
            if collector is None:
                raise SourceConfigError(f"{source.get_kind_display()} sources are not collected periodically")
            collector(source, recorder, now)
    finally:
        source_release(source_id=source_id)
    return recorder.run


# --- Reading a source's configuration ---------------------------------------------------------
#
# One reader per kind turns the JSON an admin edits into typed settings, or raises
# SourceConfigError naming the key. The collectors read their configuration with it at every
# run, and the admin checks a configuration with it on save (``source_config_validate``), so
# the two cannot disagree.


@dataclass(frozen=True)
class DcgmSettings:
    targets: tuple[tuple[str, str], ...]  # (url, hostname to use when the page names none)
    timeout_s: float


@dataclass(frozen=True)
class PrometheusSettings:
    query: "PrometheusConfig"
    lag_s: int
    initial_backfill_days: int


@dataclass(frozen=True)
class TextSettings:
    """Where a scheduler's or a log reader's text comes from, and its time zone."""

    path: str = ""
    command: tuple[str, ...] = ()
    root: str = ""
    timezone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    overlap_hours: int = 24
    kernel_logs: bool = False


# A scheduler source may also read its node list for inventory discovery.
NODE_LIST_KEYS = ("nodes_path", "nodes_command", "discover_nodes")
SOURCE_CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    SourceKind.DCGM_SCRAPE: ("urls", "timeout_s"),
    SourceKind.SLURM: ("path", "command", "timezone", "overlap_hours", *NODE_LIST_KEYS),
    # Kubernetes times carry their zone; "timezone" is accepted (and checked) like on Slurm.
    SourceKind.KUBERNETES: ("path", "command", "timezone", *NODE_LIST_KEYS),
    SourceKind.LOG_FILES: ("root", "timezone"),
    SourceKind.LOG_PUSH: ("kernel_logs", "timezone"),
    SourceKind.CSV_IMPORT: (),
}
PROMETHEUS_OWN_KEYS = ("lag_s", "initial_backfill_days")  # the portal's; the rest is the collector's


def source_config_read(*, kind: str, config: object, environ: Mapping[str, str] | None = None):
    """The settings a ``kind`` source runs with, from its JSON ``config``.

    Env references (``{"env": "NAME"}``, ``efficiency.config_secrets``) are resolved from
    ``environ`` (the process environment by default). Raises ``SourceConfigError`` naming the
    key for anything a run could not use, and never shows a secret's value.
    """
    if not isinstance(config, Mapping):
        raise SourceConfigError("the configuration must be a JSON object")
    problems = secrets_check(kind, config)
    if problems:
        raise SourceConfigError("; ".join(problems))
    try:
        config = secrets_resolve(kind, config, os.environ if environ is None else environ)
    except ValueError as error:  # SecretMissing, or a value that cannot be sent
        raise SourceConfigError(str(error)) from None
    if kind == SourceKind.PROMETHEUS:
        return _prometheus_settings(config)
    allowed = SOURCE_CONFIG_KEYS.get(kind)
    if allowed is None:
        raise SourceConfigError(f"unknown source kind {kind!r}")
    unknown = sorted(str(key) for key in config if key not in allowed)
    if unknown:
        raise SourceConfigError(
            f"unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed) or 'none'}"
        )
    if kind == SourceKind.DCGM_SCRAPE:
        return _dcgm_settings(config)
    return TextSettings(
        timezone=_zone(config),
        overlap_hours=_whole(config, "overlap_hours", 24, high=24 * 31),
        kernel_logs=_flag(config, "kernel_logs"),
        **_text_from(config, kind),
    )


def source_config_validate(*, kind: str, config: object) -> None:
    """Check a configuration on save with the collectors' own reader (``SourceConfigError``).

    Env references are not resolved here (the web process need not have the workers'
    variables): they stand for a placeholder, so only their form is checked. A node list
    (``nodes_path``) outside ``PORTAL_SOURCE_ROOTS`` is refused here too, though a run only
    rejects the list then and stores the jobs.
    """
    source_config_read(kind=kind, config=secrets_placeholder(kind, config), environ={})
    source_config_check(config)


def source_settings(source: DataSource):
    """``source_config_read`` for a stored source, at run time."""
    return source_config_read(kind=source.kind, config=source.config)


def _prometheus_settings(config: Mapping) -> PrometheusSettings:
    from efficiency.collectors import prometheus

    own = {key: value for key, value in config.items() if key not in PROMETHEUS_OWN_KEYS}
    allowed = (*prometheus.CONFIG_KEYS, *PROMETHEUS_OWN_KEYS)
    unknown = sorted(str(key) for key in config if key not in allowed)
    if unknown:  # named here, with the keys the portal reads besides the collector's own
        raise SourceConfigError(
            f"unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}"
        )
    try:
        query = prometheus.PrometheusConfig.from_dict(own)
    except (TypeError, ValueError) as error:
        # The message is quoted inside a sentence of its own (the form, the run): no full stop.
        raise SourceConfigError(str(error).rstrip(".")) from None
    return PrometheusSettings(
        query=query,
        lag_s=_whole(config, "lag_s", 60, high=86_400),
        initial_backfill_days=_whole(config, "initial_backfill_days", 7, low=1, high=3_650),
    )


def _dcgm_settings(config: Mapping) -> DcgmSettings:
    urls = config.get("urls")
    if urls is None:
        raise SourceConfigError("configuration needs 'urls' (a list of exporter URLs)")
    if not isinstance(urls, list):
        raise SourceConfigError("configuration 'urls' must be a list of exporter URLs")
    targets = []
    for index, entry in enumerate(urls):
        url, hostname = (entry, "") if isinstance(entry, str) else _target_entry(entry, index)
        if not _is_http_url(url):
            raise SourceConfigError(f"configuration 'urls[{index}]' must be an http:// or https:// URL")
        targets.append((url, hostname))
    return DcgmSettings(targets=tuple(targets), timeout_s=_seconds(config, "timeout_s", 10))


def _target_entry(entry: object, index: int) -> tuple[str, str]:
    if (
        not isinstance(entry, Mapping)
        or set(entry) - {"url", "hostname"}
        or not isinstance(entry.get("url"), str)
        or not isinstance(entry.get("hostname", ""), str)
    ):
        raise SourceConfigError(
            f'configuration \'urls[{index}]\' must be a URL or {{"url": ..., "hostname": ...}} (strings)'
        )
    return entry["url"], entry.get("hostname", "")


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- urlsplit checks the port only when asked for it
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _text_from(config: Mapping, kind: str) -> dict:
    """``path``/``command``/``root`` checked: a non-empty string inside the source roots, a list
    of arguments; a Kubernetes source needs a path or a command, a log-files source its root."""
    found: dict = {}
    for key in PATH_KEYS:
        if key in config:
            value = config[key]
            if not isinstance(value, str) or not value or "\x00" in value:
                raise SourceConfigError(f"configuration {key!r} must be a non-empty string")
            if key != "nodes_path":  # a node list out of bounds is a rejection of its run, not a failure
                source_path_check(value)
            found[key] = value
    for key in ("command", "nodes_command"):
        if key in config:
            argv = config[key]
            if (
                not isinstance(argv, list)
                or not argv
                or not all(isinstance(arg, str) and arg and "\x00" not in arg for arg in argv)
            ):
                raise SourceConfigError(
                    f"configuration {key!r} must be a non-empty list of arguments (strings)"
                )
            found[key] = tuple(argv)
    _flag(config, "discover_nodes")
    # The node list (discovery) is read by its own code; here only checked.
    found = {key: value for key, value in found.items() if key in ("path", "command", "root")}
    if kind == SourceKind.KUBERNETES and not found:
        raise SourceConfigError("configuration needs 'path' or 'command' (a list of arguments)")
    if kind == SourceKind.LOG_FILES and "root" not in found:
        raise SourceConfigError("configuration needs 'root' (the directory of job logs)")
    return found


def _zone(config: Mapping) -> ZoneInfo:
    name = config.get("timezone", "UTC")
    if not isinstance(name, str):
        raise SourceConfigError("configuration 'timezone' must be an IANA time zone name such as UTC")
    try:
        return time_zone_get(name)
    except ValueError as error:
        raise SourceConfigError(f"configuration 'timezone': {error}") from None


def _whole(config: Mapping, key: str, default: int, *, low: int = 0, high: int) -> int:
    value = config.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise SourceConfigError(f"configuration {key!r} must be a whole number from {low} to {high}")
    return value


def _seconds(config: Mapping, key: str, default: float) -> float:
    value = config.get(key, default)
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value <= 600:
        raise SourceConfigError(f"configuration {key!r} must be a number of seconds in (0, 600]")
    return float(value)


def _flag(config: Mapping, key: str) -> bool:
    value = config.get(key, False)
    if not isinstance(value, bool):
        raise SourceConfigError(f"configuration {key!r} must be true or false")
    return value


def _http_get(
    url: str, *, timeout_s: float, headers: dict | None = None, session: requests.Session | None = None
) -> str:
    try:
        response = (session or requests).get(url, timeout=timeout_s, headers=headers or {})
    except requests.RequestException as error:
        raise SourceUnavailable(f"{url}: {type(error).__name__}") from error
    if response.status_code >= 500 or response.status_code == 429:
        raise SourceUnavailable(f"{url} answered HTTP {response.status_code}")
    if response.status_code >= 400:
        raise SourceConfigError(f"{url} answered HTTP {response.status_code}")
    return response.text


def gpu_readings_store(
    *,
    cluster: Cluster,
    readings: Iterable[GpuReading],
    interval_s: int,
    now: datetime,
    source: DataSource | None = None,
) -> IngestResult:
    """Store a batch of GPU readings, then record the Xid counts they carried as fault signals.

    Ingest only stores and reports what it found; deciding that an Xid count is fault evidence
    (and queueing the grouping into incidents) is the collection's next step, here. Nodes the
    readings discovered are credited to ``source``.
    """
    result = gpu_readings_ingest(
        cluster=cluster, readings=readings, interval_s=interval_s, now=now, source=source
    )
    if result.xid_counts:
        xid_count_signals_record(cluster=cluster, events=result.xid_counts, now=now)
    return result


# Pages stored in one ingest call: each call reads the cluster's node list once and writes one
# COPY, so a thousand small pages cost a few dozen round trips instead of thousands.
DCGM_PAGES_PER_STORE = 50


def _collect_dcgm(source: DataSource, recorder: RunRecorder, now: datetime) -> None:
    """Scrape each dcgm-exporter URL once; an exporter knows only "now", so no backfill.

    Each URL is a target of its own, as in Prometheus: one that does not answer, answers 4xx or
    5xx, or whose page cannot be stored is marked down with its error in ``state["targets"]``
    and listed among the run's rejections; the other targets are stored all the same. Only a
    run where every target is down fails.

    The pages are fetched concurrently, at most ``PORTAL_SCRAPE_CONCURRENCY`` at a time, so a
    source of a thousand exporters is scraped within its interval; each page is parsed and
    stored on this thread (its database connection) as it arrives, while the others download.
    """
    settings_ = source_settings(source)
    errors: dict[str, str] = {}
    pending: list[_Page] = []
    for url, hostname, text, error in _dcgm_pages_fetch(settings_):
        if error:
            errors[url] = error
            continue
        page = _dcgm_page_parse(url, hostname, text, now)
        if isinstance(page, str):
            errors[url] = page
            continue
        pending.append(page)
        if len(pending) >= DCGM_PAGES_PER_STORE:
            errors.update(_dcgm_pages_store(source, recorder, now, pending))
            pending = []
    errors.update(_dcgm_pages_store(source, recorder, now, pending))
    targets = {
        url: {
            "health": "down" if url in errors else "up",
            "last_scrape": now.isoformat(),
            "last_error": errors.get(url, ""),
        }
        for url, _ in settings_.targets
    }
    failures = [errors[url] for url in targets if url in errors]
    recorder.state = {**source.state, "targets": targets}
    if failures and len(failures) == len(settings_.targets):
        raise SourceUnavailable("; ".join(failures[:5]))
    # Targets that are down while others are up: counted like rejected input, and kept within
    # the same cap on listed rejections.
    recorder.add(IngestResult(), parse_rejected=[Rejected(reason=failure) for failure in failures])
    recorder.watermark = now


@dataclass
class _Page:
    url: str
    readings: list[GpuReading]
    rejected: list[Rejected]


def _dcgm_pages_fetch(settings_: DcgmSettings) -> Iterator[tuple[str, str, str, str]]:
    """(url, hostname, page text, error) of every target, in the order the fetches finish.

    Fetches run in a bounded pool of threads, each with its own HTTP session (connections to
    the same exporter host are reused); nothing here touches the database.
    """
    targets = settings_.targets
    if not targets:
        return
    local = threading.local()
    sessions: list[requests.Session] = []

    def fetch(url: str) -> str:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
            sessions.append(session)
        return _http_get(url, timeout_s=settings_.timeout_s, session=session)

    workers = max(1, min(settings.PORTAL_SCRAPE_CONCURRENCY, len(targets)))
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dcgm-scrape") as pool:
            futures = {pool.submit(fetch, url): (url, hostname) for url, hostname in targets}
            for future in as_completed(futures):
                url, hostname = futures[future]
                try:
                    yield url, hostname, future.result(), ""
                except (SourceUnavailable, SourceConfigError) as error:
                    yield url, hostname, "", str(error)
    finally:
        for session in sessions:
            session.close()


def _dcgm_page_parse(url: str, hostname: str, text: str, now: datetime) -> "_Page | str":
    """The page's readings, or its error when it cannot be read at all."""
    from efficiency.collectors.dcgm import gpu_readings_from_exposition

    try:
        parsed = gpu_readings_from_exposition(
            text, scrape_time_ms=int(now.timestamp() * 1000), default_hostname=hostname, origin=url
        )
    except Exception as error:  # one target's bad page must not stop the others
        logger.exception("dcgm target %s could not be parsed", url)
        return excerpt(f"{url}: {type(error).__name__}: {error}")
    return _Page(url=url, readings=list(parsed.records), rejected=list(parsed.rejected))


def _dcgm_pages_store(
    source: DataSource, recorder: RunRecorder, now: datetime, pages: list[_Page]
) -> dict[str, str]:
    """Store several pages in one ingest call; returns the errors of pages that could not be stored.

    When the batch fails, it is rolled back and each page is stored alone, so that only the
    pages at fault are marked down.
    """
    if not pages:
        return {}
    if len(pages) > 1:
        try:
            with transaction.atomic():
                result = _dcgm_readings_store(source, now, [r for page in pages for r in page.readings])
        except Exception:
            logger.info(
                "a batch of %d dcgm pages of source %s failed; storing them one by one", len(pages), source.pk
            )
        else:
            recorder.add(result, parse_rejected=[r for page in pages for r in page.rejected])
            return {}
    errors = {}
    for page in pages:
        try:
            with transaction.atomic():
                result = _dcgm_readings_store(source, now, page.readings)
        except Exception as error:  # one target's bad page must not stop the others
            logger.exception("dcgm target %s of source %s could not be stored", page.url, source.pk)
            errors[page.url] = excerpt(f"{page.url}: {type(error).__name__}: {error}")
        else:
            recorder.add(result, parse_rejected=page.rejected)
    return errors


def _dcgm_readings_store(source: DataSource, now: datetime, readings: list[GpuReading]) -> IngestResult:
    return gpu_readings_store(
        cluster=source.cluster, readings=readings, interval_s=source.interval_s, now=now, source=source
    )


def _collect_prometheus(source: DataSource, recorder: RunRecorder, now: datetime) -> None:
    """Ask Prometheus for [watermark, now - lag): an outage is backfilled on the next run."""
    from efficiency.collectors import prometheus

    settings_ = source_settings(source)
    config = settings_.query
    end = now - timedelta(seconds=settings_.lag_s)
    start = source.watermark or (end - timedelta(days=settings_.initial_backfill_days))
    recorder.run.window_start, recorder.run.window_end = start, end
    if end <= start:
        return
    try:
        # Chunk by chunk: each stored chunk moves the watermark, so a failure half-way through
        # a long backfill keeps what was fetched and the next run resumes from there.
        # Each reading stands for its raw samples x the sample interval (``ChunkResult.interval_s``),
        # so the mean over any range is the mean of the samples Prometheus holds.
        for chunk in prometheus.fetch_chunks(config, start, end):
            parse_rejected = chunk.outcome.rejected
            for interval_s, readings in chunk.by_interval():
                result = gpu_readings_store(
                    cluster=source.cluster, readings=readings, interval_s=interval_s, now=now, source=source
                )
                recorder.add(result, parse_rejected=parse_rejected)
                parse_rejected = []
            if parse_rejected:
                recorder.add(IngestResult(), parse_rejected=parse_rejected)
            recorder.watermark = chunk.end
    except prometheus.PrometheusUnavailable as error:
        raise SourceUnavailable(error.message) from error
    except prometheus.PrometheusQueryError as error:
        raise SourceConfigError(error.message) from error


PATH_KEYS = ("path", "root", "nodes_path")  # configuration keys that name a file or directory to read


def source_path_check(path: str | Path) -> Path:
    """The path, resolved (symlinks followed), if it lies inside one of ``PORTAL_SOURCE_ROOTS``.

    A file source reads what the worker can read, and a rejection quotes what it read: without
    this, a source pointed at the secret key or /etc/shadow would show it on the page. Checked
    when a source is saved in the admin and again every time it is read (a symlink may change).
    Raises ``SourceConfigError`` naming the path and the roots.
    """
    resolved = Path(path).resolve()
    roots = [Path(root).resolve() for root in settings.PORTAL_SOURCE_ROOTS]
    if not any(resolved.is_relative_to(root) for root in roots):
        raise SourceOutsideRoots(str(path), ", ".join(str(root) for root in roots) or "-")
    return resolved


def source_config_check(config: object) -> None:
    """Check a source configuration's paths against ``PORTAL_SOURCE_ROOTS`` (``SourceConfigError``)."""
    if not isinstance(config, dict):
        return
    for key in PATH_KEYS:
        value = config.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise SourceConfigError(f"configuration {key!r} must be a non-empty string")
        if value:
            source_path_check(value)


def _read_text(
    source: DataSource,
    *,
    since: datetime,
    until: datetime,
    command: Callable[..., list[str]] | None,
    env: dict[str, str] | None = None,
    path_key: str = "path",
    command_key: str = "command",
) -> str:
    """The source's text: a file (``path``), or a command's output (``command``).

    ``path_key`` / ``command_key`` name other keys of the configuration for a second text
    of the same source (the node list: ``nodes_path`` / ``nodes_command``).
    """
    path = source.config.get(path_key)
    if path:
        resolved = source_path_check(path)
        try:
            return resolved.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            raise SourceUnavailable(f"cannot read {path}: {error.strerror}") from error
    argv = source.config.get(command_key)
    if argv is None and command is not None:
        argv = command(since, until)
    if not argv or not isinstance(argv, list):
        raise SourceConfigError(f"configuration needs {path_key!r} or {command_key!r} (a list of arguments)")
    try:
        completed = subprocess.run(  # noqa: S603
            argv, capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **(env or {})}
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SourceUnavailable(f"{argv[0]}: {error}") from error
    if completed.returncode != 0:
        raise SourceUnavailable(f"{argv[0]} exited {completed.returncode}: {excerpt(completed.stderr)}")
    return completed.stdout


def _collect_slurm(source: DataSource, recorder: RunRecorder, now: datetime) -> None:
    """Read sacct output for [watermark - overlap, now): running jobs are seen again until done.

    The node list is read first, so that the jobs of a node it discovers are placed on it in
    the same run (not stored without a node until the next one).
    """
    from efficiency.collectors import slurm

    settings_ = source_settings(source)
    overlap = timedelta(hours=settings_.overlap_hours)
    since = (source.watermark or now - INITIAL_BACKFILL) - overlap
    tz = settings_.timezone
    # The node list: the default command when sacct runs as the portal's own command, else
    # only when the configuration names one (a dump of sacct says nothing about nodes).
    own_commands = "path" not in source.config and "command" not in source.config
    _discover_nodes(
        source,
        recorder,
        now,
        parse=slurm.parse_slurm_nodes,
        default_command=slurm.scontrol_nodes_command if own_commands else None,
    )
    # sacct reads -S/-E and prints times in its process's local time zone. Django sets TZ to the
    # display zone for its own process, so say which zone the Slurm side uses.
    text = _read_text(
        source,
        since=since,
        until=now,
        command=lambda a, b: slurm.sacct_command(a, b, timezone=tz),
        env={"TZ": tz.key},
    )
    parsed = slurm.parse_sacct(text, timezone=tz)
    result = jobs_ingest(cluster=source.cluster, source=JobSource.SLURM, records=parsed.records, now=now)
    recorder.add(result, parse_rejected=parsed.rejected)
    recorder.watermark = now


def _collect_kubernetes(source: DataSource, recorder: RunRecorder, now: datetime) -> None:
    """Read the pods or jobs, after the node list (see ``_collect_slurm``)."""
    from efficiency.collectors.kubernetes import parse_kubernetes_jobs, parse_kubernetes_nodes

    source_settings(source)  # refuses a configuration a run cannot use, naming the key
    _discover_nodes(source, recorder, now, parse=parse_kubernetes_nodes, default_command=None)
    text = _read_text(source, since=now, until=now, command=None)
    parsed = parse_kubernetes_jobs(text)
    result = jobs_ingest(cluster=source.cluster, source=JobSource.KUBERNETES, records=parsed.records, now=now)
    recorder.add(result, parse_rejected=parsed.rejected)
    recorder.watermark = now


# --- Inventory discovery from a scheduler's node list --------------------------------------------


def _discover_nodes(
    source: DataSource,
    recorder: RunRecorder,
    now: datetime,
    *,
    parse: Callable[[str], ParseOutcome[ObservedNode]],
    default_command: Callable[[], list[str]] | None,
) -> None:
    """List the scheduler's nodes in the same run and discover the inventory from them.

    The list comes from ``nodes_path`` (a file) or ``nodes_command`` (an argv, e.g.
    ``["kubectl", "get", "nodes", "-o", "json"]``), else ``default_command``; with none of
    them, or ``discover_nodes: false``, nothing happens. A node list that cannot be read is a
    rejection of this run, not a failure: the jobs are stored, and no node is retired.
    """
    config = source.config
    if config.get("discover_nodes") is False:
        return
    if "nodes_path" not in config and "nodes_command" not in config and default_command is None:
        return
    try:
        text = _read_text(
            source,
            since=now,
            until=now,
            command=(lambda _since, _until: default_command()) if default_command else None,
            path_key="nodes_path",
            command_key="nodes_command",
        )
    except (SourceUnavailable, SourceConfigError) as error:
        recorder.add(IngestResult(), parse_rejected=[Rejected(reason=f"node list: {error}")])
        return
    parsed = parse(text)
    if text.strip() and not parsed.records and not parsed.rejected:
        # A list that names no node is more likely a wrong command or file than an empty
        # cluster: say so, and retire nothing.
        parsed.reject("node list: it names no node", text)
    recorder.add(IngestResult(), parse_rejected=parsed.rejected)
    # A list with unreadable entries is not the whole inventory: retire nothing from it.
    result = nodes_discover(
        cluster=source.cluster,
        observed=parsed.records,
        source=source,
        complete=not parsed.rejected,
        now=now,
    )
    recorder.add_discovery(result)


def _collect_log_files(source: DataSource, recorder: RunRecorder, now: datetime) -> None:
    """Tail the watched directory; chunks and the new cursors are saved in one transaction."""
    from efficiency.collectors.logfiles import tail_directory

    root = source_path_check(source_settings(source).root)
    if not root.is_dir():
        raise SourceUnavailable(f"log directory {root} does not exist")
    tailed = tail_directory(root, source.state.get("cursors", {}))
    with transaction.atomic():
        result = log_chunks_ingest(source=source, chunks=tailed.chunks, now=now)
        recorder.add(result, parse_rejected=tailed.rejected)
        recorder.state = {**source.state, "cursors": tailed.cursors}
    recorder.watermark = now


_COLLECTORS: dict[str, Callable[[DataSource, RunRecorder, datetime], None]] = {
    SourceKind.DCGM_SCRAPE: _collect_dcgm,
    SourceKind.PROMETHEUS: _collect_prometheus,
    SourceKind.SLURM: _collect_slurm,
    SourceKind.KUBERNETES: _collect_kubernetes,
    SourceKind.LOG_FILES: _collect_log_files,
}
# Kinds the portal collects itself (a push or an import source only receives).
COLLECTED_KINDS = frozenset(_COLLECTORS)


def sources_due(*, now: datetime | None = None) -> list[int]:
    """Enabled, periodically collected sources whose interval has passed since the last attempt."""
    now = now or timezone.now()
    slack = due_slack()
    due = []
    for pk, interval_s, last in DataSource.objects.filter(
        enabled=True, kind__in=list(_COLLECTORS)
    ).values_list("pk", "interval_s", "last_attempt_at"):
        if last is None or now - last >= timedelta(seconds=interval_s) - slack:
            due.append(pk)
    return due


def log_push_receive(
    *,
    source: DataSource,
    body: BinaryIO,
    content_length: int | None,
    content_encoding: str = "",
    max_bytes: int,
    now: datetime | None = None,
) -> SourceRun:
    """Store NDJSON log lines a shipper pushed, recorded as a run of the push source.

    ``body`` is read here, at most ``max_bytes`` of it, whether or not its length was announced
    (chunked transfer encoding), then inflated (gzip, deflate) and parsed. A body refused as a
    whole raises ``PushRefused`` (its HTTP status and reason) after recording a failed run, so
    the Data sources page shows it too; nothing of it is stored.
    """
    from efficiency.collectors.logpush import (
        PushRefused,
        parse_ndjson_push,
        push_body_decode,
        push_body_drain,
        push_body_read,
    )

    now = now or timezone.now()
    with source_run_record(source, now=now) as recorder:
        if content_length is not None and content_length > max_bytes:
            push_body_drain(body, max_bytes=max_bytes)  # so that the client reads the answer
            raise PushRefused(
                413,
                f"body of {content_length} bytes, at most {max_bytes}: nothing stored; send smaller batches",
            )
        text = push_body_decode(push_body_read(body, max_bytes=max_bytes), content_encoding)
        parsed = parse_ndjson_push(text)
        result = log_chunks_ingest(source=source, chunks=parsed.records, now=now)
        recorder.add(result, parse_rejected=parsed.rejected)
        recorder.watermark = now
    return recorder.run


def time_zone_get(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; ``ValueError`` naming it when there is no such zone."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # a key like "../x" or "" is a ValueError
        raise ValueError(
            f"unknown time zone {name!r}: use an IANA name such as Asia/Shanghai or UTC"
        ) from None


def jobs_csv_import(
    *,
    cluster,
    text: str | None = None,
    path: Path | None = None,
    timezone_name: str = "UTC",
    now: datetime | None = None,
    batch_rows: int = 5000,
    progress: Callable[[SourceRun, int], None] | None = None,
) -> SourceRun:
    """Import job history from the documented CSV format, recorded as a run of the cluster's CSV source.

    Give ``text`` or ``path``. A file is streamed in batches of ``batch_rows`` rows, each stored
    in its own transaction (so memory stays bounded and a re-run after a crash only counts
    duplicates); ``progress`` is called with the run and the rows read so far after each batch.
    A file that is not UTF-8 is read in the encoding ``csv_encoding_detect`` finds, with a
    warning, or refused (``UnknownEncoding``) before anything is stored. Raises ``ValueError``
    for an unknown zone.
    """
    from efficiency.collectors.jobs_csv import csv_encoding_detect, iter_jobs_csv

    zone = time_zone_get(timezone_name)
    now = now or timezone.now()
    source, _ = DataSource.objects.get_or_create(
        cluster=cluster, name="csv-import", defaults={"kind": SourceKind.CSV_IMPORT, "enabled": False}
    )
    with ExitStack() as stack, source_run_record(source, now=now) as recorder:
        if path is None:
            lines: Iterable[str] = io.StringIO(text or "", newline="")
        else:
            encoding = csv_encoding_detect(stack.enter_context(path.open("rb")))
            if encoding != "utf-8-sig":
                warning = (
                    f"the file is not UTF-8: read as {encoding}; save it as UTF-8 to be sure of its text"
                )
                recorder.add(IngestResult(warnings=[Rejected(reason=warning)]))
            lines = stack.enter_context(path.open(encoding=encoding, newline=""))
        rows = 0
        for batch in iter_jobs_csv(lines, default_timezone=zone, batch_rows=batch_rows):
            result = jobs_ingest(cluster=cluster, source=JobSource.CSV, records=batch.records, now=now)
            recorder.add(result, parse_rejected=batch.rejected)
            rows += len(batch.records) + len(batch.rejected)
            if progress is not None:
                progress(recorder.run, rows)
    return recorder.run
