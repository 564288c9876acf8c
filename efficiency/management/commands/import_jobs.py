from pathlib import Path
from zoneinfo import ZoneInfoNotFoundError

from django.core.management.base import BaseCommand, CommandError

from efficiency.models import Cluster
from efficiency.services.sources import jobs_csv_import


class Command(BaseCommand):
    help = "Import job history from a CSV file (format: docs/jobs-csv-format.md). Safe to run twice."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--cluster", required=True, help="Slug of the cluster the jobs ran on.")
        parser.add_argument("--timezone", default="UTC", help="Zone of times written without an offset.")

    def handle(self, *args, path: Path, cluster: str, timezone: str, **options):
        try:
            target = Cluster.objects.get(slug=cluster)
        except Cluster.DoesNotExist:
            raise CommandError(f"no cluster with slug {cluster!r}") from None
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror}") from None
        try:
            run = jobs_csv_import(cluster=target, text=text, timezone_name=timezone)
        except ZoneInfoNotFoundError:
            raise CommandError(f"unknown time zone {timezone!r}") from None
        self.stdout.write(
            f"{run.received} rows read: {run.stored} stored, "
            f"{run.duplicates} unchanged, {run.rejected} rejected"
        )
        for item in run.rejects:
            where = f"line {item['line']}: " if item.get("line") else ""
            self.stdout.write(f"  {item['kind']}: {where}{item['reason']}")
