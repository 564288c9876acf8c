"""Faults: evidence (signals), incidents with their phases, automated actions and policies."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from efficiency.choices import ActionKind, FaultCategory, IncidentStatus, NodeState, Severity, SignalSource
from efficiency.fault_messages import render
from efficiency.models.inventory import Cluster, Department, Node
from efficiency.models.jobs import Job

# The phases of an incident, in the only order time allows.
PHASES = ("occurred_at", "detected_at", "located_at", "restart_requested_at", "recovered_at")


def _in_order(earlier: str, later: str) -> Q:
    return (
        Q(**{f"{earlier}__isnull": True})
        | Q(**{f"{later}__isnull": True})
        | Q(**{f"{later}__gte": F(earlier)})
    )


class Incident(models.Model):
    """Related fault signals of one job (or one node), rooted at a suspected node/GPU/rank.

    Phase times: ``occurred_at`` (first evidence, by the log line's own clock), ``detected_at``
    (the portal saw it), ``located_at`` (root cause and place decided), ``restart_requested_at``,
    ``recovered_at`` (the job or its resubmission makes progress again), never out of that order
    (a constraint; the fault service stamps them through one function). MTTR = recovered -
    occurred. ``gpu_hours_lost`` = GPUs x (time since the last checkpoint + downtime).

    Closing (``status`` closed: by a platform admin with a reason, or by the portal when the job
    never ran again) ends an incident without a recovery: it has no ``recovered_at`` and no MTTR.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="incidents")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="incidents")
    # The job's department, copied so that heads' incidents are found by index.
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.SET_NULL, related_name="incidents"
    )
    node = models.ForeignKey(
        Node,
        verbose_name=_("suspected node"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="incidents",
    )
    gpu_index = models.PositiveSmallIntegerField(_("suspected GPU"), null=True, blank=True)
    rank = models.IntegerField(_("suspected rank"), null=True, blank=True)
    category = models.CharField(_("root cause"), max_length=30, choices=FaultCategory.choices)
    severity = models.CharField(_("severity"), max_length=10, choices=Severity.choices)
    code = models.CharField(_("code"), max_length=40, blank=True)
    root_signature_id = models.CharField(_("root signature"), max_length=300)
    status = models.CharField(
        _("status"), max_length=12, choices=IncidentStatus.choices, default=IncidentStatus.OPEN
    )
    occurred_at = models.DateTimeField(_("occurred"))
    detected_at = models.DateTimeField(_("detected"))
    located_at = models.DateTimeField(_("located"), null=True, blank=True)
    restart_requested_at = models.DateTimeField(_("restart requested"), null=True, blank=True)
    recovered_at = models.DateTimeField(_("recovered"), null=True, blank=True)
    last_checkpoint_at = models.DateTimeField(_("last checkpoint"), null=True, blank=True)
    gpu_count = models.PositiveIntegerField(_("GPUs"), default=0)
    # False while all its evidence is job output (a suspicion): no action, no inventory change
    # until a trusted signal (kernel log, exporter metrics) joins it. Set by the fault service.
    confirmed = models.BooleanField(
        _("confirmed"),
        default=True,
        help_text=_(
            "False while the only evidence is the job's own output: a suspicion, on which nothing is "
            "done until the node's kernel log or the exporter's metrics confirm it."
        ),
    )
    gpu_hours_lost = models.FloatField(_("GPU-hours lost"), null=True, blank=True)
    reasoning = models.JSONField(_("how it was located"), default=dict, blank=True)
    closed_at = models.DateTimeField(_("closed"), null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("closed by"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    close_reason = models.TextField(_("why it was closed"), blank=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        ordering = ["-occurred_at"]
        verbose_name = _("incident")
        verbose_name_plural = _("incidents")
        indexes = [
            models.Index(fields=["cluster", "-occurred_at"]),
            models.Index(fields=["department", "-occurred_at"]),
            models.Index(fields=["node", "-occurred_at"]),
            models.Index(fields=["job", "status"]),
        ]
        constraints = [
            models.CheckConstraint(
                condition=_in_order(PHASES[0], PHASES[1])
                & _in_order(PHASES[0], PHASES[2])
                & _in_order(PHASES[0], PHASES[3])
                & _in_order(PHASES[0], PHASES[4])
                & _in_order(PHASES[1], PHASES[2])
                & _in_order(PHASES[1], PHASES[3])
                & _in_order(PHASES[1], PHASES[4])
                & _in_order(PHASES[2], PHASES[3])
                & _in_order(PHASES[2], PHASES[4])
                & _in_order(PHASES[3], PHASES[4]),
                name="incident_phases_in_order",
                violation_error_message=_("An incident's phases must follow each other in time."),
            ),
            models.CheckConstraint(
                condition=~Q(status=IncidentStatus.CLOSED) | Q(recovered_at__isnull=True),
                name="incident_closed_is_not_recovered",
            ),
        ]

    def __str__(self) -> str:
        return self.root_signature_id

    @property
    def is_finished(self) -> bool:
        return self.status in IncidentStatus.finished()

    @property
    def mttr_s(self) -> float | None:
        if self.recovered_at is None:
            return None
        return (self.recovered_at - self.occurred_at).total_seconds()

    @property
    def time_to_detect_s(self) -> float:
        return (self.detected_at - self.occurred_at).total_seconds()

    @property
    def time_to_locate_s(self) -> float | None:
        return None if self.located_at is None else (self.located_at - self.occurred_at).total_seconds()


class FaultSignal(models.Model):
    """One piece of evidence: a log line matching a signature, a detector's finding, a metric.

    ``evidence_key`` makes the same evidence stored once however often it is scanned (a log
    line is keyed by its source, stream, file and byte offset).
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    evidence_key = models.CharField(max_length=600)
    source = models.CharField(_("source"), max_length=10, choices=SignalSource.choices)
    signature_id = models.CharField(_("signature"), max_length=60)
    category = models.CharField(_("category"), max_length=30, choices=FaultCategory.choices)
    severity = models.CharField(_("severity"), max_length=10, choices=Severity.choices)
    code = models.CharField(_("code"), max_length=40, blank=True)
    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="fault_signals"
    )
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="fault_signals"
    )
    gpu_index = models.PositiveSmallIntegerField(null=True, blank=True)
    rank = models.IntegerField(null=True, blank=True)
    occurred_at = models.DateTimeField(_("occurred"))
    detected_at = models.DateTimeField(_("detected"))
    # A log line as written; for a detector's or metric's finding, its English text, with the
    # facts in ``facts`` (``{"code", "params"}``, efficiency.fault_messages) to show it in any language.
    message = models.TextField(_("evidence"))
    facts = models.JSONField(_("facts"), default=dict, blank=True)
    location = models.CharField(_("where"), max_length=600, blank=True)
    # Trusted evidence comes from a stream its subject cannot write (a node's kernel log, the
    # exporter's metrics); a job's own output is not, and can only raise a suspicion.
    trusted = models.BooleanField(
        _("trusted source"),
        default=False,
        help_text=_("From a node's kernel log or the exporter's metrics, not from a job's own output."),
    )
    # Why it is only a suspicion, or why the node it named was refused, as message facts.
    trust_note = models.JSONField(_("trust"), default=dict, blank=True)
    incident = models.ForeignKey(
        Incident, null=True, blank=True, on_delete=models.SET_NULL, related_name="signals"
    )

    class Meta:
        ordering = ["occurred_at", "id"]
        verbose_name = _("fault signal")
        verbose_name_plural = _("fault signals")
        constraints = [
            models.UniqueConstraint(fields=["cluster", "evidence_key"], name="faultsignal_unique_evidence"),
            models.CheckConstraint(
                condition=Q(detected_at__gte=F("occurred_at")), name="faultsignal_detected_after_occurred"
            ),
        ]
        indexes = [
            models.Index(fields=["cluster", "occurred_at"]),
            models.Index(fields=["incident"]),
            models.Index(fields=["job", "occurred_at"]),
            models.Index(fields=["node", "occurred_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.signature_id} @ {self.occurred_at:%Y-%m-%d %H:%M:%S}"

    @property
    def text(self) -> str:
        """The evidence in the reader's language (a log line as written)."""
        return render(self.facts, self.message)

    @property
    def trust_text(self) -> str:
        """Why this evidence is only a suspicion (or its node was refused), in the reader's language."""
        return render(self.trust_note)


class IncidentAction(models.Model):
    """An isolation, restart or notification an incident triggered, and how it went."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="actions")
    kind = models.CharField(_("action"), max_length=20, choices=ActionKind.choices)
    actuator = models.CharField(_("actuator"), max_length=100)
    dry_run = models.BooleanField(_("dry run"))
    ok = models.BooleanField(_("succeeded"))
    # The outcome in English (logs, older clients); ``message`` holds it as facts for any language.
    summary = models.CharField(_("summary"), max_length=1000)
    message = models.JSONField(_("message"), default=dict, blank=True)
    detail = models.TextField(_("detail"), blank=True)
    requested_at = models.DateTimeField(_("requested at"))
    duration_s = models.FloatField(_("duration (s)"), default=0)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["requested_at", "id"]
        verbose_name = _("incident action")
        verbose_name_plural = _("incident actions")

    def __str__(self) -> str:
        return f"{self.kind} {'ok' if self.ok else 'failed'}"

    @property
    def text(self) -> str:
        """What was done, or would have been, in the reader's language."""
        return render(self.message, self.summary)


class NodeStateChange(models.Model):
    """A change of a node's state in the portal's inventory: who or what made it, and for which
    incident. Only real changes are recorded (a dry run changes nothing)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="state_changes")
    at = models.DateTimeField(_("when"))
    state = models.CharField(_("state"), max_length=20, choices=NodeState.choices)
    previous_state = models.CharField(_("previous state"), max_length=20, choices=NodeState.choices)
    incident = models.ForeignKey(
        Incident, null=True, blank=True, on_delete=models.SET_NULL, related_name="node_state_changes"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = _("node state change")
        verbose_name_plural = _("node state changes")
        indexes = [models.Index(fields=["node", "-at"])]

    def __str__(self) -> str:
        return f"{self.node_id}: {self.previous_state} → {self.state}"


class FaultPolicy(models.Model):
    """What to do automatically when an incident of a category is located."""

    category = models.CharField(_("category"), max_length=30, choices=FaultCategory.choices, unique=True)
    isolate_node = models.BooleanField(_("isolate the node"), default=False)
    restart_job = models.BooleanField(_("restart the job from its last checkpoint"), default=False)
    notify = models.BooleanField(_("notify"), default=True)

    class Meta:
        ordering = ["category"]
        verbose_name = _("fault policy")
        verbose_name_plural = _("fault policies")

    def __str__(self) -> str:
        return self.get_category_display()


# Closing is the portal's own bookkeeping: no actuator carries it out.
ACTUATOR_ACTIONS = [(value, label) for value, label in ActionKind.choices if value != ActionKind.CLOSE]


class ActuatorConfig(models.Model):
    """How an action reaches the outside world: a webhook or a command template.

    ``config`` is efficiency.actuators' JSON (``{"type": "webhook", "url": ...}`` or
    ``{"type": "command", "argv": ["scontrol", "update", "NodeName={node}", ...]}``).
    """

    name = models.CharField(_("name"), max_length=100, unique=True)
    action = models.CharField(_("action"), max_length=20, choices=ACTUATOR_ACTIONS)
    config = models.JSONField(_("configuration"), default=dict)
    dry_run = models.BooleanField(
        _("dry run"), default=True, help_text=_("Log what would be done, do nothing.")
    )
    enabled = models.BooleanField(_("enabled"), default=True)

    class Meta:
        ordering = ["action", "name"]
        verbose_name = _("actuator")
        verbose_name_plural = _("actuators")

    def __str__(self) -> str:
        return self.name


class FaultScanCursor(models.Model):
    """How far the fault scanner has read a source's log chunks (by chunk id)."""

    source = models.OneToOneField("efficiency.DataSource", on_delete=models.CASCADE, related_name="+")
    last_chunk_id = models.BigIntegerField(default=0)
    scanned_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.source_id} @ {self.last_chunk_id}"


class LogStreamContext(models.Model):
    """What the fault scanner remembers of one log file between its pieces (JSON of
    ``analysis.faults.context.StreamContext``: throughput baselines, lines seen): a drop that
    began in one collected piece and lasted into the next is still one drop."""

    source = models.ForeignKey("efficiency.DataSource", on_delete=models.CASCADE, related_name="+")
    stream = models.CharField(max_length=500)
    file_id = models.CharField(max_length=100)
    context = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "stream", "file_id"], name="logstreamcontext_unique_file"
            )
        ]
        indexes = [models.Index(fields=["updated_at"])]

    def __str__(self) -> str:
        return f"{self.stream} ({self.file_id})"
