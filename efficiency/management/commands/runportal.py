import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.utils import timezone

from efficiency.management.commands.demo_setup import DEFAULT_DEMO_PASSWORD, logins_write
from efficiency.models import NodeHour, WorkerHeartbeat
from efficiency.services.organisation import DEMO_CLUSTER_SLUG

WORKER_READY_S = 90


# Threaded workers keep reporting to gunicorn's arbiter while a thread streams a long response (a
# million-job CSV takes minutes); a sync worker would be killed at --timeout (30 s) mid-download.
GUNICORN_WORKER_ARGS = ("--worker-class", "gthread", "--threads", "4")


class Command(BaseCommand):
    help = (
        "Run the whole portal on this machine: web server (gunicorn), Celery worker and beat. "
        "With --demo, migrate, create the demo organisation, backfill weeks of simulated history "
        "(first run only; pages are served meanwhile) and run the simulated cluster that the "
        "collectors read live."
    )

    def add_arguments(self, parser):
        parser.add_argument("--demo", action="store_true", help="Migrate and set up the demo first.")
        parser.add_argument("--bind", default=os.environ.get("PORTAL_BIND", "127.0.0.1:8000"))
        parser.add_argument("--web-workers", type=int, default=2)
        parser.add_argument(
            "--demo-days",
            type=int,
            default=int(os.environ.get("PORTAL_DEMO_DAYS", "21")),
            help="Days of simulated history for a new demo.",
        )

    def handle(self, *args, demo: bool, bind: str, web_workers: int, demo_days: int, **options):
        logs = Path(settings.VAR_DIR) / "log"
        logs.mkdir(parents=True, exist_ok=True)
        needs_history = False
        if demo:
            call_command("migrate", interactive=False, verbosity=0)
            call_command("demo_setup", password=DEFAULT_DEMO_PASSWORD, stdout=self.stdout)
            needs_history = not NodeHour.objects.filter(cluster__slug=DEMO_CLUSTER_SLUG).exists()
        python = sys.executable
        # The console shows what needs attention; routine lines (each request, each task) go to
        # files under var/log so that the logins printed here stay in view.
        web = [
            python, "-m", "gunicorn", "portal.wsgi", "--bind", bind, "--workers", str(web_workers),
            *GUNICORN_WORKER_ARGS, "--access-logfile", str(logs / "access.log"),
        ]  # fmt: skip
        background = {
            "worker": [
                python, "-m", "celery", "-A", "portal", "--quiet", "worker", "--loglevel", "WARNING",
                "--concurrency", "2", "--without-gossip", "--without-mingle",
                # One worker for every queue on this one machine (README: "Workers and queues").
                "--queues", ",".join(settings.PORTAL_QUEUES),
            ],
            "beat": [
                python, "-m", "celery", "-A", "portal", "--quiet", "beat", "--loglevel", "WARNING",
                "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME,
            ],
        }  # fmt: skip
        if demo:
            background["simulator"] = [python, "manage.py", "simulate", "serve"]
        processes: dict[str, subprocess.Popen] = {}

        # Unbuffered, so that the children's lines appear in the order they happen.
        # Celery's warning about running as root (a container's default) is not for this console.
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PYTHONWARNINGS": "ignore:You're running the worker with superuser privileges",
        }

        def start(name: str, command: list[str]) -> None:
            self.stdout.flush()
            # In a session of its own, so that a signal to the console's process group (Ctrl-C, a
            # supervisor's kill of the group) reaches only this command, which then stops each
            # child exactly once: a second SIGTERM in the middle of a child's shutdown (gunicorn,
            # Celery) interrupts its exit with a traceback.
            processes[name] = subprocess.Popen(
                command, cwd=settings.BASE_DIR, env=env, start_new_session=True
            )

        stopped: set[int] = set()

        def stop(*_):
            for process in processes.values():
                if process.poll() is None and process.pid not in stopped:
                    stopped.add(process.pid)
                    process.terminate()

        signal.signal(signal.SIGTERM, stop)
        try:
            start("web", web)
            if needs_history:
                # Pages answer while the history fills (they say how far it has come); the
                # collectors start once it is there, so live data never races the backfill.
                self.stdout.write(
                    self.style.SUCCESS(f"Portal running on http://{bind}/ while the demo history is prepared")
                )
                start("history", [python, "manage.py", "simulate", "backfill", "--days", str(demo_days)])
                if not self._wait(processes, until_done="history"):
                    return
                if processes.pop("history").returncode != 0:
                    self.stderr.write("The demo history could not be prepared; see the messages above.")
                    return
            started = timezone.now()
            for name, command in background.items():
                start(name, command)
            # "Ready" once the worker has reported: the logins then stay the last lines shown.
            if not self._wait_for_worker(processes, since=started):
                self.stderr.write("No worker has reported yet; the pages work, collection may lag.")
            self.stdout.write(self.style.SUCCESS(f"Portal ready on http://{bind}/  (Ctrl-C stops it)"))
            if demo:
                logins_write(self.stdout, password=DEFAULT_DEMO_PASSWORD)
            self.stdout.flush()
            self._wait(processes)
        except KeyboardInterrupt:
            pass
        finally:
            stop()
            for process in processes.values():
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()

    def _wait_for_worker(self, processes: dict[str, subprocess.Popen], *, since) -> bool:
        """Wait (at most WORKER_READY_S) for a heartbeat of a worker started at ``since``."""
        deadline = time.monotonic() + WORKER_READY_S
        while time.monotonic() < deadline:
            if WorkerHeartbeat.objects.filter(last_seen_at__gte=since).exists():
                return True
            if any(process.poll() is not None for process in processes.values()):
                return False
            time.sleep(1)
        return False

    def _wait(self, processes: dict[str, subprocess.Popen], *, until_done: str | None = None) -> bool:
        """Watch the processes; True when ``until_done`` finished, False when another one exited."""
        while True:
            if until_done and processes[until_done].poll() is not None:
                return True
            exited = [name for name, p in processes.items() if name != until_done and p.poll() is not None]
            if exited:
                self.stderr.write(f"{', '.join(exited)} exited; stopping the portal.")
                return False
            time.sleep(1)
