"""What an actuator is asked to do, what it reports back, and how one is built from its JSON config.

An incident policy names an action (isolate a node, requeue a job from its last checkpoint, notify,
resume a node); the fault service turns it into an ``ActionRequest`` and hands it to the actuator the
policy configures. Actuators never raise for a failed action: the target being down, a timeout or a
refused value all come back as ``ActionResult(ok=False, ...)`` with the reason, so the caller can record
it on the incident. Only an invalid *configuration* raises (``ValueError``), when the actuator is built.
"""

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from efficiency.config_secrets import secrets_check, secrets_placeholder, secrets_resolve

ActionKind = Literal["isolate_node", "restart_job", "notify", "resume_node"]
ACTION_KINDS: tuple[str, ...] = get_args(ActionKind)

# Response bodies and command output are kept for the incident page, not archived.
DETAIL_MAX_CHARS = 4_000

ACTUATOR_TYPES = ("webhook", "command")


@dataclass(frozen=True, kw_only=True)
class ActionRequest:
    """One action for one incident; ``extra`` carries policy-specific values such as cluster or checkpoint."""

    kind: ActionKind
    incident_id: int
    node: str | None = None
    gpu: int | None = None
    job_id: str | None = None
    category: str
    reason: str
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ACTION_KINDS:
            raise ValueError(f"Unknown action kind {self.kind!r}; expected one of {', '.join(ACTION_KINDS)}.")
        if not isinstance(self.incident_id, int) or isinstance(self.incident_id, bool):
            raise ValueError(f"incident_id must be an integer, got {self.incident_id!r}.")
        if self.gpu is not None and (not isinstance(self.gpu, int) or isinstance(self.gpu, bool)):
            raise ValueError(f"gpu must be an integer GPU index or None, got {self.gpu!r}.")
        # A read-only copy, so a request cannot change after an actuator has checked it.
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))


@dataclass(frozen=True, kw_only=True)
class ActionResult:
    """What an actuator did (or, in a dry run, would do).

    ``summary`` is one line for lists and logs; ``code`` and ``params`` say the same as facts, so that the
    portal can show it in its reader's language (``efficiency.fault_messages``); ``detail`` is the
    response body or the command's output, at most ``DETAIL_MAX_CHARS`` characters. ``exit_code`` is set
    for commands that ran, ``http_status`` for webhooks that answered.
    """

    ok: bool
    dry_run: bool
    summary: str
    code: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    detail: str = ""
    exit_code: int | None = None
    http_status: int | None = None
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary", one_line(self.summary))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "detail", truncate(self.detail))


@runtime_checkable
class Actuator(Protocol):
    """Carries out an ``ActionRequest``; never raises for a failed action, reports it in the result."""

    @property
    def name(self) -> str: ...

    def run(self, request: ActionRequest, *, dry_run: bool) -> ActionResult: ...


def actuator_from_config(config: Mapping[str, Any], *, environ: Mapping[str, str] | None = None) -> Actuator:
    """Build the actuator an admin configured as JSON; ``ValueError`` says what is wrong with it.

    ``{"type": "webhook", "url": ..., "headers": {...}, "secret": ..., "timeout_s": 10}`` or
    ``{"type": "command", "argv": [...] | "template": "...", "timeout_s": 30, "env": {...}}``; both take
    an optional ``"name"`` shown in results. A webhook's ``secret`` and ``headers`` values may be
    ``{"env": "NAME"}``, read from ``environ`` (the process environment by default) now; an unset
    variable is a ``ValueError`` (``SecretMissing``) naming it, never a value.
    """
    # Imported here: both modules import this one.
    from efficiency.actuators.command import CommandActuator
    from efficiency.actuators.webhook import WebhookActuator

    if not isinstance(config, Mapping):
        raise ValueError("Invalid actuator config: expected a JSON object.")
    kind = config.get("type")
    if isinstance(kind, str):
        problems = secrets_check(kind, config)
        if problems:
            raise ValueError(f"Invalid {kind} actuator config: " + "; ".join(problems) + ".")
        config = secrets_resolve(kind, config, os.environ if environ is None else environ)
    if kind == "webhook":
        return WebhookActuator.from_config(config)
    if kind == "command":
        return CommandActuator.from_config(config)
    if kind is None:
        raise ValueError(f"Invalid actuator config: 'type' is required ({' or '.join(ACTUATOR_TYPES)}).")
    raise ValueError(
        f"Invalid actuator config: unknown type {kind!r}; expected {' or '.join(ACTUATOR_TYPES)}."
    )


def actuator_config_validate(config: object) -> None:
    """Check a configuration on save by building the actuator as a run would (``ValueError``).

    Env references stand for a placeholder: the web process need not have the workers' variables.
    """
    kind = config.get("type") if isinstance(config, Mapping) else None
    actuator_from_config(
        secrets_placeholder(kind, config) if isinstance(kind, str) else config,  # type: ignore[arg-type]
        environ={},
    )


def check_config_keys(config: Mapping[str, Any], allowed: tuple[str, ...], what: str) -> None:
    """Raise ``ValueError`` naming the keys of ``config`` that are not in ``allowed``."""
    unknown = sorted(str(key) for key in config if key not in allowed)
    if unknown:
        raise ValueError(
            f"Invalid {what} actuator config: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(allowed)}."
        )


def check_timeout(timeout_s: object, what: str) -> float:
    """``timeout_s`` as a float when it is a number of seconds in (0, 600], else ``ValueError``."""
    if not isinstance(timeout_s, int | float) or isinstance(timeout_s, bool) or not 0 < timeout_s <= 600:
        raise ValueError(
            f"Invalid {what} actuator config: 'timeout_s' must be a number of seconds in (0, 600], "
            f"got {timeout_s!r}."
        )
    return float(timeout_s)


def check_str_mapping(value: object, key: str, what: str) -> dict[str, str]:
    """``value`` as a dict when it maps strings to strings, else ``ValueError``."""
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"Invalid {what} actuator config: {key!r} must be an object of strings to strings.")
    return dict(value)


def truncate(text: str, limit: int = DETAIL_MAX_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, ending with "…" when something was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(text: str) -> str:
    """``text`` with line breaks and runs of whitespace folded into single spaces."""
    return " ".join(text.split())


def action_failed(summary: str, started: float, code: str, params: Mapping[str, Any]) -> ActionResult:
    """A failed action's result; ``started`` is the ``time.monotonic()`` the attempt began at."""
    return ActionResult(
        ok=False,
        dry_run=False,
        summary=summary,
        code=code,
        params=params,
        duration_s=time.monotonic() - started,
    )
