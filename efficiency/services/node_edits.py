"""Editing what the sources cannot tell about a node: rack, owner, RDMA, why it is in its state."""

from django.db import transaction

from efficiency.models import Department, Node

EDITABLE_NODE_FIELDS = ("fault_domain", "owner_department", "rdma_capable", "state_reason")


def node_attributes_update(*, node: Node, changes: dict, reason: str = "") -> list[str]:
    """Set any of ``EDITABLE_NODE_FIELDS`` on ``node`` (validated values: a ``Department`` or
    None for ``owner_department``) and return the names of those that changed.

    Saved through ``save()``, so the audit trail records the change with the acting user (the
    request's) and ``reason``; nothing is written when no value differs.
    """
    unknown = set(changes) - set(EDITABLE_NODE_FIELDS)
    if unknown:
        raise ValueError(f"not editable here: {', '.join(sorted(unknown))}")
    owner = changes.get("owner_department")
    if owner is not None and not isinstance(owner, Department):
        raise TypeError("owner_department must be a Department or None")
    changed = []
    for name, value in changes.items():
        current = node.owner_department if name == "owner_department" else getattr(node, name)
        if current != value:
            setattr(node, name, value)
            changed.append(name)
    if changed:
        node._change_reason = (reason or "edited: " + ", ".join(changed))[:100]
        with transaction.atomic():
            node.save(update_fields=[*changed, "updated_at"])
    return changed
