"""Real processes for the fault-injection tests: workers to kill, a broker and a database to restart.

Every helper starts what it needs on its own port or queue, so a test can stop and restart it
without disturbing anything else on the machine, and stops it on exit.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection

from tests.workers import ROOT, celery_worker, portal_python

WAIT_S = 60.0


def require_postgresql() -> None:
    """Worker processes must see the test database: an in-memory SQLite one cannot be shared."""
    if connection.vendor != "postgresql":
        pytest.skip(
            "needs PostgreSQL (DATABASE_URL=postgres://...): worker processes share the test database"
        )


def wait_for(condition: Callable[[], object], *, what: str, timeout_s: float = WAIT_S) -> object:
    """Poll ``condition`` until it returns something true; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def sigkill(worker: subprocess.Popen) -> None:
    """Kill a worker the way the OOM killer does: no cleanup, no acknowledgement, no rollback."""
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)


class Client:
    """Sends tasks to one test queue from a separate process, as beat or the web would."""

    def __init__(self, env: dict[str, str], queue: str) -> None:
        self.env, self.queue = env, queue

    def send(self, task: str, *args: object) -> None:
        """Queue ``task`` and return at once (the worker may be killed before it finishes)."""
        self._run(f"{self._apply(task, args)}")

    def send_each(self, task: str, ids: list[int]) -> None:
        """Queue ``task`` once per id from one process, as beat's collect-due-sources task does."""
        self._run("; ".join(self._apply(task, (pk,)) for pk in ids))

    def call(self, task: str, *args: object, timeout_s: float = WAIT_S) -> dict:
        """Queue ``task`` and return its result."""
        out = self._run(f"import json; print(json.dumps({self._apply(task, args)}.get(timeout={timeout_s})))")
        return json.loads(out.strip().splitlines()[-1])

    def _apply(self, task: str, args: tuple) -> str:
        tasks = "__import__('efficiency.tasks').tasks"
        return f"{tasks}.{task}.apply_async(args={list(args)!r}, queue={self.queue!r})"

    def _run(self, code: str) -> str:
        result = portal_python(self.env, code)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout


def new_queue(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@contextmanager
def worker_process(env: dict[str, str], queue: str) -> Iterator[subprocess.Popen]:
    """A solo worker on ``queue``; the caller may SIGKILL it (then it is simply gone)."""
    with celery_worker(env, queue) as worker:
        yield worker


# --- a Redis server of the test's own ------------------------------------------------------------

REDIS_BIN = shutil.which("redis-server") or "/usr/bin/redis-server"


class RedisServer:
    """A throwaway ``redis-server`` on its own port and data directory, restartable in place.

    Persistence is Redis's default for a server without a config file (RDB snapshots, and one on
    a clean shutdown), which is what a packaged Redis does: queued messages survive a restart.
    """

    def __init__(self, directory: Path, port: int) -> None:
        self.directory, self.port = directory, port
        self.process: subprocess.Popen | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.process = subprocess.Popen(
            [REDIS_BIN, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--save", "3600 1 300 100 60 10000", "--logfile", str(self.directory / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_connect_timeout=1)

        def ready() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                assert self.process.poll() is None, (self.directory / "redis.log").read_text()[-2000:]
                return False

        wait_for(ready, what=f"redis-server on port {self.port}", timeout_s=20)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM): Redis writes its snapshot, as on a service restart."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)


def require_redis_server() -> None:
    if not Path(REDIS_BIN).exists():
        if os.environ.get("PORTAL_REQUIRE_BROKER") == "1":
            pytest.fail("PORTAL_REQUIRE_BROKER=1 but redis-server is not installed")
        pytest.skip("redis-server is not installed")


# --- a PostgreSQL cluster of the test's own ------------------------------------------------------


def _pg_bin() -> Path:
    """PostgreSQL's server programs: ``PORTAL_PG_BIN``, else Debian's newest installed version."""
    if os.environ.get("PORTAL_PG_BIN"):
        return Path(os.environ["PORTAL_PG_BIN"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _pg_bin()


class PostgresCluster:
    """A throwaway PostgreSQL cluster (initdb + pg_ctl) on its own port, restartable in place.

    initdb refuses to run as root: as root the cluster belongs to the ``postgres`` user, in a
    directory of its own under the system's temporary directory (pytest's is private to root).
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.user = "postgres" if os.geteuid() == 0 else None
        self.directory = Path(tempfile.mkdtemp(prefix="portal-pg-"))
        self.data = self.directory / "data"

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/portal"

    def _run(self, *argv: str, timeout_s: float = 60) -> None:
        command = [str(PG_BIN / argv[0]), *argv[1:]]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        assert result.returncode == 0, f"{argv[0]} failed: {result.stdout}{result.stderr}"

    def init(self) -> None:
        if self.user:
            shutil.chown(self.directory, self.user)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "portal")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.directory / "pg.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast``: the server ends every session (as a restart for a minor upgrade does)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop("immediate")
        shutil.rmtree(self.directory, ignore_errors=True)


def require_initdb() -> None:
    """Skip without PostgreSQL's server programs; CI (``PORTAL_REQUIRE_BROKER=1``) fails instead."""
    if not (PG_BIN / "initdb").exists():
        if os.environ.get("PORTAL_REQUIRE_BROKER") == "1":
            pytest.fail(f"PORTAL_REQUIRE_BROKER=1 but {PG_BIN}/initdb is missing")
        pytest.skip(f"{PG_BIN}/initdb is missing (set PORTAL_PG_BIN to PostgreSQL's bin directory)")


__all__ = ["ROOT"]
