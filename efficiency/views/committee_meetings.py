"""Committee meeting pages: a meeting with its agenda, decisions, actions and minutes, the forms that
record them, and the audit trail with its chain check. Committee members and platform admins only.

Every change goes through ``efficiency.services.committee.meetings``; what it refuses
(``CommitteeRefused``) is shown beside the field it is about and nothing is written.
"""

from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from efficiency.choices import DecisionKind, MeetingStatus, TicketSeverity
from efficiency.committee_messages import decision_request_text
from efficiency.forms import ActionCloseForm, ActionForm, DecisionForm, MeetingCreateForm, MinutesForm
from efficiency.selectors import committee_meetings as selectors
from efficiency.selectors.committee_meetings import MEETING_ROLES
from efficiency.services.committee import meetings as services
from efficiency.services.committee.audit import audit_verify
from efficiency.views.helpers import PAGE_SIZE, get_or_404, role_required

SECTION_LABELS = {
    "summary": gettext_lazy("Summary and key figures"),
    "since_last": gettext_lazy("Since the last meeting"),
    "cluster": gettext_lazy("The cluster"),
    "departments": gettext_lazy("Departments"),
    "proposals": gettext_lazy("Quota proposals"),
    "capacity": gettext_lazy("Capacity"),
    "reliability": gettext_lazy("Reliability"),
    "recommendations_tickets": gettext_lazy("Recommendations and tickets"),
    "showback": gettext_lazy("Showback"),
}


def _agenda(meeting) -> list[dict]:
    """The stored agenda with its labels in the reader's language."""
    items = []
    for item in meeting.agenda or []:
        kind = item.get("kind")
        row = dict(item)
        if kind == "section":
            row["label"] = SECTION_LABELS.get(item.get("key"), item.get("key"))
        elif kind == "decision":
            row["label"] = decision_request_text(item)
        elif kind == "minutes":
            row["label"] = _("Approve the minutes of %(title)s") % {"title": item.get("title")}
        else:
            row["label"] = item.get("title")
        items.append(row)
    return items


def _decision_form(meeting, data=None) -> DecisionForm:
    return DecisionForm(
        data,
        prefix="decision",
        kinds=DecisionKind.choices,
        severities=TicketSeverity.choices,
        supersedable=selectors.decisions_to_supersede(meeting),
        cycles=selectors.decision_quota_cycles(meeting),
        departments=selectors.active_departments(),
    )


def _action_form(meeting, data=None) -> ActionForm:
    return ActionForm(
        data,
        prefix="action",
        people=selectors.committee_people(),
        decisions=selectors.meeting_decisions(meeting),
    )


def _detail(request: HttpRequest, meeting, *, status: int = 200, **forms) -> HttpResponse:
    decisions = list(selectors.meeting_decisions(meeting))
    previous = meeting.previous
    context = {
        "meeting": meeting,
        "agenda": _agenda(meeting),
        "carried": selectors.carried_actions(meeting),
        "decisions": decisions,
        "actions": selectors.meeting_actions(meeting),
        "attendees": meeting.attendees.all(),
        "decision_form": forms.get("decision_form") or _decision_form(meeting),
        "action_form": forms.get("action_form") or _action_form(meeting),
        "close_form": ActionCloseForm(),
        "minutes_form": forms.get("minutes_form") or MinutesForm(initial={"minutes": meeting.minutes}),
        "minutes_editable": meeting.minutes_approved_at is None,
        "records_open": meeting.status != MeetingStatus.APPROVED,
        "previous": previous,
        "can_approve_previous": previous is not None and previous.minutes_approved_at is None,
        "error": forms.get("error"),
        "pack_url": f"/committee/packs/{meeting.pack_id}/",
    }
    return render(request, "efficiency/committee/meetings/detail.html", context, status=status)


def _put_error(form, refused: services.CommitteeRefused, aliases: dict | None = None) -> None:
    field = (aliases or {}).get(refused.field, refused.field)
    form.add_error(field if field in form.fields else None, refused.message)


@role_required(*MEETING_ROLES)
@require_POST
def meeting_create_view(request: HttpRequest) -> HttpResponse:
    people = selectors.committee_people()
    form = MeetingCreateForm(request.POST, people=people)
    pack = None
    if form.is_valid():
        pack = get_or_404(selectors.pack_for_meeting, user=request.user, pk=form.cleaned_data["pack"])
        try:
            meeting = services.meeting_create(
                pack,
                request.user,
                form.cleaned_data["scheduled_for"],
                form.cleaned_data["attendees"],
                form.cleaned_data["guests"],
                title=form.cleaned_data["title"],
            )
        except services.CommitteeRefused as refused:
            _put_error(form, refused)
            status = refused.status
        else:
            messages.success(request, _("Meeting planned; its agenda is built from the pack."))
            return redirect("efficiency:meeting-detail", pk=meeting.pk)
    else:
        status = 400
    return render(
        request, "efficiency/committee/meetings/new.html", {"form": form, "pack": pack}, status=status
    )


@role_required(*MEETING_ROLES)
def meeting_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    meeting = get_or_404(selectors.meeting_get, user=request.user, pk=pk)
    return _detail(request, meeting)


def _ticket(form):
    ticket_id = form.cleaned_data.get("ticket_id")
    if not ticket_id:
        return None
    try:
        return selectors.ticket_by_id(ticket_id)
    except ObjectDoesNotExist:
        form.add_error("ticket_id", _("There is no ticket #%(id)d.") % {"id": ticket_id})
        return None


@role_required(*MEETING_ROLES)
@require_POST
def meeting_decide_view(request: HttpRequest, pk: int) -> HttpResponse:
    meeting = get_or_404(selectors.meeting_get, user=request.user, pk=pk)
    form = _decision_form(meeting, request.POST)
    if not form.is_valid():
        return _detail(request, meeting, status=400, decision_form=form)
    data = form.cleaned_data
    kind = data["kind"]
    ticket = _ticket(form) if kind == DecisionKind.TICKET else None
    if form.errors:
        return _detail(request, meeting, status=400, decision_form=form)
    new_ticket = None
    if kind == DecisionKind.TICKET and data["ticket_title"]:
        new_ticket = {
            "title": data["ticket_title"],
            "department": data["ticket_department"],
            "severity": data["ticket_severity"] or TicketSeverity.MEDIUM,
            "description": data["outcome"],
        }
    try:
        decision = services.decision_record(
            meeting,
            request.user,
            kind,
            data["title"],
            data["options"],
            data["outcome"],
            data["decided_by"],
            quota_cycle=data["quota_cycle"] if kind == DecisionKind.QUOTA else None,
            ticket=ticket,
            capacity_gpu_model=data["capacity_gpu_model"] if kind == DecisionKind.CAPACITY else "",
            capacity_gpus=data["capacity_gpus"] if kind == DecisionKind.CAPACITY else None,
            supersedes=data["supersedes"],
            quota_approve=kind == DecisionKind.QUOTA and data["quota_approve"],
            new_ticket=new_ticket,
        )
    except services.CommitteeRefused as refused:
        _put_error(form, refused, {"ticket": "ticket_id", "ticket_department": "ticket_department"})
        return _detail(request, meeting, status=refused.status, decision_form=form)
    messages.success(request, _("Decision %(number)d recorded.") % {"number": decision.number})
    return redirect(reverse("efficiency:meeting-detail", args=[meeting.pk]) + f"#decision-{decision.number}")


@role_required(*MEETING_ROLES)
@require_POST
def meeting_action_create_view(request: HttpRequest, pk: int) -> HttpResponse:
    meeting = get_or_404(selectors.meeting_get, user=request.user, pk=pk)
    form = _action_form(meeting, request.POST)
    if not form.is_valid():
        return _detail(request, meeting, status=400, action_form=form)
    data = form.cleaned_data
    try:
        services.action_create(
            meeting, request.user, data["title"], data["owner"], data["due_on"], data["decision"]
        )
    except services.CommitteeRefused as refused:
        _put_error(form, refused)
        return _detail(request, meeting, status=refused.status, action_form=form)
    messages.success(request, _("Action added."))
    return redirect(reverse("efficiency:meeting-detail", args=[meeting.pk]) + "#actions")


@role_required(*MEETING_ROLES)
@require_POST
def action_close_view(request: HttpRequest, pk: int) -> HttpResponse:
    action = get_or_404(selectors.action_get, user=request.user, pk=pk)
    back = request.POST.get("meeting", "")
    meeting_pk = int(back) if back.isdigit() and len(back) < 12 else action.meeting_id
    meeting = get_or_404(selectors.meeting_get, user=request.user, pk=meeting_pk)
    form = ActionCloseForm(request.POST)
    if not form.is_valid():
        return _detail(request, meeting, status=400, error=_("Close an action as done or dropped."))
    try:
        services.action_close(action, request.user, form.cleaned_data["status"], form.cleaned_data["note"])
    except services.CommitteeRefused as refused:
        return _detail(request, meeting, status=refused.status, error=refused.message)
    messages.success(request, _("Action closed."))
    return redirect(reverse("efficiency:meeting-detail", args=[meeting.pk]) + "#actions")


@role_required(*MEETING_ROLES)
@require_POST
def meeting_hold_view(request: HttpRequest, pk: int) -> HttpResponse:
    meeting = get_or_404(selectors.meeting_get, user=request.user, pk=pk)
    try:
        services.meeting_hold(meeting, request.user)
    except services.CommitteeRefused as refused:
        return _detail(request, meeting, status=refused.status, error=refused.message)
    messages.success(request, _("Meeting marked as held."))
    return redirect("efficiency:meeting-detail", pk=meeting.pk)


@role_required(*MEETING_ROLES)
@require_POST
def meeting_minutes_view(request: HttpRequest, pk: int) -> HttpResponse:
    meeting = get_or_404(selectors.meeting_get, user=request.user, pk=pk)
    form = MinutesForm(request.POST)
    if not form.is_valid():
        return _detail(request, meeting, status=400, minutes_form=form)
    try:
        services.minutes_save(meeting, request.user, form.cleaned_data["minutes"])
    except services.CommitteeRefused as refused:
        _put_error(form, refused)
        return _detail(request, meeting, status=refused.status, minutes_form=form)
    messages.success(request, _("Minutes saved."))
    return redirect(reverse("efficiency:meeting-detail", args=[meeting.pk]) + "#minutes")


@role_required(*MEETING_ROLES)
@require_POST
def meeting_approve_minutes_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve the previous meeting's minutes in this one."""
    meeting = get_or_404(selectors.meeting_get, user=request.user, pk=pk)
    if meeting.previous is None:
        return _detail(
            request,
            meeting,
            status=400,
            error=_("This is the first meeting: there are no minutes to approve."),
        )
    try:
        services.minutes_approve(meeting.previous, meeting, request.user)
    except services.CommitteeRefused as refused:
        return _detail(request, meeting, status=refused.status, error=refused.message)
    messages.success(request, _("The previous meeting's minutes are approved."))
    return redirect("efficiency:meeting-detail", pk=meeting.pk)


@role_required(*MEETING_ROLES)
def committee_audit_view(request: HttpRequest) -> HttpResponse:
    entries = selectors.audit_entries(user=request.user)
    check = audit_verify()
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "efficiency/committee/meetings/audit.html", {"page": page, "check": check})
