"""Command actuator: run a program (``scontrol``, ``kubectl``, a site script) with values from the request.

The command is an argv list whose elements may hold placeholders: ``{node}``, ``{gpu}``, ``{job_id}``,
``{reason}``, ``{category}``, ``{incident_id}``, ``{kind}`` and ``{extra[key]}`` (``{{`` and ``}}`` for
literal braces). Each is substituted *inside* its element and the program runs without a shell, so a value
is always exactly one argument: ``Reason={reason}`` stays one argument whatever the reason holds, and
``$(reboot)`` or ``; rm -rf /`` reach the program as plain text. A string template is split with
``shlex.split`` before substitution, for the same reason.

Values are checked before anything runs; a refused value gives ``ok=False`` without running:

- a placeholder whose value is missing or empty (``{node}`` for a request without a node);
- any value with a NUL, CR or LF (one argument must stay one line in logs and in Slurm's reason field);
- a node or job id that is not a plain name (``^[A-Za-z0-9._:@/-]+$``) or that starts with "-", which the
  program would read as an option (``kubectl cordon --selector=...`` would cordon many nodes).

The command runs in its own process group, so a timeout kills it together with anything it started.
"""

import contextlib
import os
import re
import shlex
import signal
import string
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from efficiency.actuators.base import (
    DETAIL_MAX_CHARS,
    ActionRequest,
    ActionResult,
    action_failed,
    check_config_keys,
    check_str_mapping,
    check_timeout,
    truncate,
)

# Ready-made commands. Each needs the program on PATH (or an absolute path) and the portal's service
# account allowed to run it: a Slurm operator for scontrol, RBAC "patch nodes" for kubectl.

# Stop new jobs on the node; running jobs finish. Slurm requires a reason and shows it in `sinfo -R`.
SLURM_DRAIN = ("scontrol", "update", "NodeName={node}", "State=DRAIN", "Reason={reason}")
# Put a drained node back into service once it is repaired.
SLURM_RESUME = ("scontrol", "update", "NodeName={node}", "State=RESUME")
# Requeue a batch job: Slurm cancels and restarts it, and the job resumes from its last checkpoint if its
# script loads one. Fails for jobs submitted with --no-requeue.
SLURM_REQUEUE = ("scontrol", "requeue", "{job_id}")
# Mark a Kubernetes node unschedulable; running pods stay (draining them is a separate, human decision).
KUBECTL_CORDON = ("kubectl", "cordon", "{node}")
# Make the node schedulable again.
KUBECTL_UNCORDON = ("kubectl", "uncordon", "{node}")

PLACEHOLDERS = ("node", "gpu", "job_id", "reason", "category", "incident_id", "kind")
NAME_RE = re.compile(r"^[A-Za-z0-9._:@/-]+$")
DEFAULT_TIMEOUT_S = 30.0

_EXTRA_RE = re.compile(r"^extra\[([^\[\]{}]+)\]$")
_NAME_PLACEHOLDERS = frozenset({"node", "job_id"})
_CONFIG_KEYS = ("type", "name", "argv", "template", "timeout_s", "env")
# After a kill, how long to wait for the output pipes to close (a process that left our group may hold them).
_DRAIN_S = 2.0


class CommandRefused(ValueError):
    """A value from the request cannot go into the command; nothing was run.

    ``code`` and ``params`` say why as facts (``efficiency.fault_messages``): ``command_refused_missing``,
    ``command_refused_line_break`` or ``command_refused_not_a_name``.
    """

    def __init__(self, message: str, *, code: str, **params: str) -> None:
        super().__init__(message)
        self.code = code
        self.params = params


@dataclass(frozen=True)
class _Piece:
    """A literal run of text followed by at most one placeholder (``None`` at the end of an element)."""

    literal: str
    placeholder: str | None


@dataclass(frozen=True)
class CommandActuator:
    """Runs ``argv`` with the request's values substituted; ok when the program exits with code 0.

    ``env`` is laid over the portal's own environment (``None``: the environment as is). The program
    gets no stdin; its stdout and stderr come back in ``detail``.
    """

    argv: Sequence[str]
    _: KW_ONLY
    timeout_s: float = DEFAULT_TIMEOUT_S
    env: Mapping[str, str] | None = field(default=None, repr=False)  # may hold credentials
    name: str = "command"
    _pieces: tuple[tuple[_Piece, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.argv, str) or not isinstance(self.argv, Sequence) or not self.argv:
            raise ValueError(
                "Invalid command actuator config: 'argv' must be a non-empty list of strings "
                "(use 'template' for a command line)."
            )
        if not all(isinstance(arg, str) for arg in self.argv):
            raise ValueError("Invalid command actuator config: every 'argv' element must be a string.")
        if any("\0" in arg for arg in self.argv):
            raise ValueError("Invalid command actuator config: an 'argv' element contains a NUL character.")
        argv = tuple(self.argv)
        pieces = tuple(_parse(arg) for arg in argv)
        if not argv[0] or any(piece.placeholder for piece in pieces[0]):
            raise ValueError(
                f"Invalid command actuator config: the program (first element, {argv[0]!r}) must be a "
                f"fixed, non-empty name or path without placeholders."
            )
        object.__setattr__(self, "argv", argv)
        object.__setattr__(self, "_pieces", pieces)
        object.__setattr__(self, "timeout_s", check_timeout(self.timeout_s, "command"))
        if self.env is not None:
            env = check_str_mapping(self.env, "env", "command")
            if any("\0" in key + value or "=" in key or not key for key, value in env.items()):
                raise ValueError(
                    "Invalid command actuator config: 'env' names must be non-empty without '=', "
                    "and no name or value may contain a NUL character."
                )
            object.__setattr__(self, "env", env)
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("Invalid command actuator config: 'name' must be a non-empty string.")

    @classmethod
    def from_template(cls, template: str, **kwargs: Any) -> "CommandActuator":
        """Build from a command line, split with ``shlex.split`` (quotes group words; no shell runs)."""
        if not isinstance(template, str):
            raise ValueError("Invalid command actuator config: 'template' must be a string.")
        try:
            argv = shlex.split(template)
        except ValueError as exc:
            raise ValueError(f"Invalid command actuator config: cannot split 'template' ({exc}).") from None
        if not argv:
            raise ValueError("Invalid command actuator config: 'template' is empty.")
        return cls(argv, **kwargs)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "CommandActuator":
        """Build from ``{"type": "command", "argv": [...] | "template": "...", "timeout_s", "env"}``."""
        check_config_keys(config, _CONFIG_KEYS, "command")
        if ("argv" in config) == ("template" in config):
            raise ValueError("Invalid command actuator config: give exactly one of 'argv' and 'template'.")
        kwargs = {key: config[key] for key in ("timeout_s", "env", "name") if key in config}
        if "template" in config:
            return cls.from_template(config["template"], **kwargs)
        return cls(config["argv"], **kwargs)

    @property
    def placeholders(self) -> frozenset[str]:
        """The placeholders the command uses, e.g. ``{"node", "reason", "extra[cluster]"}``."""
        return frozenset(piece.placeholder for arg in self._pieces for piece in arg if piece.placeholder)

    def argv_for(self, request: ActionRequest) -> list[str]:
        """The argv to run for ``request``; ``CommandRefused`` when a value is missing or not allowed."""
        return ["".join(_render(piece, request) for piece in arg) for arg in self._pieces]

    def run(self, request: ActionRequest, *, dry_run: bool) -> ActionResult:
        """Run the command for ``request`` (in a dry run, say what would run); failures give ``ok=False``."""
        try:
            argv = self.argv_for(request)
        except CommandRefused as exc:
            return ActionResult(
                ok=False,
                dry_run=dry_run,
                summary=f"Refused to run {self.argv[0]}: {exc}",
                code=exc.code,
                params={"program": self.argv[0], **exc.params},
            )
        shown = shlex.join(argv)
        facts = {"command": shown, "program": argv[0]}
        if dry_run:
            return ActionResult(
                ok=True, dry_run=True, summary=f"Would run: {shown}", code="command_would_run", params=facts
            )

        env = None if self.env is None else {**os.environ, **self.env}
        started = time.monotonic()
        try:
            # No shell: each argv element reaches the program as exactly one argument.
            process = subprocess.Popen(  # noqa: S603
                argv,
                shell=False,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError:
            return action_failed(
                f"Cannot run {shown}: {argv[0]} not found.", started, "command_not_found", facts
            )
        except PermissionError:
            return action_failed(
                f"Cannot run {shown}: {argv[0]} is not executable.", started, "command_not_executable", facts
            )
        except OSError as exc:
            error = exc.strerror or type(exc).__name__
            return action_failed(
                f"Cannot run {shown}: {error}.", started, "command_os_error", {**facts, "error": error}
            )

        try:
            stdout, stderr = process.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            stdout, stderr = _kill(process)
            return ActionResult(
                ok=False,
                dry_run=False,
                summary=f"{shown} timed out after {self.timeout_s:g} s and was killed.",
                code="command_timed_out",
                params={**facts, "timeout_s": f"{self.timeout_s:g}"},
                detail=_output(stdout, stderr),
                duration_s=time.monotonic() - started,
            )
        finally:
            # communicate() raising anything else (KeyboardInterrupt) must not leave the command running.
            if process.returncode is None:
                _kill(process)

        code = process.returncode
        err = stderr.decode(errors="replace").strip()
        said = truncate(" ".join(err.split()), 300)
        if code == 0:
            summary, message = f"Ran {shown}: exit code 0.", "command_ran"
        elif err:
            summary, message = f"{shown} failed with exit code {code}: {said}", "command_failed"
        else:
            summary, message = f"{shown} failed with exit code {code} (no stderr)", "command_failed_silently"
        return ActionResult(
            ok=code == 0,
            dry_run=False,
            summary=summary,
            code=message,
            params={**facts, "exit_code": code, "stderr": said},
            detail=_output(stdout, stderr),
            exit_code=code,
            duration_s=time.monotonic() - started,
        )


def _parse(arg: str) -> tuple[_Piece, ...]:
    """Split one argv element into literal text and placeholders; ``ValueError`` for bad placeholders."""
    try:
        parsed = list(string.Formatter().parse(arg))
    except ValueError as exc:
        raise ValueError(
            f"Invalid command actuator config: {arg!r} has unbalanced braces ({exc}); "
            f"write {{{{ and }}}} for literal braces."
        ) from None
    pieces = []
    for literal, placeholder, format_spec, conversion in parsed:
        if placeholder is None:
            pieces.append(_Piece(literal, None))
            continue
        if conversion or format_spec:
            raise ValueError(
                f"Invalid command actuator config: placeholder {{{placeholder}}} in {arg!r} takes no "
                f"!conversion or :format."
            )
        if placeholder not in PLACEHOLDERS and not _EXTRA_RE.match(placeholder):
            raise ValueError(
                f"Invalid command actuator config: unknown placeholder {{{placeholder}}} in {arg!r}; known: "
                + ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)
                + ", {extra[key]}."
            )
        pieces.append(_Piece(literal, placeholder))
    return tuple(pieces)


def _render(piece: _Piece, request: ActionRequest) -> str:
    if piece.placeholder is None:
        return piece.literal
    return piece.literal + _value(piece.placeholder, request)


def _value(placeholder: str, request: ActionRequest) -> str:
    """The text for one placeholder, checked; ``CommandRefused`` says why it cannot be used."""
    extra = _EXTRA_RE.match(placeholder)
    raw: object = request.extra.get(extra.group(1)) if extra else getattr(request, placeholder)
    if raw is None or raw == "":
        where = f"extra value {extra.group(1)!r}" if extra else placeholder.replace("_", " ")
        raise CommandRefused(
            f"the request has no {where} for {{{placeholder}}}.",
            code="command_refused_missing",
            placeholder=placeholder,
        )
    value = str(raw)
    if any(ch in value for ch in "\0\r\n"):
        raise CommandRefused(
            f"{{{placeholder}}} value {value!r} contains a NUL or line break.",
            code="command_refused_line_break",
            placeholder=placeholder,
            value=repr(value),
        )
    if placeholder in _NAME_PLACEHOLDERS and (not NAME_RE.match(value) or value.startswith("-")):
        raise CommandRefused(
            f"{placeholder.replace('_', ' ')} {value!r} is not a plain name (letters, digits and . _ : @ / - "
            f"only, not starting with -).",
            code="command_refused_not_a_name",
            placeholder=placeholder,
            value=repr(value),
        )
    return value


def _kill(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Kill the command and everything in its process group; return what it wrote until then."""
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(process.pid, signal.SIGKILL)
    try:
        return process.communicate(timeout=_DRAIN_S)
    except subprocess.TimeoutExpired:
        # Something that left the group still holds the pipes; stop reading rather than wait for it.
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait()
        return b"", b""


def _output(stdout: bytes, stderr: bytes) -> str:
    """stdout and stderr for ``detail``; stderr keeps up to half the room when both are long."""
    out = stdout.decode(errors="replace").strip()
    err = stderr.decode(errors="replace").strip()
    if not err:
        return out
    if not out:
        return err
    err_section = truncate("--- stderr ---\n" + err, DETAIL_MAX_CHARS // 2)
    return truncate(out, DETAIL_MAX_CHARS - len(err_section) - 1) + "\n" + err_section
