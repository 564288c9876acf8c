"""Committee meetings, the read side: meetings, their decisions and actions, the actions still
open, and the audit trail with its chain check. Committee members and platform admins only
(department heads see packs, not the meetings): others get ``PermissionDenied``.
"""

from datetime import UTC

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from efficiency.analysis.committee.agenda import FLAG_AFTER
from efficiency.analysis.committee.chain import ChainCheck, Link, verify_chain
from efficiency.choices import ActionStatus, QuotaCycleStatus, Role
from efficiency.models import (
    Action,
    AuditEntry,
    Decision,
    Department,
    QuotaCycle,
    ReviewMeeting,
    ReviewPack,
    Ticket,
)
from efficiency.permissions import has_role
from efficiency.scoping import User

MEETING_ROLES = (Role.COMMITTEE, Role.PLATFORM_ADMIN)


def may_keep_meetings(user: User) -> bool:
    return has_role(user, MEETING_ROLES)


def _require(user: User) -> None:
    if not may_keep_meetings(user):
        raise PermissionDenied


def meeting_list(*, user: User, cluster_id: int | None = None) -> QuerySet[ReviewMeeting]:
    _require(user)
    rows = ReviewMeeting.objects.select_related("cluster", "pack").order_by("-scheduled_for", "-pk")
    return rows if cluster_id is None else rows.filter(cluster_id=cluster_id)


def meeting_get(*, user: User, pk: int) -> ReviewMeeting:
    _require(user)
    return (
        ReviewMeeting.objects.select_related("cluster", "pack", "previous", "minutes_approved_by")
        .prefetch_related("attendees")
        .get(pk=pk)
    )


def pack_meetings(*, user: User, pack_id: int) -> QuerySet[ReviewMeeting]:
    """The meetings run from a pack (or from an earlier or later version of it)."""
    _require(user)
    return ReviewMeeting.objects.filter(pack_id=pack_id).order_by("scheduled_for", "pk")


def pack_for_meeting(*, user: User, pk: int) -> ReviewPack:
    _require(user)
    return ReviewPack.objects.select_related("cluster").get(pk=pk)


def meeting_decisions(meeting: ReviewMeeting) -> QuerySet[Decision]:
    """The decisions of a meeting in order, each with what superseded it (if anything)."""
    return (
        Decision.objects.filter(meeting=meeting)
        .select_related(
            "supersedes__meeting", "superseded_by__meeting", "quota_cycle", "ticket", "recorded_by"
        )
        .order_by("number")
    )


def meeting_actions(meeting: ReviewMeeting) -> QuerySet[Action]:
    return Action.objects.filter(meeting=meeting).select_related("owner", "decision").order_by("due_on", "pk")


def open_actions(*, cluster_id: int | None = None) -> QuerySet[Action]:
    rows = Action.objects.filter(status=ActionStatus.OPEN).select_related("owner", "meeting")
    if cluster_id is not None:
        rows = rows.filter(meeting__cluster_id=cluster_id)
    return rows.order_by("-carried", "due_on", "pk")


def carried_actions(meeting: ReviewMeeting) -> QuerySet[Action]:
    """The actions of earlier meetings of the cluster that are still open."""
    return (
        open_actions(cluster_id=meeting.cluster_id)
        .exclude(meeting=meeting)
        .filter(meeting__scheduled_for__lte=meeting.scheduled_for)
    )


def flagged_actions(*, cluster_id: int | None = None) -> QuerySet[Action]:
    return open_actions(cluster_id=cluster_id).filter(carried__gte=FLAG_AFTER)


def decisions_to_supersede(meeting: ReviewMeeting) -> QuerySet[Decision]:
    """Decisions of this meeting or earlier ones of the cluster that nothing supersedes yet."""
    return (
        Decision.objects.filter(
            meeting__cluster_id=meeting.cluster_id, meeting__scheduled_for__lte=meeting.scheduled_for
        )
        .filter(superseded_by__isnull=True)
        .select_related("meeting")
        .order_by("-meeting__scheduled_for", "-number")
    )


def proposed_quota_cycles(meeting: ReviewMeeting) -> QuerySet[QuotaCycle]:
    return QuotaCycle.objects.filter(
        cluster_id=meeting.cluster_id, status=QuotaCycleStatus.PROPOSED
    ).order_by("-start")


def decision_quota_cycles(meeting: ReviewMeeting) -> QuerySet[QuotaCycle]:
    return QuotaCycle.objects.filter(cluster_id=meeting.cluster_id).order_by("-start")


def committee_people() -> QuerySet:
    """Who may attend or own an action: every active user with a portal role."""
    return (
        get_user_model()
        .objects.filter(is_active=True, groups__name__in=[role.value for role in Role])
        .distinct()
        .order_by("username")
    )


def active_departments() -> QuerySet[Department]:
    return Department.objects.filter(is_active=True).order_by("name")


def ticket_by_id(pk: int) -> Ticket:
    return Ticket.objects.get(pk=pk)


def action_get(*, user: User, pk: int) -> Action:
    _require(user)
    return Action.objects.select_related("meeting").get(pk=pk)


def decision_get(pk: int) -> Decision:
    return Decision.objects.select_related("meeting").get(pk=pk)


def audit_entries(*, user: User) -> QuerySet[AuditEntry]:
    _require(user)
    return AuditEntry.objects.order_by("seq")


def audit_check(*, user: User) -> ChainCheck:
    """Recompute the whole chain (as ``efficiency.services.committee.audit.audit_verify``)."""
    _require(user)
    rows = AuditEntry.objects.order_by("seq").iterator(chunk_size=2000)
    return verify_chain(
        Link(
            seq=row.seq,
            at=row.at.astimezone(UTC).isoformat(timespec="microseconds"),
            actor=row.actor_name,
            verb=row.verb,
            object_type=row.object_type,
            object_id=row.object_id,
            payload=row.payload,
            prev_hash=row.prev_hash,
            entry_hash=row.entry_hash,
        )
        for row in rows
    )
