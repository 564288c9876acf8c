"""A job's environment as ``KEY=VALUE`` lines (``env`` output, a ``.env`` file, a Slurm script's
exports): the config snapshot ``manage.py audit_logs --env`` reads."""

import re
import shlex
from dataclasses import dataclass, field

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass
class EnvFile:
    values: dict[str, str] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line number, why)


def parse_env(text: str) -> EnvFile:
    """Parse ``KEY=VALUE`` lines: ``export`` prefixes, quotes, blank lines and ``#`` comments are
    allowed; a line that is not an assignment is reported with its number and skipped (the good
    lines are kept). A later assignment overrides an earlier one, as in a shell."""
    result = EnvFile()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not _NAME.match(name):
            result.errors.append((number, "not a KEY=VALUE line"))
            continue
        value = value.strip()
        if value[:1] in ("'", '"'):
            try:
                parts = shlex.split(value)
            except ValueError:
                result.errors.append((number, "unbalanced quotes"))
                continue
            value = parts[0] if parts else ""
        result.values[name] = value
    return result
