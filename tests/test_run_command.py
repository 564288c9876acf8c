"""The README's run command, as a new user runs it: embedded default, nothing but Python.

Starts ``manage.py runportal --demo`` (migrate, demo organisation, a day of simulated history,
gunicorn, Celery worker and beat on the file-system broker and SQLite, the simulated cluster) in
a scratch folder: the web answers while the history is prepared, then /healthz reports a live
worker, a demo user signs in over HTTP, and the worker collects live data from every demo source.

No step has a fixed time limit: on a busy machine the history takes longer, so each wait fails
only when the portal stops making progress (its output and its history status stay unchanged
for STALL_S) or exits, within a generous overall cap.
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


STALL_S = 300
CAP_S = 40 * 60


class Progress:
    """Fails a wait when the portal stops making progress, not when the machine is slow."""

    def __init__(self, portal: subprocess.Popen, watched: list[Path]):
        self.portal = portal
        self.watched = watched
        self.started = time.monotonic()
        self._last_change = time.monotonic()
        self._last_seen: tuple = ()

    def check(self, what: str) -> None:
        seen = tuple(path.stat().st_mtime_ns if path.exists() else 0 for path in self.watched)
        if seen != self._last_seen:
            self._last_seen, self._last_change = seen, time.monotonic()
        assert self.portal.poll() is None, f"the portal exited while waiting for {what}"
        assert time.monotonic() - self._last_change < STALL_S, f"no progress for {STALL_S} s: {what}"
        assert time.monotonic() - self.started < CAP_S, f"over {CAP_S} s: {what}"


def _health(base: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
            return json.load(response)
    except OSError:
        return None


def _wait_for_health(base: str, progress: Progress, *, status: str | None = None) -> dict:
    while True:
        health = _health(base)
        if health is not None and (status is None or health["status"] == status):
            return health
        progress.check(f"/healthz {status or 'answering'} (last: {health})")
        time.sleep(0.5)


def _log_has(log: Path, text: str) -> bool:
    return text in log.read_text()


def _wait_for_live_collection(database: Path, progress: Progress) -> None:
    """Every demo source has stored data from the live simulator through the worker."""
    query = (
        "SELECT s.name, MAX(r.stored) FROM efficiency_datasource s "
        "JOIN efficiency_sourcerun r ON r.source_id = s.id "
        "WHERE r.status IN ('ok', 'partial') GROUP BY s.name"
    )
    stored = {}
    while True:
        with sqlite3.connect(database, timeout=10) as connection:
            stored = dict(connection.execute(query).fetchall())
        if all(stored.get(name, 0) > 0 for name in ("dcgm-exporter", "slurm", "job-logs")):
            return
        progress.check(f"live collection from every source (so far: {stored})")
        time.sleep(2)


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
    log_path = tmp_path / "portal.log"
    var = tmp_path / "var"
    progress = Progress(portal, [log_path, var / "sim" / "history.json", var / "portal.sqlite3-wal"])
    try:
        # The web answers before the history is ready, and says that it is being prepared.
        _wait_for_health(base, progress)
        preparing = not _log_has(log_path, "Portal ready")
        with urllib.request.urlopen(f"{base}/login/", timeout=10) as response:
            login_page = response.read().decode()
        if preparing and (var / "sim" / "history.json").exists():
            assert "history is being prepared" in login_page or _log_has(log_path, "Portal ready")
        while not _log_has(log_path, "Portal ready"):
            progress.check("the history to be prepared")
            time.sleep(1)
        # "ok" means the database and the broker answered (the detail is for signed-in staff).
        assert _wait_for_health(base, progress, status="ok") == {"status": "ok"}

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
        _wait_for_live_collection(var / "portal.sqlite3", progress)
    finally:
        os.killpg(portal.pid, signal.SIGTERM)
        try:
            portal.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(portal.pid, signal.SIGKILL)
        log.close()
    output = log_path.read_text()
    running = output.index("while the demo history is prepared")
    assert running < output.index("Simulating history")  # pages were served during the backfill
    ready = output.index("Portal ready")
    assert "head-vision" in output[ready:]  # the logins are printed again once it is ready
    assert "Traceback" not in output
    # The console keeps to what needs attention, so the logins stay in view.
    assert "celery@" not in output  # no worker banner
    assert "No hostname was supplied" not in output
    assert "superuser privileges" not in output
