"""Raw GPU samples and log chunks partitioned by UTC day on PostgreSQL (issue 19).

Each table is rebuilt as a range-partitioned table with the same columns, constraints, indexes
(same names) and foreign keys, a ``_default`` partition, one partition per day its rows cover
and the days ahead; the rows are copied over and the old table dropped. On a large existing
table this copies every raw row once: run it in a maintenance window (or lower
PORTAL_RAW_RETENTION_DAYS and prune first).

A partitioned table's unique keys must contain the partition column, so a log chunk's
"stored once per (source, stream, file, start offset)" is no longer a unique constraint: ingest
checks for the stored chunk under a per-source lock (``services.ingest.log_chunks_ingest``), and
the same columns keep a plain index. SQLite is left unpartitioned.
"""

from datetime import UTC, datetime, timedelta

import django.db.models.deletion
from django.db import migrations, models

# table -> (partition column, primary key columns before partitioning)
TABLES = {
    "efficiency_gpusample": ("ts", ["node_id", "gpu_index", "ts"]),
    "efficiency_logchunk": ("received_at", ["id"]),
}
DAYS_AHEAD = 3


def _fetch(cursor, sql, params=()):
    cursor.execute(sql, params)
    return cursor.fetchall()


def _rebuild(cursor, table: str, *, partitioned: bool) -> None:
    """Rebuild ``table`` as a partitioned (or again a plain) table with the same definition."""
    key, plain_pk = TABLES[table]
    old = f"{table}_before_rebuild"
    indexes = _fetch(
        cursor,
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = to_regclass(%s) AND NOT x.indisprimary",
        [table],
    )
    [(pk_name,)] = _fetch(
        cursor,
        "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'p'",
        [table],
    )
    foreign = _fetch(
        cursor,
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = to_regclass(%s) AND contype = 'f'",
        [table],
    )
    identity = _fetch(
        cursor,
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attidentity <> ''",
        [table],
    )
    cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{old}"')
    for name, _definition in indexes:
        cursor.execute(f'ALTER INDEX "{name}" RENAME TO "{name[:50]}_old"')
    cursor.execute(f'ALTER INDEX "{pk_name}" RENAME TO "{pk_name[:50]}_old"')
    for name, _definition in foreign:
        cursor.execute(f'ALTER TABLE "{old}" DROP CONSTRAINT "{name}"')
    partition_by = f' PARTITION BY RANGE ("{key}")' if partitioned else ""
    cursor.execute(
        f'CREATE TABLE "{table}" (LIKE "{old}" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY)'
        + partition_by
    )
    pk = plain_pk + ([key] if partitioned and key not in plain_pk else [])
    cursor.execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{pk_name}" PRIMARY KEY ({", ".join(pk)})')
    for _name, definition in indexes:
        # The definitions name the table by its own name; a partitioned index reads ON ONLY.
        cursor.execute(definition.replace(" ON ONLY ", " ON "))
    if partitioned:
        cursor.execute(f'CREATE TABLE "{table}_default" PARTITION OF "{table}" DEFAULT')
        today = datetime.now(tz=UTC).date()
        days = {
            day
            for (day,) in _fetch(
                cursor,
                f"""SELECT DISTINCT ("{key}" AT TIME ZONE 'UTC')::date FROM "{old}" """,  # noqa: S608
            )
        }
        days |= {today + timedelta(days=offset) for offset in range(DAYS_AHEAD + 1)}
        for day in sorted(days):
            start = datetime(day.year, day.month, day.day, tzinfo=UTC)
            end = start + timedelta(days=1)
            cursor.execute(
                f'CREATE TABLE "{table}_p{day:%Y%m%d}" PARTITION OF "{table}" '
                f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
            )
    cursor.execute(f'INSERT INTO "{table}" OVERRIDING SYSTEM VALUE SELECT * FROM "{old}"')  # noqa: S608
    for (column,) in identity:
        cursor.execute(
            f'SELECT setval(pg_get_serial_sequence(%s, %s), coalesce(max("{column}"), 0) + 1, false) '  # noqa: S608
            f'FROM "{table}"',
            [table, column],
        )
    sequences = (
        [name for (name,) in _fetch(cursor, "SELECT pg_get_serial_sequence(%s, 'id')", [table])]
        if identity
        else []
    )
    cursor.execute(f'DROP TABLE "{old}"')
    # The foreign keys last, after the copy: added before, their deferred checks of the copied rows
    # would still be pending at the next ALTER TABLE of this transaction, which PostgreSQL refuses.
    for name, definition in foreign:
        cursor.execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
    for sequence in sequences:
        # LIKE ... INCLUDING IDENTITY named the new sequence "<table>_id_seq1" while the old one
        # existed; give it back the usual name.
        wanted = f"public.{table}_id_seq"
        if sequence and sequence != wanted:
            cursor.execute(f'ALTER SEQUENCE {sequence} RENAME TO "{table}_id_seq"')


def _rebuild_all(schema_editor, *, partitioned: bool) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table in TABLES:
            _rebuild(cursor, table, partitioned=partitioned)


def partition(apps, schema_editor):
    _rebuild_all(schema_editor, partitioned=True)


def unpartition(apps, schema_editor):
    _rebuild_all(schema_editor, partitioned=False)


class Migration(migrations.Migration):
    dependencies = [("efficiency", "0028_committee")]

    operations = [
        # The primary key (node, gpu_index, ts) leads with the node: its own index was a tenth of
        # the table's disk for nothing (bench/raw_disk.py).
        migrations.AlterField(
            model_name="gpusample",
            name="node",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="efficiency.node",
            ),
        ),
        migrations.RemoveConstraint(model_name="logchunk", name="logchunk_unique_offset"),
        migrations.AddIndex(
            model_name="logchunk",
            index=models.Index(
                fields=["source", "stream", "file_id", "start_offset"], name="logchunk_offset"
            ),
        ),
        migrations.RunPython(partition, unpartition, elidable=False),
    ]
