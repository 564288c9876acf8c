"""What a delivery says: one notification as a headline, details and a link, or a digest of many.

Texts are written in ``PORTAL_NOTIFICATION_LANGUAGE`` from each notification's snapshot. They are
plain text here; each channel escapes them for its own markup (``channels``), so a ticket title
cannot turn into a link, a heading or an @-mention in a chat group.
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.urls import NoReverseMatch, reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from efficiency.choices import FaultCategory, NotificationEvent, Severity, TicketSeverity, TicketState
from efficiency.models import Notification
from efficiency.recommendation_messages import rule_title

TITLE_MAX_CHARS = 120
DIGEST_MAX_ITEMS = 20


@dataclass(frozen=True)
class Item:
    """One notification: ``headline`` says what happened, ``details`` the facts, ``url`` where to look."""

    headline: str
    details: list[str] = field(default_factory=list)
    url: str = ""


@dataclass(frozen=True)
class Message:
    """What one delivery sends: a subject line and its items (one, or a digest's first ones)."""

    subject: str
    items: list[Item]
    more: int = 0  # items of a digest left out of the message

    @property
    def digest(self) -> bool:
        return len(self.items) + self.more > 1


def clip(text: object, limit: int = TITLE_MAX_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis marks a cut)."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def message_build(notifications: list[Notification]) -> Message:
    """The message for a delivery's notifications, oldest first; a digest when there are more
    than ``PORTAL_NOTIFICATION_DIGEST_OVER`` (the first ``DIGEST_MAX_ITEMS`` listed)."""
    with translation.override(settings.PORTAL_NOTIFICATION_LANGUAGE):
        items = [_item(notification) for notification in notifications]
        if len(items) == 1:
            return Message(subject=items[0].headline, items=items)
        if len(items) <= settings.PORTAL_NOTIFICATION_DIGEST_OVER:
            subject = _("%(count)d notifications from the GPU Efficiency Portal") % {"count": len(items)}
            return Message(subject=subject, items=items)
        subject = _("Digest: %(count)d notifications from the GPU Efficiency Portal") % {"count": len(items)}
        return Message(
            subject=subject, items=items[:DIGEST_MAX_ITEMS], more=max(0, len(items) - DIGEST_MAX_ITEMS)
        )


def more_text(count: int) -> str:
    with translation.override(settings.PORTAL_NOTIFICATION_LANGUAGE):
        return _("… and %(count)d more: see the portal.") % {"count": count}


def _url(name: str, pk: int, fallback: str) -> str:
    try:
        path = reverse(name, args=[pk])
    except NoReverseMatch:
        path = fallback
    return settings.PORTAL_BASE_URL + path


def _when(value: str | None) -> str:
    if not value:
        return "-"
    at = timezone.localtime(datetime.fromisoformat(value))
    return f"{at:%Y-%m-%d %H:%M}"


def _label(choices, value: str) -> str:
    try:
        return str(choices(value).label)
    except ValueError:
        return value


def _item(notification: Notification) -> Item:
    p = notification.payload
    event = notification.event
    if event in (
        NotificationEvent.TICKET_ASSIGNED,
        NotificationEvent.TICKET_DUE_SOON,
        NotificationEvent.TICKET_OVERDUE,
        NotificationEvent.TICKET_VERIFIED,
    ):
        return _ticket_item(event, p)
    if event == NotificationEvent.RECOMMENDATION_ACCEPTED:
        url = (
            _url("efficiency:ticket-detail", p["ticket_id"], f"/tickets/{p['ticket_id']}/")
            if p.get("ticket_id")
            else _url("efficiency:recommendation-detail", p["id"], f"/recommendations/{p['id']}/")
        )
        return Item(
            headline=_("Recommendation #%(id)s accepted: %(rule)s")
            % {"id": p["id"], "rule": rule_title(p["rule"])},
            details=[
                _("About: %(subject)s") % {"subject": clip(p.get("subject"))},
                _("Department that makes the change: %(department)s")
                % {"department": clip(p.get("department") or "-")},
                _("Expected gain: %(gain).0f GPU-hours a week") % {"gain": p.get("gain_gpu_h_week") or 0},
            ],
            url=url,
        )
    if event == NotificationEvent.PACK_READY:
        return Item(
            headline=_("Review pack of %(cluster)s ready: %(start)s to %(end)s (version %(version)s)")
            % {
                "cluster": clip(p.get("cluster") or "-"),
                "start": _when(p.get("period_start")),
                "end": _when(p.get("period_end")),
                "version": p.get("version", 1),
            },
            details=[_("SHA-256: %(hash)s") % {"hash": clip(p.get("hash") or "-")}],
            url=_url("efficiency:pack-detail", p["id"], f"/committee/packs/{p['id']}/"),
        )
    # Incident opened.
    where = p.get("node") or p.get("job") or "-"
    return Item(
        headline=_("Incident #%(id)s opened: %(category)s on %(where)s")
        % {"id": p["id"], "category": _label(FaultCategory, p.get("category", "")), "where": clip(where)},
        details=[
            _("Severity: %(severity)s") % {"severity": _label(Severity, p.get("severity", ""))},
            _("Department: %(department)s") % {"department": clip(p.get("department") or "-")},
            _("Occurred: %(at)s") % {"at": _when(p.get("occurred_at"))},
        ],
        url=_url("efficiency:incident-detail", p["id"], f"/faults/incidents/{p['id']}/"),
    )


def _ticket_item(event: str, p: dict) -> Item:
    values = {"id": p["id"], "title": clip(p.get("title")), "due": _when(p.get("due_at"))}
    if event == NotificationEvent.TICKET_ASSIGNED:
        headline = _("Ticket #%(id)s assigned to %(assignee)s: %(title)s") % {
            **values,
            "assignee": clip(p.get("assignee") or "-"),
        }
    elif event == NotificationEvent.TICKET_DUE_SOON:
        headline = _("Ticket #%(id)s is due soon (%(due)s): %(title)s") % values
    elif event == NotificationEvent.TICKET_OVERDUE:
        headline = _("Ticket #%(id)s is overdue (was due %(due)s): %(title)s") % values
    else:
        outcome = {
            TicketState.VERIFIED_GAIN: _("the fix brought a gain"),
            TicketState.NO_GAIN: _("no gain measured"),
            TicketState.REGRESSED: _("the job family got slower"),
        }.get(p.get("state"), _label(TicketState, p.get("state", "")))
        headline = _("Ticket #%(id)s verified, %(outcome)s: %(title)s") % {**values, "outcome": outcome}
    details = [
        _("Department: %(department)s") % {"department": clip(p.get("department") or "-")},
        _("Severity: %(severity)s") % {"severity": _label(TicketSeverity, p.get("severity", ""))},
        _("Due: %(due)s") % values,
    ]
    if event == NotificationEvent.TICKET_VERIFIED and p.get("measured_gain_pct") is not None:
        details.append(_("Measured gain: %(gain)+.1f%%") % {"gain": p["measured_gain_pct"]})
    return Item(
        headline=headline,
        details=details,
        url=_url("efficiency:ticket-detail", p["id"], f"/tickets/{p['id']}/"),
    )
