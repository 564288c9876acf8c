"""Jobs as the schedulers report them."""

from collections.abc import Iterable
from datetime import datetime

from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from efficiency.choices import Framework, JobSource, JobState
from efficiency.gpu_shares import MILLI_PER_GPU, gpus_text
from efficiency.models.inventory import Cluster, Department, Node


def not_ended(now: datetime | None = None) -> Q:
    """Jobs whose end time has not passed: a row with an end time in the past has ended, whatever
    state a source left on it (a trace cut off while jobs ran); a future end time is an expected end."""
    return Q(ended_at__isnull=True) | Q(ended_at__gt=now or timezone.now())


class JobQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):
        """As Django's, with a job's GPU share filled from its whole GPUs where none was given."""
        objs = list(objs)
        for job in objs:
            if job.gpu_milli is None:
                job.gpu_milli = job.gpu_count * MILLI_PER_GPU
        return super().bulk_create(objs, *args, **kwargs)

    def for_departments(self, department_ids: Iterable[int]) -> "JobQuerySet":
        return self.filter(department_id__in=list(department_ids))

    def between(self, start: datetime, end: datetime) -> "JobQuerySet":
        """Jobs that held GPUs at some moment of [start, end)."""
        return self.filter(started_at__lt=end).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))


class Job(models.Model):
    """A scheduler job (Slurm job, Kubernetes job), with the config it was submitted with.

    ``config`` is the snapshot the config audit reads: environment variables, image, mounts,
    storage cache mode and launcher arguments, captured at submit time.
    """

    cluster = models.ForeignKey(
        Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE, related_name="jobs"
    )
    source = models.CharField(_("source"), max_length=20, choices=JobSource.choices)
    external_id = models.CharField(_("external id"), max_length=200)
    department = models.ForeignKey(
        Department,
        verbose_name=_("department"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="jobs",
        help_text=_("Empty when no mapping matched the job's account or namespace."),
    )
    account = models.CharField(
        _("account or namespace"), max_length=200, blank=True, help_text=_("As the scheduler reports it.")
    )
    user_name = models.CharField(_("user"), max_length=150, blank=True)
    name = models.CharField(_("name"), max_length=500, blank=True)
    state = models.CharField(_("state"), max_length=20, choices=JobState.choices)
    gpu_count = models.PositiveIntegerField(
        _("GPUs"), default=0, help_text=_("Whole GPUs the job touches, as the scheduler reports them.")
    )
    gpu_milli = models.PositiveIntegerField(
        _("GPU share (thousandths)"),
        help_text=_(
            "Thousandths of a GPU the job holds in all: 1000 per whole GPU, 500 for half of a "
            "shared GPU. GPU-hours and allocation are counted from this."
        ),
    )
    gpu_model = models.CharField(_("GPU model"), max_length=100, blank=True)
    node_count = models.PositiveIntegerField(_("nodes"), default=0)
    nodes = models.ManyToManyField(Node, verbose_name=_("nodes"), related_name="jobs", blank=True)
    submitted_at = models.DateTimeField(_("submitted at"))
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    ended_at = models.DateTimeField(_("ended at"), null=True, blank=True)
    framework = models.CharField(
        _("framework"), max_length=20, choices=Framework.choices, default=Framework.UNKNOWN
    )
    config = models.JSONField(_("config snapshot"), default=dict, blank=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-submitted_at", "-id"]
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "source", "external_id"], name="job_unique_external_id"
            ),
        ]
        indexes = [
            models.Index(fields=["department", "-submitted_at"]),
            models.Index(fields=["state"]),
            models.Index(fields=["started_at", "ended_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.external_id} {self.name}".strip()

    def save(self, *args, **kwargs) -> None:
        if self.gpu_milli is None:
            self.gpu_milli = self.gpu_count * MILLI_PER_GPU
        super().save(*args, **kwargs)

    @property
    def gpus(self) -> float:
        """GPUs held, fractions included (0.5 for half of a shared GPU)."""
        return (
            self.gpu_milli if self.gpu_milli is not None else self.gpu_count * MILLI_PER_GPU
        ) / MILLI_PER_GPU

    @property
    def gpus_text(self) -> str:
        """GPUs as a page shows them: "8", "0.5", "0.46"."""
        return gpus_text(self.gpu_milli if self.gpu_milli is not None else self.gpu_count * MILLI_PER_GPU)

    @property
    def is_shared(self) -> bool:
        """Holds less than all of the GPUs it touches (GPU sharing, a MIG slice)."""
        return self.gpus < self.gpu_count

    @property
    def is_waiting(self) -> bool:
        """Submitted, not started, not over: its wait is still growing."""
        return self.started_at is None and self.ended_at is None and self.state not in JobState.finished()

    @property
    def wait_s(self) -> float | None:
        """Seconds from submission to start. A job still waiting has waited until now; one that
        ended without starting (cancelled while pending) waited until it ended."""
        if self.started_at is not None:
            until = self.started_at
        elif self.ended_at is not None:
            until = self.ended_at
        elif self.is_waiting:
            until = timezone.now()
        else:
            return None
        return max(0.0, (until - self.submitted_at).total_seconds())

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()

    @property
    def is_running(self) -> bool:
        """Started and not over: its run time is still growing."""
        return self.started_at is not None and self.ended_at is None and self.state not in JobState.finished()

    @property
    def run_s(self) -> float | None:
        """Seconds it ran; for a job still running, until now."""
        if self.duration_s is not None:
            return self.duration_s
        if self.is_running:
            return max(0.0, (timezone.now() - self.started_at).total_seconds())
        return None

    @property
    def gpu_hours(self) -> float | None:
        duration_s = self.duration_s
        return None if duration_s is None else self.gpus * duration_s / 3600
