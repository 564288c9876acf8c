"""Health checks of the portal's processes, for compose's healthchecks and portal-healthcheck@.timer.

    python deploy/healthcheck.py web                 # /healthz answers 200 (database and broker up)
    python deploy/healthcheck.py worker QUEUE        # the worker QUEUE@<this host> answers a ping
    python deploy/healthcheck.py beat SCHEDULE_FILE  # beat wrote its schedule file lately

Exit 0 when healthy, 1 with one line on stderr when not. Standard library only (the worker check
runs ``celery inspect ping``), so that the check stays cheap and loads no Django for web and beat.
"""

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def _host_header() -> str:
    # Django answers 400 to a Host outside ALLOWED_HOSTS: ask as the first allowed name.
    for host in os.environ.get("ALLOWED_HOSTS", "localhost").split(","):
        host = host.strip().lstrip(".")
        if host and host != "*":
            return host
    return "localhost"


def web() -> str | None:
    port = os.environ.get("PORTAL_BIND", "0.0.0.0:8000").rsplit(":", 1)[-1]
    request = urllib.request.Request(f"http://127.0.0.1:{port}/healthz", headers={"Host": _host_header()})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 (fixed http URL)
            return None if response.status == 200 else f"/healthz answered {response.status}"
    except urllib.error.HTTPError as error:
        return f"/healthz answered {error.code}"
    except OSError as error:
        return f"/healthz did not answer: {error}"


def worker(queue: str) -> str | None:
    node = f"{queue}@{socket.gethostname()}"
    command = [sys.executable, "-m", "celery", "-A", "portal", "inspect", "ping", "-d", node, "--timeout=5"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)  # noqa: S603
    except subprocess.TimeoutExpired:
        return f"{node} did not answer a ping within 30 s"
    return None if done.returncode == 0 else f"{node} did not answer a ping: {done.stdout.strip()[-200:]}"


def beat(schedule_file: str) -> str | None:
    # Beat writes its schedule (a dbm file: one or several files by that name) at start and at
    # least every 3 minutes while it sends tasks; a beat that hangs stops writing it.
    stale_after_s = float(os.environ.get("PORTAL_BEAT_STALE_AFTER_S", "600"))
    path = Path(schedule_file)
    written = [p.stat().st_mtime for p in path.parent.glob(f"{path.name}*") if p.is_file()]
    if not written:
        return f"no schedule file {schedule_file}*"
    age_s = time.time() - max(written)
    if age_s > stale_after_s:
        return f"schedule written {age_s:.0f} s ago (over {stale_after_s:.0f})"
    return None


def main(argv: list[str]) -> int:
    checks = {"web": (web, 0), "worker": (worker, 1), "beat": (beat, 1)}
    if not argv or argv[0] not in checks or len(argv) - 1 != checks[argv[0]][1]:
        print(__doc__, file=sys.stderr)  # noqa: T201
        return 2
    check, _arity = checks[argv[0]]
    problem = check(*argv[1:])
    if problem:
        print(f"unhealthy {argv[0]}: {problem}", file=sys.stderr)  # noqa: T201
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
