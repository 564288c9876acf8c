import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from efficiency.collectors.jobs_csv import UnknownEncoding
from efficiency.models import Cluster
from efficiency.services.sources import jobs_csv_import, time_zone_get


class Command(BaseCommand):
    help = (
        "Import job history from a CSV file (format: docs/jobs-csv-format.md), streamed in batches "
        "with progress. Safe to run twice."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--cluster", required=True, help="Slug of the cluster the jobs ran on.")
        parser.add_argument("--timezone", default="UTC", help="Zone of times written without an offset.")
        parser.add_argument("--batch", type=int, default=5000, help="Rows stored per transaction.")

    def handle(self, *args, path: Path, cluster: str, timezone: str, batch: int, **options):
        try:
            time_zone_get(timezone)
        except ValueError as error:
            raise CommandError(str(error)) from None
        try:
            target = Cluster.objects.get(slug=cluster)
        except Cluster.DoesNotExist:
            raise CommandError(f"no cluster with slug {cluster!r}") from None
        if not path.is_file():
            raise CommandError(f"cannot read {path}: no such file")
        started = time.monotonic()

        def progress(run, rows):
            self.stdout.write(
                f"  {rows} rows read, {run.stored} stored, {run.rejected} rejected "
                f"({time.monotonic() - started:.0f} s)"
            )
            self.stdout.flush()

        try:
            run = jobs_csv_import(
                cluster=target, path=path, timezone_name=timezone, batch_rows=max(1, batch), progress=progress
            )
        except UnknownEncoding as error:
            raise CommandError(f"{path}: {error}") from None
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror}") from None
        self.stdout.write(
            f"{run.received} rows read: {run.stored} stored, "
            f"{run.duplicates} unchanged, {run.rejected} rejected"
        )
        for item in run.rejects:
            where = f"line {item['line']}: " if item.get("line") else ""
            self.stdout.write(f"  {item['kind']}: {where}{item['reason']}")
