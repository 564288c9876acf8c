"""A department head's copy of a review pack: the cover and their own departments' parts.

Written by helper B as a stand-in for the pack builder's own (helper A owns this module).
Pure Python: takes the sealed content dict and returns a new dict, never changing its argument.
"""

import copy as _copy

COVER_KEYS = (
    "schema",
    "definitions_version",
    "cluster",
    "period",
    "previous",
    "generated_at",
    "completeness",
)
CLUSTER_WIDE = (
    "summary",
    "since_last",
    "cluster_section",
    "capacity",
    "reliability",
    "recommendations",
    "tickets",
)
COMMITTEE_ONLY = {"available": False, "reason": "cluster-wide section: committee only"}


def department_copy(content: dict, codes: list[str] | tuple[str, ...] | set[str]) -> dict:
    """``content`` cut to the departments whose code is in ``codes``."""
    keep = set(codes)
    result = {key: _copy.deepcopy(content.get(key)) for key in COVER_KEYS}
    for key in CLUSTER_WIDE:
        result[key] = dict(COMMITTEE_ONLY)
    result["committee"] = list(content.get("committee") or [])
    result["departments"] = [
        _copy.deepcopy(d) for d in content.get("departments") or [] if d.get("code") in keep
    ]
    result["pareto_idle"] = [dict(r) for r in content.get("pareto_idle") or [] if r.get("department") in keep]
    proposals = _copy.deepcopy(content.get("proposals") or {})
    if proposals.get("available", True) and "rows" in proposals:
        proposals["rows"] = [r for r in proposals.get("rows") or [] if r.get("department") in keep]
        proposals["objections"] = [
            r for r in proposals.get("objections") or [] if r.get("department") in keep
        ]
        proposals["backtest"] = None
    result["proposals"] = proposals
    showback = _copy.deepcopy(content.get("showback") or {})
    if showback.get("available", True) and "departments" in showback:
        showback["departments"] = [r for r in showback.get("departments") or [] if r.get("code") in keep]
        showback["central"] = None
        showback["total_cost"] = None
    result["showback"] = showback
    result["copy"] = {"departments": sorted(keep)}
    return result
