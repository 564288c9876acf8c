"""Build an expensive data set once per module, give every test of the module its own copy.

Browser tests run under ``transaction=True`` (the live server reads what the test wrote), so the
database is flushed after each of them and a fixture that builds weeks of simulated history
would build it again for every test. ``DatabaseSnapshot.take()`` keeps the rows of every table
once they are built; ``restore()`` empties the tables and puts exactly those rows back (the
same primary keys, sequences untouched), which is what a test saw after building them itself,
in a fraction of the time. PostgreSQL copies with COPY, SQLite with INSERT.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.contrib.contenttypes.models import ContentType
from django.core.cache import caches
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connections, transaction
from django.test import override_settings


@contextmanager
def build_settings(**extra) -> Iterator[None]:
    """The settings tests/conftest.py's autouse fixtures give a test, for a module-scoped build
    (which runs before them): a password hashed here must be the one a test signs in with."""
    from django.conf import settings

    from tests.conftest import TEST_SOURCE_ROOTS

    with override_settings(
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        PORTAL_SOURCE_ROOTS=[*settings.PORTAL_SOURCE_ROOTS, *TEST_SOURCE_ROOTS],
        **extra,
    ):
        yield


def flush(using: str = "default") -> None:
    """Empty the database as a transactional test's teardown does (sequences kept)."""
    call_command("flush", interactive=False, reset_sequences=False, verbosity=0, database=using)


@dataclass
class DatabaseSnapshot:
    using: str = "default"
    tables: dict[str, tuple[list[str], object]] = field(default_factory=dict)

    @classmethod
    def take(cls, using: str = "default") -> "DatabaseSnapshot":
        snapshot = cls(using)
        connection = connections[using]
        with connection.cursor() as cursor:
            for table in snapshot._table_names():
                columns = snapshot._columns(cursor, table)
                names = ", ".join(connection.ops.quote_name(c) for c in columns)
                query = f"SELECT {names} FROM {connection.ops.quote_name(table)}"
                if connection.vendor == "postgresql":
                    with cursor.cursor.copy(f"COPY ({query}) TO STDOUT (FORMAT binary)") as copy:
                        rows = b"".join(bytes(block) for block in copy)
                else:
                    cursor.execute(query)
                    rows = cursor.fetchall()
                snapshot.tables[table] = (columns, rows)
        return snapshot

    def restore(self) -> None:
        connection = connections[self.using]
        with transaction.atomic(using=self.using), connection.cursor() as cursor:
            for sql in connection.ops.sql_flush(no_style(), list(self.tables), reset_sequences=False):
                cursor.execute(sql)
            for table, (columns, rows) in self.tables.items():
                if not rows:
                    continue
                names = ", ".join(connection.ops.quote_name(c) for c in columns)
                target = f"{connection.ops.quote_name(table)} ({names})"
                if connection.vendor == "postgresql":
                    with cursor.cursor.copy(f"COPY {target} FROM STDIN (FORMAT binary)") as copy:
                        copy.write(rows)
                else:
                    marks = ", ".join(["%s"] * len(columns))
                    cursor.executemany(f"INSERT INTO {target} VALUES ({marks})", rows)
        # The flush after the previous test made content types with other keys: forget those.
        ContentType.objects.clear_cache()
        for cache in caches.all(initialized_only=True):
            cache.clear()  # nothing a previous test cached about these rows is served

    def _table_names(self) -> list[str]:
        return sorted(
            connections[self.using].introspection.django_table_names(only_existing=True, include_views=False)
        )

    def _columns(self, cursor, table: str) -> list[str]:
        description = connections[self.using].introspection.get_table_description(cursor, table)
        return [column.name for column in description]
