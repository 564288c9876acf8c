"""Canonical JSON and its SHA-256: what seals a review pack.

The same content always gives the same bytes (keys sorted, no whitespace, UTF-8, no NaN), so the
hash of a pack can be recomputed from its stored text by anyone, with any JSON library.
"""

import hashlib
import json
import math
from typing import Any


class NotCanonical(ValueError):
    """The content holds a value JSON cannot carry exactly (NaN, infinity, a non-string key...)."""


def _check(value: Any, path: str = "$") -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise NotCanonical(f"{path}: {value!r} is not a finite number")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotCanonical(f"{path}: key {key!r} is not a string")
            _check(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
    elif not (value is None or isinstance(value, str | int | float | bool)):
        raise NotCanonical(f"{path}: {type(value).__name__} is not JSON")


def canonical_json(content: Any) -> str:
    """``content`` as canonical JSON text; ``NotCanonical`` names the first value that is not."""
    _check(content)
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seal(content: Any) -> tuple[str, str]:
    """(canonical text, its SHA-256 hex)."""
    text = canonical_json(content)
    return text, sha256_hex(text)


def verify(text: str, expected_hash: str) -> bool:
    """Whether stored text still has the hash it was sealed with."""
    return sha256_hex(text) == expected_hash
