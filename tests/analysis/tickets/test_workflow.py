from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.tickets.workflow import (
    CLOCK_PAUSED,
    CLOCK_RUNNING,
    CLOCK_STOPPED,
    PEOPLE_ACTIONS,
    PORTAL_ACTIONS,
    REASON_REQUIRED,
    TRANSITIONS,
    Action,
    State,
    TransitionRefused,
    allowed_actions,
    transition,
)


def refusal(state, action, **kwargs):
    with pytest.raises(TransitionRefused) as caught:
        transition(state, action, **kwargs)
    return caught.value


def test_a_ticket_with_a_gain_walks_from_open_to_closed():
    state = State.OPEN
    state = transition(state, "start")
    state = transition(state, "resolve")
    state = transition(state, "verify", actor="portal")
    state = transition(state, "measure_gain", actor="portal")
    assert state == State.VERIFIED_GAIN
    assert transition(state, "close") == State.CLOSED


def test_waiting_on_the_department_pauses_the_clock_and_resume_restarts_work():
    waiting = transition("in_progress", "wait")
    assert waiting == State.WAITING_ON_DEPARTMENT
    assert waiting in CLOCK_PAUSED
    assert transition(waiting, "resume") == State.IN_PROGRESS


def test_the_clock_runs_only_while_work_is_owed():
    assert {State.OPEN, State.IN_PROGRESS} == CLOCK_RUNNING
    assert set(State) == CLOCK_RUNNING | CLOCK_PAUSED | CLOCK_STOPPED
    assert not CLOCK_RUNNING & CLOCK_STOPPED
    assert not CLOCK_PAUSED & CLOCK_STOPPED


def test_wont_fix_needs_a_reason_that_is_more_than_whitespace():
    assert refusal("open", "wont_fix").code == "reason_required"
    assert refusal("open", "wont_fix", reason="   ").code == "reason_required"
    assert transition("open", "wont_fix", reason="the job family is retired") == State.WONT_FIX


def test_reopening_needs_a_reason_and_goes_back_to_work():
    assert refusal("regressed", "reopen").code == "reason_required"
    assert transition("regressed", "reopen", reason="throughput dropped 8%") == State.IN_PROGRESS
    assert transition("closed", "reopen", reason="sockets again") == State.IN_PROGRESS


def test_a_move_not_allowed_from_the_state_says_what_is_allowed():
    refused = refusal("closed", "resolve")
    assert refused.code == "not_allowed"
    assert refused.params["allowed"] == [Action.REOPEN]
    assert str(refused) == "Cannot 'resolve' a ticket that is 'closed'; allowed: reopen."


def test_unknown_states_and_actions_are_refused_with_their_own_codes():
    assert refusal("done", "close").code == "unknown_state"
    assert "'done'" in str(refusal("done", "close"))
    assert refusal("open", "finish").code == "unknown_action"
    assert refusal("open", "start", actor="robot").code == "unknown_actor"


def test_people_cannot_record_a_measurement_and_the_portal_cannot_close():
    by_person = refusal("verifying", "measure_gain")
    assert by_person.code == "not_yours"
    assert by_person.params["allowed"] == [Action.REOPEN]
    assert refusal("verified_gain", "close", actor="portal").code == "not_yours"


def test_an_outcome_arriving_after_a_reopen_is_refused():
    state = transition("verifying", "reopen", reason="fix rolled back")
    assert refusal(state, "measure_no_gain", actor="portal").code == "not_allowed"


def test_allowed_actions_follow_table_order_and_the_actor():
    assert allowed_actions("open") == [Action.START, Action.WAIT, Action.WONT_FIX]
    assert allowed_actions("verifying", actor="portal") == [
        Action.MEASURE_GAIN,
        Action.MEASURE_NO_GAIN,
        Action.MEASURE_REGRESSION,
    ]
    assert allowed_actions("verifying", actor="person") == [Action.REOPEN]


def test_actions_belong_to_people_or_to_the_portal_never_both():
    assert set(Action) == PEOPLE_ACTIONS | PORTAL_ACTIONS
    assert not PEOPLE_ACTIONS & PORTAL_ACTIONS
    assert REASON_REQUIRED <= PEOPLE_ACTIONS


def test_every_state_is_reachable_from_open_and_can_still_end():
    def reachable(start):
        seen, todo = {start}, deque([start])
        while todo:
            state = todo.popleft()
            for (source, _), target in TRANSITIONS.items():
                if source == state and target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    assert reachable(State.OPEN) == set(State)
    for state in State:
        assert reachable(state) & {State.CLOSED, State.WONT_FIX}, state


@given(
    st.lists(
        st.tuples(
            st.sampled_from(list(Action)),
            st.sampled_from(["person", "portal"]),
            st.sampled_from([None, "", "because"]),
        ),
        max_size=30,
    )
)
def test_every_walk_from_open_stays_in_the_table_and_every_refusal_lists_the_allowed(steps):
    mine = {"person": PEOPLE_ACTIONS, "portal": PORTAL_ACTIONS}
    state = State.OPEN
    for action, actor, reason in steps:
        legal = (state, action) in TRANSITIONS and action in mine[actor]
        if legal and (reason or action not in REASON_REQUIRED):
            state = transition(state, action, reason=reason, actor=actor)
            assert state in set(TRANSITIONS.values())
            continue
        refused = refusal(state, action, reason=reason, actor=actor)
        if legal:
            assert refused.code == "reason_required"
        else:
            assert refused.code in {"not_allowed", "not_yours"}
            assert refused.params["allowed"] == allowed_actions(state, actor=actor)
            assert all(allowed.value in refused.message for allowed in refused.params["allowed"])
