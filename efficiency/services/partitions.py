"""Daily partitions of the raw tables on PostgreSQL: made ahead of time, dropped for retention.

At 10,000 GPUs and a 15 s scrape the raw sample table grows by ~58 million rows a day. On
PostgreSQL ``efficiency_gpusample`` (by ``ts``) and ``efficiency_logchunk`` (by ``received_at``)
are range-partitioned by UTC day (migration ``0029_raw_partitions``): retention drops a whole
day's table instead of scanning and deleting its rows, and a query of a few hours reads only
the partitions that hold them.

- ``partitions_ensure``: the partitions of some days, made when missing. Ingest calls it for the
  days of the rows it is about to write, and the daily maintenance task for the days ahead, so
  rows almost never meet a missing partition.
- A row whose day has no partition (written by another path, or before its partition was
  made) lands in the table's ``_default`` partition; making that day's partition later moves
  those rows into it (PostgreSQL refuses a new partition that the default holds rows of).
- ``partitions_drop_before``: drops the partitions that end at or before a time, and deletes
  the default partition's rows older than it (that table stays small).

SQLite (the embedded default) has no partitioning: every function here does nothing there and
retention deletes rows as before.
"""

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from efficiency.services.locks import transaction_lock

logger = logging.getLogger(__name__)

# table -> the column it is partitioned by
PARTITIONED = {"efficiency_gpusample": "ts", "efficiency_logchunk": "received_at"}
PARTITION_LOCK_SPACE = 0x504152  # first key of the advisory lock that serialises partition DDL
_DAY_SUFFIX = re.compile(r"_p(\d{8})$")

# (table, day) pairs known to exist in this process; added only once the creating transaction
# has committed, so a rolled-back creation is not remembered.
_known: set[tuple[str, date]] = set()


@dataclass(frozen=True)
class Partition:
    name: str
    day: date

    @property
    def end(self) -> datetime:
        return _day_start(self.day + timedelta(days=1))


def partitioning_active() -> bool:
    """Whether the raw tables are partitioned here (PostgreSQL after migration 0029)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_partitioned_table WHERE partrelid = to_regclass(%s)",
            ["efficiency_gpusample"],
        )
        return bool(cursor.fetchone()[0])


def partition_name(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def default_partition_name(table: str) -> str:
    return f"{table}_default"


def partitions_ensure(table: str, days: Iterable[date]) -> list[str]:
    """Make the daily partitions of ``table`` for ``days`` that do not exist; their names."""
    if connection.vendor != "postgresql":
        return []
    wanted = sorted({day for day in days if (table, day) not in _known})
    if not wanted:
        return []
    created = []
    with transaction.atomic(), connection.cursor() as cursor:
        if not _exists(cursor, default_partition_name(table)):
            return []  # not partitioned (before migration 0029)
        missing = [day for day in wanted if not _exists(cursor, partition_name(table, day))]
        if missing:
            # One creator at a time per table: two workers ingesting the first rows of a new day
            # would otherwise race to make the same partition.
            transaction_lock(PARTITION_LOCK_SPACE, _table_key(table))
            for day in missing:
                if not _exists(cursor, partition_name(table, day)):
                    _partition_create(cursor, table, day)
                    created.append(partition_name(table, day))
        transaction.on_commit(lambda: _known.update((table, day) for day in wanted))
    if created:
        logger.info("made partitions %s", ", ".join(created), extra={"partitions": created})
    return created


def partitions_for_rows(table: str, moments: Iterable[datetime]) -> list[str]:
    """``partitions_ensure`` for the UTC days of ``moments`` (the rows about to be written)."""
    if connection.vendor != "postgresql":
        return []
    return partitions_ensure(table, {moment.astimezone(UTC).date() for moment in moments})


def partitions_ahead(*, now: datetime | None = None, days: int | None = None) -> dict[str, list[str]]:
    """Make today's partitions and those of the next ``days`` days (``PORTAL_PARTITIONS_AHEAD_DAYS``)."""
    now = now or timezone.now()
    days = settings.PORTAL_PARTITIONS_AHEAD_DAYS if days is None else days
    today = now.astimezone(UTC).date()
    span = [today + timedelta(days=offset) for offset in range(days + 1)]
    return {table: partitions_ensure(table, span) for table in PARTITIONED}


def partitions_list(table: str) -> list[Partition]:
    """The daily partitions of ``table``, oldest first (not the default one)."""
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT child.relname FROM pg_inherits JOIN pg_class child ON child.oid = pg_inherits.inhrelid "
            "WHERE pg_inherits.inhparent = to_regclass(%s)",
            [table],
        )
        names = [name for (name,) in cursor.fetchall()]
    found = []
    for name in names:
        match = _DAY_SUFFIX.search(name)
        if match and name == partition_name(table, _parse_day(match.group(1))):
            found.append(Partition(name=name, day=_parse_day(match.group(1))))
    return sorted(found, key=lambda partition: partition.day)


def partitions_drop_before(
    table: str, cutoff: datetime, *, before_drop: Callable[[str, datetime], None] | None = None
) -> dict[str, int]:
    """Drop ``table``'s partitions that end at or before ``cutoff``; delete the default
    partition's rows older than ``cutoff``. Returns the partitions dropped and the rows deleted.

    A day is kept while any of it is inside the window: retention is whole UTC days (up to a day
    more than ``cutoff`` asks for), never a scan of a day's rows. ``before_drop(relation, upto)``,
    when given, runs in the same transaction just before the rows of ``relation`` (a partition,
    or the default one) with a key before ``upto`` go: to keep what must outlive them.
    """
    if connection.vendor != "postgresql":
        return {"partitions": 0, "rows": 0}
    key = PARTITIONED[table]
    dropped = 0
    for partition in partitions_list(table):
        if partition.end > cutoff:
            break
        with transaction.atomic(), connection.cursor() as cursor:
            transaction_lock(PARTITION_LOCK_SPACE, _table_key(table))
            # Rows written earlier in the same transaction leave deferred foreign-key checks
            # pending, and PostgreSQL drops no table with pending checks: run them now.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            if before_drop is not None and _exists(cursor, partition.name):
                before_drop(partition.name, partition.end)
            cursor.execute(f'DROP TABLE IF EXISTS "{partition.name}"')
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")  # Django's foreign keys are deferred
        _known.discard((table, partition.day))
        dropped += 1
        logger.info("dropped partition %s", partition.name, extra={"partition": partition.name})
    with transaction.atomic(), connection.cursor() as cursor:
        if before_drop is not None:
            before_drop(default_partition_name(table), cutoff)
        cursor.execute(
            f'DELETE FROM "{default_partition_name(table)}" WHERE "{key}" < %s',  # noqa: S608 -- names from PARTITIONED
            [cutoff],
        )
        rows = cursor.rowcount
    return {"partitions": dropped, "rows": rows}


def known_forget() -> None:
    """Forget which partitions exist (after they were dropped or made by another path)."""
    _known.clear()


def _table_key(table: str) -> int:
    """The second key of ``table``'s partition lock (the first is ``PARTITION_LOCK_SPACE``)."""
    return list(PARTITIONED).index(table)


def _exists(cursor, name: str) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
    return cursor.fetchone()[0]


def _partition_create(cursor, table: str, day: date) -> None:
    """Make ``table``'s partition of ``day``, moving the default partition's rows of that day
    into it first (PostgreSQL will not add a partition whose rows sit in the default one)."""
    key = PARTITIONED[table]
    name, default = partition_name(table, day), default_partition_name(table)
    start, end = _day_start(day), _day_start(day + timedelta(days=1))
    cursor.execute(
        f'SELECT EXISTS (SELECT 1 FROM "{default}" WHERE "{key}" >= %s AND "{key}" < %s)',  # noqa: S608
        [start, end],
    )
    bounds = f"FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
    if not cursor.fetchone()[0]:
        cursor.execute(f'CREATE TABLE "{name}" PARTITION OF "{table}" FOR VALUES {bounds}')
        return
    cursor.execute(f'CREATE TABLE "{name}" (LIKE "{table}" INCLUDING DEFAULTS INCLUDING CONSTRAINTS)')
    cursor.execute(
        f'WITH moved AS (DELETE FROM "{default}" WHERE "{key}" >= %s AND "{key}" < %s RETURNING *) '  # noqa: S608
        f'INSERT INTO "{name}" SELECT * FROM moved',
        [start, end],
    )
    cursor.execute(f'ALTER TABLE "{table}" ATTACH PARTITION "{name}" FOR VALUES {bounds}')


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def _parse_day(digits: str) -> date:
    return datetime.strptime(digits, "%Y%m%d").date()  # noqa: DTZ007 -- a date, no time zone
