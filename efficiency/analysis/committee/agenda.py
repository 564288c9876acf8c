"""A committee meeting's agenda, built from its review pack and the actions still open.

Order: the actions carried over from earlier meetings first (the ones carried twice or more are
flagged), then the previous meeting's minutes to approve, then the decisions the pack requests,
then the pack's sections for discussion. Items are plain JSON (stored with the meeting); the page
names them in the reader's language from ``kind`` and ``key``.
"""

from collections.abc import Iterable, Mapping
from typing import Any

# An action carried to this many meetings or more is flagged on the agenda.
FLAG_AFTER = 2

# The pack's sections, in the order they are discussed: (agenda key, content key or None).
SECTIONS: tuple[tuple[str, str | None], ...] = (
    ("summary", "summary"),
    ("since_last", "since_last"),
    ("cluster", "cluster_section"),
    ("departments", "departments"),
    ("proposals", "proposals"),
    ("capacity", "capacity"),
    ("reliability", "reliability"),
    ("recommendations_tickets", "recommendations"),
    ("showback", "showback"),
)


def flagged(carried: int) -> bool:
    return carried >= FLAG_AFTER


def _available(section: Any) -> bool:
    if isinstance(section, Mapping):
        return section.get("available", True) is not False
    return section is not None


def build_agenda(
    content: Mapping[str, Any],
    open_actions: Iterable[Mapping[str, Any]] = (),
    previous_meeting: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The agenda items.

    ``open_actions``: ``{"id", "title", "owner", "due_on", "carried"}`` each (``due_on`` an ISO
    date); the most carried first, then by due date. ``previous_meeting``: ``{"id", "title"}``
    whose minutes this meeting approves, or None.
    """
    items: list[dict[str, Any]] = []
    actions = sorted(
        open_actions,
        key=lambda a: (-int(a.get("carried") or 0), str(a.get("due_on") or ""), a.get("id") or 0),
    )
    for action in actions:
        carried = int(action.get("carried") or 0)
        items.append(
            {
                "kind": "action",
                "ref": action.get("id"),
                "title": str(action.get("title") or ""),
                "owner": str(action.get("owner") or ""),
                "due_on": str(action.get("due_on") or ""),
                "carried": carried,
                "flagged": flagged(carried),
            }
        )
    if previous_meeting is not None:
        items.append(
            {
                "kind": "minutes",
                "ref": previous_meeting.get("id"),
                "title": str(previous_meeting.get("title") or ""),
            }
        )
    summary = content.get("summary")
    requested = summary.get("decisions_requested", []) if isinstance(summary, Mapping) else []
    for request in requested or []:
        items.append(
            {
                "kind": "decision",
                "decision_kind": str(request.get("kind") or ""),
                "ref": request.get("ref"),
                "title_key": str(request.get("title_key") or ""),
                "params": dict(request.get("params") or {}),
            }
        )
    for key, content_key in SECTIONS:
        items.append({"kind": "section", "key": key, "available": _available(content.get(content_key))})
    return items
