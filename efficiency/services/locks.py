"""Transaction-scoped locks that keep concurrent workers from writing the same rows at once."""

from django.db import connection


def transaction_lock(space: int, key: int) -> None:
    """Hold PostgreSQL's advisory lock (``space``, ``key``) until the current transaction ends.

    Call it inside ``transaction.atomic()``. Elsewhere (SQLite, the embedded default) it does
    nothing: SQLite's IMMEDIATE transactions already admit one writer at a time.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [space, key])
