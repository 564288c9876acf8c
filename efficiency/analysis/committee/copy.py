"""A department's copy of a pack: the cover, and of the rest only that department's parts.

Built from the sealed content (never from live data), so a head's copy shows the same figures as
the committee's. Whatever is not known to be about the listed departments is dropped: the
cluster-wide sections become ``{"available": false, ...}``, so another department's code or
figures never reach the copy.
"""

from collections.abc import Iterable, Mapping
from typing import Any

COVER_KEYS = (
    "schema",
    "definitions_version",
    "cluster",
    "period",
    "previous",
    "generated_at",
    "completeness",
)
CLUSTER_WIDE = {"available": False, "reason": "cluster-wide section: committee only"}
CLUSTER_WIDE_SECTIONS = (
    "summary",
    "since_last",
    "cluster_section",
    "capacity",
    "reliability",
    "recommendations",
    "tickets",
)


def _unavailable(section: Any) -> bool:
    return isinstance(section, Mapping) and section.get("available") is False


def department_copy(content: Mapping, codes: Iterable[str]) -> dict:
    """``content`` reduced to the departments whose code is in ``codes``."""
    keep = sorted(set(codes))
    allowed = set(keep)
    copy: dict[str, Any] = {key: content[key] for key in COVER_KEYS if key in content}
    copy["copy"] = {"departments": keep}
    for key in CLUSTER_WIDE_SECTIONS:
        copy[key] = dict(CLUSTER_WIDE)
    copy["departments"] = [
        entry for entry in content.get("departments") or [] if entry.get("code") in allowed
    ]
    copy["pareto_idle"] = [
        row for row in content.get("pareto_idle") or [] if row.get("department") in allowed
    ]

    proposals = content.get("proposals")
    if not isinstance(proposals, Mapping) or _unavailable(proposals):
        copy["proposals"] = proposals if _unavailable(proposals) else dict(CLUSTER_WIDE)
    else:
        copy["proposals"] = {
            "available": proposals.get("available", True),
            "cycle_id": proposals.get("cycle_id"),
            "status": proposals.get("status"),
            "rows": [row for row in proposals.get("rows") or [] if row.get("department") in allowed],
            "backtest": None,  # the backtest compares every department: committee only
            "objections": [
                row for row in proposals.get("objections") or [] if row.get("department") in allowed
            ],
        }

    showback = content.get("showback")
    if not isinstance(showback, Mapping) or _unavailable(showback):
        copy["showback"] = showback if _unavailable(showback) else dict(CLUSTER_WIDE)
    else:
        copy["showback"] = {
            "rate_card": showback.get("rate_card"),
            "departments": [row for row in showback.get("departments") or [] if row.get("code") in allowed],
            "central": None,
            "total_cost": None,
            "unpriced_models": showback.get("unpriced_models", []),
        }
    return copy
