"""Committee meetings, the write side: plan a meeting from a pack, hold it, record decisions and
actions, keep and approve its minutes.

Each function checks the input and the state first and raises ``CommitteeRefused`` (a translated
message and the field it is about) when the change is not allowed; nothing is written then.
Every change appends to the hash-chained audit trail in the same transaction, so the record and
its audit entry commit together or not at all.

**Decisions are never edited**: a changed mind is a new decision that supersedes the old one (of
this meeting or an earlier one of the same cluster), and a decision is superseded at most once.
A quota decision that approves a cycle approves it through the quota service (the same call as
the quota page's "Approve" button) in the decision's transaction.
"""

from collections.abc import Iterable
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency.analysis.committee.agenda import build_agenda
from efficiency.analysis.committee.seal import sha256_hex
from efficiency.choices import ActionStatus, DecisionKind, MeetingStatus, Role, TicketOrigin
from efficiency.models import Action, Decision, Department, QuotaCycle, ReviewMeeting, ReviewPack, Ticket
from efficiency.permissions import QUOTA_PLANNERS, has_role
from efficiency.scoping import User
from efficiency.services.committee.audit import audit_append
from efficiency.services.quotas import QuotaError, quota_cycle_approve
from efficiency.services.tickets import TicketRefused, ticket_create

MEETING_ROLES = (Role.COMMITTEE, Role.PLATFORM_ADMIN)
MAX_TITLE = 200
MAX_OUTCOME = 4000
MAX_OPTIONS = 20
MAX_OPTION = 300
MAX_DECIDED_BY = 300
MAX_GUESTS = 500
MAX_MINUTES = 50_000
MAX_NOTE = 2000


class CommitteeRefused(Exception):
    """A change to the committee's records that is not allowed or whose input is bad; nothing was
    written. ``field`` names the input it is about; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, field: str | None = None, *, status: int = 400):
        super().__init__(message)
        self.message, self.field, self.status = message, field, status


def _may_act(user: User) -> None:
    if not has_role(user, MEETING_ROLES):
        raise CommitteeRefused(
            _("Only committee members and platform admins keep the meeting records."), status=403
        )


def _text(value: str | None, *, field: str, limit: int, required: bool, what: str) -> str:
    text = (value or "").strip()
    if required and not text:
        raise CommitteeRefused(_("A %(what)s is required.") % {"what": what}, field)
    if len(text) > limit:
        raise CommitteeRefused(
            _("The %(what)s is %(length)d characters long; at most %(limit)d are kept.")
            % {"what": what, "length": len(text), "limit": limit},
            field,
        )
    return text


def _actor(user: User | None) -> User | None:
    return user if user is not None and user.is_authenticated else None


def _meeting_locked(meeting: ReviewMeeting) -> ReviewMeeting:
    return ReviewMeeting.objects.select_for_update().get(pk=meeting.pk)


def _open_for_records(meeting: ReviewMeeting) -> None:
    if meeting.status == MeetingStatus.APPROVED:
        raise CommitteeRefused(_("This meeting's minutes are approved: its records are closed."))


# --- Meetings -------------------------------------------------------------------------------------


def default_title(pack: ReviewPack) -> str:
    """The period's days where the committee meets (the pack's time zone), as the pack shows them."""
    try:
        zone = ZoneInfo(pack.time_zone)
    except (ValueError, ZoneInfoNotFoundError):
        zone = UTC
    return _("Committee review %(start)s to %(end)s") % {
        "start": f"{pack.period_start.astimezone(zone):%Y-%m-%d}",
        "end": f"{pack.period_end.astimezone(zone):%Y-%m-%d}",
    }


def _action_row(action: Action) -> dict:
    return {
        "id": action.pk,
        "title": action.title,
        "owner": action.owner.get_username(),
        "due_on": action.due_on.isoformat(),
        "carried": action.carried,
    }


@transaction.atomic
def meeting_create(
    pack: ReviewPack,
    user: User,
    scheduled_for: datetime,
    attendees: Iterable = (),
    guests: str = "",
    *,
    title: str = "",
    now: datetime | None = None,
) -> ReviewMeeting:
    """Plan the cluster's next meeting from ``pack``: the latest meeting of the cluster becomes its
    previous one, every action still open from earlier meetings is carried once more, and the
    agenda is built and stored."""
    _may_act(user)
    now = now or timezone.now()
    if ReviewPack.objects.filter(supersedes=pack).exists():
        raise CommitteeRefused(
            _("This pack was corrected; start the meeting from its current version."), "pack"
        )
    if scheduled_for is None:
        raise CommitteeRefused(_("Say when the meeting takes place."), "scheduled_for")
    title = _text(title, field="title", limit=MAX_TITLE, required=False, what=_("title")) or default_title(
        pack
    )
    guests = _text(
        guests, field="guests", limit=MAX_GUESTS, required=False, what=_("list of other attendees")
    )
    # Lock the cluster's meetings so two plans of the "next" meeting cannot both take the same previous.
    meetings = ReviewMeeting.objects.select_for_update().filter(cluster_id=pack.cluster_id)
    previous = meetings.order_by("-scheduled_for", "-pk").first()
    if previous is not None and scheduled_for <= previous.scheduled_for:
        raise CommitteeRefused(
            _("The meeting must come after the previous one (%(when)s).")
            % {"when": f"{timezone.localtime(previous.scheduled_for):%Y-%m-%d %H:%M}"},
            "scheduled_for",
        )
    meeting = ReviewMeeting.objects.create(
        cluster_id=pack.cluster_id,
        pack=pack,
        previous=previous,
        title=title,
        scheduled_for=scheduled_for,
        guests=guests,
        created_at=now,
        created_by=_actor(user),
    )
    people = list(attendees)
    if people:
        meeting.attendees.set(people)
    carried = list(
        Action.objects.select_for_update()
        .filter(meeting__cluster_id=pack.cluster_id, status=ActionStatus.OPEN)
        .exclude(meeting=meeting)
        .order_by("pk")
    )
    Action.objects.filter(pk__in=[action.pk for action in carried]).update(carried=F("carried") + 1)
    for action in carried:
        action.carried += 1
    audit_append(
        actor=_actor(user),
        verb="meeting_create",
        obj=meeting,
        at=now,
        payload={
            "pack": pack.pk,
            "pack_hash": pack.content_hash,
            "previous": previous.pk if previous else 0,
            "title": title,
            "scheduled_for": scheduled_for.isoformat(),
            "attendees": ",".join(sorted(person.get_username() for person in people)),
            "guests": guests,
        },
    )
    for action in carried:
        audit_append(
            actor=_actor(user),
            verb="action_carry",
            obj=action,
            at=now,
            payload={"meeting": meeting.pk, "carried": action.carried},
        )
    meeting.agenda = build_agenda(
        pack.content,
        [_action_row(action) for action in carried],
        {"id": previous.pk, "title": previous.title} if previous else None,
    )
    meeting.save(update_fields=["agenda"])
    return meeting


@transaction.atomic
def meeting_hold(meeting: ReviewMeeting, user: User, *, now: datetime | None = None) -> ReviewMeeting:
    """Mark a planned meeting as held (its decisions and minutes are then the record)."""
    _may_act(user)
    now = now or timezone.now()
    meeting = _meeting_locked(meeting)
    if meeting.status != MeetingStatus.PLANNED:
        raise CommitteeRefused(_("This meeting was already held."))
    meeting.status, meeting.held_at = MeetingStatus.HELD, now
    meeting.save(update_fields=["status", "held_at"])
    audit_append(
        actor=_actor(user), verb="meeting_hold", obj=meeting, at=now, payload={"held_at": now.isoformat()}
    )
    return meeting


@transaction.atomic
def minutes_save(
    meeting: ReviewMeeting, user: User, minutes: str, *, now: datetime | None = None
) -> ReviewMeeting:
    """Write the minutes; they can change until the next meeting approves them."""
    _may_act(user)
    now = now or timezone.now()
    meeting = _meeting_locked(meeting)
    if meeting.minutes_approved_at is not None:
        raise CommitteeRefused(_("These minutes are approved and can no longer change."), "minutes")
    minutes = _text(minutes, field="minutes", limit=MAX_MINUTES, required=False, what=_("minutes"))
    if minutes == meeting.minutes:
        return meeting
    meeting.minutes = minutes
    meeting.save(update_fields=["minutes"])
    audit_append(
        actor=_actor(user),
        verb="minutes_save",
        obj=meeting,
        at=now,
        payload={"minutes_sha256": sha256_hex(minutes), "length": len(minutes)},
    )
    return meeting


@transaction.atomic
def minutes_approve(
    meeting_to_approve: ReviewMeeting, in_meeting: ReviewMeeting, user: User, *, now: datetime | None = None
) -> ReviewMeeting:
    """Approve the previous meeting's minutes in the meeting that follows it, once."""
    _may_act(user)
    now = now or timezone.now()
    target = _meeting_locked(meeting_to_approve)
    if in_meeting.previous_id != target.pk:
        raise CommitteeRefused(
            _("Only the previous meeting's minutes are approved, in the meeting after it.")
        )
    if target.minutes_approved_at is not None:
        raise CommitteeRefused(_("These minutes are already approved."))
    if target.status != MeetingStatus.HELD:
        raise CommitteeRefused(_("That meeting was never marked as held: it has no minutes to approve."))
    if not target.minutes.strip():
        raise CommitteeRefused(_("That meeting has no minutes yet."))
    target.status = MeetingStatus.APPROVED
    target.minutes_approved_at, target.minutes_approved_by, target.minutes_approved_in = (
        now,
        _actor(user),
        in_meeting,
    )
    target.save(update_fields=["status", "minutes_approved_at", "minutes_approved_by", "minutes_approved_in"])
    audit_append(
        actor=_actor(user),
        verb="minutes_approve",
        obj=target,
        at=now,
        payload={"in_meeting": in_meeting.pk, "minutes_sha256": sha256_hex(target.minutes)},
    )
    return target


# --- Decisions ------------------------------------------------------------------------------------


def _options(options: Iterable[str] | str | None) -> list[str]:
    if isinstance(options, str):
        options = options.splitlines()
    kept = [option.strip() for option in options or () if option and option.strip()]
    if len(kept) > MAX_OPTIONS:
        raise CommitteeRefused(_("At most %(n)d options are kept.") % {"n": MAX_OPTIONS}, "options")
    if any(len(option) > MAX_OPTION for option in kept):
        raise CommitteeRefused(
            _("An option is at most %(n)d characters long.") % {"n": MAX_OPTION}, "options"
        )
    return kept


def _check_supersedes(meeting: ReviewMeeting, old: Decision | None) -> Decision | None:
    if old is None:
        return None
    old = Decision.objects.select_for_update().select_related("meeting").get(pk=old.pk)
    if old.meeting.cluster_id != meeting.cluster_id or (
        old.meeting_id != meeting.pk and old.meeting.scheduled_for > meeting.scheduled_for
    ):
        raise CommitteeRefused(
            _("A decision can only supersede one of this meeting or an earlier meeting of the cluster."),
            "supersedes",
        )
    if Decision.objects.filter(supersedes=old).exists():
        raise CommitteeRefused(
            _("That decision was already superseded; supersede the newer one."), "supersedes"
        )
    return old


def _new_ticket(meeting: ReviewMeeting, user: User, spec: dict, now: datetime) -> Ticket:
    department = spec.get("department")
    if department is not None and not isinstance(department, Department):
        department = Department.objects.filter(pk=department).first()
    try:
        return ticket_create(
            user=user,
            title=spec.get("title") or "",
            department=department,
            severity=spec.get("severity") or "medium",
            description=spec.get("description") or "",
            origin=TicketOrigin.COMMITTEE,
            meeting=meeting.title,
            now=now,
        )
    except TicketRefused as refused:
        raise CommitteeRefused(
            refused.message, f"ticket_{refused.field}" if refused.field else "ticket"
        ) from None


@transaction.atomic
def decision_record(
    meeting: ReviewMeeting,
    user: User,
    kind: str,
    title: str,
    options: Iterable[str] | str,
    outcome: str,
    decided_by: str,
    quota_cycle: QuotaCycle | None = None,
    ticket: Ticket | None = None,
    capacity_gpu_model: str = "",
    capacity_gpus: int | None = None,
    supersedes: Decision | None = None,
    *,
    quota_approve: bool = False,
    new_ticket: dict | None = None,
    now: datetime | None = None,
) -> Decision:
    """Record a decision of ``meeting`` (numbered 1, 2, … within it), written once.

    ``kind`` quota: names ``quota_cycle``; with ``quota_approve`` the proposed cycle is approved
    now (by the quota service, the outcome as its comment). ``kind`` ticket: links ``ticket``, or
    opens one from ``new_ticket`` (``{"title", "department", "severity", "description"}``) with
    origin committee and the meeting's title. ``kind`` capacity: the GPU model and GPUs ordered.
    """
    _may_act(user)
    now = now or timezone.now()
    meeting = _meeting_locked(meeting)
    _open_for_records(meeting)
    if kind not in DecisionKind.values:
        raise CommitteeRefused(_("Unknown kind of decision %(value)s.") % {"value": kind}, "kind")
    title = _text(title, field="title", limit=MAX_TITLE, required=True, what=_("title"))
    outcome = _text(outcome, field="outcome", limit=MAX_OUTCOME, required=True, what=_("outcome"))
    decided_by = _text(
        decided_by, field="decided_by", limit=MAX_DECIDED_BY, required=True, what=_("decided by")
    )
    options = _options(options)
    supersedes = _check_supersedes(meeting, supersedes)
    payload: dict = {"kind": kind, "title": title, "outcome": outcome, "decided_by": decided_by}
    if kind == DecisionKind.QUOTA:
        if quota_cycle is None:
            raise CommitteeRefused(_("Name the quota cycle this decision is about."), "quota_cycle")
        if quota_cycle.cluster_id != meeting.cluster_id:
            raise CommitteeRefused(_("That quota cycle is of another cluster."), "quota_cycle")
        payload["quota_cycle"] = quota_cycle.pk
    elif quota_cycle is not None or quota_approve:
        raise CommitteeRefused(_("Only a quota decision names a quota cycle."), "quota_cycle")
    if kind == DecisionKind.TICKET:
        if ticket is None and not new_ticket:
            raise CommitteeRefused(_("Name the ticket, or describe the one to open."), "ticket")
        if ticket is not None and new_ticket:
            raise CommitteeRefused(_("Either name a ticket or open a new one, not both."), "ticket")
    elif ticket is not None or new_ticket:
        raise CommitteeRefused(_("Only a ticket decision links a ticket."), "ticket")
    capacity_gpu_model = (capacity_gpu_model or "").strip()
    if kind == DecisionKind.CAPACITY:
        if not capacity_gpu_model:
            raise CommitteeRefused(_("Name the GPU model ordered."), "capacity_gpu_model")
        if len(capacity_gpu_model) > 100:
            raise CommitteeRefused(_("The GPU model is at most 100 characters long."), "capacity_gpu_model")
        if capacity_gpus is None or capacity_gpus <= 0:
            raise CommitteeRefused(_("Say how many GPUs are ordered (at least one)."), "capacity_gpus")
        payload.update({"capacity_gpu_model": capacity_gpu_model, "capacity_gpus": int(capacity_gpus)})
    elif capacity_gpu_model or capacity_gpus:
        raise CommitteeRefused(_("Only a capacity decision orders GPUs."), "capacity_gpu_model")

    number = (meeting.decisions.aggregate(top=Max("number"))["top"] or 0) + 1
    if kind == DecisionKind.QUOTA and quota_approve:
        if not has_role(user, QUOTA_PLANNERS):
            raise CommitteeRefused(_("Only committee members approve quotas."), "quota_cycle", status=403)
        comment = _("Decision %(number)d of %(meeting)s: %(outcome)s") % {
            "number": number,
            "meeting": meeting.title,
            "outcome": outcome,
        }
        try:
            quota_cycle_approve(cycle=quota_cycle, actor=user, comment=comment, now=now)
        except QuotaError as error:
            raise CommitteeRefused(str(error), "quota_cycle") from None
        except ValidationError as error:
            raise CommitteeRefused(" ".join(error.messages), "quota_cycle") from None
        payload["quota_approved"] = 1
    if kind == DecisionKind.TICKET and new_ticket:
        ticket = _new_ticket(meeting, user, new_ticket, now)
        payload["ticket_opened"] = 1
    if ticket is not None:
        payload["ticket"] = ticket.pk
    if supersedes is not None:
        payload["supersedes"] = supersedes.pk
    if options:
        payload["options"] = "\n".join(options)
    try:
        with transaction.atomic():
            decision = Decision.objects.create(
                meeting=meeting,
                number=number,
                kind=kind,
                title=title,
                options=options,
                outcome=outcome,
                decided_by=decided_by,
                decided_at=now,
                recorded_by=_actor(user),
                supersedes=supersedes,
                quota_cycle=quota_cycle,
                ticket=ticket,
                capacity_gpu_model=capacity_gpu_model,
                capacity_gpus=capacity_gpus if kind == DecisionKind.CAPACITY else None,
            )
    except IntegrityError:
        raise CommitteeRefused(
            _("That decision was already superseded; supersede the newer one."), "supersedes"
        ) from None
    payload["number"] = number
    audit_append(actor=_actor(user), verb="decision_record", obj=decision, at=now, payload=payload)
    return decision


# --- Actions --------------------------------------------------------------------------------------


@transaction.atomic
def action_create(
    meeting: ReviewMeeting,
    user: User,
    title: str,
    owner,
    due_on: date,
    decision: Decision | None = None,
    *,
    now: datetime | None = None,
) -> Action:
    """A follow-up of ``meeting`` with one owner and a due date."""
    _may_act(user)
    now = now or timezone.now()
    meeting = _meeting_locked(meeting)
    _open_for_records(meeting)
    title = _text(title, field="title", limit=300, required=True, what=_("action"))
    if owner is None or not get_user_model().objects.filter(pk=owner.pk, is_active=True).exists():
        raise CommitteeRefused(_("Choose the person who owns the action."), "owner")
    if due_on is None:
        raise CommitteeRefused(_("Give the action a due date."), "due_on")
    if decision is not None and decision.meeting_id != meeting.pk:
        raise CommitteeRefused(_("That decision belongs to another meeting."), "decision")
    action = Action.objects.create(
        meeting=meeting,
        decision=decision,
        title=title,
        owner=owner,
        due_on=due_on,
        created_at=now,
        created_by=_actor(user),
    )
    audit_append(
        actor=_actor(user),
        verb="action_create",
        obj=action,
        at=now,
        payload={
            "meeting": meeting.pk,
            "title": title,
            "owner": owner.get_username(),
            "due_on": due_on.isoformat(),
            "decision": decision.pk if decision else 0,
        },
    )
    return action


@transaction.atomic
def action_close(
    action: Action, user: User, status: str, note: str = "", *, now: datetime | None = None
) -> Action:
    """Close an open action as done or dropped (dropping needs a note saying why)."""
    _may_act(user)
    now = now or timezone.now()
    action = Action.objects.select_for_update().get(pk=action.pk)
    if action.status != ActionStatus.OPEN:
        raise CommitteeRefused(_("This action is already closed."))
    if status not in (ActionStatus.DONE, ActionStatus.DROPPED):
        raise CommitteeRefused(_("Close an action as done or dropped."), "status")
    note = _text(
        note, field="note", limit=MAX_NOTE, required=status == ActionStatus.DROPPED, what=_("note saying why")
    )
    action.status, action.closed_at, action.closing_note = status, now, note
    action.save(update_fields=["status", "closed_at", "closing_note"])
    audit_append(
        actor=_actor(user), verb="action_close", obj=action, at=now, payload={"status": status, "note": note}
    )
    return action
