"""Real Celery worker processes for tests, with the portal's own settings from ``env``."""

import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def celery_worker(env: dict[str, str], queue: str) -> Iterator[subprocess.Popen]:
    """A solo worker on its own ``queue`` (so no other worker can take the test's task)."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool", "solo", "--queues", queue,
         "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "WARNING"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()


@contextmanager
def celery_workers(env: dict[str, str], queue: str, count: int) -> Iterator[list[subprocess.Popen]]:
    """``count`` solo workers on ``queue``, each a process of its own, as on separate hosts."""
    with ExitStack() as stack:
        yield [stack.enter_context(celery_worker(env, queue)) for _ in range(count)]


def portal_python(env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a separate process after ``django.setup()`` (a client of the worker)."""
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def worker_env(database_url: str, var_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a test's worker and client processes: this test database, Redis when
    CI provides it (else the file-system broker), and no CELERY_/PORTAL_ settings of our own."""
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis://"):
        broker = "filesystem://localhost//"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "PORTAL_"))}
    env.update(
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=broker,
        PORTAL_VAR_DIR=str(var_dir),
        PORTAL_SOURCE_ROOTS=f"{var_dir},{tempfile.gettempdir()}",  # tests' sources live in tmp_path
        DJANGO_SETTINGS_MODULE="portal.settings",
        **extra,
    )
    return env


def database_url_for_processes() -> str:
    """The URL of the database this test runs on, for the processes it starts."""
    from django.db import connection

    settings = connection.settings_dict
    user = settings["USER"] or "postgres"
    password = f":{settings['PASSWORD']}" if settings["PASSWORD"] else ""
    host = f"{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}"
    return f"postgres://{user}{password}@{host}/{settings['NAME']}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
