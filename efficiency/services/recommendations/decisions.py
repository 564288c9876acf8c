"""The review workflow: accept (which opens a remediation ticket), reject, snooze and comment, each
recorded as a decision.

Which decisions a recommendation offers in its state is ``recommendation_actions``; a decision that
does not apply, or bad input (no reason to reject, a snooze date not in the future, a comment too
long), raises ``RecommendationDecisionRefused`` with a message for the page and the API, and
changes nothing.
"""

from datetime import date, datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency.choices import RecommendationAction, RecommendationState, Role
from efficiency.models import Department, Recommendation, RecommendationDecision
from efficiency.permissions import RECOMMENDATION_REVIEWERS, has_role
from efficiency.scoping import User, visible_department_ids
from efficiency.services.notifications import notification_emit
from efficiency.services.tickets import ticket_from_recommendation

ACCEPT, REJECT, SNOOZE, COMMENT = "accept", "reject", "snooze", "comment"
MAX_TEXT = 2000


class RecommendationDecisionRefused(Exception):
    """A decision that does not apply now, or bad input for it; the message says which."""


def recommendation_actions(recommendation: Recommendation, user: User) -> list[str]:
    """The decisions ``user`` may take on ``recommendation`` in its state."""
    actions = []
    if has_role(user, RECOMMENDATION_REVIEWERS):
        state = recommendation.state
        if state in (RecommendationState.PROPOSED, RecommendationState.SNOOZED, RecommendationState.REJECTED):
            actions.append(ACCEPT)
        if state in (RecommendationState.PROPOSED, RecommendationState.SNOOZED, RecommendationState.ACCEPTED):
            actions.append(REJECT)
        if state in (RecommendationState.PROPOSED, RecommendationState.ACCEPTED):
            actions.append(SNOOZE)
    if may_comment(recommendation, user):
        actions.append(COMMENT)
    return actions


def may_comment(recommendation: Recommendation, user: User) -> bool:
    if has_role(user, (Role.COMMITTEE, Role.PLATFORM_ADMIN)):
        return True
    # A head sees exactly the departments they head, and the ids are cached on the user: no query
    # per recommendation when a list shows each one's actions.
    headed = set(visible_department_ids(user) or ())
    return bool(headed & {recommendation.department_id, recommendation.assignee_department_id} - {None})


def _text(value: str | None, *, required: bool, what: str) -> str:
    text = (value or "").strip()
    if required and not text:
        raise RecommendationDecisionRefused(_("A %(what)s is required.") % {"what": what})
    if len(text) > MAX_TEXT:
        raise RecommendationDecisionRefused(
            _("The %(what)s is %(length)d characters long; at most %(limit)d are kept.")
            % {"what": what, "length": len(text), "limit": MAX_TEXT}
        )
    return text


def _check(recommendation: Recommendation, user: User, action: str) -> None:
    if action == COMMENT and not may_comment(recommendation, user):
        raise RecommendationDecisionRefused(
            _("Only the heads of its department, the GPU committee and platform admins comment on it.")
        )
    if action not in recommendation_actions(recommendation, user):
        done = {
            ACCEPT: _("accepted"),
            REJECT: _("rejected"),
            SNOOZE: _("snoozed"),
            COMMENT: _("commented on"),
        }[action]
        raise RecommendationDecisionRefused(
            _("A recommendation that is %(state)s cannot be %(done)s.")
            % {"state": recommendation.get_state_display().lower(), "done": done}
        )


@transaction.atomic
def recommendation_decide(
    recommendation: Recommendation,
    *,
    user: User,
    action: str,
    text: str | None = None,
    until: date | None = None,
    assignee_department: Department | None = None,
    now: datetime | None = None,
) -> RecommendationDecision:
    """Record one decision and apply it (see the module's docstring)."""
    now = now or timezone.now()
    recommendation = Recommendation.objects.select_for_update().get(pk=recommendation.pk)
    if action not in (ACCEPT, REJECT, SNOOZE, COMMENT):
        raise RecommendationDecisionRefused(_("Unknown decision: %(action)s.") % {"action": action})
    _check(recommendation, user, action)
    decision = RecommendationDecision(recommendation=recommendation, user=user, at=now)
    if action == ACCEPT:
        note = _text(text, required=False, what=_("note"))
        department = assignee_department or recommendation.department
        if department is None:
            raise RecommendationDecisionRefused(_("Choose the department that will make the change."))
        recommendation.state = RecommendationState.ACCEPTED
        recommendation.assignee_department = department
        recommendation.decision_note = note
        recommendation.snoozed_until = None
        decision.action, decision.text, decision.assignee_department = (
            RecommendationAction.ACCEPTED,
            note,
            department,
        )
    elif action == REJECT:
        reason = _text(text, required=True, what=_("reason"))
        recommendation.state = RecommendationState.REJECTED
        recommendation.rejected_fingerprint = recommendation.fingerprint
        recommendation.decision_note = reason
        recommendation.snoozed_until = None
        decision.action, decision.text = RecommendationAction.REJECTED, reason
    elif action == SNOOZE:
        if until is None:
            raise RecommendationDecisionRefused(_("Choose the date until which to snooze."))
        if until <= timezone.localdate(now):
            raise RecommendationDecisionRefused(_("The snooze date must be after today."))
        if (until - timezone.localdate(now)).days > 366:
            raise RecommendationDecisionRefused(_("Snooze for at most a year."))
        note = _text(text, required=False, what=_("note"))
        recommendation.state = RecommendationState.SNOOZED
        recommendation.snoozed_until = until
        recommendation.decision_note = note
        decision.action, decision.text, decision.snoozed_until = RecommendationAction.SNOOZED, note, until
    else:
        decision.action, decision.text = (
            RecommendationAction.COMMENTED,
            _text(text, required=True, what=_("comment")),
        )
    if action != COMMENT:
        recommendation.save()
    decision.save()
    if action == ACCEPT:
        # Accepted work is tracked as a ticket of the department that makes the change.
        ticket_from_recommendation(
            recommendation, user=user, department=recommendation.assignee_department, now=now
        )
        notification_emit("recommendation_accepted", recommendation=recommendation, now=now)
    return decision
