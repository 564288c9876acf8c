"""The committee's review pack pages: the packs list, a pack, its presentation and print faces.

A pack is sealed content (``ReviewPack.content``); these pages only render it, never recompute
it. Department heads read their department copy (cover + their departments' parts), on every face.
Section 10 (this meeting's decisions and actions) is the meeting's record, not the pack's: the
pack page leaves ``{% block meeting_records %}`` for it.
"""

from datetime import datetime
from zoneinfo import ZoneInfo

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html, json_script
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST
from plotly.utils import PlotlyJSONEncoder

from efficiency import dispatch
from efficiency.charts import committee as charts
from efficiency.charts.toolkit import duration_text
from efficiency.choices import NodeClass
from efficiency.committee_messages import KPI_LABELS
from efficiency.permissions import has_role
from efficiency.quota_explanation import pack_proposal_rows
from efficiency.selectors import committee_meetings as meeting_selectors
from efficiency.selectors import committee_pages as selectors
from efficiency.selectors.quotas import default_cluster
from efficiency.views.helpers import get_or_404, role_required
from efficiency.views.quotas import policy_labels

READERS = selectors.PACK_READERS
MANAGERS = selectors.PACK_MANAGERS
# (number, content key, anchor, title): the pack's sections 0-9 in order.
SECTIONS = (
    (0, None, "cover", gettext_lazy("Cover")),
    (1, "summary", "summary", gettext_lazy("Summary")),
    (2, "since_last", "since-last", gettext_lazy("Since the last meeting")),
    (3, "cluster_section", "cluster", gettext_lazy("Cluster")),
    (4, "departments", "departments", gettext_lazy("Departments against their guaranteed quota")),
    (5, "proposals", "proposals", gettext_lazy("Next cycle's quota proposals")),
    (6, "capacity", "capacity", gettext_lazy("Capacity")),
    (7, "reliability", "reliability", gettext_lazy("Reliability")),
    (8, "tickets", "tickets", gettext_lazy("Recommendations and tickets")),
    (9, "showback", "showback", gettext_lazy("Showback")),
)
# The reason a department copy gives for the cluster-wide sections it leaves out.
COMMITTEE_ONLY_REASON = "cluster-wide section: committee only"
PHASE_LABELS = {
    "detect": gettext_lazy("Detect"),
    "locate": gettext_lazy("Locate"),
    "restart": gettext_lazy("Restart"),
    "recover": gettext_lazy("Recover"),
}
STATE_LABELS = {
    "busy": gettext_lazy("Busy"),
    "allocated_idle": gettext_lazy("Allocated, idle"),
    "unallocated": gettext_lazy("Unallocated"),
    "down": gettext_lazy("Down"),
    "capacity": gettext_lazy("Capacity"),
    "unused_guarantee": gettext_lazy("Unused guarantee"),
}


def chart_html(figure, element_id: str) -> str:
    """A chart placeholder and its figure as JSON, drawn by static/efficiency/js/charts.js (the
    ``plotly_chart`` template tag's markup: a face may not import another face's module)."""
    data_id = f"{element_id}-data"
    return format_html(
        '<div class="chart" id="{}" data-plotly="{}" role="img" aria-label="{}"></div>{}',
        element_id,
        data_id,
        figure.layout.title.text or "",
        json_script(figure.to_plotly_json(), data_id, encoder=PlotlyJSONEncoder),
    )


def rendered_charts(content: dict, prefix: str) -> dict[str, str]:
    class_labels = {choice.value: str(choice.label) for choice in NodeClass}
    figures = charts.pack_charts(content, class_labels)
    return {key: chart_html(fig, f"{prefix}-{key.replace(':', '-')}") for key, fig in figures.items()}


def svg_charts(content: dict) -> dict[str, str]:
    """The print face's vector charts (helper C's module), or none while it is missing."""
    try:
        from efficiency.charts.committee_print import pack_svg_charts
    except ImportError:
        return {}
    return pack_svg_charts(content)


def kpi_text(value, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "ratio":
        return f"{value * 100:.1f}%"
    if unit == "seconds":
        return duration_text(value)
    if unit == "gpu_hours":
        return f"{value:,.0f}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def local_time(stamp: str | None, zone: ZoneInfo, fmt: str = "%Y-%m-%d %H:%M") -> str:
    if not stamp:
        return "—"
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(zone).strftime(fmt)
    except (TypeError, ValueError):
        return str(stamp)


def pack_context(request: HttpRequest, pk: int, *, chart_prefix: str, print_face: bool = False) -> dict:
    """What every face of one pack shows: its header facts, its sections and their charts."""
    pack = get_or_404(selectors.pack_get, user=request.user, pk=pk)
    content = selectors.pack_view_content(user=request.user, pack=pack)
    period = content.get("period") or {}
    try:
        zone = ZoneInfo(period.get("time_zone") or pack.time_zone or "UTC")
    except (ValueError, KeyError):
        zone = ZoneInfo("UTC")
    sections, committee_only = [], []
    for number, key, anchor, title in SECTIONS:
        data = content if key is None else content.get(key)
        if key == "tickets":  # section 8 is recommendations and tickets together
            parts = {"recommendations": content.get("recommendations"), "tickets": content.get("tickets")}
            data = parts if any(charts.available(part) for part in parts.values()) else parts["tickets"]
        unavailable = isinstance(data, dict) and data.get("available") is False
        if unavailable and data.get("reason") == COMMITTEE_ONLY_REASON:
            committee_only.append(title)  # a department copy leaves the cluster-wide sections out
            continue
        sections.append(
            {
                "number": number,
                "key": key or "cover",
                "anchor": anchor,
                "title": title,
                "data": data,
                "available": not unavailable,
                # Translators: the reason a pack section is empty comes from the pack (English text).
                "reason": _(data.get("reason", "")) if unavailable else "",
                "template": f"efficiency/committee/sections/s{number}.html",
            }
        )
    summary = content.get("summary")
    kpis = []
    if charts.available(summary):
        for kpi in summary.get("kpis") or []:
            kpis.append(
                {
                    **kpi,
                    "label": KPI_LABELS.get(kpi["key"], kpi["key"]),
                    "value_text": kpi_text(kpi.get("value"), kpi.get("unit")),
                    "previous_text": kpi_text(kpi.get("previous"), kpi.get("unit")),
                    "target_text": kpi_text(kpi.get("target"), kpi.get("unit")),
                }
            )
    proposals = content.get("proposals")
    proposal_rows = pack_proposal_rows(proposals) if charts.available(proposals) else []
    backtest_rows = [
        {**row, "label": policy_labels().get(row.get("policy"), row.get("policy"))}
        for row in (proposals.get("backtest") or [] if charts.available(proposals) else [])
        if isinstance(row, dict)
    ]
    phase_rows = []
    reliability = content.get("reliability")
    if charts.available(reliability):
        phases = reliability.get("phases") or {}
        for key in charts.PHASES:
            if key in phases:
                phase_rows.append({"label": PHASE_LABELS[key], **phases[key]})
    department_names = {d["code"]: d["name"] for d in content.get("departments") or [] if isinstance(d, dict)}
    successor = selectors.pack_successor(pack)
    return {
        "pack": pack,
        "content": content,
        "is_copy": "copy" in content,
        "copy_departments": list(department_names.values()) if "copy" in content else [],
        "sections": sections,
        "committee_only": committee_only,
        "kpis": kpis,
        "phase_rows": phase_rows,
        "proposal_rows": proposal_rows,
        "backtest_rows": backtest_rows,
        "department_names": department_names,
        "state_labels": STATE_LABELS,
        "charts": svg_charts(content) if print_face else rendered_charts(content, chart_prefix),
        "successor": successor,
        "period_start": local_time(period.get("start"), zone),
        "period_end": local_time(period.get("end"), zone),
        "generated_at": local_time(content.get("generated_at"), zone),
        "time_zone": str(zone),
        "zone": zone,
        "can_manage": has_role(request.user, MANAGERS),
    }


@role_required(*READERS)
def committee_home_view(request: HttpRequest) -> HttpResponse:
    """The committee's home: every period's current pack (older versions folded) and meetings."""
    entries = selectors.pack_list(user=request.user)
    keeps_meetings = meeting_selectors.may_keep_meetings(request.user)
    context = {
        "entries": entries,
        "can_manage": has_role(request.user, MANAGERS),
        "keeps_meetings": keeps_meetings,
        "meetings": list(meeting_selectors.meeting_list(user=request.user)[:10]) if keeps_meetings else [],
        "open_actions": list(meeting_selectors.open_actions()[:20]) if keeps_meetings else [],
    }
    return render(request, "efficiency/committee/home.html", context)


@role_required(*READERS)
def pack_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "efficiency/committee/pack.html", pack_context(request, pk, chart_prefix="pack"))


@role_required(*READERS)
def pack_present_view(request: HttpRequest, pk: int) -> HttpResponse:
    """One section per screen for the projector (static/efficiency/js/committee_present.js)."""
    return render(
        request, "efficiency/committee/present.html", pack_context(request, pk, chart_prefix="slide")
    )


@role_required(*READERS)
def pack_print_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Print-ready HTML (A4 landscape, a page per section) with vector charts."""
    context = pack_context(request, pk, chart_prefix="print", print_face=True)
    return render(request, "efficiency/committee/print.html", context)


def _generate(**kwargs) -> bool:
    """Queue a pack generation (``dispatch.committee_pack_generate``); False while it is missing."""
    queue = getattr(dispatch, "committee_pack_generate", None)
    if queue is None:
        return False
    queue(**kwargs)
    return True


@require_POST
@role_required(*MANAGERS)
def pack_generate_view(request: HttpRequest) -> HttpResponse:
    """Queue the pack of the last complete cycle; it is built in a worker, never in the request."""
    cluster = default_cluster()
    if cluster is None:
        messages.error(request, _("There is no cluster to review."))
    elif _generate(cluster_id=cluster.pk, user_id=request.user.pk):
        messages.success(request, _("Generation started: the pack appears here when it is ready."))
    else:
        messages.error(request, _("Pack generation is not available yet."))
    return redirect("efficiency:committee-home")


@require_POST
@role_required(*MANAGERS)
def pack_correct_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a corrected version of a pack; the reason is required and kept with the new version."""
    pack = get_or_404(selectors.pack_get, user=request.user, pk=pk)
    reason = (request.POST.get("reason") or "").strip()
    if not reason:
        messages.error(request, _("Say why the pack needs a correction."))
    elif selectors.pack_successor(pack) is not None:
        messages.error(request, _("This version is already corrected: correct the current one."))
    elif _generate(
        cluster_id=pack.cluster_id, user_id=request.user.pk, corrects_id=pack.pk, reason=reason[:2000]
    ):
        messages.success(
            request, _("Generation started: the corrected version appears here when it is ready.")
        )
    else:
        messages.error(request, _("Pack generation is not available yet."))
    return redirect(reverse("efficiency:pack-detail", args=[pack.pk]))
