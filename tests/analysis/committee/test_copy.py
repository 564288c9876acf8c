"""A department's copy keeps its own parts and never carries another department's code."""

from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.committee.copy import department_copy
from efficiency.analysis.committee.seal import canonical_json

CODES = [f"DEPT{n:03d}X" for n in range(8)]


def content_for(codes: list[str]) -> dict:
    return {
        "schema": 1,
        "definitions_version": "2026-12.1",
        "cluster": {"slug": "c1", "name": "Cluster"},
        "period": {"start": "2026-11-01T00:00:00Z", "end": "2026-11-15T00:00:00Z", "hours": 336},
        "previous": None,
        "generated_at": "2026-11-15T01:00:00Z",
        "completeness": [],
        "committee": ["alice (Alice)"],
        "summary": {"kpis": [], "decisions_requested": [{"kind": "quota", "params": {"d": codes}}]},
        "since_last": {"quota_changes": [{"department": c} for c in codes]},
        "cluster_section": {"heatmap": {"rows": codes}},
        "departments": [{"id": i, "code": c, "name": f"name of {c}"} for i, c in enumerate(codes)],
        "pareto_idle": [{"department": c, "cause": "allocated_idle", "gpu_hours": 1.0} for c in codes],
        "proposals": {
            "available": True,
            "cycle_id": 3,
            "status": "proposed",
            "rows": [{"department": c, "gpu_model": "H100", "current": 1, "proposed": 2} for c in codes],
            "backtest": [{"department": c} for c in codes],
            "objections": [{"department": c, "text": "no", "response": ""} for c in codes],
        },
        "capacity": {"available": True, "alerts": [{"department": c} for c in codes]},
        "reliability": {"incidents": [{"department": c} for c in codes]},
        "recommendations": {"by_state": {}},
        "tickets": {"verified": [{"department": c} for c in codes]},
        "showback": {
            "rate_card": None,
            "departments": [{"code": c, "name": f"name of {c}", "cost": 1.0} for c in codes],
            "central": {"cost": 3.0},
            "total_cost": 9.0,
            "unpriced_models": [],
        },
    }


def test_copy_keeps_cover_and_own_parts():
    content = content_for(CODES[:3])
    copy = department_copy(content, [CODES[1]])
    assert copy["copy"] == {"departments": [CODES[1]]}
    assert copy["period"] == content["period"]
    assert [d["code"] for d in copy["departments"]] == [CODES[1]]
    assert [r["department"] for r in copy["proposals"]["rows"]] == [CODES[1]]
    assert copy["proposals"]["backtest"] is None
    assert [r["code"] for r in copy["showback"]["departments"]] == [CODES[1]]
    assert copy["cluster_section"] == {"available": False, "reason": "cluster-wide section: committee only"}
    assert copy["summary"]["available"] is False


def test_copy_of_unavailable_sections():
    content = content_for(CODES[:2])
    content["proposals"] = {"available": False, "reason": "no cycle"}
    content["showback"] = {"available": False, "reason": "no rate card"}
    copy = department_copy(content, [CODES[0]])
    assert copy["proposals"] == {"available": False, "reason": "no cycle"}
    assert copy["showback"] == {"available": False, "reason": "no rate card"}


@given(st.lists(st.sampled_from(CODES), min_size=1, max_size=8, unique=True), st.data())
def test_copy_never_leaks_another_department(codes, data):
    mine = data.draw(st.lists(st.sampled_from(codes), max_size=len(codes), unique=True))
    text = canonical_json(department_copy(content_for(codes), mine))
    for code in set(codes) - set(mine):
        assert code not in text
