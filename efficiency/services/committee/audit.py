"""Appending to and checking the committee's hash-chained audit trail.

Appends are serialised: on PostgreSQL an append holds the trail's advisory lock until its
transaction ends, so the next writer reads the head only after the last one committed (with
optimistic retries alone, four writers at once ran out of attempts on a loaded machine). The
unique sequence number still guards it: a writer that read a head another took re-reads it and
retries (SQLite). Call ``audit_append`` inside the transaction that makes the change, so the entry
and the change commit together.
"""

from datetime import UTC, datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from efficiency.analysis.committee.chain import GENESIS, ChainCheck, Link, body, link_hash, verify_chain
from efficiency.models import AuditEntry
from efficiency.scoping import User
from efficiency.services.locks import transaction_lock

ATTEMPTS = 20
AUDIT_LOCK_SPACE = 0x415544  # "AUD": first key of the audit trail's advisory lock (the second is 0)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def audit_append(
    *, actor: User | None, verb: str, obj, payload: dict | None = None, at: datetime | None = None
) -> AuditEntry:
    """Record ``verb`` on ``obj`` (a model instance) with ``payload`` (JSON: what changed)."""
    at = at or timezone.now()
    actor_name = "" if actor is None or not actor.is_authenticated else actor.get_username()
    object_type = type(obj)._meta.model_name
    payload = payload or {}
    for _attempt in range(ATTEMPTS):
        try:
            with transaction.atomic():
                transaction_lock(AUDIT_LOCK_SPACE, 0)  # held until the outermost transaction ends
                head = AuditEntry.objects.order_by("-seq").values("seq", "entry_hash").first()
                seq = 1 if head is None else head["seq"] + 1
                prev_hash = GENESIS if head is None else head["entry_hash"]
                entry_body = body(
                    seq=seq,
                    at=_iso(at),
                    actor=actor_name,
                    verb=verb,
                    object_type=object_type,
                    object_id=obj.pk,
                    payload=payload,
                )
                entry = AuditEntry(
                    seq=seq,
                    at=at,
                    actor=actor if actor_name else None,
                    actor_name=actor_name,
                    verb=verb,
                    object_type=object_type,
                    object_id=obj.pk,
                    payload=payload,
                    prev_hash=prev_hash,
                    entry_hash=link_hash(prev_hash, entry_body),
                )
                entry.save()
        except IntegrityError:
            continue  # another writer took this sequence number: read the new head and retry
        return entry
    raise RuntimeError("could not append to the audit trail: too many concurrent writers")


def _links(entries) -> list[Link]:
    return [
        Link(
            seq=entry.seq,
            at=_iso(entry.at),
            actor=entry.actor_name,
            verb=entry.verb,
            object_type=entry.object_type,
            object_id=entry.object_id,
            payload=entry.payload,
            prev_hash=entry.prev_hash,
            entry_hash=entry.entry_hash,
        )
        for entry in entries
    ]


def audit_verify() -> ChainCheck:
    """Recompute the whole chain from the database."""
    return verify_chain(_links(AuditEntry.objects.order_by("seq").iterator(chunk_size=2000)))


def audit_trail(*, object_type: str | None = None, object_ids: list[int] | None = None):
    rows = AuditEntry.objects.select_related("actor").order_by("seq")
    if object_type is not None:
        rows = rows.filter(object_type=object_type)
    if object_ids is not None:
        rows = rows.filter(object_id__in=object_ids)
    return rows
