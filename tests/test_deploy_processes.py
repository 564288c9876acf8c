"""The deployment's health checks and graceful shutdown, on real processes.

deploy/healthcheck.py is what compose's healthchecks and portal-healthcheck@.timer run; SIGTERM is
what systemd (KillMode=mixed: the main process only) and Docker (through init) send on stop.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from tests.workers import ROOT, database_url_for_processes, free_port, portal_python, worker_env

HEALTHCHECK = str(ROOT / "deploy" / "healthcheck.py")


def healthcheck(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, HEALTHCHECK, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def wait_until(condition, *, what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(0.5)


def stop(process: subprocess.Popen, timeout_s: float = 30) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


def redis_env(tmp_path: Path) -> dict[str, str]:
    if not os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
        if os.environ.get("PORTAL_REQUIRE_BROKER") == "1":
            pytest.fail("PORTAL_REQUIRE_BROKER=1 but CELERY_BROKER_URL is not Redis")
        pytest.skip("needs Redis (CELERY_BROKER_URL=redis://...): the file-system broker has no ping")
    # The worker needs no table: a SQLite file of its own keeps this test off the test database.
    return worker_env(f"sqlite:///{tmp_path / 'portal.sqlite3'}", tmp_path / "var")


def start_worker(env: dict[str, str], queue: str) -> subprocess.Popen:
    """A worker as portal-worker@QUEUE runs it: prefork, one queue, named QUEUE@HOST."""
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "--queues", queue,
         "--hostname", f"{queue}@{socket.gethostname()}", "--concurrency", "1", "--include",
         "tests.deploy_tasks", "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def send_slow_task(env: dict[str, str], queue: str, directory: Path, seconds: float) -> None:
    sent = portal_python(
        env,
        "from tests.deploy_tasks import slow_write_task; "
        f"slow_write_task.apply_async(args=[{str(directory)!r}, {seconds}], queue={queue!r})",
    )
    assert sent.returncode == 0, sent.stderr


@pytest.mark.broker
def test_a_stopped_worker_finishes_its_task_and_its_health_check_then_fails(tmp_path):
    env = redis_env(tmp_path)
    queue = f"deploy-{uuid.uuid4().hex[:8]}"
    worker = start_worker(env, queue)
    try:
        wait_until(lambda: healthcheck(env, "worker", queue).returncode == 0, what="the worker's ping")
        send_slow_task(env, queue, tmp_path, seconds=4)
        wait_until(lambda: (tmp_path / "started").exists(), what="the task to start")
        # SIGTERM to the main process, as systemd and Docker send it: warm shutdown.
        assert stop(worker) == 0, worker.stdout.read() if worker.stdout else ""
    finally:
        if worker.poll() is None:
            worker.kill()
    assert (tmp_path / "finished").read_text() == (tmp_path / "started").read_text()
    stopped = healthcheck(env, "worker", queue)
    assert stopped.returncode == 1
    assert f"{queue}@{socket.gethostname()} did not answer a ping" in stopped.stderr


@pytest.mark.broker
def test_a_task_whose_process_is_killed_goes_back_to_the_queue_and_runs_again(tmp_path):
    env = redis_env(tmp_path)
    queue = f"deploy-{uuid.uuid4().hex[:8]}"
    worker = start_worker(env, queue)
    try:
        send_slow_task(env, queue, tmp_path, seconds=3)
        wait_until(lambda: (tmp_path / "started").exists(), what="the task to start")
        # The process running it dies (out of memory, SIGKILL at the end of the stop timeout).
        os.kill(int((tmp_path / "started").read_text().split()[0]), signal.SIGKILL)
        wait_until(lambda: (tmp_path / "finished").exists(), what="the task to run again")
    finally:
        stop(worker)
    first, second = (tmp_path / "started").read_text().split()
    assert first != second  # started twice, in two processes
    assert (tmp_path / "finished").read_text().split() == [second]  # finished once


def test_beat_health_check_follows_its_schedule_file(tmp_path):
    schedule = tmp_path / "beat" / "celerybeat-schedule"
    schedule.parent.mkdir()
    # The file-system broker: the tasks beat sends stay in this test's folder.
    env = worker_env(
        f"sqlite:///{tmp_path / 'portal.sqlite3'}",
        tmp_path / "var",
    )
    env["CELERY_BROKER_URL"] = "filesystem://localhost//"
    assert healthcheck(env, "beat", str(schedule)).returncode == 1  # no schedule yet
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "beat", "--schedule", str(schedule),
         "--loglevel", "WARNING"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: healthcheck(env, "beat", str(schedule)).returncode == 0, what="beat's schedule")
        stale = healthcheck({**env, "PORTAL_BEAT_STALE_AFTER_S": "0"}, "beat", str(schedule))
        assert stale.returncode == 1
        assert "schedule written" in stale.stderr
    finally:
        assert stop(beat) == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="gunicorn must see the test database")
def test_web_health_check_asks_healthz_as_an_allowed_host_and_gunicorn_stops_on_sigterm(tmp_path):
    port = free_port()
    env = worker_env(
        database_url_for_processes(),
        tmp_path / "var",
        PORTAL_ENV="production",
        SECRET_KEY="test-only-" + uuid.uuid4().hex * 2,
        ALLOWED_HOSTS="portal.example.com",
        PORTAL_BIND=f"127.0.0.1:{port}",
        PORTAL_WEB_WORKERS="1",
    )
    env["CELERY_BROKER_URL"] = "filesystem://localhost//"
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--config", str(ROOT / "deploy" / "gunicorn.conf.py")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: healthcheck(env, "web").returncode == 0, what="/healthz to answer 200")
        # Asked as a host outside ALLOWED_HOSTS, Django refuses: the check must not be.
        refused = healthcheck({**env, "ALLOWED_HOSTS": "elsewhere.example.com"}, "web")
        assert (refused.returncode, refused.stderr.strip()) == (1, "unhealthy web: /healthz answered 400")
    finally:
        assert stop(web) == 0
    down = healthcheck(env, "web")
    assert down.returncode == 1
    assert "/healthz did not answer" in down.stderr
