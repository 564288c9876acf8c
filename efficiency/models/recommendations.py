"""Tuning recommendations: what to change, on what evidence, and what the admins decided."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from efficiency.choices import Confidence, RecommendationAction, RecommendationState, RecommendationSubject
from efficiency.models.inventory import Cluster, Department, Node
from efficiency.models.jobs import Job


class Recommendation(models.Model):
    """One rule's finding on one subject (a job family, a user, a department or a node).

    Re-running the engine updates the row with the same ``(rule, subject_kind, subject_key)``
    instead of adding one; when the condition no longer holds the engine closes it with the date.
    A job family is a user's jobs of one department whose names share a pattern (digits as ``*``).

    ``evidence`` holds the log lines (``{"file", "line", "text", "job"}``), ``config`` the settings
    side by side with the ideal (``[setting, observed, ideal]``); the metric window is read from the
    family's job hours when a page shows it. ``fingerprint`` identifies the condition: a rejected
    recommendation is proposed again only when it changes (the evidence changed materially).
    """

    rule = models.CharField(_("rule"), max_length=60, db_index=True)
    subject_kind = models.CharField(_("subject"), max_length=20, choices=RecommendationSubject.choices)
    subject_key = models.CharField(_("subject key"), max_length=500)
    cluster = models.ForeignKey(
        Cluster, verbose_name=_("cluster"), null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    department = models.ForeignKey(
        Department,
        verbose_name=_("department"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="recommendations",
    )
    user_name = models.CharField(_("user"), max_length=150, blank=True)
    name_pattern = models.CharField(_("job name pattern"), max_length=500, blank=True)
    node = models.ForeignKey(
        Node, verbose_name=_("node"), null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    jobs = models.ManyToManyField(Job, verbose_name=_("jobs"), related_name="recommendations", blank=True)
    job_count = models.PositiveIntegerField(_("jobs"), default=0)
    state = models.CharField(
        _("state"), max_length=20, choices=RecommendationState.choices, default=RecommendationState.PROPOSED
    )
    observed = models.TextField(_("observed"))
    ideal = models.TextField(_("ideal"))
    change = models.TextField(_("change"))
    evidence = models.JSONField(_("evidence"), default=list, blank=True)
    config = models.JSONField(_("config values"), default=list, blank=True)
    params = models.JSONField(default=dict, blank=True)
    gain_gpu_h_week = models.FloatField(_("expected gain (GPU-hours per week)"), default=0.0)
    gain_pct = models.FloatField(_("expected gain (%)"), default=0.0)
    gpu_h_week = models.FloatField(_("GPU-hours per week"), default=0.0)
    confidence = models.CharField(_("confidence"), max_length=10, choices=Confidence.choices)
    fingerprint = models.CharField(max_length=1000)
    rejected_fingerprint = models.CharField(max_length=1000, blank=True)
    first_seen = models.DateTimeField(_("first seen"))
    last_seen = models.DateTimeField(_("last seen"))
    closed_at = models.DateTimeField(_("closed at"), null=True, blank=True)
    snoozed_until = models.DateField(_("snoozed until"), null=True, blank=True)
    assignee_department = models.ForeignKey(
        Department,
        verbose_name=_("assigned to"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decision_note = models.TextField(_("note"), blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-gain_gpu_h_week", "pk"]
        verbose_name = _("recommendation")
        verbose_name_plural = _("recommendations")
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "subject_kind", "subject_key"], name="recommendation_unique_subject"
            ),
        ]
        indexes = [
            models.Index(fields=["state", "-gain_gpu_h_week"]),
            models.Index(fields=["department", "state"]),
        ]

    def __str__(self) -> str:
        return f"{self.rule} · {self.subject_key}"


class RecommendationDecision(models.Model):
    """Every decision and every engine event on a recommendation: who, when, what, why.

    Never edited: a new decision supersedes the last. Comments by department heads are decisions
    of kind ``commented`` with their text.
    """

    recommendation = models.ForeignKey(Recommendation, on_delete=models.CASCADE, related_name="decisions")
    action = models.CharField(_("action"), max_length=20, choices=RecommendationAction.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("by"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    at = models.DateTimeField(_("at"))
    text = models.TextField(_("reason or comment"), blank=True)
    snoozed_until = models.DateField(null=True, blank=True)
    assignee_department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["at", "pk"]
        verbose_name = _("recommendation decision")
        verbose_name_plural = _("recommendation decisions")

    def __str__(self) -> str:
        return f"{self.recommendation_id} {self.action} {self.at:%Y-%m-%d %H:%M}"


class JobLogFacts(models.Model):
    """What a job's log lines said about its setup so far (NCCL transports, variables, data
    loader, precision, checkpoints), kept so that each run reads only the chunks that arrived since.
    """

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="log_facts")
    facts = models.JSONField(default=dict)
    last_chunk_id = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("job log facts")
        verbose_name_plural = _("job log facts")

    def __str__(self) -> str:
        return f"facts of job {self.job_id}"


class LogFactsCursor(models.Model):
    """How far the log facts worker has read one source's log chunks, by id.

    Per source, because a source's chunks are stored by one writer at a time (``log_chunks_ingest``
    holds the source's lock until it commits), so their ids become visible in order; across
    sources they do not, and one cursor over all chunks could pass an id another source had not
    committed yet and never read it.
    """

    source = models.OneToOneField(
        "efficiency.DataSource", on_delete=models.CASCADE, related_name="log_facts_cursor"
    )
    last_chunk_id = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = _("log facts cursor")
        verbose_name_plural = _("log facts cursors")

    def __str__(self) -> str:
        return f"{self.source_id} @ {self.last_chunk_id}"
