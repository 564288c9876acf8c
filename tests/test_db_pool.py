"""PORTAL_DB_POOL=1: the processes share a bounded psycopg pool of PostgreSQL connections."""

import json
import subprocess
import sys

import pytest
from django.db import connection

from tests.workers import ROOT, database_url_for_processes, portal_python, worker_env

# Six threads of one process (a gunicorn worker's threads) each run a query that takes 0.3 s.
_THREADS = """
import json, threading
from django.db import connection, connections
pids = []
def query():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid(), pg_sleep(0.3)")
        pids.append(cursor.fetchone()[0])
    connections.close_all()  # what Django does at the end of each request: back to the pool
threads = [threading.Thread(target=query) for _ in range(6)]
[t.start() for t in threads]; [t.join() for t in threads]
print(json.dumps({"queries": len(pids), "connections": len(set(pids)),
                  "pool": type(connection.pool).__name__}))
"""


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the pool is PostgreSQL's (psycopg)")
def test_pooled_threads_share_at_most_max_size_connections(tmp_path):
    env = worker_env(database_url_for_processes(), tmp_path, PORTAL_DB_POOL="1", PORTAL_DB_POOL_MAX_SIZE="2")
    done = portal_python(env, f"exec({_THREADS!r})")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # All six answered, over no more than two server connections: the others waited their turn.
    assert result == {"queries": 6, "connections": result["connections"], "pool": "ConnectionPool"}
    assert 1 <= result["connections"] <= 2

    # Without the pool each thread opens a connection of its own.
    env["PORTAL_DB_POOL"] = "0"
    unpooled = json.loads(portal_python(env, f"exec({_THREADS!r})").stdout.strip().splitlines()[-1])
    assert unpooled == {"queries": 6, "connections": 6, "pool": "NoneType"}


def test_pool_on_sqlite_stops_the_process_at_start_up(tmp_path):
    env = worker_env(f"sqlite:///{tmp_path / 'portal.sqlite3'}", tmp_path, PORTAL_DB_POOL="1")
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "PORTAL_DB_POOL=1 needs PostgreSQL" in done.stderr
