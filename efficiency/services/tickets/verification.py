"""The measured gain of a resolved ticket: the job family's windows before and after the fix.

A ticket for one job family (``measurable``) enters *verifying* when it is resolved.
``tickets_verify`` (every 15 minutes) reads, for each such ticket, the family's jobs before
``resolved_at`` (``PORTAL_TICKET_VERIFICATION["before_days"]``) and after it, hands them to the
pure ``efficiency.analysis.tickets.verification.verify`` and moves the ticket to *verified gain*,
*no gain* or *regressed* once the after window holds enough data. Past ``max_days`` without
enough data the ticket ends as *no gain*, with the reason.

**The windows.** The family is the recommendation's: its department (the recommendation's, not
the department the ticket was assigned to), user and name pattern (digits as ``*``). Only runs of
the shapes the recommendation was about are compared (the node counts of the ticket's linked jobs,
where it has any): sockets between nodes slow a two-node run, not the family's single-GPU
debugging runs beside it, which would dilute both medians. The before window holds the runs that
started before ``resolved_at`` and ran in the ``before_days`` before it; the after window only runs
that *started* after ``resolved_at`` (a run that started before the fix still has the old config).

**The series.** Iteration times come from the runs' log lines, read from the stored log chunks
(the newest ``MAX_CHUNKS`` chunks that hold a throughput line, at most ``MAX_LOG_CHARS`` of
text a window, at most ``MAX_LINES_PER_JOB`` values a run): the throughput shapes that
``efficiency.analysis.faults.context.METRICS`` knows (Megatron's ``elapsed time per iteration
(ms)``, tqdm's ``it/s``, ``samples/sec``, ...); numbers that cannot be a time are dropped. One
shape is compared, the one both windows print most (a rate enters as its inverse: time per
iteration or per sample). SM activity is
one value per job-hour (SM-active GPU-seconds over held GPU-seconds; engine activity where the
exporter reports no SM activity, as the recommendations read it). GPU-hours are the family's held
GPU-hours in the window. Work units are samples (Megatron's ``consumed samples``): each run's rate
between its first and last line, over the hours it held, where runs with a rate cover at least
half the window's GPU-hours. The portal has no data-wait measure yet: ``wait_share`` stays empty.

**Stored** (``ticket.verification``, JSON; the ticket page and its chart read these keys):

- ``outcome``: verifying / verified_gain / no_gain / regressed; ``reason``: "" or ``timed_out``
  (no gain because the after window never held enough data in ``max_days``).
- ``metric``: the deciding metric (``iteration_s``, ``gpu_h_per_unit``, ``sm_activity``) or None;
  ``iteration_metric``: the log shape the iteration series came from (``elapsed_ms`` ...) or None.
- ``before`` / ``after``: the deciding metric's medians; ``gain_pct``: the measured gain (share of
  GPU time saved, in percent); ``interval_low_pct`` / ``interval_high_pct``: its bootstrap
  interval; ``confidence``; ``noise_band_pct``; ``expected_gain_pct``: the recommendation's.
- ``shortfalls``: ``[{what, have, need, missing}]`` while verifying (``what``: gpu_hours,
  iterations, activity_hours, before_metric).
- ``comparisons``: every metric both windows have (``Comparison.as_json``: metric, before, after,
  before_n, after_n, relative_change, gain_share, gain_low, gain_high).
- ``windows``: ``{"before": {...}, "after": {...}}``, each ``start``, ``end`` (ISO), ``jobs``,
  ``gpu_hours``, ``iteration_lines``, ``activity_hours``, ``work_units``.
- ``series``: ``{"before": [...], "after": [...]}``, one point per run (the latest
  ``MAX_SERIES_POINTS``): ``job`` (external id), ``start`` (ISO), ``iteration`` (median of the
  compared log shape, in its seconds), ``sm_activity`` (0–1), ``gpu_hours``.
- ``started_at`` (when verification began), ``checked_at`` (the last measurement).
"""

import logging
import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from efficiency.analysis.faults.context import METRICS, metric_value
from efficiency.analysis.recommendations.families import name_pattern
from efficiency.analysis.tickets import verification as pure
from efficiency.choices import TicketAction, TicketState
from efficiency.models import Job, JobHour, LogChunk, Ticket
from efficiency.services.tickets.core import ticket_transition

logger = logging.getLogger(__name__)

MAX_CHUNKS = 5_000  # log chunks read per window, newest first
MAX_LOG_CHARS = 64_000_000  # and at most this much of their text
MAX_LINES_PER_JOB = 2_000  # iteration values kept per run
MAX_SERIES_POINTS = 100  # runs per window in the chart's series
MIN_ITERATION_S, MAX_ITERATION_S = 1e-6, 86_400.0  # a time per iteration outside these is junk
MIN_WORK_COVERAGE = 0.5  # share of the window's GPU-hours whose runs must show a rate of work

_TIME_SHAPES = {"elapsed_ms": 1e-3, "elapsed_s": 1.0, "iter_time": 1.0, "time_meter": 1.0}
_LITERALS = sorted({metric.literal.decode() for metric in METRICS})
_CONSUMED = re.compile(r"consumed samples:\s*(\d{1,18})")
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")

ACTION_OF = {
    pure.VERIFIED_GAIN: TicketAction.MEASURE_GAIN,
    pure.NO_GAIN: TicketAction.MEASURE_NO_GAIN,
    pure.REGRESSED: TicketAction.MEASURE_REGRESSION,
}


def verification_settings() -> tuple[pure.VerificationSettings, int, int]:
    """The thresholds, and the before window's and the wait's length in days."""
    config = dict(settings.PORTAL_TICKET_VERIFICATION)
    before_days = int(config.pop("before_days", 7))
    max_days = int(config.pop("max_days", 14))
    known = set(pure.VerificationSettings.__dataclass_fields__)
    return pure.VerificationSettings(**{k: v for k, v in config.items() if k in known}), before_days, max_days


@dataclass
class _Run:
    """What one run of the family shows."""

    pk: int
    external_id: str
    start: datetime
    gpus: float
    held_gpu_s: float = 0.0
    activity: list[float] = field(default_factory=list)
    activity_gpu_s: float = 0.0  # SM- (or engine-) active GPU-seconds
    series: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    first: tuple[float, int] | None = None  # (unix time, consumed samples) of the first line
    last: tuple[float, int] | None = None


@dataclass
class WindowData:
    """One window: its span, its runs, and the ``Window`` the pure verdict reads."""

    start: datetime
    end: datetime
    runs: list[_Run]
    window: pure.Window = field(default_factory=pure.Window)
    metric: str | None = None

    def info(self) -> dict:
        return {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "jobs": len(self.runs),
            "gpu_hours": round(self.window.gpu_hours, 3),
            "iteration_lines": len(self.window.iteration_s),
            "activity_hours": len(self.window.sm_activity),
            "work_units": self.window.work_units,
        }

    def series(self) -> list[dict]:
        points = []
        for run in sorted(self.runs, key=lambda r: r.start)[-MAX_SERIES_POINTS:]:
            values = run.series.get(self.metric or "", [])
            points.append(
                {
                    "job": run.external_id,
                    "start": run.start.isoformat(),
                    "iteration": _round(statistics.median(values)) if values else None,
                    "sm_activity": _round(run.activity_gpu_s / run.held_gpu_s)
                    if run.held_gpu_s > 0
                    else None,
                    "gpu_hours": round(run.held_gpu_s / 3600, 3),
                }
            )
        return points


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


# --- Reading ---------------------------------------------------------------------------------


def _family_runs(ticket: Ticket, *, since: datetime, now: datetime) -> list[dict]:
    """The family's runs that started before ``now`` and ran after ``since``, of the compared shapes."""
    department_id = ticket.recommendation.department_id if ticket.recommendation_id else ticket.department_id
    rows = Job.objects.filter(
        department_id=department_id,
        user_name=ticket.family_user,
        started_at__isnull=False,
        started_at__lt=now,
    ).filter(Q(ended_at__isnull=True) | Q(ended_at__gte=since))
    shapes = set(ticket.jobs.values_list("node_count", flat=True))
    return [
        row
        for row in rows.values(
            "pk", "external_id", "name", "gpu_count", "gpu_milli", "node_count", "started_at"
        )
        if name_pattern(row["name"]) == ticket.family_pattern and (not shapes or row["node_count"] in shapes)
    ]


def _runs(rows: list[dict]) -> dict[int, _Run]:
    return {
        row["pk"]: _Run(
            pk=row["pk"],
            external_id=row["external_id"],
            start=row["started_at"],
            gpus=max((row["gpu_milli"] or row["gpu_count"] * 1000) / 1000, 1e-3),
        )
        for row in rows
    }


def _read_hours(runs: dict[int, _Run], *, since: datetime | None) -> None:
    hours = JobHour.objects.filter(job_id__in=list(runs), allocated_gpu_s__gt=0)
    if since is not None:
        hours = hours.filter(hour__gte=since)
    for job_id, allocated, busy, sm in hours.values_list(
        "job_id", "allocated_gpu_s", "busy_gpu_s", "sm_active_busy_gpu_s"
    ):
        allocated, busy, sm = float(allocated or 0.0), float(busy or 0.0), float(sm or 0.0)
        if not math.isfinite(allocated) or allocated <= 0:
            continue
        # SM activity where the exporter reports it, else engine activity (as the rules read it).
        active = sm if sm > 0 or busy == 0 else busy
        if not math.isfinite(active):
            continue
        run = runs[job_id]
        run.held_gpu_s += allocated
        run.activity_gpu_s += active
        run.activity.append(min(1.0, max(0.0, active / allocated)))


def _unix_time(text: str) -> float | None:
    match = _STAMP.search(text)
    if not match:
        return None
    try:
        return datetime(*(int(part) for part in match.groups()), tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _read_line(run: _Run, line: str) -> None:
    data = None
    for metric in METRICS:
        literal = metric.literal.decode()
        at = line.find(literal)
        if at < 0 or len(run.series[metric.key]) >= MAX_LINES_PER_JOB:
            continue
        if data is None:
            data = line.encode()
        value = metric_value(data, metric, len(line[:at].encode()), 0)
        if value is None or not math.isfinite(value) or value <= 0:
            continue
        if metric.key in _TIME_SHAPES:
            value *= _TIME_SHAPES[metric.key]
        elif metric.higher_is_faster:
            value = 1.0 / value  # a rate: time per iteration (or per sample, at the family's batch)
        if MIN_ITERATION_S <= value <= MAX_ITERATION_S:  # else a junk number, not a time
            run.series[metric.key].append(value)
    consumed = _CONSUMED.search(line)
    if consumed:
        at_s = _unix_time(line)
        if at_s is not None:
            point = (at_s, int(consumed[1]))
            if run.first is None or point < run.first:
                run.first = point
            if run.last is None or point > run.last:
                run.last = point


def _read_logs(runs: dict[int, _Run]) -> None:
    if not runs:
        return
    has_metric = Q()
    for literal in _LITERALS:
        has_metric |= Q(text__contains=literal)
    chunks = (
        LogChunk.objects.filter(job_id__in=list(runs))
        .filter(has_metric)
        .order_by("-pk")
        .values_list("job_id", "text")[:MAX_CHUNKS]
    )
    read = 0
    for job_id, text in chunks.iterator(chunk_size=200):
        read += len(text or "")
        if read > MAX_LOG_CHARS:
            break
        run = runs[job_id]
        for line in (text or "").split("\n"):
            if any(literal in line for literal in _LITERALS) or "consumed samples" in line:
                _read_line(run, line)


def _work_units(runs: list[_Run], gpu_hours: float) -> float | None:
    """Samples the window's runs did, from their rates (module docstring); None where unknown."""
    done, covered_s = 0.0, 0.0
    for run in runs:
        if run.first is None or run.last is None or run.held_gpu_s <= 0:
            continue
        seconds, samples = run.last[0] - run.first[0], run.last[1] - run.first[1]
        if seconds <= 0 or samples <= 0:
            continue
        done += samples / seconds * run.held_gpu_s / run.gpus
        covered_s += run.held_gpu_s
    total_s = gpu_hours * 3600
    if total_s <= 0 or done <= 0 or covered_s < MIN_WORK_COVERAGE * total_s:
        return None
    return done * total_s / covered_s  # the uncovered GPU-hours at the covered runs' rate


def _window(
    runs: dict[int, _Run], start: datetime, end: datetime, *, hours_since: datetime | None
) -> WindowData:
    _read_hours(runs, since=hours_since)
    _read_logs(runs)
    return WindowData(start=start, end=end, runs=list(runs.values()))


def _choose_metric(before: WindowData, after: WindowData) -> str | None:
    """The log shape both windows print most (else the one the before window prints most)."""
    counts = {}
    for key in {key for run in before.runs for key, values in run.series.items() if values}:
        before_n = sum(len(run.series.get(key, ())) for run in before.runs)
        after_n = sum(len(run.series.get(key, ())) for run in after.runs)
        counts[key] = (min(before_n, after_n), before_n)
    return max(sorted(counts), key=lambda key: counts[key]) if counts else None


def _finish(data: WindowData, metric: str | None) -> None:
    data.metric = metric
    gpu_hours = sum(run.held_gpu_s for run in data.runs) / 3600
    data.window = pure.Window(
        iteration_s=[v for run in data.runs for v in run.series.get(metric or "", ())],
        sm_activity=[v for run in data.runs for v in run.activity],
        wait_share=(),  # no data-wait measure yet
        gpu_hours=gpu_hours,
        work_units=_work_units(data.runs, gpu_hours),
    )


def ticket_windows(ticket: Ticket, now: datetime | None = None) -> tuple[WindowData, WindowData]:
    """The family's window before the fix and after it (module docstring)."""
    now = now or timezone.now()
    _, before_days, _ = verification_settings()
    resolved = ticket.resolved_at or now
    before_start = resolved - timedelta(days=before_days)
    rows = _family_runs(ticket, since=before_start, now=now) if ticket.family_pattern else []
    before = _window(
        _runs([row for row in rows if row["started_at"] < resolved]),
        before_start,
        resolved,
        hours_since=before_start,
    )
    after = _window(
        _runs([row for row in rows if row["started_at"] >= resolved]),
        resolved,
        max(now, resolved),
        hours_since=None,
    )
    metric = _choose_metric(before, after)
    _finish(before, metric)
    _finish(after, metric)
    return before, after


# --- Deciding --------------------------------------------------------------------------------


def _pct(share: float | None) -> float | None:
    return _round(100 * share, 3) if share is not None and math.isfinite(share) else None


def _record(
    ticket: Ticket, verdict: pure.Verdict, before: WindowData, after: WindowData, *, now, reason=""
) -> dict:
    deciding = verdict.comparison(verdict.primary) if verdict.primary else None
    data = verdict.as_json()
    return {
        "outcome": verdict.outcome,
        "reason": reason,
        "metric": verdict.primary,
        "iteration_metric": before.metric,
        "before": _round(deciding.before) if deciding else None,
        "after": _round(deciding.after) if deciding else None,
        "gain_pct": _pct(verdict.measured_gain_share),
        "interval_low_pct": _pct(verdict.gain_low),
        "interval_high_pct": _pct(verdict.gain_high),
        "confidence": verdict.confidence,
        "noise_band_pct": _pct(verdict.noise_band),
        "expected_gain_pct": ticket.expected_gain_pct,
        "shortfalls": data["shortfalls"],
        "comparisons": [
            {key: (_round(value) if isinstance(value, float) else value) for key, value in row.items()}
            for row in data["comparisons"]
        ],
        "windows": {"before": before.info(), "after": after.info()},
        "series": {"before": before.series(), "after": after.series()},
        "started_at": (ticket.verification or {}).get("started_at")
        or (ticket.resolved_at.isoformat() if ticket.resolved_at else now.isoformat()),
        "checked_at": now.isoformat(),
    }


def ticket_verify(ticket: Ticket, now: datetime | None = None) -> Ticket:
    """Measure a verifying ticket's gain; move it when the verdict is in (module docstring)."""
    now = now or timezone.now()
    if ticket.state != TicketState.VERIFYING:
        return ticket
    rules, _, max_days = verification_settings()
    before, after = ticket_windows(ticket, now)
    expected = ticket.expected_gain_pct / 100 if ticket.expected_gain_pct is not None else None
    verdict = pure.verify(before.window, after.window, expected_gain_share=expected, settings=rules)
    outcome, reason = verdict.outcome, ""
    waited = now - (ticket.resolved_at or now)
    if outcome == pure.VERIFYING and waited >= timedelta(days=max_days):
        outcome, reason = pure.NO_GAIN, "timed_out"
    record = _record(ticket, verdict, before, after, now=now, reason=reason)
    if outcome == pure.VERIFYING:
        # The measurement's progress is no move of the ticket: stored without an audit entry
        # (one every 15 minutes would bury the ticket's history).
        Ticket.objects.filter(pk=ticket.pk).update(verification=record, updated_at=now)
        ticket.verification, ticket.updated_at = record, now
        return ticket
    record["outcome"] = outcome
    return ticket_transition(
        ticket,
        ACTION_OF[outcome],
        user=None,
        actor="portal",
        now=now,
        verification=record,
        reason="verification: not enough data" if reason else "",
    )


def tickets_verify(now: datetime | None = None) -> dict[str, int]:
    """Verify every ticket in *verifying*; one ticket's odd data never stops the others."""
    now = now or timezone.now()
    counts: dict[str, int] = defaultdict(int)
    for ticket in Ticket.objects.filter(state=TicketState.VERIFYING).select_related("recommendation"):
        try:
            ticket = ticket_verify(ticket, now)
        except Exception:
            logger.exception("Verification of ticket %s failed; tried again next run", ticket.pk)
            counts["failed"] += 1
            continue
        counts[ticket.state] += 1
    return dict(counts)
