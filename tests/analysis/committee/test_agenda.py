from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.committee.agenda import FLAG_AFTER, SECTIONS, build_agenda, flagged

CONTENT = {
    "schema": 1,
    "summary": {
        "kpis": [],
        "decisions_requested": [
            {"kind": "quota", "ref": 7, "title_key": "approve_quota_cycle", "params": {"cycle": 7}},
            {"kind": "capacity", "ref": None, "title_key": "order_capacity", "params": {"gpu_model": "H100"}},
        ],
    },
    "proposals": {"available": False, "reason": "no proposal"},
}


def test_order_actions_then_minutes_then_decisions_then_sections():
    actions = [
        {"id": 1, "title": "Fix NCCL", "owner": "ann", "due_on": "2026-12-01", "carried": 1},
        {"id": 2, "title": "Buy racks", "owner": "bob", "due_on": "2026-12-09", "carried": 3},
    ]
    agenda = build_agenda(CONTENT, actions, {"id": 4, "title": "Review 1"})
    kinds = [item["kind"] for item in agenda]
    assert kinds == ["action", "action", "minutes", "decision", "decision"] + ["section"] * len(SECTIONS)
    assert [item["ref"] for item in agenda[:2]] == [2, 1]  # most carried first
    assert [item["flagged"] for item in agenda[:2]] == [True, False]
    assert agenda[2] == {"kind": "minutes", "ref": 4, "title": "Review 1"}
    assert (agenda[3]["decision_kind"], agenda[3]["ref"]) == ("quota", 7)
    sections = {item["key"]: item["available"] for item in agenda if item["kind"] == "section"}
    assert sections["proposals"] is False
    assert sections["summary"] is True
    assert list(sections) == [key for key, _ in SECTIONS]


def test_first_meeting_has_no_minutes_and_tolerates_a_bare_pack():
    agenda = build_agenda({"schema": 1}, [], None)
    assert all(item["kind"] == "section" for item in agenda)
    assert not any(item["available"] for item in agenda)


actions_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(1, 10_000),
            "title": st.text(max_size=20),
            "owner": st.text(max_size=10),
            "due_on": st.dates().map(lambda day: day.isoformat()),
            "carried": st.integers(0, 6),
        }
    ),
    max_size=12,
)


@given(actions=actions_strategy, with_previous=st.booleans(), requests=st.integers(0, 4))
def test_carried_actions_always_come_first_and_flag_iff_carried_twice(actions, with_previous, requests):
    content = {
        "summary": {
            "decisions_requested": [
                {"kind": "quota", "ref": n, "title_key": "approve_quota_cycle", "params": {}}
                for n in range(requests)
            ]
        }
    }
    agenda = build_agenda(content, actions, {"id": 1, "title": "M"} if with_previous else None)
    head = agenda[: len(actions)]
    assert all(item["kind"] == "action" for item in head)
    assert all(item["kind"] != "action" for item in agenda[len(actions) :])
    assert sorted(item["ref"] for item in head) == sorted(action["id"] for action in actions)
    for item in head:
        assert item["flagged"] == (item["carried"] >= 2)
    carried = [item["carried"] for item in head]
    assert carried == sorted(carried, reverse=True)
    assert len(agenda) == len(actions) + int(with_previous) + requests + len(SECTIONS)


@given(st.integers(0, 100))
def test_flag_threshold(carried):
    assert flagged(carried) == (carried >= FLAG_AFTER == 2)
