"""The remediation ticket's states and the one table of transitions between them.

A ticket moves open → in progress → resolved → verifying → verified gain / no gain / regressed →
closed, may wait on its department on the way (the SLA clock pauses) and may end as won't fix (a
reason is required). Every legal move is one row of ``TRANSITIONS``: ``(state, action) → new state``.

Why a plain table rather than django-fsm-2: the ticket page, the API and the tests all read the same
data (the page lists ``allowed_actions``, the API refuses with the same message, a property test walks
every path), nothing here needs a model mixin or a database, and a refused move is an ordinary
exception the page and the API turn into a 4xx. The service that applies a transition saves the new
state and its history in one transaction; this module only decides whether the move is legal.

Some actions belong to the portal, not to people: starting verification when a ticket is resolved
and recording what the measurement found. People cannot trigger them through the page or API, and
the portal cannot close or reopen a ticket on anyone's behalf.

Messages are English; each refusal also carries a ``code`` and ``params`` so the page layer can
show a translated message.
"""

from enum import StrEnum
from typing import Literal


class State(StrEnum):
    OPEN = "open"
    IN_PROGRESS = "in_progress"
    WAITING_ON_DEPARTMENT = "waiting_on_department"
    RESOLVED = "resolved"
    VERIFYING = "verifying"
    VERIFIED_GAIN = "verified_gain"
    NO_GAIN = "no_gain"
    REGRESSED = "regressed"
    CLOSED = "closed"
    WONT_FIX = "wont_fix"


class Action(StrEnum):
    START = "start"
    WAIT = "wait"
    RESUME = "resume"
    RESOLVE = "resolve"
    VERIFY = "verify"
    MEASURE_GAIN = "measure_gain"
    MEASURE_NO_GAIN = "measure_no_gain"
    MEASURE_REGRESSION = "measure_regression"
    CLOSE = "close"
    REOPEN = "reopen"
    WONT_FIX = "wont_fix"


S, A = State, Action

TRANSITIONS: dict[tuple[State, Action], State] = {
    (S.OPEN, A.START): S.IN_PROGRESS,
    (S.OPEN, A.WAIT): S.WAITING_ON_DEPARTMENT,
    (S.OPEN, A.WONT_FIX): S.WONT_FIX,
    (S.IN_PROGRESS, A.WAIT): S.WAITING_ON_DEPARTMENT,
    (S.IN_PROGRESS, A.RESOLVE): S.RESOLVED,
    (S.IN_PROGRESS, A.WONT_FIX): S.WONT_FIX,
    (S.WAITING_ON_DEPARTMENT, A.RESUME): S.IN_PROGRESS,
    (S.WAITING_ON_DEPARTMENT, A.WONT_FIX): S.WONT_FIX,
    # The portal starts measuring as soon as a ticket with a job family is resolved; until then
    # the fix can be taken back.
    (S.RESOLVED, A.VERIFY): S.VERIFYING,
    (S.RESOLVED, A.REOPEN): S.IN_PROGRESS,
    # A fix with nothing the portal can measure (a node repaired, a manual request) is closed by
    # people once resolved.
    (S.RESOLVED, A.CLOSE): S.CLOSED,
    (S.VERIFYING, A.MEASURE_GAIN): S.VERIFIED_GAIN,
    (S.VERIFYING, A.MEASURE_NO_GAIN): S.NO_GAIN,
    (S.VERIFYING, A.MEASURE_REGRESSION): S.REGRESSED,
    # A fix rolled back while being measured: the measurement's later outcome is then refused,
    # because the outcomes are only legal from verifying.
    (S.VERIFYING, A.REOPEN): S.IN_PROGRESS,
    # A verified gain is closed, not reworked; if the problem returns, reopen the closed ticket.
    (S.VERIFIED_GAIN, A.CLOSE): S.CLOSED,
    (S.NO_GAIN, A.CLOSE): S.CLOSED,
    (S.NO_GAIN, A.REOPEN): S.IN_PROGRESS,
    (S.REGRESSED, A.CLOSE): S.CLOSED,
    (S.REGRESSED, A.REOPEN): S.IN_PROGRESS,
    (S.CLOSED, A.REOPEN): S.IN_PROGRESS,
    (S.WONT_FIX, A.REOPEN): S.IN_PROGRESS,
}

PORTAL_ACTIONS: frozenset[Action] = frozenset(
    {A.VERIFY, A.MEASURE_GAIN, A.MEASURE_NO_GAIN, A.MEASURE_REGRESSION}
)
PEOPLE_ACTIONS: frozenset[Action] = frozenset(Action) - PORTAL_ACTIONS

# Giving up and undoing a decision are the moves whose "why" the history must keep.
REASON_REQUIRED: frozenset[Action] = frozenset({A.WONT_FIX, A.REOPEN})

# The SLA clock: paused while the department is asked for something, stopped once the work is done
# (or declined); it runs again after a reopen.
CLOCK_PAUSED: frozenset[State] = frozenset({S.WAITING_ON_DEPARTMENT})
CLOCK_STOPPED: frozenset[State] = frozenset(
    {S.RESOLVED, S.VERIFYING, S.VERIFIED_GAIN, S.NO_GAIN, S.REGRESSED, S.CLOSED, S.WONT_FIX}
)
CLOCK_RUNNING: frozenset[State] = frozenset(State) - CLOCK_PAUSED - CLOCK_STOPPED

Actor = Literal["person", "portal"]
_ACTIONS_OF: dict[str, frozenset[Action]] = {"person": PEOPLE_ACTIONS, "portal": PORTAL_ACTIONS}


class TransitionRefused(Exception):
    """A move the table does not allow; ``code`` and ``params`` let the page translate ``message``.

    Codes: ``unknown_state``, ``unknown_action``, ``unknown_actor``, ``not_allowed`` (params list
    the ``allowed`` actions from the state), ``not_yours`` (a portal action asked for by a person,
    or the other way round), ``reason_required``.
    """

    def __init__(self, message: str, code: str, params: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.params = params or {}


def _state(state: str) -> State:
    try:
        return State(state)
    except ValueError:
        known = ", ".join(State)
        raise TransitionRefused(
            f"Unknown ticket state {state!r}; the states are: {known}.",
            "unknown_state",
            {"state": state, "known": list(State)},
        ) from None


def _actions_of(actor: str) -> frozenset[Action]:
    try:
        return _ACTIONS_OF[actor]
    except KeyError:
        raise TransitionRefused(
            f"Unknown actor {actor!r}; expected 'person' or 'portal'.", "unknown_actor", {"actor": actor}
        ) from None


def allowed_actions(state: str, *, actor: Actor | None = None) -> list[Action]:
    """The actions the table allows from ``state``, in table order; only ``actor``'s when given."""
    current = _state(state)
    mine = _actions_of(actor) if actor is not None else frozenset(Action)
    return [action for (source, action) in TRANSITIONS if source == current and action in mine]


def transition(state: str, action: str, *, reason: str | None = None, actor: Actor = "person") -> State:
    """The state that ``action`` leads to from ``state``, or ``TransitionRefused`` saying why not.

    ``actor`` is "person" for the page and the API (the default, so a request can never record a
    measurement) and "portal" for the verification service.
    """
    current = _state(state)
    try:
        wanted = Action(action)
    except ValueError:
        known = ", ".join(Action)
        raise TransitionRefused(
            f"Unknown action {action!r}; the actions are: {known}.",
            "unknown_action",
            {"action": action, "known": list(Action)},
        ) from None
    mine = _actions_of(actor)
    allowed = allowed_actions(current, actor=actor)
    if wanted not in mine:
        owner = "the portal" if wanted in PORTAL_ACTIONS else "people"
        raise TransitionRefused(
            f"Action {wanted.value!r} is taken by {owner}, not by a {actor}; "
            f"from {current.value!r} a {actor} may: {_listing(allowed)}.",
            "not_yours",
            {"action": wanted, "state": current, "actor": actor, "allowed": allowed},
        )
    target = TRANSITIONS.get((current, wanted))
    if target is None:
        raise TransitionRefused(
            f"Cannot {wanted.value!r} a ticket that is {current.value!r}; allowed: {_listing(allowed)}.",
            "not_allowed",
            {"action": wanted, "state": current, "allowed": allowed},
        )
    if wanted in REASON_REQUIRED and not (reason or "").strip():
        raise TransitionRefused(
            f"Action {wanted.value!r} needs a reason.", "reason_required", {"action": wanted}
        )
    return target


def _listing(actions: list[Action]) -> str:
    return ", ".join(action.value for action in actions) or "nothing"
