"""PostgreSQL restarted under a running portal: the web server and the worker carry on without a
restart of their own.

Both keep persistent connections (``CONN_MAX_AGE``) that the restart breaks; Django's
``CONN_HEALTH_CHECKS`` (on in settings) finds a broken one before use and opens a new one. The test
runs a PostgreSQL cluster of its own (initdb + pg_ctl on a free port) so it can restart it.
"""

import re
import subprocess
import sys

import pytest
import requests

from tests.reliability.processes import (
    ROOT,
    Client,
    PostgresCluster,
    new_queue,
    require_initdb,
    wait_for,
    worker_process,
)
from tests.workers import free_port, portal_python, worker_env

pytestmark = pytest.mark.broker

PASSWORD = "restart-test-pass"


def _sign_in(base_url: str) -> requests.Session:
    session = requests.Session()
    page = session.get(f"{base_url}/login/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answer = session.post(
        f"{base_url}/login/",
        data={"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{base_url}/login/"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text[:500]
    assert "/login/" not in answer.url, "not signed in"
    return session


def _up(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def test_the_web_and_the_worker_recover_from_a_database_restart_by_themselves(tmp_path):
    require_initdb()
    database = PostgresCluster(free_port())
    database.init()
    gunicorn = None
    try:
        env = worker_env(database.url, tmp_path / "var", DB_CONN_MAX_AGE="600")
        # The schema straight from the models (as pytest-django's --nomigrations does): seconds
        # instead of replaying every migration, and the restart does not depend on history.
        schema = portal_python(
            env,
            "from django.conf import settings; from django.core.management import call_command; "
            "settings.MIGRATION_MODULES = type('NoMigrations', (dict,), "
            "{'__contains__': lambda self, app: True, '__getitem__': lambda self, app: None})(); "
            "call_command('migrate', run_syncdb=True, verbosity=0); "
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_superuser('admin', 'admin@example.com', {PASSWORD!r})",
        )
        assert schema.returncode == 0, schema.stderr[-3000:]
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "portal.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(lambda: _up(f"{base_url}/healthz"), what="gunicorn to answer")
        web = _sign_in(base_url)
        assert web.get(f"{base_url}/", timeout=30).status_code == 200
        queue = new_queue("db-restart")
        client = Client(env, queue)
        with worker_process(env, queue) as worker:
            assert "last_seen_at" in client.call("worker_heartbeat_task")

            database.stop("fast")  # every session ends, as on a restart for a minor upgrade
            database.start()

            # The first request and the first task after the restart succeed: no 500, no retry.
            assert web.get(f"{base_url}/", timeout=30).status_code == 200
            assert web.get(f"{base_url}/healthz", timeout=30).json()["status"] != "error"
            assert "last_seen_at" in client.call("worker_heartbeat_task")
            assert worker.poll() is None, "the worker had to be restarted"
            assert gunicorn.poll() is None, "gunicorn had to be restarted"
    finally:
        if gunicorn is not None:
            gunicorn.terminate()
            gunicorn.wait(timeout=20)
        database.destroy()
