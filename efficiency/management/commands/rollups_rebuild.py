import time
from datetime import date, datetime, timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db.models.functions import TruncHour
from django.utils import timezone

from efficiency import days
from efficiency.models import Cluster, GpuSample, NodeDay, NodeHour, ScopeHour
from efficiency.services.ingest import dirty_hours_mark
from efficiency.services.rollups import rollups_refresh
from efficiency.times import portal_day_zone


class Command(BaseCommand):
    help = (
        "Recompute the hourly rollups (and the node-days) from raw samples and jobs: every hour "
        "that has rollups or raw samples, or only those of --start/--end (portal days, both "
        "inclusive) and --cluster. Prints the hours queued per cluster, how many were recomputed "
        "and the rollup rows of the range afterwards. Run after an upgrade that changes rollups, "
        "or after importing history."
    )

    def add_arguments(self, parser):
        parser.add_argument("--start", type=date.fromisoformat, metavar="YYYY-MM-DD", help="first day")
        parser.add_argument("--end", type=date.fromisoformat, metavar="YYYY-MM-DD", help="last day")
        parser.add_argument("--cluster", metavar="SLUG", help="only this cluster")

    def handle(self, *args, start: date | None, end: date | None, cluster: str | None, **options):
        zone = portal_day_zone()
        if start and end and end < start:
            raise CommandError(f"--end {end} is before --start {start}.")
        since = days.day_start(start, zone) if start else None
        until = days.day_start(end + timedelta(days=1), zone) if end else None
        clusters = Cluster.objects.order_by("slug")
        if cluster is not None:
            clusters = clusters.filter(slug=cluster)
            if not clusters.exists():
                known = ", ".join(Cluster.objects.order_by("slug").values_list("slug", flat=True)) or "none"
                raise CommandError(f"No cluster {cluster!r}. Clusters: {known}.")
        self.stdout.write(f"Range: {_range_text(since, until)}")
        queued = 0
        for item in clusters:
            hours = _hours(item, since, until)
            dirty_hours_mark(cluster=item, hours=hours)
            queued += len(hours)
            if hours:
                self.stdout.write(
                    f"{item.slug}: {len(hours)} hours queued ({_when(min(hours))} – {_when(max(hours))})"
                )
            else:
                self.stdout.write(f"{item.slug}: no samples or rollups in the range, nothing to do")
        began = time.monotonic()
        done = 0
        while count := rollups_refresh():
            done += count
        elapsed = time.monotonic() - began
        self.stdout.write(self.style.SUCCESS(f"{done} hours recomputed in {elapsed:.1f} s"))
        if done > queued:
            self.stdout.write(f"  ({done - queued} of them were already queued by ingest)")
        ids = [item.pk for item in clusters]
        node_hours = _between(NodeHour.objects.filter(cluster_id__in=ids), "hour", since, until)
        scope_hours = _between(ScopeHour.objects.filter(cluster_id__in=ids), "hour", since, until)
        node_days = NodeDay.objects.filter(node__cluster_id__in=ids, day_zone=zone.key)
        if start:
            node_days = node_days.filter(day__gte=start)
        if end:
            node_days = node_days.filter(day__lte=end)
        self.stdout.write(
            f"Rollup rows in the range now: {node_hours.count()} node-hours, "
            f"{scope_hours.count()} scope-hours, {node_days.count()} node-days"
        )


def _between(queryset, field: str, since: datetime | None, until: datetime | None):
    if since:
        queryset = queryset.filter(**{f"{field}__gte": since})
    if until:
        queryset = queryset.filter(**{f"{field}__lt": until})
    return queryset


def _hours(cluster: Cluster, since: datetime | None, until: datetime | None) -> list[datetime]:
    """Hours with rollups or raw samples (raw samples reach back over the retention window)."""
    rolled = _between(NodeHour.objects.filter(cluster=cluster), "hour", since, until)
    hours = set(rolled.values_list("hour", flat=True).distinct())
    raw = _between(GpuSample.objects.filter(node__cluster=cluster), "ts", since, until)
    hours |= set(raw.annotate(h=TruncHour("ts")).values_list("h", flat=True).distinct())
    return sorted(hours)


def _when(moment: datetime) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")


def _range_text(since: datetime | None, until: datetime | None) -> str:
    if since is None and until is None:
        return "every hour with data"
    first = _when(since) if since else "the first data"
    last = _when(until) if until else "now"
    return f"{first} – {last} ({timezone.get_current_timezone_name()})"
