"""Helpers for tests of data migrations: migrate to just before one, fill rows, migrate to the end."""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets):
    """Migrate the test database to ``targets``; the historical models of that state."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def around(name_suffix: str) -> tuple[list, list]:
    """Just before the efficiency migration whose name ends with ``name_suffix`` (found by name:
    its number may change on merge), and the latest state, so the database is left as fully
    migrated as it was found."""
    graph = MigrationExecutor(connection).loader.graph
    [key] = [key for key in graph.nodes if key[0] == "efficiency" and key[1].endswith(name_suffix)]
    before = [parent.key for parent in graph.node_map[key].parents if parent.key[0] == "efficiency"]
    return before, graph.leaf_nodes()
