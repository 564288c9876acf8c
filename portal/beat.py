"""One beat sends the schedule, however many run: the others stand by and take over.

Celery beat keeps no shared state: two beats (a second host, a second ``make run``) would each
send every periodic task, doubling the work. ``SingleBeatScheduler`` sends only while it holds
a lock; a beat that cannot take it logs that it stands by, asks again every
``PORTAL_BEAT_STANDBY_POLL_S`` seconds and takes over when the holder stops or dies.

The lock lives where every beat of a deployment can see it:

* PostgreSQL: a session advisory lock on a connection of the beat's own. The server drops it
  when that connection goes (the process exits, is killed, or its host stops answering TCP
  keepalives within about a minute), so a dead beat's lock never has to expire. Every tick checks
  that the lock is still held; one that was lost (the database restarted) stops the sending
  until it is taken again. The connection must reach PostgreSQL itself, or a pooler in session
  mode: a transaction-mode pooler (PgBouncer's default) cannot keep a session lock.
* SQLite (the embedded default, one machine): an exclusive ``flock`` on ``var/beat.lock``,
  which the kernel drops when the process ends.
"""

import contextlib
import fcntl
import logging
import os
import socket
from pathlib import Path

from celery.beat import PersistentScheduler
from django.conf import settings

logger = logging.getLogger(__name__)

BEAT_LOCK_KEYS = (0x424541, 0x54)  # "BEA", "T": the advisory lock's two keys


class BeatLock:
    """A lock that at most one process holds; ``hold()`` takes it or checks it is still held."""

    holder_hint = ""

    def hold(self) -> bool:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError


class PostgresBeatLock(BeatLock):
    def __init__(self) -> None:
        self.connection = None
        self.held = False
        self.name = f"portal-beat@{socket.gethostname()}:{os.getpid()}"

    def _connect(self):
        import psycopg
        from django.db import connections

        params = connections["default"].get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        # The server notices a vanished host within about a minute and drops its lock.
        connection = psycopg.connect(**params, autocommit=True, application_name=self.name)
        connection.execute("SET tcp_keepalives_idle = 20")
        connection.execute("SET tcp_keepalives_interval = 10")
        connection.execute("SET tcp_keepalives_count = 3")
        return connection

    def hold(self) -> bool:
        import psycopg

        try:
            if self.connection is None or self.connection.closed:
                self.connection, self.held = self._connect(), False
            if self.held:
                self.held = bool(
                    self.connection.execute(
                        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
                        " AND pid = pg_backend_pid() AND classid = %s AND objid = %s AND objsubid = 2)",
                        BEAT_LOCK_KEYS,
                    ).fetchone()[0]
                )
                if self.held:
                    return True
            self.held = bool(
                self.connection.execute("SELECT pg_try_advisory_lock(%s, %s)", BEAT_LOCK_KEYS).fetchone()[0]
            )
            if not self.held:
                row = self.connection.execute(
                    "SELECT a.application_name, a.client_addr FROM pg_locks l JOIN pg_stat_activity a"
                    " ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted"
                    " AND l.classid = %s AND l.objid = %s AND l.objsubid = 2",
                    BEAT_LOCK_KEYS,
                ).fetchone()
                self.holder_hint = f"{row[0] or 'unnamed'} from {row[1] or 'local'}" if row else ""
        except psycopg.Error as error:
            logger.warning("beat lock: the database did not answer (%s); not sending", error)
            self.release()
        return self.held

    def release(self) -> None:
        self.held = False
        if self.connection is not None:
            # A connection already broken has nothing left to release.
            with contextlib.suppress(Exception):
                self.connection.close()
            self.connection = None


class FileBeatLock(BeatLock):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = None

    def hold(self) -> bool:
        if self.file is not None:
            return True
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            self.holder_hint = f"pid {handle.read().strip() or '?'}"
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self.file = handle
        return True

    def release(self) -> None:
        if self.file is not None:
            self.file.close()  # closing drops the flock
            self.file = None


def beat_lock() -> BeatLock:
    """The lock for this deployment's database: PostgreSQL's when it is shared, else a file's."""
    from django.db import connections

    if connections["default"].vendor == "postgresql":
        return PostgresBeatLock()
    return FileBeatLock(Path(settings.VAR_DIR) / "beat.lock")


class SingleBeatScheduler(PersistentScheduler):
    """Beat's own scheduler (schedule file and all), sending only while it holds the beat lock."""

    def __init__(self, *args, **kwargs) -> None:
        self.lock = beat_lock()
        self.leading: bool | None = None  # None: not yet known
        super().__init__(*args, **kwargs)

    def tick(self, *args, **kwargs) -> float:
        held = self.lock.hold()
        if held != self.leading:
            if held:
                logger.log(
                    logging.INFO if self.leading is None else logging.WARNING,
                    "This beat sends the periodic tasks (it holds the beat lock)."
                    if self.leading is None
                    else "This beat took over the periodic tasks: the other beat stopped.",
                )
            else:
                logger.error(
                    "Another beat (%s) is sending the periodic tasks: this one stands by and takes over "
                    "when it stops, checking every %s s.",
                    self.lock.holder_hint or "holder unknown",
                    settings.PORTAL_BEAT_STANDBY_POLL_S,
                )
            self.leading = held
        if not held:
            return float(settings.PORTAL_BEAT_STANDBY_POLL_S)
        return super().tick(*args, **kwargs)

    def close(self) -> None:
        super().close()
        self.lock.release()
