"""Ticket pages: the board (every ticket the user sees, by state, overdue first), "My tickets", a
ticket with its actions, edits, comments, history and verification, and opening a ticket by hand
or as an incident's follow-up.

Every change goes through ``efficiency.services.tickets``; what it refuses (``TicketRefused``) is
shown on the page beside the field it is about, with the status it names, and nothing is written.
"""

from datetime import date, datetime, timedelta

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from efficiency.analysis.tickets.workflow import REASON_REQUIRED
from efficiency.charts import tickets as charts
from efficiency.choices import TicketAction, TicketOrigin, TicketSeverity, TicketState
from efficiency.filters import TicketFilter
from efficiency.forms import TicketCommentForm, TicketCreateForm, TicketEditForm, TicketMoveForm
from efficiency.permissions import TICKET_CREATORS as CREATORS
from efficiency.permissions import TICKET_READERS as READERS
from efficiency.selectors import tickets as selectors
from efficiency.selectors.faults import incident_get
from efficiency.services import tickets as services
from efficiency.views.helpers import (
    PAGE_SIZE,
    choice_label,
    csv_filename,
    csv_response,
    get_or_404,
    role_required,
)

HEAD_EDITABLE = ("assignee",)
# "Due soon" is counted in business hours; a ticket further than this (wall-clock) from its due
# date is not due soon on any calendar: a week of holidays and weekends, plus the hours themselves
# spread over short working days.
DUE_SOON_HORIZON = timedelta(days=21)


def _due_soon_ids(user, now: datetime) -> list[int]:
    horizon = DUE_SOON_HORIZON + timedelta(hours=5 * settings.PORTAL_TICKET_DUE_SOON_HOURS)
    return [
        ticket.pk
        for ticket in selectors.ticket_sla_candidates(user=user, now=now, horizon=horizon)
        if services.sla_status(ticket, now) == services.DUE_SOON
    ]


SLA_LABELS = {
    services.OVERDUE: gettext_lazy("Overdue"),
    services.DUE_SOON: gettext_lazy("Due soon"),
    services.OK: gettext_lazy("On time"),
}


def _csv_columns(now: datetime):
    return [
        (gettext_lazy("Ticket"), lambda t: t.pk),
        (gettext_lazy("Title"), lambda t: t.title),
        (gettext_lazy("State"), lambda t: choice_label(TicketState, t.state)),
        (gettext_lazy("Department"), lambda t: t.department.code),
        (gettext_lazy("Assignee"), lambda t: t.assignee.get_username() if t.assignee else ""),
        (gettext_lazy("Severity"), lambda t: choice_label(TicketSeverity, t.severity)),
        (gettext_lazy("Origin"), lambda t: choice_label(TicketOrigin, t.origin)),
        (gettext_lazy("Due"), lambda t: t.due_at),
        (gettext_lazy("Due date"), lambda t: SLA_LABELS.get(services.sla_status(t, now), "")),
        (gettext_lazy("Waiting since"), lambda t: t.paused_at),
        (gettext_lazy("Recommendation"), lambda t: t.recommendation_id),
        (gettext_lazy("Incident"), lambda t: t.incident_id),
        (gettext_lazy("Committee meeting"), lambda t: t.meeting),
        (gettext_lazy("Expected gain (%)"), lambda t: _rounded(t.expected_gain_pct)),
        (gettext_lazy("Measured gain (%)"), lambda t: _rounded(t.measured_gain_pct)),
        (gettext_lazy("Created"), lambda t: t.created_at),
        (gettext_lazy("Resolved"), lambda t: t.resolved_at),
        (gettext_lazy("Closed"), lambda t: t.closed_at),
    ]


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


# --- The board ---------------------------------------------------------------------------------------


@role_required(*READERS)
def ticket_board_view(request: HttpRequest) -> HttpResponse:
    """Every ticket the user may see, grouped by state, overdue first then soonest due; filtered as
    the URL says; ``?export=csv`` downloads every filtered row."""
    now = timezone.now()
    return _board(request, selectors.ticket_board(user=request.user, now=now), now=now, mine=False)


@role_required(*READERS)
def ticket_mine_view(request: HttpRequest) -> HttpResponse:
    """The board of the tickets assigned to the user."""
    now = timezone.now()
    board = selectors.ticket_board(user=request.user, now=now).filter(assignee=request.user)
    return _board(request, board, now=now, mine=True)


def _board(request: HttpRequest, board, *, now: datetime, mine: bool) -> HttpResponse:
    due_soon = _due_soon_ids(request.user, now)
    filterset = TicketFilter(request.GET, queryset=board, request=request, due_soon_ids=due_soon)
    valid = filterset.is_valid()
    rows = filterset.qs if valid else board.none()
    if valid and request.GET.get("export") == "csv":
        columns = _csv_columns(now)
        return csv_response(
            csv_filename("my-tickets" if mine else "tickets", now),
            [header for header, _accessor in columns],
            ([accessor(t) for _header, accessor in columns] for t in rows.iterator(chunk_size=2000)),
        )
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    page.object_list = list(page.object_list)
    for ticket in page.object_list:
        ticket.sla = services.sla_status(ticket, now)
    context = {
        "filterset": filterset,
        "page": page,
        "mine": mine,
        "grouped": not request.GET.get("sort"),
        "state_links": _state_links(request, board, due_soon) if valid else [],
        "may_create": services.creatable_departments(request.user).exists(),
        "now": now,
    }
    return render(request, "efficiency/tickets/board.html", context, status=200 if valid else 400)


def _state_links(request: HttpRequest, board, due_soon: list[int]) -> list[dict]:
    """One link per state with its count under the other filters (the state filter replaced)."""
    query = request.GET.copy()
    for name in ("state", "page", "export"):
        query.pop(name, None)
    others = TicketFilter(query, queryset=board, request=request, due_soon_ids=due_soon)
    counts = selectors.ticket_state_counts(others.qs) if others.is_valid() else {}
    chosen = set(request.GET.getlist("state"))
    links = []
    for value, label in TicketState.choices:
        params = query.copy()
        params.setlist("state", [value])
        links.append(
            {
                "value": value,
                "label": label,
                "count": counts.get(value, 0),
                "url": "?" + params.urlencode(),
                "active": value in chosen,
            }
        )
    return links


# --- A ticket --------------------------------------------------------------------------------------


def _edit_form(request, ticket, data=None) -> TicketEditForm:
    editable = services.EDITABLE if services.may_manage(request.user) else HEAD_EDITABLE
    initial = {
        "title": ticket.title,
        "description": ticket.description,
        "severity": ticket.severity,
        "assignee": ticket.assignee.get_username() if ticket.assignee else None,
        "due_at": ticket.due_at,
        "meeting": ticket.meeting,
    }
    return TicketEditForm(
        data,
        initial=initial,
        editable=editable,
        assignees=services.assignee_candidates(ticket.department).order_by("username"),
        severities=TicketSeverity.choices,
    )


def _detail(
    request: HttpRequest,
    ticket,
    *,
    status: int = 200,
    edit_form: TicketEditForm | None = None,
    comment_form: TicketCommentForm | None = None,
    move_action: str | None = None,
    move_error: str | None = None,
) -> HttpResponse:
    now = timezone.now()
    manager = services.may_manage(request.user)
    actions = [
        {
            "value": action,
            "label": choice_label(TicketAction, action),
            "needs_reason": action in REASON_REQUIRED,
            "error": move_error if action == move_action else None,
        }
        for action in services.ticket_actions(ticket, request.user)
    ]
    context = {
        "ticket": ticket,
        "sla": services.sla_status(ticket, now),
        "now": now,
        "links": selectors.ticket_links(user=request.user, ticket=ticket),
        "actions": actions,
        "move_error": move_error if move_action not in {a["value"] for a in actions} else None,
        "edit_form": edit_form or _edit_form(request, ticket),
        "comment_form": comment_form or TicketCommentForm(),
        "may_manage": manager,
        "comments": list(services.visible_comments(ticket, request.user)),
        "history": selectors.ticket_history(ticket=ticket),
        "verification": _verification(ticket),
        "max_comment": services.MAX_COMMENT,
    }
    if context["verification"]:
        context["verification_figure"] = _verification_figure(context["verification"])
    return render(request, "efficiency/tickets/detail.html", context, status=status)


@role_required(*READERS)
def ticket_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    ticket = get_or_404(selectors.ticket_get, user=request.user, pk=pk)
    return _detail(request, ticket)


def _refused(refused: services.TicketRefused) -> None:
    if refused.status == 404:
        raise Http404(refused.message)


@require_POST
@role_required(*READERS)
def ticket_move_view(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """Move the ticket by ``action`` (``ticket_actions``); a reason where the move needs one."""
    ticket = get_or_404(selectors.ticket_get, user=request.user, pk=pk)
    form = TicketMoveForm(request.POST)
    form.is_valid()
    try:
        ticket = services.ticket_transition(
            ticket, action, user=request.user, reason=form.cleaned_data.get("reason", "")
        )
    except services.TicketRefused as refused:
        _refused(refused)
        return _detail(request, ticket, status=refused.status, move_action=action, move_error=refused.message)
    messages.success(
        request,
        _("Ticket #%(id)d is now %(state)s.")
        % {"id": ticket.pk, "state": ticket.get_state_display().lower()},
    )
    return redirect("efficiency:ticket-detail", pk=ticket.pk)


def _changes(form: TicketEditForm, ticket) -> dict:
    """The fields the form changes (an untouched due date in the past is no change)."""
    changes = {}
    for name, value in form.cleaned_data.items():
        if name == "assignee":
            if (value.pk if value else None) != ticket.assignee_id:
                changes[name] = value
        elif name == "due_at":
            if value is not None and abs(value - ticket.due_at) >= timedelta(minutes=1):
                changes[name] = value
            elif value is None:
                changes[name] = None
        elif value != getattr(ticket, name):
            changes[name] = value
    return changes


@require_POST
@role_required(*READERS)
def ticket_edit_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Change the ticket's fields: every editable one for the committee and platform admins, the
    assignee (within the department) for a head."""
    ticket = get_or_404(selectors.ticket_get, user=request.user, pk=pk)
    form = _edit_form(request, ticket, request.POST)
    if not form.is_valid():
        return _detail(request, ticket, status=400, edit_form=form)
    changes = _changes(form, ticket)
    if not changes:
        messages.info(request, _("Nothing changed."))
        return redirect("efficiency:ticket-detail", pk=ticket.pk)
    try:
        services.ticket_update(ticket, user=request.user, **changes)
    except services.TicketRefused as refused:
        _refused(refused)
        form.add_error(refused.field if refused.field in form.fields else None, refused.message)
        return _detail(request, ticket, status=refused.status, edit_form=form)
    messages.success(request, _("Ticket #%(id)d saved.") % {"id": ticket.pk})
    return redirect("efficiency:ticket-detail", pk=ticket.pk)


@require_POST
@role_required(*READERS)
def ticket_comment_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Add a comment, or an internal note (committee and platform admins)."""
    ticket = get_or_404(selectors.ticket_get, user=request.user, pk=pk)
    form = TicketCommentForm(request.POST)
    if not form.is_valid():
        return _detail(request, ticket, status=400, comment_form=form)
    try:
        services.ticket_comment(
            ticket, user=request.user, text=form.cleaned_data["text"], internal=form.cleaned_data["internal"]
        )
    except services.TicketRefused as refused:
        _refused(refused)
        form.add_error(refused.field if refused.field in form.fields else None, refused.message)
        return _detail(request, ticket, status=refused.status, comment_form=form)
    messages.success(request, _("Comment added."))
    return redirect(reverse("efficiency:ticket-detail", args=[ticket.pk]) + "#comments")


# --- Opening a ticket ----------------------------------------------------------------------------------


def _incident_of(request: HttpRequest):
    raw = request.GET.get("incident")
    if not raw:
        return None
    if not raw.isdigit() or len(raw) > 12:
        raise Http404(raw)
    return get_or_404(incident_get, user=request.user, pk=int(raw))


def _incident_defaults(incident) -> dict:
    department = incident.department or (incident.node.owner_department if incident.node_id else None)
    place = (
        incident.node.hostname if incident.node_id else (incident.job.external_id if incident.job_id else "?")
    )
    severity = {"critical": TicketSeverity.CRITICAL, "error": TicketSeverity.HIGH}.get(
        incident.severity, TicketSeverity.MEDIUM
    )
    return {
        "department": department.code if department else None,
        "title": _("Follow up incident #%(id)d: %(category)s on %(place)s")
        % {"id": incident.pk, "category": incident.get_category_display(), "place": place},
        "severity": severity,
    }


@role_required(*CREATORS)
def ticket_create_view(request: HttpRequest) -> HttpResponse:
    """Open a ticket by hand, or with ``?incident=<id>`` as an incident's follow-up (a bare POST
    from the incident's page opens it with the incident's defaults at once)."""
    incident = _incident_of(request)
    departments = services.creatable_departments(request.user).order_by("name")
    department_ids = list(departments.values_list("pk", flat=True))
    initial = _incident_defaults(incident) if incident else {"severity": TicketSeverity.MEDIUM}
    quick = incident is not None and request.method == "POST" and "title" not in request.POST

    def form_for(data):
        return TicketCreateForm(
            data,
            initial=initial,
            departments=departments,
            assignees=selectors.ticket_assignee_choices(department_ids=department_ids),
            severities=TicketSeverity.choices,
        )

    form = form_for(request.POST if request.method == "POST" and not quick else None)
    status = 200
    if request.method == "POST":
        if quick or form.is_valid():
            try:
                ticket = _create(request, form, incident, quick=quick)
            except services.TicketRefused as refused:
                _refused(refused)
                if quick:
                    form = form_for({name: value for name, value in initial.items() if value})
                    form.is_valid()
                form.add_error(refused.field if refused.field in form.fields else None, refused.message)
                status = refused.status
            else:
                messages.success(request, _("Ticket #%(id)d opened.") % {"id": ticket.pk})
                return redirect("efficiency:ticket-detail", pk=ticket.pk)
        else:
            status = 400
    context = {"form": form, "incident": incident, "has_departments": bool(department_ids)}
    return render(request, "efficiency/tickets/new.html", context, status=status)


def _create(request: HttpRequest, form: TicketCreateForm, incident, *, quick: bool):
    if quick:
        return services.ticket_from_incident(incident, user=request.user)
    data = form.cleaned_data
    fields = {
        "title": data["title"],
        "description": data["description"],
        "department": data["department"],
        "severity": data["severity"],
        "assignee": data["assignee"],
        "due_at": data["due_at"],
    }
    if incident is not None:
        return services.ticket_from_incident(incident, user=request.user, **fields)
    return services.ticket_create(user=request.user, **fields)


# --- Verification ----------------------------------------------------------------------------------------

OUTCOME_LABELS = {
    "verifying": gettext_lazy("Still measuring"),
    "verified_gain": gettext_lazy("Gain verified"),
    "no_gain": gettext_lazy("No gain measured"),
    "regressed": gettext_lazy("Regressed"),
}
# metric → (label, lower is better, shown in percent)
METRICS = {
    "iteration_s": (gettext_lazy("Seconds per iteration"), True, False),
    "gpu_h_per_unit": (gettext_lazy("GPU-hours per unit of work"), True, False),
    "sm_activity": (gettext_lazy("SM activity (%)"), False, True),
    "wait_share": (gettext_lazy("Time waiting on input (%)"), True, True),
}
SHORTFALL_LABELS = {
    "gpu_hours": gettext_lazy("GPU-hours of the job family since the fix"),
    "iterations": gettext_lazy("Iteration-time log lines since the fix"),
    "activity_hours": gettext_lazy("Hours with activity samples since the fix"),
    "before_metric": gettext_lazy("Measurements before the fix to compare with"),
}


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _day(value) -> date | datetime | None:
    if isinstance(value, date):
        return value
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value) if "T" in value else date.fromisoformat(value[:10])
    except ValueError:
        return None


def _series(window) -> list[tuple]:
    """A window's per-day values from whichever shape it was stored in: a list of
    ``{"day": …, "value": …}``, of ``[day, value]`` pairs, a ``{day: value}`` mapping, or parallel
    ``days`` and ``values`` lists."""
    if not isinstance(window, dict):
        return []
    if isinstance(window.get("days"), list) and isinstance(window.get("values"), list):
        pairs = list(zip(window["days"], window["values"], strict=False))
    else:
        raw = next(
            (window[key] for key in ("series", "per_day", "daily", "days") if key in window),
            [],
        )
        if isinstance(raw, dict):
            pairs = list(raw.items())
        elif isinstance(raw, list):
            pairs = []
            for row in raw:
                if isinstance(row, list | tuple) and len(row) >= 2:
                    pairs.append((row[0], row[1]))
                elif isinstance(row, dict):
                    day = next((row[k] for k in ("day", "date", "at", "start") if k in row), None)
                    value = next(
                        (row[k] for k in ("value", "median", "mean") if k in row),
                        next((v for k, v in row.items() if _number(v) is not None), None),
                    )
                    pairs.append((day, value))
        else:
            pairs = []
    points = [(_day(day), _number(value)) for day, value in pairs]
    return sorted((point for point in points if point[0] is not None), key=lambda point: str(point[0]))


def _windows(data: dict) -> dict:
    windows = data.get("windows")
    if isinstance(windows, list):
        named = {}
        for index, window in enumerate(windows):
            if isinstance(window, dict):
                named[window.get("name") or window.get("label") or ("before", "after")[min(index, 1)]] = (
                    window
                )
        windows = named
    if not isinstance(windows, dict):
        return {}
    return {name: windows.get(name) for name in ("before", "after") if isinstance(windows.get(name), dict)}


def _verification(ticket) -> dict | None:
    """The verification block's numbers, read defensively from ``ticket.verification``."""
    data = ticket.verification if isinstance(ticket.verification, dict) else {}
    if not data:
        return None
    metric = data.get("metric") or data.get("primary")
    comparison = next(
        (c for c in data.get("comparisons") or [] if isinstance(c, dict) and c.get("metric") == metric), {}
    )
    label, lower_is_better, in_percent = METRICS.get(metric, (metric or "", True, False))
    scale = 100.0 if in_percent else 1.0
    before = _number(data.get("before", comparison.get("before")))
    after = _number(data.get("after", comparison.get("after")))
    gain_pct = _number(data.get("gain_pct"))
    if gain_pct is None and _number(data.get("measured_gain_share")) is not None:
        gain_pct = 100 * data["measured_gain_share"]
    if gain_pct is None:
        gain_pct = ticket.measured_gain_pct
    low, high = _interval(data)
    shortfalls = [
        {
            "label": SHORTFALL_LABELS.get(row.get("what"), row.get("what", "")),
            "have": _number(row.get("have")),
            "need": _number(row.get("need")),
            "missing": _number(row.get("missing")),
        }
        for row in data.get("shortfalls") or []
        if isinstance(row, dict)
    ]
    windows = _windows(data)
    expected_pct = ticket.expected_gain_pct
    if expected_pct is None:
        expected_pct = _number(data.get("expected_gain_pct"))
    expected_share = expected_pct / 100 if expected_pct is not None else None
    expected_level = None
    if before is not None and expected_share is not None and expected_share < 1:
        expected_level = before * (1 - expected_share) if lower_is_better else before / (1 - expected_share)
    outcome = data.get("outcome") or ""
    return {
        "outcome": outcome,
        "outcome_label": OUTCOME_LABELS.get(outcome, outcome),
        "metric": metric,
        "metric_label": label,
        "scale": scale,
        "before": None if before is None else before * scale,
        "after": None if after is None else after * scale,
        "expected_level": None if expected_level is None else expected_level * scale,
        "gain_pct": gain_pct,
        "expected_gain_pct": expected_pct,
        "low": low,
        "high": high,
        "confidence": _number(data.get("confidence")),
        "shortfalls": shortfalls,
        "before_series": [
            (at, None if v is None else v * scale) for at, v in _points(data, windows, "before", metric)
        ],
        "after_series": [
            (at, None if v is None else v * scale) for at, v in _points(data, windows, "after", metric)
        ],
        "windows": [
            {
                "label": label_,
                "start": _day(windows[name].get("start")),
                "end": _day(windows[name].get("end")),
                "jobs": _number(windows[name].get("jobs")),
                "gpu_hours": _number(windows[name].get("gpu_hours")),
            }
            for name, label_ in (("before", _("Before the fix")), ("after", _("After the fix")))
            if name in windows
        ],
        "timed_out": data.get("reason") == "timed_out",
        "started_at": _day(data.get("started_at")),
        "checked_at": _day(data.get("checked_at")),
    }


def _interval(data: dict) -> tuple[float | None, float | None]:
    """The measured gain's interval in percent: ``interval_low_pct`` / ``interval_high_pct`` (the
    verification service's), else an ``interval`` in percent, else ``gain_low`` / ``gain_high`` shares."""
    low, high = _number(data.get("interval_low_pct")), _number(data.get("interval_high_pct"))
    if low is not None or high is not None:
        return low, high
    interval = data.get("interval")
    if isinstance(interval, dict):
        return _number(interval.get("low")), _number(interval.get("high"))
    if isinstance(interval, list | tuple) and len(interval) == 2:
        return _number(interval[0]), _number(interval[1])
    low, high = _number(data.get("gain_low")), _number(data.get("gain_high"))
    return (None if low is None else 100 * low), (None if high is None else 100 * high)


# The value of each run in the stored series, per deciding metric.
SERIES_KEYS = {"iteration_s": "iteration", "sm_activity": "sm_activity"}


def _points(data: dict, windows: dict, name: str, metric: str | None) -> list[tuple]:
    """The chart's points of one window: the verification's per-run series (``series``: one point
    per run, at its start) where it has the deciding metric, else a per-day series in the window."""
    series = data.get("series")
    if isinstance(series, dict) and isinstance(series.get(name), list):
        key = SERIES_KEYS.get(metric or "")
        if key is None:
            return []
        points = [
            (_day(row.get("start")), _number(row.get(key))) for row in series[name] if isinstance(row, dict)
        ]
        return sorted((point for point in points if point[0] is not None), key=lambda point: str(point[0]))
    return _series(windows.get(name))


def _verification_figure(verification: dict):
    before, after = verification["before_series"], verification["after_series"]
    if not before and not after:
        return None
    return charts.verification_figure(
        [_local(day) for day, _v in before],
        [value for _d, value in before],
        [_local(day) for day, _v in after],
        [value for _d, value in after],
        title=_("Before and after the fix"),
        metric_label=str(verification["metric_label"]),
        before_label=_("Before the fix"),
        after_label=_("After the fix"),
        before_level=verification["before"],
        after_level=verification["after"],
        expected_level=verification["expected_level"],
        expected_label=_("Expected after the fix"),
    )


def _local(moment):
    """A point's time in the display time zone (a day stays a day)."""
    if isinstance(moment, datetime) and moment.tzinfo is not None:
        return timezone.localtime(moment)
    return moment
