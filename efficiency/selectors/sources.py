"""What the Data sources page shows: each source's health, lag and recent runs."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Max, Q, QuerySet, Sum
from django.utils import timezone

from efficiency.choices import SourceKind
from efficiency.models import DataSource, SourceRun


@dataclass(frozen=True)
class SourceStatus:
    source: DataSource
    lag_s: float | None  # now - watermark: how far behind the data is
    stored_last_hour: int
    rejected_last_hour: int
    runs_last_hour: int
    last_run: SourceRun | None

    @property
    def imported(self) -> bool:
        """Fed by ``manage.py import_jobs``, not collected periodically: never "disabled"."""
        return self.source.kind == SourceKind.CSV_IMPORT

    @property
    def healthy(self) -> bool:
        return self.source.enabled and self.source.consecutive_failures == 0 and self.last_run is not None


def source_status_list(*, now: datetime | None = None) -> list[SourceStatus]:
    """Every data source with its lag and last hour's counts (three queries, however many sources)."""
    now = now or timezone.now()
    sources = list(DataSource.objects.select_related("cluster").order_by("cluster__name", "name"))
    hour_ago = now - timedelta(hours=1)
    totals = {
        row["source_id"]: row
        for row in SourceRun.objects.filter(started_at__gte=hour_ago)
        .values("source_id")
        .annotate(stored=Sum("stored"), rejected=Sum("rejected"), runs=Count("pk"))
        .order_by()
    }
    # The newest run per source: run ids grow with time, so the largest id is the newest.
    newest = (
        SourceRun.objects.filter(source__in=sources)
        .values("source_id")
        .annotate(last=Max("pk"))
        .values("last")
    )
    last_runs = {run.source_id: run for run in SourceRun.objects.filter(pk__in=newest)}
    statuses = []
    for source in sources:
        row = totals.get(source.pk, {})
        statuses.append(
            SourceStatus(
                source=source,
                lag_s=(now - source.watermark).total_seconds() if source.watermark else None,
                stored_last_hour=row.get("stored") or 0,
                rejected_last_hour=row.get("rejected") or 0,
                runs_last_hour=row.get("runs") or 0,
                last_run=last_runs.get(source.pk),
            )
        )
    return statuses


def source_get(*, pk: int) -> DataSource:
    return DataSource.objects.select_related("cluster").get(pk=pk)


def log_push_source_get(*, pk: int) -> DataSource:
    """An enabled *Log push* source, the only kind that takes pushed lines (else DoesNotExist)."""
    return DataSource.objects.get(pk=pk, kind=SourceKind.LOG_PUSH, enabled=True)


def source_run_list(*, source: DataSource, problems_only: bool = False) -> QuerySet[SourceRun]:
    runs = source.runs.all()
    if problems_only:
        runs = runs.filter(Q(rejected__gt=0) | Q(status="failed"))
    return runs


@dataclass(frozen=True)
class ScrapeTarget:
    """One exporter URL of a scrape source, as its last run left it (``source.state["targets"]``)."""

    url: str
    up: bool
    last_scrape: datetime | None
    last_error: str


def source_targets(source: DataSource) -> list[ScrapeTarget]:
    """The source's scrape targets, those down first; empty for sources without targets."""
    targets = (source.state or {}).get("targets") or {}
    rows = []
    for url, target in targets.items():
        if not isinstance(target, dict):
            continue
        try:
            last_scrape = datetime.fromisoformat(str(target.get("last_scrape")))
        except ValueError:
            last_scrape = None
        rows.append(
            ScrapeTarget(
                url=str(url),
                up=target.get("health") == "up",
                last_scrape=last_scrape,
                last_error=str(target.get("last_error") or ""),
            )
        )
    return sorted(rows, key=lambda row: (row.up, row.url))
