"""Fault pages: cluster fault timeline and figures, incident pages with evidence and actions, reports."""

import json

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from efficiency.analysis.faults.signatures import SIGNATURES_BY_ID
from efficiency.charts import faults as charts
from efficiency.charts import usage as usage_charts
from efficiency.charts.toolkit import duration_text
from efficiency.choices import FaultCategory, Severity
from efficiency.permissions import FAULT_OPERATORS as OPERATORS
from efficiency.permissions import FAULT_READERS as VIEWERS
from efficiency.permissions import has_role
from efficiency.selectors import faults as selectors
from efficiency.selectors.inventory import node_get
from efficiency.services import faults as services
from efficiency.views.helpers import csv_response, get_or_404, role_required
from efficiency.views.usage import range_or_400


def category_labels() -> dict[str, str]:
    return {category.value: str(category.label) for category in FaultCategory}


@role_required(*VIEWERS)
def fault_overview_view(request: HttpRequest) -> HttpResponse:
    """Incidents over a range: the node × time timeline, MTTR and ETTR, by category and domain."""
    template = "efficiency/faults/overview.html"
    form, time_range, invalid = range_or_400(request, template)
    if invalid:
        return invalid
    incidents = list(selectors.incident_list(user=request.user, time_range=time_range))
    if request.GET.get("export") == "csv":
        return incidents_csv(incidents)
    summary = selectors.fault_summary(incidents)
    labels = category_labels()
    # Configuration findings (NCCL on sockets) are evidence for the config audit, not faults.
    signals = list(
        selectors.fault_signal_list(user=request.user, time_range=time_range).exclude(
            category__in=services.NOT_INCIDENTS
        )[:20_000]
    )
    rows = sorted({s.node.hostname for s in signals if s.node})
    context = {
        "range_form": form,
        "time_range": time_range,
        "incidents": incidents[:200],
        "has_evidence": any(s.node for s in signals),
        "summary": summary,
        "durations": {
            "mttr": duration_text(summary.mttr_median_s),
            "detect": duration_text(summary.detect_median_s),
            "locate": duration_text(summary.locate_median_s),
        },
        "timeline_figure": charts.fault_timeline_figure(
            [
                charts.TimelinePoint(
                    row=s.node.hostname,
                    time=timezone.localtime(s.occurred_at),
                    category=s.category,
                    severity=s.severity,
                    text=s.text[:160],
                    incident_id=s.incident_id,
                )
                for s in signals
                if s.node
            ],
            row_order=rows,
            category_labels=labels,
            severity_labels={severity.value: str(severity.label) for severity in Severity},
            title=_("Fault timeline: evidence per node"),
            axis_label=_("Time"),
        ),
    }
    if summary.by_category:
        by_category = summary.by_category.most_common()
        context["category_figure"] = charts.count_bar_figure(
            [labels.get(key, key) for key, _count in by_category],
            [count for _key, count in by_category],
            title=_("Incidents by root cause"),
            axis_label=_("Incidents"),
        )
        by_domain = summary.by_fault_domain.most_common()
        domain_labels = {None: _("Not located yet"), "": _("No fault domain")}
        context["domain_figure"] = charts.count_bar_figure(
            [domain_labels.get(key, key) for key, _count in by_domain],
            [count for _key, count in by_domain],
            title=_("Incidents by fault domain"),
            axis_label=_("Incidents"),
        )
        trend = selectors.fault_daily_trend(incidents)
        context["trend_figure"] = charts.mttr_trend_figure(
            [point.day for point in trend],
            [_minutes(point.mttr_median_s) for point in trend],
            [_minutes(point.detect_median_s) for point in trend],
            [_minutes(point.locate_median_s) for point in trend],
            title=_("Median time to recover, detect and locate, per day"),
            mttr_label=_("MTTR"),
            detect_label=_("Time to detect"),
            locate_label=_("Time to locate"),
            axis_label=_("Minutes"),
        )
        context["ettr_trend_figure"] = len(trend) > 1 and usage_charts.utilization_trend_figure(
            [point.day for point in trend],
            {_("ETTR"): [None if p.ettr_median is None else round(p.ettr_median * 100, 1) for p in trend]},
            title=_("Median effective training time ratio of the jobs hit, per day"),
            axis_label=_("ETTR (%)"),
        )
        ettrs = selectors.ettr_list(incidents, now=timezone.now())
        if ettrs:
            context["ettr_figure"] = charts.ettr_figure(
                [f"{job.external_id} {job.name}"[:60] for job, _ratio in ettrs],
                [round(ratio * 100, 1) for _job, ratio in ettrs],
                title=_("Effective training time ratio of the jobs hit (lowest first)"),
                axis_label=_("ETTR (%)"),
            )
    return render(request, template, context)


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 60, 1)


def incidents_csv(incidents) -> HttpResponse:
    return csv_response(
        "incidents.csv",
        [
            _("Incident"),
            _("Root cause"),
            _("Code"),
            _("Severity"),
            _("Status"),
            _("Evidence"),
            _("Job"),
            _("Department"),
            _("Node"),
            _("Rank"),
            _("Occurred"),
            _("Detected"),
            _("Located"),
            _("Restart requested"),
            _("Recovered"),
            _("MTTR (s)"),
            _("GPU-hours lost"),
        ],
        [
            [
                i.pk,
                i.get_category_display(),
                i.code,
                i.get_severity_display(),
                i.get_status_display(),
                _("confirmed") if i.confirmed else _("suspicion"),
                i.job.external_id if i.job else "",
                i.department.name if i.department else "",
                i.node.hostname if i.node else "",
                i.rank,
                i.occurred_at.isoformat(),
                i.detected_at.isoformat(),
                i.located_at.isoformat() if i.located_at else "",
                i.restart_requested_at.isoformat() if i.restart_requested_at else "",
                i.recovered_at.isoformat() if i.recovered_at else "",
                i.mttr_s,
                None if i.gpu_hours_lost is None else round(i.gpu_hours_lost, 2),
            ]
            for i in incidents
        ],
    )


def incident_phases(incident) -> list[tuple[str, object, object]]:
    """The phases to draw: an incident without a job has nothing to restart or recover."""
    phases = [
        (_("Detect"), incident.occurred_at, incident.detected_at),
        (_("Locate"), incident.detected_at, incident.located_at),
    ]
    if incident.job_id is None:
        return phases
    return [
        *phases,
        (_("Restart"), incident.located_at or incident.detected_at, incident.restart_requested_at),
        (_("Recover"), incident.restart_requested_at or incident.located_at, incident.recovered_at),
    ]


def incident_context(request: HttpRequest, incident) -> dict:
    phases = [
        (name, timezone.localtime(start), timezone.localtime(end) if end else None)
        for name, start, end in incident_phases(incident)
        if start is not None
    ]
    ettr = selectors.job_ettr(incident.job, [incident], now=timezone.now()) if incident.job else None
    signature = SIGNATURES_BY_ID.get(incident.root_signature_id)
    can_operate = has_role(request.user, OPERATORS)
    operations = services.incident_operations(incident=incident) if can_operate else {}
    # A finished incident's phases stop where it ended; an open one's last phase runs to now.
    ended = incident.recovered_at or incident.closed_at
    return {
        "recommended_action": _(signature.action) if signature else "",
        "incident": incident,
        "signals": list(incident.signals.all()),
        "actions": list(incident.actions.all()),
        "can_operate": can_operate,
        "offered": {name for name, why_not in operations.items() if why_not is None},
        "phases_figure": charts.incident_phases_figure(
            phases,
            title=_("Phases"),
            now=timezone.localtime(ended) if ended else timezone.localtime(),
            duration_text=duration_text,
        ),
        "durations": {
            "detect": duration_text(incident.time_to_detect_s),
            "locate": duration_text(incident.time_to_locate_s),
            "mttr": duration_text(incident.mttr_s),
        },
        "ettr": ettr,
    }


def job_faults_context(request: HttpRequest, job) -> dict:
    """A job's incidents, their phases on one timeline, and the job's ETTR."""
    incidents = list(selectors.incident_list(user=request.user).filter(job=job).order_by("occurred_at"))
    if not incidents:
        return {"job_incidents": []}
    phases = []
    for number, incident in enumerate(incidents, start=1):
        for name, start, end in incident_phases(incident):
            if start is not None:
                label = f"#{number} {name}"
                phases.append((label, timezone.localtime(start), timezone.localtime(end) if end else None))
    return {
        "job_incidents": incidents,
        "job_ettr": selectors.job_ettr(job, incidents, now=timezone.now()),
        "job_phases_figure": charts.incident_phases_figure(
            phases,
            title=_("Incidents of this job, phase by phase"),
            now=job.ended_at and timezone.localtime(job.ended_at),
            duration_text=duration_text,
        ),
    }


@role_required(*VIEWERS)
def incident_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_or_404(selectors.incident_get, user=request.user, pk=pk)
    return render(request, "efficiency/faults/incident_detail.html", incident_context(request, incident))


@role_required(*VIEWERS)
def incident_report_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The fault report: printable HTML, or Markdown / JSON to attach to a ticket."""
    incident = get_or_404(selectors.incident_get, user=request.user, pk=pk)
    context = incident_context(request, incident)
    fmt = request.GET.get("format")
    if fmt == "json":
        response = HttpResponse(json.dumps(report_data(incident), indent=2), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="incident-{incident.pk}.json"'
        return response
    if fmt == "md":
        text = render(request, "efficiency/faults/report.md", context, content_type="text/markdown").content
        response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="incident-{incident.pk}.md"'
        return response
    return render(request, "efficiency/faults/report.html", context)


def report_data(incident) -> dict:
    def when(moment):
        return moment.isoformat() if moment else None

    return {
        "incident": incident.pk,
        "root_cause": incident.category,
        "code": incident.code,
        "severity": incident.severity,
        "signature": incident.root_signature_id,
        "job": incident.job.external_id if incident.job else None,
        "department": incident.department.code if incident.department else None,
        "node": incident.node.hostname if incident.node else None,
        "fault_domain": incident.node.fault_domain if incident.node else None,
        "rank": incident.rank,
        "phases": {
            "occurred": when(incident.occurred_at),
            "detected": when(incident.detected_at),
            "located": when(incident.located_at),
            "restart_requested": when(incident.restart_requested_at),
            "recovered": when(incident.recovered_at),
        },
        "status": incident.status,
        "closed": {
            "at": when(incident.closed_at),
            "by": incident.closed_by.get_username() if incident.closed_by else None,
            "reason": incident.close_reason,
        }
        if incident.closed_at
        else None,
        "mttr_s": incident.mttr_s,
        "gpu_hours_lost": incident.gpu_hours_lost,
        "how_located": incident.reasoning,
        "evidence": [
            {
                "occurred": when(s.occurred_at),
                "signature": s.signature_id,
                "category": s.category,
                "node": s.node.hostname if s.node else None,
                "rank": s.rank,
                "where": s.location,
                "line": s.text,
            }
            for s in incident.signals.all()
        ],
        "actions": [
            {
                "kind": a.kind,
                "actuator": a.actuator,
                "dry_run": a.dry_run,
                "ok": a.ok,
                "summary": a.text,
                "by": a.actor.get_username() if a.actor else None,
                "at": when(a.requested_at),
            }
            for a in incident.actions.all()
        ],
    }


SUCCESS = {
    services.ISOLATE: gettext_lazy("Node isolated."),
    services.RESTART: gettext_lazy("Restart requested."),
    services.RETURN_TO_SERVICE: gettext_lazy("Node returned to service."),
}


def _say_outcome(request: HttpRequest, operation: str, actions) -> None:
    """Tell what came of an action: done, only a dry run (nothing changed), or not done."""
    if any(action.ok and not action.dry_run for action in actions):
        messages.success(request, SUCCESS[operation])
    elif actions and all(action.dry_run for action in actions):
        messages.info(request, _("Dry run: nothing was changed. The actions log shows what would have run."))
    else:
        messages.error(request, _("It was not done: the actions log says why."))


@require_POST
@role_required(*OPERATORS)
def incident_action_view(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """A platform admin isolates the node, requests a restart, returns the node to service, or
    closes the incident (with a reason); what does not apply now is refused with the reason."""
    incident = get_or_404(selectors.incident_get, user=request.user, pk=pk)
    if action not in services.OPERATIONS:
        raise Http404(action)
    try:
        actions = services.incident_operation_run(
            incident=incident, operation=action, actor=request.user, reason=request.POST.get("reason", "")
        )
    except services.IncidentActionRefused as refused:
        messages.error(request, refused.reason)
        return redirect("efficiency:incident-detail", pk=incident.pk)
    if action == services.CLOSE:
        messages.success(request, _("Incident closed."))
    else:
        _say_outcome(request, action, actions)
    return redirect("efficiency:incident-detail", pk=incident.pk)


@require_POST
@role_required(*OPERATORS)
def node_return_view(request: HttpRequest, pk: int) -> HttpResponse:
    """A platform admin puts an isolated node back into service from its page."""
    node = get_or_404(node_get, user=request.user, pk=pk)
    try:
        _say_outcome(
            request,
            services.RETURN_TO_SERVICE,
            services.node_return_to_service(node=node, actor=request.user),
        )
    except services.IncidentActionRefused as refused:
        messages.error(request, refused.reason)
    return redirect("efficiency:node-detail", pk=node.pk)
