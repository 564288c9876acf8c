import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from efficiency.management.commands.demo_setup import DEFAULT_DEMO_PASSWORD


class Command(BaseCommand):
    help = (
        "Run the whole portal on this machine: web server (gunicorn), Celery worker and beat. "
        "With --demo, migrate, create the demo organisation, backfill weeks of simulated history "
        "(first run only) and run the simulated cluster that the collectors read live."
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
        if demo:
            call_command("migrate", interactive=False, verbosity=0)
            call_command("demo_setup", password=DEFAULT_DEMO_PASSWORD)
            call_command("simulate", "backfill", days=demo_days)
        python = sys.executable
        commands = {
            "worker": [
                python,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                "2",
                "--without-gossip",
                "--without-mingle",
            ],
            "beat": [
                python,
                "-m",
                "celery",
                "-A",
                "portal",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                settings.CELERY_BEAT_SCHEDULE_FILENAME,
            ],
            "web": [
                python,
                "-m",
                "gunicorn",
                "portal.wsgi",
                "--bind",
                bind,
                "--workers",
                str(web_workers),
                "--access-logfile",
                "-",
            ],
        }
        if demo:
            commands["simulator"] = [python, "manage.py", "simulate", "serve"]
        processes = {name: subprocess.Popen(cmd, cwd=settings.BASE_DIR) for name, cmd in commands.items()}
        self.stdout.write(self.style.SUCCESS(f"Portal running on http://{bind}/  (Ctrl-C stops it)"))

        def stop(*_):
            for process in processes.values():
                if process.poll() is None:
                    process.terminate()

        signal.signal(signal.SIGTERM, stop)
        try:
            while all(process.poll() is None for process in processes.values()):
                time.sleep(1)
            exited = [name for name, process in processes.items() if process.poll() is not None]
            self.stderr.write(f"{', '.join(exited)} exited; stopping the portal.")
        except KeyboardInterrupt:
            pass
        finally:
            stop()
            for process in processes.values():
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
