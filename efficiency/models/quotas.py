"""Quota planning: cycles with guaranteed GPUs per department, their history and review."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from efficiency.choices import CapacityAlertKind, QuotaCycleOrigin, QuotaCycleStatus, QuotaEventKind
from efficiency.models.inventory import Cluster, Department


class QuotaCycleQuerySet(models.QuerySet):
    def approved(self) -> "QuotaCycleQuerySet":
        return self.filter(status=QuotaCycleStatus.APPROVED)


class QuotaCycle(models.Model):
    """One planning cycle of a cluster (PORTAL_CYCLE_DAYS long) and how its quotas were set.

    ``capacity`` is GPUs per GPU model when the cycle was planned; the shared pool of a model is
    that capacity minus the guarantees. ``proposal_settings`` are the proposal's knobs
    (efficiency.analysis.quotas.ProposalSettings) and [demand_start, demand_end) the hours of
    demand it was computed from. The quotas of the latest approved cycle that has begun are the
    ones in force.
    """

    cluster = models.ForeignKey(
        Cluster, verbose_name=_("cluster"), on_delete=models.CASCADE, related_name="quota_cycles"
    )
    start = models.DateTimeField(_("start"))
    end = models.DateTimeField(_("end"))
    status = models.CharField(_("status"), max_length=10, choices=QuotaCycleStatus.choices)
    capacity = models.JSONField(_("capacity (GPUs per model)"), default=dict)
    proposal_settings = models.JSONField(_("proposal settings"), default=dict, blank=True)
    demand_start = models.DateTimeField(_("demand from"), null=True, blank=True)
    demand_end = models.DateTimeField(_("demand until"), null=True, blank=True)
    origin = models.CharField(_("origin"), max_length=20, choices=QuotaCycleOrigin.choices)
    created_at = models.DateTimeField(_("created at"))
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(_("approved at"), null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("approved by"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    approval_comment = models.TextField(_("approval comment"), blank=True)

    objects = QuotaCycleQuerySet.as_manager()

    class Meta:
        ordering = ["-start"]
        verbose_name = _("quota cycle")
        verbose_name_plural = _("quota cycles")
        constraints = [models.UniqueConstraint(fields=["cluster", "start"], name="quotacycle_unique_start")]

    def __str__(self) -> str:
        return f"{self.cluster.slug} {self.start:%Y-%m-%d}–{self.end:%Y-%m-%d}"

    @property
    def is_proposed(self) -> bool:
        return self.status == QuotaCycleStatus.PROPOSED

    @property
    def is_fixed_partition(self) -> bool:
        return self.origin == QuotaCycleOrigin.FIXED_PARTITION


class Quota(models.Model):
    """A department's guaranteed GPUs of one GPU model in one cycle.

    ``proposed_gpus`` is what the analysis proposed (kept when the committee edits
    ``guaranteed_gpus``), ``explanation`` the facts behind it — its ``steps`` (percentile, bound,
    floor, share, rounding, each with its numbers; efficiency.analysis.quotas), rendered in the
    reader's language by efficiency.quota_explanation — and ``demand_gpus`` the hourly
    demand it was computed from (mean GPUs per hour).
    """

    cycle = models.ForeignKey(
        QuotaCycle, verbose_name=_("cycle"), on_delete=models.CASCADE, related_name="quotas"
    )
    department = models.ForeignKey(
        Department, verbose_name=_("department"), on_delete=models.CASCADE, related_name="quotas"
    )
    gpu_model = models.CharField(_("GPU model"), max_length=100)
    guaranteed_gpus = models.PositiveIntegerField(_("guaranteed GPUs"))
    borrowing_limit_gpus = models.PositiveIntegerField(
        _("borrowing limit (GPUs)"),
        null=True,
        blank=True,
        help_text=_("Most GPUs the department may borrow from the shared pool; empty: no limit."),
    )
    previous_gpus = models.PositiveIntegerField(_("previous GPUs"), null=True, blank=True)
    proposed_gpus = models.PositiveIntegerField(_("proposed GPUs"), null=True, blank=True)
    explanation = models.JSONField(_("explanation"), default=dict, blank=True)
    demand_gpus = models.JSONField(_("hourly demand (GPUs)"), default=list, blank=True)

    class Meta:
        ordering = ["cycle", "department__name", "gpu_model"]
        verbose_name = _("quota")
        verbose_name_plural = _("quotas")
        constraints = [
            models.UniqueConstraint(
                fields=["cycle", "department", "gpu_model"], name="quota_unique_per_cycle"
            )
        ]

    def __str__(self) -> str:
        return f"{self.department.code} {self.gpu_model}: {self.guaranteed_gpus}"

    @property
    def edited(self) -> bool:
        return self.proposed_gpus is not None and self.proposed_gpus != self.guaranteed_gpus


class QuotaObjection(models.Model):
    """A department head's objection to a proposal, and the committee's answer."""

    cycle = models.ForeignKey(QuotaCycle, on_delete=models.CASCADE, related_name="objections")
    department = models.ForeignKey(
        Department, verbose_name=_("department"), on_delete=models.CASCADE, related_name="quota_objections"
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    text = models.TextField(_("objection"))
    created_at = models.DateTimeField(_("filed at"))
    response = models.TextField(_("answer"), blank=True)
    responded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    responded_at = models.DateTimeField(_("answered at"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("quota objection")
        verbose_name_plural = _("quota objections")

    def __str__(self) -> str:
        return f"{self.department.code} on {self.cycle}"


class QuotaEvent(models.Model):
    """One recorded change of a cycle: who did what, when, from which number to which.

    ``comment`` holds only what a person wrote; facts the portal records beside it (a changed
    borrowing limit) go to ``detail`` and are rendered in the reader's language.
    """

    cycle = models.ForeignKey(QuotaCycle, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(_("kind"), max_length=20, choices=QuotaEventKind.choices)
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    gpu_model = models.CharField(max_length=100, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(_("at"))
    from_gpus = models.IntegerField(null=True, blank=True)
    to_gpus = models.IntegerField(null=True, blank=True)
    comment = models.TextField(_("comment"), blank=True)
    detail = models.JSONField(_("detail"), default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = _("quota event")
        verbose_name_plural = _("quota events")
        indexes = [models.Index(fields=["cycle", "-at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.at:%Y-%m-%d %H:%M}"


class QuotaBacktest(models.Model):
    """The backtest of a cycle's quotas: last cycle's jobs replayed under each policy.

    ``results`` holds one entry per policy (fixed partition, quotas in force, this cycle's),
    as efficiency.analysis.backtest computed them.
    """

    cycle = models.ForeignKey(QuotaCycle, on_delete=models.CASCADE, related_name="backtests")
    computed_at = models.DateTimeField(_("computed at"))
    window_start = models.DateTimeField(_("window start"))
    window_end = models.DateTimeField(_("window end"))
    job_count = models.PositiveIntegerField(_("jobs"))
    duration_s = models.FloatField(_("run time (s)"))
    results = models.JSONField(_("results"), default=list)

    class Meta:
        ordering = ["-computed_at"]
        verbose_name = _("quota backtest")
        verbose_name_plural = _("quota backtests")

    def __str__(self) -> str:
        return f"backtest of {self.cycle} @ {self.computed_at:%Y-%m-%d %H:%M}"


class CapacityAlert(models.Model):
    """The cluster is short of GPUs of one model: the shared pool runs out while jobs wait, or
    demand is on course to pass capacity. Open while ``resolved_at`` is empty."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="capacity_alerts")
    gpu_model = models.CharField(_("GPU model"), max_length=100)
    kind = models.CharField(_("kind"), max_length=20, choices=CapacityAlertKind.choices)
    raised_at = models.DateTimeField(_("raised at"))
    checked_at = models.DateTimeField(_("last checked"))
    resolved_at = models.DateTimeField(_("resolved at"), null=True, blank=True)
    gpus_needed = models.PositiveIntegerField(_("GPUs needed"), null=True, blank=True)
    detail = models.JSONField(_("detail"), default=dict, blank=True)

    class Meta:
        ordering = ["-raised_at"]
        verbose_name = _("capacity alert")
        verbose_name_plural = _("capacity alerts")
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "gpu_model", "kind"],
                condition=models.Q(resolved_at__isnull=True),
                name="capacityalert_one_open",
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster.slug} {self.gpu_model} {self.kind}"
