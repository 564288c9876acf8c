"""50 signed-in users on the dashboards for 60 s: gunicorn on PostgreSQL with the demo data, driven by
locust (headless). Prints p50 / p95 per page beside the 1 s target, and the error count (must be 0).

    # once: the demo organisation and its history in a PostgreSQL database of its own
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench
    .venv/bin/python manage.py migrate
    .venv/bin/python manage.py demo_setup
    .venv/bin/python manage.py simulate backfill --days 7
    # the run
    .venv/bin/python bench/load_dashboards.py [--users 50] [--seconds 60] [--web-workers 4]

The users and pages are in ``bench/locustfile_dashboards.py``. The users are signed in before the
clock starts (sessions made here, as a login makes them), so the minute measures the dashboards
and not 50 password hashes. Locust runs on the same machine as
gunicorn and PostgreSQL, so the figures include its own CPU use; the machine's CPU count and load
are printed with them.
"""

import argparse
import csv
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
TARGET_P95_MS = 1000.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_up(url: str, process: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"gunicorn exited with {process.returncode}")
        try:
            if requests.get(url, timeout=2).status_code < 500:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise SystemExit(f"gunicorn did not answer {url} within {timeout_s:.0f} s")


# (username, the department whose page the user reads): heads read their own department.
LOGINS = [("admin", "vision"), ("committee", "radar"), ("head-vision", "vision"), ("head-radar", "radar")]


def _sessions(count: int) -> tuple[str, str]:
    """Sign ``count`` users in beforehand (sessions in the database, as a login makes them):
    "username department key" lines for the locustfile, and the session cookie's name."""
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model

    store = import_module(settings.SESSION_ENGINE).SessionStore
    backend = "django.contrib.auth.backends.ModelBackend"
    if backend not in settings.AUTHENTICATION_BACKENDS:
        backend = settings.AUTHENTICATION_BACKENDS[-1]
    users = {
        user.username: user for user in get_user_model().objects.filter(username__in=[u for u, _ in LOGINS])
    }
    missing = sorted({u for u, _ in LOGINS} - set(users))
    if missing:
        raise SystemExit(f"no demo login {', '.join(missing)}: run manage.py demo_setup first (see --help)")
    lines = []
    for number in range(count):
        username, department = LOGINS[number % len(LOGINS)]
        session = store()
        session.update(
            {
                SESSION_KEY: str(users[username].pk),
                BACKEND_SESSION_KEY: backend,
                HASH_SESSION_KEY: users[username].get_session_auth_hash(),
            }
        )
        session.create()
        lines.append(f"{username} {department} {session.session_key}")
    return "\n".join(lines), settings.SESSION_COOKIE_NAME


def _cpu_s(process: subprocess.Popen) -> float:
    """CPU seconds (user + system) used so far by gunicorn's worker processes."""
    import psutil

    total = 0.0
    for child in psutil.Process(process.pid).children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--spawn-rate", type=float, default=10.0, help="users started per second")
    parser.add_argument("--web-workers", type=int, default=4, help="gunicorn worker processes")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL to the PostgreSQL database with the demo data (see --help)")

    port = _free_port()
    host = f"http://127.0.0.1:{port}"
    sessions, cookie = _sessions(args.users)
    env = {**os.environ, "BENCH_SESSIONS": sessions, "BENCH_SESSION_COOKIE": cookie}
    with tempfile.TemporaryDirectory() as scratch:
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{port}",
             "--workers", str(args.web_workers), "--timeout", "30", "--log-level", "warning"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        try:
            _wait_up(f"{host}/login/", gunicorn)
            for _ in range(args.web_workers * 2):  # each worker's imports and first queries, before the clock
                requests.get(f"{host}/", cookies={cookie: sessions.split()[2]}, timeout=60)
            load_before = os.getloadavg()[0]
            cpu_before = _cpu_s(gunicorn)
            started = time.monotonic()
            locust = subprocess.run(
                [sys.executable, "-m", "locust", "-f", str(ROOT / "bench" / "locustfile_dashboards.py"),
                 "--headless", "--users", str(args.users), "--spawn-rate", str(args.spawn_rate),
                 "--run-time", f"{args.seconds}s", "--host", host, "--csv", f"{scratch}/run",
                 "--only-summary", "--loglevel", "WARNING", "--stop-timeout", "10"],
                cwd=ROOT, env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            wall_s = time.monotonic() - started
            load_after = os.getloadavg()[0]
            web_cpu_s = _cpu_s(gunicorn) - cpu_before
        finally:
            gunicorn.terminate()
            gunicorn.wait(timeout=30)
        stats_file = Path(f"{scratch}/run_stats.csv")
        if not stats_file.exists():
            print(locust.stdout[-3000:], locust.stderr[-3000:])
            raise SystemExit("locust wrote no statistics")
        rows = list(csv.DictReader(stats_file.open()))
        failures_file = Path(f"{scratch}/run_failures.csv")
        failures = list(csv.DictReader(failures_file.open())) if failures_file.exists() else []

    print(
        f"{args.users} users, {args.seconds} s, gunicorn {args.web_workers} workers, "
        f"{os.cpu_count()} CPUs, load average {load_before:.1f} -> {load_after:.1f}, wall {wall_s:.0f} s"
    )
    header = f"{'page':34} {'requests':>8} {'errors':>6} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7}  p95 / 1 s"
    print(header)
    print("-" * len(header))
    errors = 0
    for row in rows:
        name = row["Name"] if row["Type"] else "all pages"
        p95 = float(row["95%"])
        errors += int(row["Failure Count"]) if row["Type"] else 0
        print(
            f"{name:34} {int(row['Request Count']):8d} {int(row['Failure Count']):6d} "
            f"{float(row['50%']):7.0f} {p95:7.0f} {float(row['Max Response Time']):7.0f}  "
            f"{p95 / TARGET_P95_MS:.2f}"
        )
    for failure in failures:
        print(f"error: {failure['Method']} {failure['Name']}: {failure['Error']} ({failure['Occurrences']}x)")
    total = next(row for row in rows if not row["Type"])
    ratio = float(total["95%"]) / TARGET_P95_MS
    print(f"\nall pages: {errors} errors, p50 {float(total['50%']):.0f} ms, p95 {float(total['95%']):.0f} ms "
          f"= {ratio:.2f} x the 1 s target; {float(total['Requests/s']):.1f} requests/s")  # fmt: skip
    # What the pages cost the web server, whatever else the machine was doing: the CPU the
    # gunicorn workers used per request, and the request rate that CPU would allow per free core.
    cpu_ms = 1000 * web_cpu_s / max(1, int(total["Request Count"]))
    print(
        f"web server CPU: {web_cpu_s:.0f} s for {total['Request Count']} requests = {cpu_ms:.0f} ms a page "
        f"(~{1000 / cpu_ms:.1f} pages/s per free core, PostgreSQL not included)"
    )
    return 1 if errors or ratio > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
