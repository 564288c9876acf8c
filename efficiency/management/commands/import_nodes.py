from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from efficiency.collectors.nodes import NODE_CSV_COLUMNS, parse_nodes_csv
from efficiency.models import Cluster
from efficiency.services.discovery import nodes_import


class Command(BaseCommand):
    help = (
        f"Create or update nodes from a CSV file with the columns {', '.join(NODE_CSV_COLUMNS)} "
        "(hostname required; an empty cell keeps the node's value). Bad rows are reported with their "
        "line number, the others stored. Safe to run twice."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--cluster", help="Slug of the nodes' cluster; needed when there are several.")

    def handle(self, *args, path: Path, cluster: str | None, **options):
        target = self._cluster(cluster)
        try:
            with path.open(encoding="utf-8-sig", newline="") as lines:
                parsed = parse_nodes_csv(lines)
        except UnicodeDecodeError:
            raise CommandError(f"{path}: not UTF-8; save the file as UTF-8 CSV") from None
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror}") from None
        result = nodes_import(cluster=target, rows=parsed.records)
        rejected = sorted([*parsed.rejected, *result.rejected], key=lambda item: item.line_no or 0)
        self.stdout.write(
            f"{target.slug}: {len(result.created)} created, {len(result.updated)} updated, "
            f"{len(result.unchanged)} unchanged, {len(rejected)} rejected"
        )
        for item in rejected:
            self.stdout.write(f"  line {item.line_no}: {item.reason}")

    def _cluster(self, slug: str | None) -> Cluster:
        if slug:
            try:
                return Cluster.objects.get(slug=slug)
            except Cluster.DoesNotExist:
                raise CommandError(f"no cluster with slug {slug!r}") from None
        clusters = list(Cluster.objects.all()[:2])
        if len(clusters) != 1:
            raise CommandError(
                "name the cluster with --cluster SLUG" if clusters else "no cluster yet: create one"
            )
        return clusters[0]
