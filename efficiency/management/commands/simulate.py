import threading
import time
from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from efficiency.models import Cluster, NodeHour
from efficiency.services import demo
from efficiency.services.demo_status import history_status_write
from efficiency.services.organisation import DEMO_CLUSTER_SLUG
from efficiency.simulator.exporter import make_server


class Command(BaseCommand):
    help = (
        "The demo's simulated cluster. 'backfill': weeks of history through the real collectors "
        "(once). 'serve': a dcgm-exporter on :9400 plus live sacct output and logs under var/sim."
    )

    def add_arguments(self, parser):
        parser.add_argument("mode", choices=["backfill", "serve"])
        parser.add_argument("--days", type=int, default=21, help="History to simulate (first run only).")
        parser.add_argument("--step-minutes", type=int, default=10, help="Sample step of the history.")
        parser.add_argument("--port", type=int, default=settings.PORTAL_SIMULATOR_PORT)
        parser.add_argument("--tick-seconds", type=int, default=15)

    def handle(self, *args, mode: str, days: int, step_minutes: int, port: int, tick_seconds: int, **options):
        try:
            cluster = Cluster.objects.get(slug=DEMO_CLUSTER_SLUG)
        except Cluster.DoesNotExist:
            raise CommandError("run `manage.py demo_setup` first") from None
        sim = demo.demo_simulator(days=days)
        if mode == "backfill":
            self._backfill(sim, cluster, timedelta(minutes=step_minutes))
        else:
            self._serve(sim, port, tick_seconds)

    def _backfill(self, sim, cluster, step):
        demo.demo_sources_ensure(cluster=cluster)
        if NodeHour.objects.filter(cluster=cluster).exists():
            self.stdout.write("Demo history already there; not backfilling again.")
            return
        now = timezone.now().replace(microsecond=0)
        self.stdout.write(f"Simulating history from {sim.start:%Y-%m-%d} to now through the collectors…")
        started = time.monotonic()

        def progress(phase: str, fraction: float) -> None:
            history_status_write(phase=phase, phase_fraction=fraction, started_at=now)

        progress("jobs", 0.0)
        try:
            counts = demo.demo_history_backfill(
                sim=sim, cluster=cluster, until=now, step=step, progress=progress
            )
        except BaseException:
            progress("failed", 0.0)
            raise
        progress("done", 1.0)
        self.stdout.write(
            self.style.SUCCESS(
                f"History ready in {time.monotonic() - started:.0f} s: {counts['pages']} exporter pages, "
                f"{counts['samples']} GPU samples, {counts['jobs']} jobs."
            )
        )

    def _serve(self, sim, port, tick_seconds):
        lock = threading.Lock()
        server = make_server(sim, "127.0.0.1", port, lock=lock)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.stdout.write(f"Simulated dcgm-exporter on http://127.0.0.1:{port}/metrics")
        try:
            while True:
                with lock:
                    demo.demo_live_tick(sim=sim, now=timezone.now().replace(microsecond=0))
                time.sleep(tick_seconds)
        except KeyboardInterrupt:
            pass
        finally:
            server.shutdown()
