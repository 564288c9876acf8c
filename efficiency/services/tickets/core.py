"""Tickets, the write side: create (by hand, from a recommendation, from an incident), edit, move
along the workflow, comment.

Every function checks what the user may do and what the input is before it writes anything, and
raises ``TicketRefused`` with a translated message (and the field it is about) otherwise: the page
shows it beside the field, the API returns it as a 400 (403 where the user may not act at all).
Each change is saved in one transaction, and recorded by the audit trail with the acting user and,
for a transition, its reason.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency import dispatch
from efficiency.analysis.tickets import workflow
from efficiency.choices import Role, Severity, TicketAction, TicketOrigin, TicketSeverity, TicketState
from efficiency.models import Department, Incident, Job, Node, Recommendation, Ticket, TicketComment
from efficiency.permissions import TICKET_MANAGERS, has_role
from efficiency.recommendation_messages import rule_title, subject_text
from efficiency.scoping import User, scope_queryset, user_role, visible_department_ids
from efficiency.services.notifications import notification_emit
from efficiency.services.tickets import sla

MAX_TITLE = 200
MAX_DESCRIPTION = 10_000
MAX_COMMENT = 4000
MAX_REASON = 2000
MAX_DUE_DAYS = 366
# Links kept per ticket from a recommendation's jobs (the most recent runs of the family).
MAX_LINKED_JOBS = 50
# What a head may do: work on the ticket; declining it, closing it and reopening a closed one is for
# the committee and platform admins.
HEAD_ACTIONS = frozenset(
    {TicketAction.START, TicketAction.WAIT, TicketAction.RESUME, TicketAction.RESOLVE, TicketAction.REOPEN}
)
HEAD_REOPENS_FROM = frozenset({TicketState.RESOLVED, TicketState.VERIFYING})

EVENT_ASSIGNED, EVENT_VERIFIED = "ticket_assigned", "ticket_verified"


class TicketRefused(Exception):
    """A change that is not allowed or whose input is bad; nothing was written.

    ``status`` is the HTTP status the page and API answer with (400 bad input or illegal move,
    403 not permitted); ``field`` names the input it is about, where there is one.
    """

    def __init__(self, message: str, *, field: str | None = None, status: int = 400, code: str = "invalid"):
        super().__init__(message)
        self.message, self.field, self.status, self.code = message, field, status, code


# --- Who may do what ------------------------------------------------------------------------------


def may_see(ticket: Ticket, user: User) -> bool:
    ids = visible_department_ids(user)
    return ids is None or ticket.department_id in ids


def may_manage(user: User) -> bool:
    return has_role(user, TICKET_MANAGERS)


def creatable_departments(user: User):
    """The departments ``user`` may open tickets for: any for managers, those they head for heads."""
    return scope_queryset(Department.objects.filter(is_active=True), user)


def ticket_actions(ticket: Ticket, user: User) -> list[str]:
    """The workflow actions ``user`` may take on ``ticket`` now (table order)."""
    if not may_see(ticket, user) or user_role(user) is None:
        return []
    allowed = workflow.allowed_actions(ticket.state, actor="person")
    if may_manage(user):
        return [str(action) for action in allowed]
    return [
        str(action)
        for action in allowed
        if action in HEAD_ACTIONS and (action != TicketAction.REOPEN or ticket.state in HEAD_REOPENS_FROM)
    ]


def assignee_candidates(department: Department):
    """Who may own a department's ticket: its heads, and the platform admins (a node repair)."""
    users = get_user_model().objects.filter(is_active=True)
    return (
        users.filter(headed_departments=department) | users.filter(groups__name=Role.PLATFORM_ADMIN)
    ).distinct()


# --- Input checks -------------------------------------------------------------------------------


def _text(value: str | None, *, field: str, limit: int, required: bool, what: str) -> str:
    text = (value or "").strip()
    if required and not text:
        raise TicketRefused(_("A %(what)s is required.") % {"what": what}, field=field)
    if len(text) > limit:
        raise TicketRefused(
            _("The %(what)s is %(length)d characters long; at most %(limit)d are kept.")
            % {"what": what, "length": len(text), "limit": limit},
            field=field,
        )
    return text


def _severity(value: str) -> str:
    if value not in TicketSeverity.values:
        raise TicketRefused(
            _("Unknown severity %(value)s; choose one of: %(known)s.")
            % {"value": value, "known": ", ".join(str(label) for label in TicketSeverity.labels)},
            field="severity",
        )
    return value


def _assignee(user: User | None, department: Department):
    if user is None:
        return None
    if not assignee_candidates(department).filter(pk=user.pk).exists():
        raise TicketRefused(
            _(
                "%(user)s is not a head of %(department)s nor a platform admin; "
                "assign the ticket to someone who is."
            )
            % {"user": user.get_username(), "department": department.name},
            field="assignee",
        )
    return user


def _due(value: datetime | None, now: datetime) -> datetime | None:
    if value is None:
        return None
    if value <= now:
        raise TicketRefused(_("The due date must be in the future."), field="due_at")
    if value - now > timedelta(days=MAX_DUE_DAYS):
        raise TicketRefused(_("The due date must be within a year."), field="due_at")
    return value


def _department(department: Department | None, user: User) -> Department:
    if department is None:
        raise TicketRefused(_("Choose the department that owns the ticket."), field="department")
    if not department.is_active:
        raise TicketRefused(
            _("%(department)s is no longer active.") % {"department": department.name}, field="department"
        )
    if not creatable_departments(user).filter(pk=department.pk).exists():
        raise TicketRefused(
            _("You open tickets only for a department you head."),
            field="department",
            status=403,
            code="forbidden",
        )
    return department


def _record(ticket: Ticket, user: User | None, reason: str = "") -> None:
    """Who the audit trail names for the next save, and why (a transition's reason)."""
    ticket._history_user = user if user is not None and user.is_authenticated else None
    ticket._change_reason = reason[:100] if reason else None


# --- Create ---------------------------------------------------------------------------------------


@transaction.atomic
def ticket_create(
    *,
    user: User,
    title: str,
    department: Department | None,
    severity: str = TicketSeverity.MEDIUM,
    description: str = "",
    assignee=None,
    due_at: datetime | None = None,
    origin: str = TicketOrigin.MANUAL,
    recommendation: Recommendation | None = None,
    incident: Incident | None = None,
    meeting: str = "",
    jobs: Iterable[Job] = (),
    nodes: Iterable[Node] = (),
    incidents: Iterable[Incident] = (),
    now: datetime | None = None,
    checked: bool = True,
) -> Ticket:
    """Open a ticket; its due date comes from the severity's SLA unless ``due_at`` is given.

    ``checked=False`` is for the portal's own tickets (a recommendation accepted by an admin): the
    department need not be one the user heads.
    """
    now = now or timezone.now()
    if origin not in TicketOrigin.values:
        raise TicketRefused(_("Unknown origin %(value)s.") % {"value": origin}, field="origin")
    title = _text(title, field="title", limit=MAX_TITLE, required=True, what=_("title"))
    description = _text(
        description, field="description", limit=MAX_DESCRIPTION, required=False, what=_("description")
    )
    meeting = _text(meeting, field="meeting", limit=200, required=False, what=_("meeting reference"))
    severity = _severity(severity)
    if checked:
        department = _department(department, user)
    elif department is None:
        raise TicketRefused(_("Choose the department that owns the ticket."), field="department")
    assignee = _assignee(assignee, department)
    due = _due(due_at, now) or sla.due_at(now, severity)
    ticket = Ticket(
        title=title,
        description=description,
        origin=origin,
        recommendation=recommendation,
        incident=incident,
        meeting=meeting,
        department=department,
        assignee=assignee,
        severity=severity,
        due_at=due,
        created_by=user if user is not None and user.is_authenticated else None,
        created_at=now,
        updated_at=now,
    )
    if recommendation is not None:
        ticket.family_user = recommendation.user_name
        ticket.family_pattern = recommendation.name_pattern
        ticket.expected_gain_pct = recommendation.gain_pct
        ticket.expected_gain_gpu_h_week = recommendation.gain_gpu_h_week
    _record(ticket, user)
    ticket.save()
    if jobs:
        ticket.jobs.set(jobs)
    if nodes:
        ticket.nodes.set(nodes)
    if incidents:
        ticket.incidents.set(incidents)
    if assignee is not None:
        notification_emit(EVENT_ASSIGNED, ticket=ticket, users=[assignee], now=now)
    return ticket


def _recommendation_severity(recommendation: Recommendation) -> str:
    """High for a change that frees a few GPUs' worth of time each week, low for small ones."""
    gain = recommendation.gain_gpu_h_week or 0.0
    if gain >= 168:  # a whole GPU, every hour of the week
        return TicketSeverity.HIGH
    if gain >= 24:
        return TicketSeverity.MEDIUM
    return TicketSeverity.LOW


def ticket_from_recommendation(
    recommendation: Recommendation,
    *,
    user: User,
    department: Department | None = None,
    now: datetime | None = None,
) -> Ticket:
    """The ticket an accepted recommendation becomes (the open one it already has, if any)."""
    existing = recommendation.tickets.exclude(state__in=(TicketState.CLOSED, TicketState.WONT_FIX)).first()
    if existing is not None:
        return existing
    department = department or recommendation.assignee_department or recommendation.department
    title = f"{rule_title(recommendation.rule)} · {subject_text(recommendation)}"[:MAX_TITLE]
    description = "\n\n".join(
        part
        for part in (
            _("Observed: %(text)s") % {"text": recommendation.observed},
            _("Change: %(text)s") % {"text": recommendation.change},
            recommendation.decision_note,
        )
        if part
    )
    jobs = list(recommendation.jobs.order_by("-submitted_at", "-pk")[:MAX_LINKED_JOBS])
    return ticket_create(
        user=user,
        title=title,
        description=description[:MAX_DESCRIPTION],
        department=department,
        severity=_recommendation_severity(recommendation),
        origin=TicketOrigin.RECOMMENDATION,
        recommendation=recommendation,
        jobs=jobs,
        nodes=[recommendation.node] if recommendation.node_id else [],
        now=now,
        checked=False,
    )


_INCIDENT_SEVERITY = {
    Severity.CRITICAL: TicketSeverity.CRITICAL,
    Severity.ERROR: TicketSeverity.HIGH,
    Severity.WARNING: TicketSeverity.MEDIUM,
}


def ticket_from_incident(incident: Incident, *, user: User, now: datetime | None = None, **fields) -> Ticket:
    """A follow-up ticket for an incident, owned by its job's department or its node's owner."""
    department = incident.department or (incident.node.owner_department if incident.node_id else None)
    place = (
        incident.node.hostname if incident.node_id else (incident.job.external_id if incident.job_id else "")
    )
    title = fields.pop("title", None) or (
        _("Follow up incident #%(id)d: %(category)s on %(place)s")
        % {"id": incident.pk, "category": incident.get_category_display(), "place": place or "?"}
    )
    return ticket_create(
        user=user,
        title=title[:MAX_TITLE],
        department=fields.pop("department", None) or department,
        severity=fields.pop("severity", None)
        or _INCIDENT_SEVERITY.get(incident.severity, TicketSeverity.MEDIUM),
        origin=TicketOrigin.INCIDENT,
        incident=incident,
        incidents=[incident],
        nodes=[incident.node] if incident.node_id else [],
        jobs=[incident.job] if incident.job_id else [],
        now=now,
        **fields,
    )


# --- Edit -----------------------------------------------------------------------------------------

EDITABLE = ("title", "description", "severity", "assignee", "due_at", "meeting")
HEAD_EDITABLE = ("assignee",)


@transaction.atomic
def ticket_update(ticket: Ticket, *, user: User, now: datetime | None = None, **changes) -> Ticket:
    """Change fields of a ticket (``EDITABLE``); a head may only reassign within the department."""
    now = now or timezone.now()
    ticket = Ticket.objects.select_for_update().get(pk=ticket.pk)
    if not may_see(ticket, user):
        raise TicketRefused(_("You cannot see this ticket."), status=404, code="not_found")
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise TicketRefused(
            _("These fields cannot be changed: %(fields)s.") % {"fields": ", ".join(sorted(unknown))}
        )
    allowed = EDITABLE if may_manage(user) else HEAD_EDITABLE
    refused = set(changes) - set(allowed)
    if refused:
        raise TicketRefused(
            _("Only the committee and platform admins change %(fields)s.")
            % {"fields": ", ".join(sorted(refused))},
            field=sorted(refused)[0],
            status=403,
            code="forbidden",
        )
    if "title" in changes:
        ticket.title = _text(changes["title"], field="title", limit=MAX_TITLE, required=True, what=_("title"))
    if "description" in changes:
        ticket.description = _text(
            changes["description"],
            field="description",
            limit=MAX_DESCRIPTION,
            required=False,
            what=_("description"),
        )
    if "meeting" in changes:
        ticket.meeting = _text(
            changes["meeting"], field="meeting", limit=200, required=False, what=_("meeting reference")
        )
    if "severity" in changes:
        ticket.severity = _severity(changes["severity"])
    if "due_at" in changes:
        due = _due(changes["due_at"], now)
        if due is None:
            raise TicketRefused(_("A due date is required."), field="due_at")
        if due != ticket.due_at:
            ticket.due_at, ticket.sla_notified = due, ""
    reassigned = None
    if "assignee" in changes:
        assignee = _assignee(changes["assignee"], ticket.department)
        if (assignee.pk if assignee else None) != ticket.assignee_id:
            reassigned = assignee
        ticket.assignee = assignee
    ticket.updated_at = now
    _record(ticket, user)
    ticket.save()
    if reassigned is not None:
        notification_emit(EVENT_ASSIGNED, ticket=ticket, users=[reassigned], now=now)
    return ticket


# --- Transitions ----------------------------------------------------------------------------------


def _apply(ticket: Ticket, action: str, target: str, now: datetime) -> None:
    """The bookkeeping of a move: the SLA clock, and when the work was done or ended."""
    if ticket.paused_at is not None and target != TicketState.WAITING_ON_DEPARTMENT:
        if action == TicketAction.RESUME:
            ticket.due_at = sla.due_after_pause(ticket.due_at, ticket.paused_at, now)
            ticket.sla_notified = ""
        ticket.paused_at = None
    if target == TicketState.WAITING_ON_DEPARTMENT:
        ticket.paused_at = now
    if action == TicketAction.RESOLVE:
        ticket.resolved_at = now
    if action == TicketAction.REOPEN:
        ticket.resolved_at = ticket.verified_at = ticket.closed_at = None
        ticket.measured_gain_pct = None
        ticket.verification = {}
        # The work starts over: a fresh SLA from now.
        ticket.due_at, ticket.sla_notified = sla.due_at(now, ticket.severity), ""
    if target == TicketState.CLOSED or target == TicketState.WONT_FIX:
        ticket.closed_at = now
    ticket.state = target


def measurable(ticket: Ticket) -> bool:
    """Whether the portal can verify the fix: it is for one job family."""
    return bool(ticket.family_pattern)


@transaction.atomic
def ticket_transition(
    ticket: Ticket,
    action: str,
    *,
    user: User | None,
    reason: str = "",
    now: datetime | None = None,
    actor: workflow.Actor = "person",
    verification: dict | None = None,
) -> Ticket:
    """Move ``ticket`` by ``action``; resolving a measurable ticket starts its verification."""
    now = now or timezone.now()
    ticket = Ticket.objects.select_for_update().get(pk=ticket.pk)
    reason = _text(reason, field="reason", limit=MAX_REASON, required=False, what=_("reason"))
    if actor == "person":
        if user is None or not may_see(ticket, user):
            raise TicketRefused(_("You cannot see this ticket."), status=404, code="not_found")
        person_may = workflow.allowed_actions(ticket.state, actor="person")
        if action in person_may and action not in ticket_actions(ticket, user):
            raise TicketRefused(
                _("Only the committee and platform admins may %(action)s a ticket.")
                % {"action": TicketAction(action).label.lower()},
                status=403,
                code="forbidden",
            )
    try:
        target = workflow.transition(ticket.state, action, reason=reason, actor=actor)
    except workflow.TransitionRefused as refused:
        raise TicketRefused(
            _refusal_text(refused, ticket),
            field="reason" if refused.code == "reason_required" else None,
            code=refused.code,
        ) from None
    _apply(ticket, action, target, now)
    if verification is not None:
        ticket.verification = verification
        ticket.measured_gain_pct = verification.get("gain_pct")
        if target in (TicketState.VERIFIED_GAIN, TicketState.NO_GAIN, TicketState.REGRESSED):
            ticket.verified_at = now
    ticket.updated_at = now
    _record(ticket, user, reason)
    ticket.save()
    if action == TicketAction.RESOLVE and measurable(ticket):
        _apply(
            ticket,
            TicketAction.VERIFY,
            workflow.transition(ticket.state, TicketAction.VERIFY, actor="portal"),
            now,
        )
        ticket.verification = {"outcome": "verifying", "started_at": now.isoformat()}
        _record(ticket, None)
        ticket.save()
    if target in (TicketState.VERIFIED_GAIN, TicketState.NO_GAIN, TicketState.REGRESSED):
        notification_emit(EVENT_VERIFIED, ticket=ticket, now=now)
    if action == TicketAction.RESOLVE:
        dispatch.demo_fix_applied(ticket.pk)  # the demo's simulated engineers apply the fix
    return ticket


def _refusal_text(refused: workflow.TransitionRefused, ticket: Ticket) -> str:
    """The translated message for a refused move."""
    params = refused.params
    if refused.code == "unknown_action":
        return _("Unknown action %(action)s; the actions are: %(known)s.") % {
            "action": params.get("action"),
            "known": ", ".join(str(a) for a in workflow.PEOPLE_ACTIONS),
        }
    if refused.code == "unknown_state":
        return _("Unknown ticket state %(state)s.") % {"state": params.get("state")}
    if refused.code == "reason_required":
        return _("%(action)s needs a reason.") % {"action": TicketAction(params["action"]).label}
    if refused.code == "not_yours":
        return _("The portal records the measurement itself; it cannot be set by hand.")
    allowed = [str(TicketAction(a).label) for a in params.get("allowed", [])]
    return _("A ticket that is %(state)s cannot be moved by “%(action)s”; allowed now: %(allowed)s.") % {
        "state": ticket.get_state_display().lower(),
        "action": TicketAction(params["action"]).label if params.get("action") else refused.code,
        "allowed": ", ".join(allowed) or _("nothing"),
    }


# --- Comments -------------------------------------------------------------------------------------


def ticket_comment(
    ticket: Ticket, *, user: User, text: str, internal: bool = False, now: datetime | None = None
) -> TicketComment:
    """Add a public comment, or an internal note (committee and platform admins only)."""
    if not may_see(ticket, user) or user_role(user) is None:
        raise TicketRefused(_("You cannot see this ticket."), status=404, code="not_found")
    if internal and not may_manage(user):
        raise TicketRefused(
            _("Internal notes are written by the committee and platform admins."),
            field="internal",
            status=403,
            code="forbidden",
        )
    text = _text(text, field="text", limit=MAX_COMMENT, required=True, what=_("comment"))
    return TicketComment.objects.create(
        ticket=ticket, author=user, at=now or timezone.now(), text=text, internal=bool(internal)
    )


def visible_comments(ticket: Ticket, user: User):
    """The ticket's comments ``user`` may read (internal notes only for managers)."""
    return scope_queryset(ticket.comments.select_related("author"), user)
