"""Beat runs once: a second beat stands by instead of doubling the schedule, and takes over
when the first dies.

Two real ``celery beat`` processes with the portal's scheduler, as on two hosts (each its own
schedule file), share the lock of the deployment's database: a PostgreSQL advisory lock, or a
file lock under ``var/`` for the embedded SQLite default. Each process's log says what it sent.
"""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.workers import ROOT, database_url_for_processes, worker_env

pytestmark = pytest.mark.broker

SENT = "Sending due task tick"


def _beat(env: dict[str, str], tmp_path: Path, name: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / f"{name}.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "beat", "--loglevel", "INFO",
         "--schedule", str(tmp_path / f"{name}-schedule")],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    return process, log


def _wait_for_line(log: Path, text: str, *, count: int = 1, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.read_text().count(text) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(
        f"{log.name} has no {count} x {text!r} after {timeout_s} s:\n{log.read_text()[-3000:]}"
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.mark.parametrize("lock", ["file", "postgresql"])
def test_a_second_beat_stands_by_and_takes_over_when_the_first_dies(tmp_path, lock, request):
    if lock == "postgresql":
        if connection.vendor != "postgresql":
            pytest.skip("needs PostgreSQL (DATABASE_URL=postgres://...): the lock of a shared database")
        request.getfixturevalue("transactional_db")
        database_url = database_url_for_processes()
    else:
        database_url = f"sqlite:///{tmp_path / 'portal.sqlite3'}"
    env = worker_env(database_url, tmp_path / "var", PORTAL_BEAT_STANDBY_POLL_S="1", LOG_FORMAT="text")
    env["DJANGO_SETTINGS_MODULE"] = "tests.beat_settings"
    env["CELERY_BROKER_URL"] = "filesystem://localhost//"  # beat only sends; the messages are files

    first, first_log = _beat(env, tmp_path, "first")
    second = None
    try:
        _wait_for_line(first_log, "This beat sends the periodic tasks")
        _wait_for_line(first_log, SENT)
        second, second_log = _beat(env, tmp_path, "second")
        _wait_for_line(second_log, "this one stands by")
        sent_before = first_log.read_text().count(SENT)
        time.sleep(5)
        # One schedule: the first beat kept sending its tick every second, the second sent nothing.
        assert first_log.read_text().count(SENT) - sent_before >= 3
        assert SENT not in second_log.read_text()

        first.send_signal(signal.SIGKILL)  # no clean shutdown: the lock goes with the process
        first.wait(timeout=10)
        killed_at = time.monotonic()
        _wait_for_line(second_log, "This beat took over the periodic tasks", timeout_s=30)
        _wait_for_line(second_log, SENT, count=3, timeout_s=30)
        print(
            f"{lock} lock: the standby took over and sent 3 ticks "
            f"{time.monotonic() - killed_at:.1f} s after the kill"
        )
        assert "Traceback" not in second_log.read_text()
    finally:
        _stop(first)
        if second is not None:
            _stop(second)
