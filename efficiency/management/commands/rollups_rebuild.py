from django.core.management.base import BaseCommand

from efficiency.models import Cluster, NodeHour
from efficiency.services.ingest import dirty_hours_mark
from efficiency.services.rollups import rollups_refresh


class Command(BaseCommand):
    help = "Recompute every hourly rollup from raw samples and jobs (after an upgrade that adds rollups)."

    def handle(self, *args, **options):
        for cluster in Cluster.objects.all():
            hours = list(NodeHour.objects.filter(cluster=cluster).values_list("hour", flat=True).distinct())
            dirty_hours_mark(cluster=cluster, hours=hours)
            self.stdout.write(f"{cluster.slug}: {len(hours)} hours queued")
        done = 0
        while count := rollups_refresh():
            done += count
        self.stdout.write(self.style.SUCCESS(f"{done} hours recomputed"))
