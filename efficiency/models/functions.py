"""Database functions the selectors and services share."""

from django.db.models import FloatField, Func


class EpochSeconds(Func):
    """Seconds since the epoch of a datetime column (or, on PostgreSQL, the seconds of an
    interval such as ``F("started_at") - F("submitted_at")``), as a double worked out by the
    database.

    Loading a timezone-aware datetime per row costs Python a few microseconds each: a tenth of
    a 10,000-GPU scrape's ingest for the nodes' last_seen_at, most of the department page's Python
    time over 90 days for the jobs' waits. PostgreSQL's EXTRACT is exact (numeric) and rounds to
    the same double as ``total_seconds()``; SQLite goes through julianday(), exact to well under a
    millisecond.
    """

    output_field = FloatField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(
            compiler,
            connection,
            template="CAST(EXTRACT(EPOCH FROM %(expressions)s) AS double precision)",
            **extra_context,
        )

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(
            compiler,
            connection,
            template="(julianday(%(expressions)s) - 2440587.5) * 86400.0",
            **extra_context,
        )
