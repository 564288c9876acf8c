"""Template helpers for the fault side of pages: a node's state with its incident, durations."""

from django import template

from efficiency.charts.toolkit import duration_text
from efficiency.permissions import FAULT_OPERATORS, has_role
from efficiency.selectors.faults import node_fault_state

register = template.Library()


@register.inclusion_tag("efficiency/faults/partials/node_state.html", takes_context=True)
def node_state(context, node):
    """A node's state, the incident it is isolated for, return to service, its history, incidents."""
    user = context["request"].user
    return {
        "node": node,
        "state": _state(context, node),
        "can_operate": has_role(user, FAULT_OPERATORS),
        "csrf_token": context.get("csrf_token"),
        "request": context["request"],
    }


@register.inclusion_tag("efficiency/faults/partials/node_faults.html", takes_context=True)
def node_faults(context, node):
    """The incidents on a node and its state history, as far as the reader may see them."""
    return {"state": _state(context, node)}


def _state(context, node):
    # Both tags of a node page read the same state: ask once per page.
    if getattr(node, "_fault_state", None) is None:
        node._fault_state = node_fault_state(user=context["request"].user, node=node)
    return node._fault_state


@register.filter
def fault_duration(seconds: float | None) -> str:
    """Seconds as people say them, in the reader's language: "45 s", "2.5 min", "1.5 h"."""
    return duration_text(seconds)
