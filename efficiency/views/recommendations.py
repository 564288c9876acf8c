"""Recommendation pages: the list, the admins' review queue, a recommendation with its evidence
and decisions, and a department's "What to fix"."""

from datetime import date, timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from efficiency.charts import recommendations as charts
from efficiency.choices import Confidence, RecommendationState, RecommendationSubject
from efficiency.filters import RecommendationFilter
from efficiency.permissions import RECOMMENDATION_READERS as READERS
from efficiency.permissions import RECOMMENDATION_REVIEWERS as REVIEWERS
from efficiency.permissions import has_role
from efficiency.recommendation_messages import RULES, rule_title, subject_text
from efficiency.selectors import recommendations as selectors
from efficiency.selectors.inventory import department_get, department_list
from efficiency.services import recommendations as services
from efficiency.views.helpers import (
    choice_label,
    csv_filename,
    csv_response,
    get_or_404,
    render_filtered_list,
    role_required,
)

CSV_COLUMNS = [
    (gettext_lazy("Recommendation"), lambda rec: rec.pk),
    (gettext_lazy("Rule"), lambda rec: rec.rule),
    (gettext_lazy("Title"), lambda rec: rule_title(rec.rule)),
    (gettext_lazy("Subject"), lambda rec: choice_label(RecommendationSubject, rec.subject_kind)),
    (gettext_lazy("Department"), lambda rec: rec.department.code if rec.department else ""),
    (gettext_lazy("User"), lambda rec: rec.user_name),
    (gettext_lazy("Job name pattern"), lambda rec: rec.name_pattern),
    (gettext_lazy("Node"), lambda rec: rec.node.hostname if rec.node else ""),
    (gettext_lazy("State"), lambda rec: choice_label(RecommendationState, rec.state)),
    (gettext_lazy("Observed"), lambda rec: rec.observed),
    (gettext_lazy("Ideal"), lambda rec: rec.ideal),
    (gettext_lazy("Change"), lambda rec: rec.change),
    (gettext_lazy("Expected gain (GPU-h/week)"), lambda rec: round(rec.gain_gpu_h_week, 1)),
    (gettext_lazy("Expected gain (%)"), lambda rec: round(rec.gain_pct, 1)),
    (gettext_lazy("Confidence"), lambda rec: choice_label(Confidence, rec.confidence)),
    (gettext_lazy("Jobs"), lambda rec: rec.job_count),
    (gettext_lazy("First seen"), lambda rec: rec.first_seen),
    (gettext_lazy("Last seen"), lambda rec: rec.last_seen),
    (gettext_lazy("Closed"), lambda rec: rec.closed_at),
    (
        gettext_lazy("Assigned to"),
        lambda rec: rec.assignee_department.code if rec.assignee_department else "",
    ),
    (gettext_lazy("Snoozed until"), lambda rec: rec.snoozed_until),
    (
        gettext_lazy("Evidence"),
        lambda rec: " | ".join(f"{e.get('file')}:{e.get('line')}" for e in rec.evidence),
    ),
]


def _listing(request: HttpRequest, queryset, *, is_queue: bool) -> HttpResponse:
    return render_filtered_list(
        request,
        template="efficiency/recommendations/list.html",
        filterset_class=RecommendationFilter,
        queryset=queryset,
        context={"rules": RULES, "is_queue": is_queue},
        csv_columns=CSV_COLUMNS,
        csv_name="recommendation-queue" if is_queue else "recommendations",
    )


@role_required(*READERS)
def recommendation_list_view(request: HttpRequest) -> HttpResponse:
    """Every recommendation the user may see, filtered and sorted as the URL says; CSV export."""
    return _listing(request, selectors.recommendation_list(user=request.user), is_queue=False)


@role_required(*REVIEWERS)
def recommendation_queue_view(request: HttpRequest) -> HttpResponse:
    """The admins' review queue: proposed recommendations (and snoozed ones whose date has come),
    most GPU-hours to gain first."""
    return _listing(request, selectors.recommendation_queue(user=request.user), is_queue=True)


@role_required(*READERS)
def recommendation_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    rec = get_or_404(selectors.recommendation_get, user=request.user, pk=pk)
    window = selectors.recommendation_metric_window(user=request.user, recommendation=rec)
    context = {
        "rec": rec,
        "text": RULES.get(rec.rule),
        "subject": subject_text(rec),
        "evidence": selectors.recommendation_evidence(user=request.user, recommendation=rec),
        "decisions": list(rec.decisions.all()),
        "jobs": selectors.recommendation_jobs(user=request.user, recommendation=rec),
        "actions": services.recommendation_actions(rec, request.user),
        "departments": list(department_list(user=request.user).filter(is_active=True)),
        "min_snooze": (timezone.localdate() + timedelta(days=1)).isoformat(),
    }
    if window:
        context["window_figure"] = charts.metric_window_figure(
            [timezone.localtime(hour) for hour, *_rest in window],
            [round(held, 2) for _hour, held, _e, _s in window],
            [round(engine, 1) for _hour, _held, engine, _s in window],
            [None if sm is None else round(sm, 1) for _hour, _held, _e, sm in window],
            title=_("The family's GPUs and their activity, per hour"),
            held_label=_("GPUs held"),
            engine_label=_("Engine activity"),
            sm_label=_("SM activity"),
            ideal_pct=_ideal_activity(rec),
            ideal_label=_("Ideal activity"),
            gpus_axis=_("GPUs"),
            pct_axis=_("Activity (%)"),
        )
    return render(request, "efficiency/recommendations/detail.html", context)


def _ideal_activity(rec) -> float | None:
    """The activity line to draw for rules that judge activity."""
    settings = services.rule_settings()
    return {
        "storage.cache-metadata-only": settings.starved_activity_pct,
        "input.pipeline-starved": settings.starved_activity_pct,
        "allocation.low-efficiency": settings.low_efficiency_pct,
    }.get(rec.rule)


@require_POST
@role_required(*READERS)
def recommendation_decide_view(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """Accept, reject, snooze (platform admins) or comment (admins, committee, the department's
    heads); what does not apply, or bad input, is refused with the reason and changes nothing."""
    rec = get_or_404(selectors.recommendation_get, user=request.user, pk=pk)
    if action not in (services.ACCEPT, services.REJECT, services.SNOOZE, services.COMMENT):
        raise Http404(action)
    if action != services.COMMENT and not has_role(request.user, REVIEWERS):
        raise PermissionDenied  # deciding is the platform admins' (the review queue)
    kwargs = {"text": request.POST.get("text", "")}
    if action == services.SNOOZE:
        try:
            kwargs["until"] = date.fromisoformat(request.POST.get("until", ""))
        except ValueError:
            messages.error(request, _("Enter the snooze date as YYYY-MM-DD."))
            return redirect("efficiency:recommendation-detail", pk=rec.pk)
    if action == services.ACCEPT and request.POST.get("department"):
        kwargs["assignee_department"] = (
            department_list(user=request.user).filter(code=request.POST["department"]).first()
        )
        if kwargs["assignee_department"] is None:
            messages.error(request, _("Unknown department."))
            return redirect("efficiency:recommendation-detail", pk=rec.pk)
    try:
        services.recommendation_decide(rec, user=request.user, action=action, **kwargs)
    except services.RecommendationDecisionRefused as refused:
        messages.error(request, str(refused))
        return redirect("efficiency:recommendation-detail", pk=rec.pk)
    messages.success(request, str(DONE[action]))
    return redirect("efficiency:recommendation-detail", pk=rec.pk)


DONE = {
    services.ACCEPT: gettext_lazy("Accepted: the department will make the change."),
    services.REJECT: gettext_lazy("Rejected: it will not be proposed again unless the evidence changes."),
    services.SNOOZE: gettext_lazy("Snoozed."),
    services.COMMENT: gettext_lazy("Comment added."),
}


@role_required(*READERS)
def department_what_to_fix_view(request: HttpRequest, code: str) -> HttpResponse:
    """A department's open recommendations, most GPU-hours to gain first, in plain language."""
    department = get_or_404(department_get, user=request.user, code=code)
    recs = selectors.department_open_recommendations(user=request.user, department_id=department.pk)
    if request.GET.get("export") == "csv":
        return csv_response(
            csv_filename("what-to-fix", department.code),
            [header for header, _accessor in CSV_COLUMNS],
            (
                [accessor(rec) for _header, accessor in CSV_COLUMNS]
                for rec in recs.order_by("-gain_gpu_h_week")
            ),
        )
    recs = list(recs.order_by("-gain_gpu_h_week", "pk"))
    context = {
        "department": department,
        "recs": [(rec, RULES.get(rec.rule), subject_text(rec)) for rec in recs],
        "total_gain": sum(rec.gain_gpu_h_week for rec in recs),
    }
    return render(request, "efficiency/recommendations/what_to_fix.html", context)
