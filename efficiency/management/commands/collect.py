from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from efficiency.models import DataSource, SourceRun
from efficiency.services.sources import source_collect


class Command(BaseCommand):
    help = (
        "Collect once from a data source now, in this process, through the same service as the "
        "periodic task, and print what the run did: rows received, stored, duplicates, rejected "
        "(with reasons) and its status. SOURCE is the source's id, its name, or cluster/name. "
        "Exit status 1 when the run failed or could not start."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", metavar="SOURCE", help="id, name, or cluster-slug/name")

    def handle(self, *args, source: str, **options):
        found = _source(source)
        if not found.enabled:
            raise CommandError(f"{found} is disabled; enable it in the admin (Data sources) first.")
        self.stdout.write(f"Collecting {found} ({found.get_kind_display()}) …")
        started = timezone.now()
        try:
            run = source_collect(source_id=found.pk)
        except Exception as error:  # the run is recorded as failed; say what it recorded
            run = SourceRun.objects.filter(source=found, started_at__gte=started).order_by("-pk").first()
            if run is None:
                raise CommandError(f"{type(error).__name__}: {error}") from error
            self._report(run)
            raise CommandError(f"collection failed: {run.message}") from error
        if run is None:
            raise CommandError(f"{found} is being collected by another worker right now; try again shortly.")
        self._report(run)

    def _report(self, run: SourceRun) -> None:
        seconds = (run.finished_at - run.started_at).total_seconds() if run.finished_at else 0.0
        self.stdout.write(f"Run {run.pk}: {run.get_status_display()} in {seconds:.1f} s")
        if run.window_start or run.window_end:
            self.stdout.write(f"  window: {_when(run.window_start)} – {_when(run.window_end)}")
        self.stdout.write(
            f"  received {run.received}, stored {run.stored}, "
            f"duplicates {run.duplicates}, rejected {run.rejected}"
        )
        for item in run.rejects:
            where = f"line {item['line']}: " if item.get("line") else ""
            excerpt = f" — {item['excerpt']}" if item.get("excerpt") else ""
            self.stdout.write(f"  {item.get('kind', 'rejected')}: {where}{item['reason']}{excerpt}")
        if run.rejected > len(run.rejects):
            self.stdout.write(
                f"  … and {run.rejected - len(run.rejects)} more rejected (only the first are kept)"
            )
        if run.message:
            self.stdout.write(f"  message: {run.message}")
        source = run.source
        source.refresh_from_db()
        if source.watermark:
            self.stdout.write(f"  complete up to {_when(source.watermark)}")


def _when(moment) -> str:
    return "—" if moment is None else timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z")


def _source(text: str) -> DataSource:
    """The source named by id, "cluster/name" or a name unique across clusters."""
    sources = DataSource.objects.select_related("cluster")
    if text.isdigit():
        found = sources.filter(pk=int(text)).first()
        if found is not None:
            return found
    if "/" in text:
        slug, name = text.split("/", 1)
        matches = list(sources.filter(cluster__slug=slug, name=name))
    else:
        matches = list(sources.filter(name=text))
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(str(source) for source in matches)
        raise CommandError(f"{text!r} names several sources ({names}); write cluster/name.")
    known = ", ".join(f"{source.pk} {source}" for source in sources.order_by("pk")[:20]) or "none"
    raise CommandError(f"No data source {text!r}. Sources: {known}.")
