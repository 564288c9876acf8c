from datetime import date, timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from efficiency import days
from efficiency.models import Cluster
from efficiency.selectors.inventory import cycle_classes_summary
from efficiency.services.classification import class_thresholds, node_classes_refresh
from efficiency.times import portal_day_zone


class Command(BaseCommand):
    help = (
        "Classify nodes now (idle / hot / fluctuating / steady) through the nightly task's "
        "service, over the cycle of PORTAL_CYCLE_DAYS whole portal days that ended at the last "
        "midnight, or with --day the cycle whose last day is DAY. Prints the nodes per class and "
        "each node left unknown with why. Re-running replaces that cycle's classes."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--day", type=date.fromisoformat, metavar="YYYY-MM-DD", help="last day of the cycle"
        )
        parser.add_argument("--cluster", metavar="SLUG", help="only this cluster (default: every cluster)")

    def handle(self, *args, day: date | None, cluster: str | None, **options):
        zone = portal_day_zone()
        now = timezone.now()
        if day is not None:
            yesterday = days.day_of(now, zone) - timedelta(days=1)
            if day > yesterday:
                raise CommandError(f"{day} is not over yet; the latest whole day is {yesterday}.")
            now = days.day_start(day + timedelta(days=1), zone)
        clusters = Cluster.objects.order_by("slug")
        if cluster is not None:
            clusters = clusters.filter(slug=cluster)
            if not clusters.exists():
                known = ", ".join(Cluster.objects.order_by("slug").values_list("slug", flat=True)) or "none"
                raise CommandError(f"No cluster {cluster!r}. Clusters: {known}.")
        cycle_start, cycle_end = days.whole_days_before(now, settings.PORTAL_CYCLE_DAYS, zone)
        needed = class_thresholds().min_covered_hours
        first, last = days.day_of(cycle_start, zone), days.day_of(cycle_end, zone) - timedelta(days=1)
        self.stdout.write(f"Cycle {first} – {last} ({zone.key} days); a class needs {needed} covered hours.")
        for item in clusters:
            classified = node_classes_refresh(cluster=item, now=now)
            summary = cycle_classes_summary(cluster_id=item.pk, cycle_start=cycle_start, cycle_end=cycle_end)
            counts = ", ".join(f"{name} {count}" for name, count in summary.counts.items())
            self.stdout.write(f"{item.slug}: {classified} nodes classified: {counts}")
            for hostname, covered in summary.unknown:
                why = (
                    "no samples in the cycle" if covered == 0 else f"only {covered} of {needed} covered hours"
                )
                self.stdout.write(f"  unknown {hostname}: {why}")
            for hostname in summary.unseen:
                # Samples after the cycle (a node connected today) count from the next cycle on.
                self.stdout.write(
                    f"  not classified {hostname}: no hourly rollups in the cycle {first} – {last} "
                    "(no samples in those days)"
                )
