"""A hash chain over audit entries: each entry's hash covers the previous hash and its own payload.

``entry_hash = sha256(prev_hash + "\\n" + canonical_json(body))`` where ``body`` holds the entry's
sequence number, time, actor, verb, record and change. The first entry's ``prev_hash`` is
``GENESIS``. Changing, inserting or removing any entry breaks the chain from there on, which
``verify_chain`` reports as the first broken sequence number.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from efficiency.analysis.committee.seal import canonical_json, sha256_hex

GENESIS = "0" * 64


@dataclass(frozen=True)
class Link:
    seq: int
    at: str  # ISO 8601 in UTC
    actor: str
    verb: str
    object_type: str
    object_id: int
    payload: dict[str, Any]
    prev_hash: str
    entry_hash: str


def body(
    *, seq: int, at: str, actor: str, verb: str, object_type: str, object_id: int, payload: dict
) -> dict:
    return {
        "seq": seq,
        "at": at,
        "actor": actor,
        "verb": verb,
        "object_type": object_type,
        "object_id": object_id,
        "payload": payload,
    }


def link_hash(prev_hash: str, entry_body: dict) -> str:
    return sha256_hex(prev_hash + "\n" + canonical_json(entry_body))


@dataclass(frozen=True)
class ChainCheck:
    ok: bool
    entries: int
    first_broken_seq: int | None = None
    reason: str = ""


def verify_chain(links: Iterable[Link]) -> ChainCheck:
    """Walk the chain in sequence order and recompute every hash."""
    prev_hash = GENESIS
    expected_seq = None
    count = 0
    for link in links:
        count += 1
        if expected_seq is not None and link.seq != expected_seq:
            return ChainCheck(False, count, link.seq, "gap in the sequence")
        if link.prev_hash != prev_hash:
            return ChainCheck(False, count, link.seq, "previous hash does not match")
        entry_body = body(
            seq=link.seq,
            at=link.at,
            actor=link.actor,
            verb=link.verb,
            object_type=link.object_type,
            object_id=link.object_id,
            payload=link.payload,
        )
        if link_hash(prev_hash, entry_body) != link.entry_hash:
            return ChainCheck(False, count, link.seq, "entry changed after it was written")
        prev_hash = link.entry_hash
        expected_seq = link.seq + 1
    return ChainCheck(True, count)
