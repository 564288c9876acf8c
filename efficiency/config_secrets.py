"""Secrets in source and actuator configurations: by reference, resolved at run time, never shown.

A configuration value that is a secret (a Prometheus ``auth_header``, a webhook ``secret`` or one
of its ``headers``) may be written as a reference to an environment variable of the process that
runs the collector or actuator (the Celery worker)::

    {"base_url": "https://prom.example.com", "auth_header": {"env": "PROM_AUTH_HEADER"}}

The configuration stores only the variable's name; its value is read when the source is collected
or the actuator runs, and a variable that is not set is a run error that names the variable, never
a value. A literal secret still works, but it is stored in the database and its history, so the
admin warns about it; the admin never shows either: it shows ``MASK`` instead, and a form sent
back with ``MASK`` keeps the stored value.

Plain Python, no Django: the actuators use it too. ``kind`` is a data source kind
(``"prometheus"``) or an actuator type (``"webhook"``); the two name spaces do not overlap.
"""

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

ENV_KEY = "env"
MASK = "••••• (set)"
# What an env reference stands for while a configuration is only checked (on save): the web
# process need not have the workers' variables.
PLACEHOLDER = "<secret from the environment>"

# Where each kind keeps secrets: a key, or "key.*" for every value of the object under key.
SECRET_KEYS: dict[str, tuple[str, ...]] = {
    "prometheus": ("auth_header",),
    "webhook": ("secret", "headers.*"),
    # Notification channels (efficiency.models.notifications): a robot's URL carries its key.
    "wecom": ("url",),
    "dingtalk": ("url", "secret"),
    "feishu": ("url", "secret"),
    "slack": ("url",),
}

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BREAKS = re.compile(r"[\r\n\x00]")


class SecretMissing(ValueError):
    """An env reference whose variable is not set where the configuration runs."""

    def __init__(self, key: str, variable: str) -> None:
        super().__init__(
            f"configuration {key!r} refers to the environment variable {variable!r}, which is not set "
            f"in the worker's environment: set it there (the value is never stored)"
        )
        self.key, self.variable = key, variable


def is_env_ref(value: object) -> bool:
    """Whether ``value`` is ``{"env": "NAME"}`` (a well-formed reference, any other key refused)."""
    return (
        isinstance(value, Mapping)
        and set(value) == {ENV_KEY}
        and isinstance(value[ENV_KEY], str)
        and _ENV_NAME.fullmatch(value[ENV_KEY]) is not None
    )


def secret_items(kind: str, config: object) -> Iterator[tuple[str, tuple[str, ...]]]:
    """``(shown key, path)`` of each secret value present in ``config``, e.g. ``("headers.X", (…))``."""
    if not isinstance(config, Mapping):
        return
    for spec in SECRET_KEYS.get(kind, ()):
        key, _, rest = spec.partition(".")
        if key not in config:
            continue
        if rest != "*":
            yield key, (key,)
        elif isinstance(config[key], Mapping):
            for name in config[key]:
                yield f"{key}.{name}", (key, name)


def _get(config: Mapping, path: tuple[str, ...]) -> Any:
    for part in path:
        config = config[part]
    return config


def _with(config: Mapping, path: tuple[str, ...], value: Any) -> dict:
    """A copy of ``config`` with ``path`` set to ``value`` (the objects on the path copied)."""
    copy = dict(config)
    if len(path) == 1:
        copy[path[0]] = value
    else:
        copy[path[0]] = _with(copy[path[0]], path[1:], value)
    return copy


def _walk(value: object, key: str = "") -> Iterator[tuple[str, object]]:
    """(shown key, value) of ``value`` and of everything inside it, a mapping's names included
    (shown with the key they name), so that a check over the leaves names where it failed."""
    yield key, value
    if isinstance(value, Mapping):
        for name, item in value.items():
            shown = f"{key}.{name}" if key else str(name)
            yield shown, str(name)
            yield from _walk(item, shown)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{key}[{index}]")


def secrets_check(kind: str, config: object) -> list[str]:
    """Problems with the secrets in ``config``: a malformed env reference, one where no secret
    goes (only the keys in ``SECRET_KEYS`` are resolved), or ``MASK`` sent with nothing stored;
    and any NaN or infinity (JSON has neither: the database refuses them) or NUL character."""
    if not isinstance(config, Mapping):
        return []
    parts = list(_walk(config))
    problems = [
        f"configuration {key!r} must be a finite number"
        for key, value in parts
        if isinstance(value, float) and not math.isfinite(value)
    ]
    # PostgreSQL's jsonb cannot hold a NUL character: refused here rather than a failed save.
    problems += [
        f"configuration {key!r} holds a NUL character"
        for key, value in parts
        if isinstance(value, str) and "\x00" in value
    ]
    secret_paths = {path for _, path in secret_items(kind, config)}
    for shown, path in secret_items(kind, config):
        value = _get(config, path)
        if isinstance(value, str) and _BREAKS.search(value):
            problems.append(f"configuration {shown!r} has a line break or NUL: it cannot be sent")
        elif value == MASK:
            problems.append(
                f'configuration {shown!r} holds no secret yet: type the secret, or {{"env": "NAME"}}'
            )
        elif isinstance(value, Mapping) and ENV_KEY in value and not is_env_ref(value):
            problems.append(
                f'configuration {shown!r}: an environment reference is {{"env": "NAME"}} with NAME made '
                f"of letters, digits and _"
            )
    for key, value in config.items():
        if is_env_ref(value) and (key,) not in secret_paths:
            allowed = ", ".join(SECRET_KEYS.get(kind, ())) or "none for this kind"
            problems.append(
                f"configuration {key!r}: only secrets may come from the environment (here: {allowed})"
            )
    return problems


def secrets_resolve(kind: str, config: Mapping, environ: Mapping[str, str]) -> dict:
    """``config`` with each env reference at a secret key replaced by the variable's value.

    Raises ``SecretMissing`` (naming the key and the variable, not a value) for an unset variable.
    """
    resolved = dict(config)
    for shown, path in list(secret_items(kind, config)):
        value = _get(config, path)
        if is_env_ref(value):
            name = value[ENV_KEY]
            if name not in environ:
                raise SecretMissing(shown, name)
            if _BREAKS.search(environ[name]):
                raise ValueError(
                    f"configuration {shown!r}: the environment variable {name!r} has a line break or NUL"
                )
            resolved = _with(resolved, path, environ[name])
    return resolved


def secrets_placeholder(kind: str, config: object) -> object:
    """``config`` with each env reference at a secret key replaced by ``PLACEHOLDER``, to check
    a configuration where its variables are not set (the admin's web process)."""
    if not isinstance(config, Mapping):
        return config
    return secrets_resolve(kind, config, _Placeholders())


class _Placeholders(Mapping):
    def __getitem__(self, name: str) -> str:
        return PLACEHOLDER

    def __contains__(self, name: object) -> bool:
        return True

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0


def secrets_mask(kind: str, config: object) -> object:
    """``config`` as it may be shown: each literal secret replaced by ``MASK`` (references stay)."""
    if not isinstance(config, Mapping):
        return config
    masked = dict(config)
    for _, path in list(secret_items(kind, config)):
        value = _get(config, path)
        if not is_env_ref(value) and value not in ("", None):
            masked = _with(masked, path, MASK)
    return masked


def secrets_keep(kind: str, config: object, stored: object) -> object:
    """``config`` as sent back from a form showing ``secrets_mask(stored)``: where it still holds
    ``MASK``, the stored value is kept. ``MASK`` where nothing was stored stays, and fails the check."""
    if not isinstance(config, Mapping) or not isinstance(stored, Mapping):
        return config
    stored_paths = {path for _, path in secret_items(kind, stored)}
    kept = dict(config)
    for _, path in list(secret_items(kind, config)):
        if _get(config, path) == MASK and path in stored_paths:
            kept = _with(kept, path, _get(stored, path))
    return kept


def literal_secret_keys(kind: str, config: object) -> list[str]:
    """The keys whose secret is written into the configuration itself rather than referenced."""
    if not isinstance(config, Mapping):
        return []
    return [
        shown
        for shown, path in secret_items(kind, config)
        if isinstance(_get(config, path), str) and _get(config, path) not in ("", MASK)
    ]
