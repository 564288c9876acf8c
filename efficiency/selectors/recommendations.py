"""Recommendations as the pages, the CSV and the API read them, scoped like everything else."""

from datetime import datetime, timedelta

from django.db.models import Prefetch, QuerySet, Sum
from django.utils import timezone

from efficiency.choices import RecommendationState
from efficiency.models import Job, JobHour, Recommendation, RecommendationDecision
from efficiency.scoping import User, scope_queryset
from efficiency.selectors.log_lines import pruned_heads


def recommendation_list(*, user: User) -> QuerySet[Recommendation]:
    """Every recommendation the user may see, most GPU-hours to gain first."""
    return scope_queryset(
        Recommendation.objects.select_related("department", "assignee_department", "node", "cluster"), user
    ).order_by("-gain_gpu_h_week", "pk")


def recommendation_queue(*, user: User) -> QuerySet[Recommendation]:
    """What waits for a decision: proposed, and snoozed ones whose date has come."""
    today = timezone.localdate()
    return recommendation_list(user=user).filter(state=RecommendationState.PROPOSED) | recommendation_list(
        user=user
    ).filter(state=RecommendationState.SNOOZED, snoozed_until__lte=today)


def recommendation_detail_list(*, user: User) -> QuerySet[Recommendation]:
    return recommendation_list(user=user).prefetch_related(
        Prefetch(
            "decisions",
            queryset=RecommendationDecision.objects.select_related("user", "assignee_department").order_by(
                "at", "pk"
            ),
        )
    )


def recommendation_get(*, user: User, pk: int) -> Recommendation:
    return recommendation_detail_list(user=user).get(pk=pk)


def department_open_recommendations(*, user: User, department_id: int) -> QuerySet[Recommendation]:
    """A department's "What to fix": open recommendations that would save GPU time, most GPU-hours
    to gain first (a hot node is a capacity signal for the committee, nothing for it to fix)."""
    visible = recommendation_list(user=user).filter(
        state__in=RecommendationState.open(), gain_gpu_h_week__gt=0
    )
    return visible.filter(department_id=department_id) | visible.filter(assignee_department_id=department_id)


def recommendation_jobs(*, user: User, recommendation: Recommendation, limit: int = 20) -> list[Job]:
    """The family's jobs the recommendation was computed from, newest first, as far as visible."""
    jobs = scope_queryset(Job.objects.all(), user).filter(recommendations=recommendation)
    return list(jobs.order_by("-started_at", "-pk")[:limit])


def recommendation_metric_window(
    *, user: User, recommendation: Recommendation, days: int = 14, now: datetime | None = None
) -> list[tuple[datetime, float, float, float | None]]:
    """Per hour, over the family's jobs: GPUs held, engine activity and SM activity (GPU-seconds
    turned into GPUs and percent) — the metric window a page draws beside the evidence."""
    now = now or timezone.now()
    hours = (
        scope_queryset(JobHour.objects.all(), user)
        .filter(job__recommendations=recommendation, hour__gte=now - timedelta(days=days))
        .values("hour")
        .annotate(a=Sum("allocated_gpu_s"), b=Sum("busy_gpu_s"), s=Sum("sm_active_busy_gpu_s"))
        .order_by("hour")
    )
    rows = []
    for row in hours:
        allocated = row["a"] or 0.0
        if allocated <= 0:
            continue
        busy, sm = row["b"] or 0.0, row["s"] or 0.0
        rows.append(
            (
                row["hour"],
                allocated / 3600,
                100 * busy / allocated,
                100 * sm / allocated if sm > 0 or busy == 0 else None,
            )
        )
    return rows


def recommendation_evidence(*, user: User, recommendation: Recommendation, radius: int = 2) -> list[dict]:
    """The recommendation's evidence lines, each with the lines around it where its log chunk is
    still stored (``context``: ``(line number, text, is the evidence line)``), for jobs the user
    may see; a line whose job the user may not see is left out."""
    keys = {row.get("job") for row in recommendation.evidence if isinstance(row, dict)}
    jobs = {
        job.external_id: job
        for job in scope_queryset(Job.objects.all(), user).filter(
            recommendations=recommendation, external_id__in=[k for k in keys if k]
        )
    }
    rows = []
    for row in recommendation.evidence:
        if not isinstance(row, dict):
            continue
        job = jobs.get(row.get("job"))
        if job is None:
            continue
        line = int(row.get("line") or 0)
        rows.append(
            {**row, "job_pk": job.pk, "context": _line_context(job, str(row.get("file", "")), line, radius)}
        )
    return rows


def _line_context(job: Job, stream: str, line: int, radius: int) -> list[tuple[int, str, bool]]:
    """The lines around ``line`` of the job's ``stream``, numbered as the log facts worker numbers
    them: per file, from its first byte, after what retention pruned of it."""
    chunks = list(
        job.log_chunks.filter(stream=stream)
        .order_by("file_id", "source_id", "start_offset")
        .values_list("source_id", "file_id", "line_count", "pk")
    )
    pruned = pruned_heads((source, stream, file_id) for source, file_id, *_ in chunks)
    current, first = None, 1
    for source, file_id, chunk_lines, text_pk in chunks:
        if (source, file_id) != current:
            current, first = (source, file_id), 1 + pruned.get((source, stream, file_id), (0, 0))[1]
        if first <= line < first + chunk_lines:
            text = job.log_chunks.get(pk=text_pk).text
            # Lines end at "\n" only, as the collectors and the worker count them (a progress bar's
            # "\r" is inside a line).
            lines = [line.removesuffix("\r") for line in text.split("\n")[:chunk_lines]]
            index = line - first
            low, high = max(0, index - radius), min(len(lines), index + radius + 1)
            return [(first + i, lines[i], first + i == line) for i in range(low, high)]
        first += chunk_lines
    return []


def what_to_fix_summary(*, user: User, department_ids: list[int]) -> dict[int, tuple[int, float]]:
    """Per department: open recommendations (its own and those assigned to it) and the GPU-hours a
    week they would save, for the links on the department page and a head's home."""
    summary = {}
    for department_id in department_ids:
        recs = department_open_recommendations(user=user, department_id=department_id)
        gains = list(recs.values_list("gain_gpu_h_week", flat=True))
        summary[department_id] = (len(gains), sum(gains))
    return summary
