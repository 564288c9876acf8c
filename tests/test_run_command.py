"""The README's run command, as a new user runs it: embedded default, nothing but Python.

Starts ``manage.py runportal --demo`` (migrate, demo organisation, a day of simulated history,
gunicorn, Celery worker and beat on the file-system broker and SQLite, the simulated cluster) in
a scratch folder, waits for /healthz to report a live worker, signs in as a demo user over HTTP,
and waits until the worker has collected live data from every demo source.
"""

import http.cookiejar
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.broker


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_health(base: str, deadline: float) -> dict:
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
                last = json.load(response)
                if last["status"] == "ok":
                    return last
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"portal never became healthy; last /healthz: {last}")


def _wait_for_live_collection(database: Path, deadline: float) -> None:
    """Every demo source has stored data from the live simulator through the worker."""
    query = (
        "SELECT s.name, MAX(r.stored) FROM efficiency_datasource s "
        "JOIN efficiency_sourcerun r ON r.source_id = s.id "
        "WHERE r.status IN ('ok', 'partial') GROUP BY s.name"
    )
    stored = {}
    while time.monotonic() < deadline:
        with sqlite3.connect(database, timeout=10) as connection:
            stored = dict(connection.execute(query).fetchall())
        if all(stored.get(name, 0) > 0 for name in ("dcgm-exporter", "slurm", "job-logs")):
            return
        time.sleep(2)
    raise AssertionError(f"live collection did not store data from every source: {stored}")


def test_run_command_brings_up_web_worker_and_beat_with_the_demo(tmp_path):
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "PORTAL_", "DATABASE_URL"))}
    env["PORTAL_VAR_DIR"] = str(tmp_path / "var")
    env["PORTAL_DEMO_DAYS"] = "1"
    env["PORTAL_SIMULATOR_PORT"] = str(_free_port())
    log = (tmp_path / "portal.log").open("w")
    portal = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "runportal",
            "--demo",
            "--bind",
            f"127.0.0.1:{port}",
            "--web-workers",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        health = _wait_for_health(base, time.monotonic() + 120)
        assert health["database"]["ok"]
        assert health["broker"] == {"ok": True, "transport": "filesystem"}

        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(f"{base}/login/").read()
        csrf = next(cookie.value for cookie in jar if cookie.name == "csrftoken")
        form = urllib.parse.urlencode(
            {"username": "head-vision", "password": "portal-demo", "csrfmiddlewaretoken": csrf}
        ).encode()
        request = urllib.request.Request(f"{base}/login/", data=form, headers={"Referer": f"{base}/login/"})
        with opener.open(request) as response:
            body = response.read().decode()
        assert response.url == f"{base}/"
        assert "Vehicle vision" in body
        assert "Radar perception" not in body
        _wait_for_live_collection(tmp_path / "var" / "portal.sqlite3", time.monotonic() + 150)
    finally:
        os.killpg(portal.pid, signal.SIGTERM)
        try:
            portal.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(portal.pid, signal.SIGKILL)
        log.close()
    output = (tmp_path / "portal.log").read_text()
    assert "head-vision" in output  # the logins were printed
