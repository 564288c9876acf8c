import contextlib
from datetime import datetime

from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist
from django.core.validators import ProhibitNullCharactersValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from efficiency.choices import (
    QuotaCycleStatus,
    RecommendationState,
    TicketAction,
    TicketOrigin,
    TicketSeverity,
    TicketState,
)
from efficiency.models import (
    CapacityAlert,
    Cluster,
    Department,
    FaultSignal,
    Gpu,
    Incident,
    IncidentAction,
    Job,
    Node,
    Quota,
    QuotaBacktest,
    QuotaCycle,
    QuotaEvent,
    QuotaObjection,
    Recommendation,
    RecommendationDecision,
    SourceRun,
    Ticket,
    TicketComment,
)
from efficiency.quota_explanation import explanation_steps
from efficiency.recommendation_messages import RULES, rule_title, subject_text
from efficiency.selectors.jobs import job_list
from efficiency.selectors.quotas import cycle_shared_pool
from efficiency.selectors.recommendations import recommendation_jobs
from efficiency.services.faults import incident_operations
from efficiency.services.quotas import EXPORT_FORMATS
from efficiency.services.recommendations import ACCEPT, COMMENT, REJECT, SNOOZE, recommendation_actions
from efficiency.services.tickets import EDITABLE as TICKET_EDITABLE
from efficiency.services.tickets import MAX_COMMENT as TICKET_MAX_COMMENT
from efficiency.services.tickets import sla_status, ticket_actions
from efficiency.times import display_time


class DateTimeField(serializers.DateTimeField):
    """DRF's field, except that a stored moment the display time zone cannot hold (year 1 or
    9999) is given in UTC instead of failing the whole response with "Datetime value out of range"."""

    def enforce_timezone(self, value):
        if not isinstance(value, datetime) or timezone.is_naive(value):
            return super().enforce_timezone(value)
        return display_time(value)


class SlugRelatedField(serializers.SlugRelatedField):
    """DRF's field, except that a slug with a NUL byte is refused before the lookup (PostgreSQL
    cannot hold one in text: the lookup raised a 500)."""

    def to_internal_value(self, data):
        if isinstance(data, str):
            ProhibitNullCharactersValidator()(data)
        return super().to_internal_value(data)

    def bind(self, field_name, parent):
        super().bind(field_name, parent)
        # A read-only link over a nullable foreign key (a job without a department, an event
        # without an actor) gives null: say so, so that the OpenAPI schema declares it.
        model = getattr(getattr(parent, "Meta", None), "model", None)
        if self.read_only and model is not None and "." not in self.source:
            with contextlib.suppress(FieldDoesNotExist):
                self.allow_null = model._meta.get_field(self.source).null


class ModelSerializer(serializers.ModelSerializer):
    """Every model serializer of the API: model datetimes through the DateTimeField above."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.DateTimeField: DateTimeField,
    }


class DepartmentSerializer(ModelSerializer):
    node_count = serializers.IntegerField(read_only=True)
    gpu_count = serializers.IntegerField(read_only=True)
    running_job_count = serializers.IntegerField(read_only=True)
    running_gpu_count = serializers.FloatField(
        read_only=True, help_text="GPUs held, shares counted: 0.5 for half a GPU"
    )

    class Meta:
        model = Department
        fields = [
            "id",
            "code",
            "name",
            "is_active",
            "node_count",
            "gpu_count",
            "running_job_count",
            "running_gpu_count",
        ]


class GpuSerializer(ModelSerializer):
    class Meta:
        model = Gpu
        fields = ["index", "uuid", "model", "memory_mib"]


class NodeSerializer(ModelSerializer):
    cluster = SlugRelatedField(slug_field="slug", read_only=True)
    owner_department = SlugRelatedField(slug_field="code", read_only=True)

    class Meta:
        model = Node
        fields = [
            "id",
            "cluster",
            "hostname",
            "gpu_model",
            "gpu_count",
            "rdma_capable",
            "fault_domain",
            "state",
            "state_reason",
            "owner_department",
        ]


class NodeDetailSerializer(NodeSerializer):
    gpus = GpuSerializer(many=True, read_only=True)

    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "gpus"]


class JobSerializer(ModelSerializer):
    cluster = SlugRelatedField(slug_field="slug", read_only=True)
    department = SlugRelatedField(slug_field="code", read_only=True)
    wait_s = serializers.FloatField(read_only=True, allow_null=True)
    duration_s = serializers.FloatField(read_only=True, allow_null=True)
    gpu_hours = serializers.FloatField(read_only=True, allow_null=True)
    gpus = serializers.FloatField(
        read_only=True, help_text=_("GPUs held, fractions of shared GPUs included (gpu_milli / 1000).")
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "cluster",
            "source",
            "external_id",
            "department",
            "account",
            "user_name",
            "name",
            "state",
            "gpu_count",
            "gpu_milli",
            "gpus",
            "gpu_model",
            "node_count",
            "submitted_at",
            "started_at",
            "ended_at",
            "wait_s",
            "duration_s",
            "gpu_hours",
            "framework",
        ]


class JobDetailSerializer(JobSerializer):
    nodes = SlugRelatedField(slug_field="hostname", many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "nodes", "config"]


class LogPushResultSerializer(ModelSerializer):
    class Meta:
        model = SourceRun
        fields = ["id", "status", "received", "stored", "duplicates", "rejected", "rejects"]


# --- Quota planning ---------------------------------------------------------------------------


class QuotaSerializer(ModelSerializer):
    department = SlugRelatedField(slug_field="code", read_only=True)
    department_name = serializers.CharField(source="department.name", read_only=True)
    explanation_text = serializers.SerializerMethodField(
        help_text=_(
            "The explanation's steps (percentile, bound, floor, share, rounding) as sentences with "
            "their numbers, in the caller's language; the facts are in explanation.steps."
        )
    )

    class Meta:
        model = Quota
        fields = [
            "id",
            "cycle",
            "department",
            "department_name",
            "gpu_model",
            "guaranteed_gpus",
            "borrowing_limit_gpus",
            "previous_gpus",
            "proposed_gpus",
            "explanation",
            "explanation_text",
        ]
        read_only_fields = fields

    @extend_schema_field({"type": "array", "items": {"type": "string"}})
    def get_explanation_text(self, quota: Quota) -> list[str]:
        return explanation_steps(quota.explanation, quota.cycle.proposal_settings)


class QuotaUpdateSerializer(serializers.Serializer):
    """A committee member's numbers for one proposed quota; fields left out keep their value."""

    guaranteed_gpus = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False)
    borrowing_limit_gpus = serializers.IntegerField(
        min_value=0,
        max_value=1_000_000,
        required=False,
        allow_null=True,
        help_text=_("Most GPUs the department may borrow from the shared pool; null: no limit."),
    )
    comment = serializers.CharField(max_length=2000, help_text=_("Why (required; kept in the history)."))


class QuotaObjectionSerializer(ModelSerializer):
    department = SlugRelatedField(slug_field="code", read_only=True)
    author = SlugRelatedField(slug_field="username", read_only=True)
    responded_by = SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = QuotaObjection
        fields = [
            "id",
            "cycle",
            "department",
            "author",
            "text",
            "created_at",
            "response",
            "responded_by",
            "responded_at",
        ]
        read_only_fields = fields


class QuotaObjectionCreateSerializer(serializers.Serializer):
    """A department head's objection; ``department`` is the code of a department they head that
    has a quota in the cycle (the view narrows the choices)."""

    department = SlugRelatedField(
        slug_field="code",
        queryset=Department.objects.none(),
        help_text=_("Code of a department you head that has a quota in this cycle."),
    )
    text = serializers.CharField(max_length=4000)

    def __init__(self, *args, departments=None, **kwargs):
        super().__init__(*args, **kwargs)
        if departments is not None:
            self.fields["department"].queryset = departments


class QuotaObjectionAnswerSerializer(serializers.Serializer):
    response = serializers.CharField(max_length=4000)


class QuotaEventSerializer(ModelSerializer):
    department = SlugRelatedField(slug_field="code", read_only=True)
    actor = SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = QuotaEvent
        fields = [
            "id",
            "kind",
            "department",
            "gpu_model",
            "actor",
            "at",
            "from_gpus",
            "to_gpus",
            "comment",
            "detail",
        ]
        read_only_fields = fields


class QuotaCycleSerializer(ModelSerializer):
    cluster = SlugRelatedField(slug_field="slug", read_only=True)
    approved_by = SlugRelatedField(slug_field="username", read_only=True)
    shared_pool = serializers.SerializerMethodField(
        help_text=_("GPUs per model not guaranteed to any department (the whole cluster's).")
    )

    class Meta:
        model = QuotaCycle
        fields = [
            "id",
            "cluster",
            "start",
            "end",
            "status",
            "origin",
            "capacity",
            "shared_pool",
            "approved_at",
            "approved_by",
            "approval_comment",
            "proposal_settings",
            "demand_start",
            "demand_end",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_shared_pool(self, cycle: QuotaCycle) -> dict[str, int]:
        # The pool's size is cluster-wide and shown to department heads too (as on the pages).
        # The list prefetches every quota of each cycle; a single cycle reads them itself.
        return cycle_shared_pool(cycle, getattr(cycle, "every_quota", None))


class QuotaCycleDetailSerializer(QuotaCycleSerializer):
    quotas = QuotaSerializer(many=True, read_only=True)
    objections = QuotaObjectionSerializer(many=True, read_only=True)
    events = QuotaEventSerializer(many=True, read_only=True)

    class Meta(QuotaCycleSerializer.Meta):
        fields = [*QuotaCycleSerializer.Meta.fields, "quotas", "objections", "events"]
        read_only_fields = fields


class ClusterQuerySerializer(serializers.Serializer):
    cluster = SlugRelatedField(
        slug_field="slug",
        queryset=Cluster.objects.all(),
        required=False,
        help_text=_("Cluster slug; by default the first cluster with nodes."),
    )


class QuotaCycleQuerySerializer(ClusterQuerySerializer):
    status = serializers.ChoiceField(choices=QuotaCycleStatus.choices, required=False)


class QuotaApproveSerializer(serializers.Serializer):
    comment = serializers.CharField(max_length=2000, help_text=_("Why (required; kept in the history)."))


class QuotaProposeSerializer(ClusterQuerySerializer):
    """The cluster to propose the next cycle for."""


class QuotaExportQuerySerializer(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=sorted(EXPORT_FORMATS), help_text=_("Scheduler configuration to produce.")
    )


class QuotaBacktestSerializer(ModelSerializer):
    class Meta:
        model = QuotaBacktest
        fields = [
            "id",
            "cycle",
            "computed_at",
            "window_start",
            "window_end",
            "job_count",
            "duration_s",
            "results",
        ]
        read_only_fields = fields


class CapacityAlertSerializer(ModelSerializer):
    cluster = SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = CapacityAlert
        fields = [
            "id",
            "cluster",
            "gpu_model",
            "kind",
            "raised_at",
            "checked_at",
            "resolved_at",
            "gpus_needed",
            "detail",
        ]
        read_only_fields = fields


class CapacityAlertQuerySerializer(serializers.Serializer):
    open = serializers.BooleanField(
        required=False,
        default=True,
        help_text=_("true (default): open alerts only; false: resolved ones too."),
    )


class QuotaUseSerializer(serializers.Serializer):
    quota = serializers.IntegerField(source="quota.pk")
    department = serializers.CharField(source="quota.department.code")
    department_name = serializers.CharField(source="quota.department.name")
    gpu_model = serializers.CharField(source="quota.gpu_model")
    guaranteed_gpus = serializers.IntegerField(source="quota.guaranteed_gpus")
    borrowing_limit_gpus = serializers.IntegerField(source="quota.borrowing_limit_gpus", allow_null=True)
    hours = serializers.IntegerField()
    mean_used_gpus = serializers.FloatField()
    p95_used_gpus = serializers.FloatField()
    mean_borrowed_gpus = serializers.FloatField()


class QuotaOverviewSerializer(serializers.Serializer):
    cluster = serializers.CharField(source="cluster.slug", allow_null=True)
    cycle = serializers.IntegerField(
        source="cycle.pk", allow_null=True, help_text=_("The cycle in force; null when none.")
    )
    since = DateTimeField(allow_null=True)
    until = DateTimeField(allow_null=True)
    shared_pool = serializers.DictField(child=serializers.IntegerField())
    shared_pool_borrowed = serializers.DictField(
        child=serializers.FloatField(), help_text=_("Mean GPUs borrowed per model, all departments.")
    )
    next_cycle = serializers.IntegerField(source="next_cycle.pk", allow_null=True)
    uses = QuotaUseSerializer(many=True)


class FaultSignalSerializer(ModelSerializer):
    node = SlugRelatedField(slug_field="hostname", read_only=True)
    job = SlugRelatedField(slug_field="external_id", read_only=True)
    text = serializers.CharField(
        read_only=True, help_text=_("The evidence in the request's language (a log line as written).")
    )
    trust_text = serializers.CharField(
        read_only=True,
        help_text=_(
            "Why untrusted evidence (job output) is only a suspicion, or why the node it named was refused."
        ),
    )

    class Meta:
        model = FaultSignal
        fields = [
            "id",
            "source",
            "signature_id",
            "category",
            "severity",
            "code",
            "job",
            "node",
            "gpu_index",
            "rank",
            "occurred_at",
            "detected_at",
            "message",
            "text",
            "facts",
            "location",
            "trusted",
            "trust_text",
            "incident",
        ]
        read_only_fields = fields


class IncidentActionSerializer(ModelSerializer):
    actor = SlugRelatedField(slug_field="username", read_only=True)
    text = serializers.CharField(read_only=True, help_text=_("What was done, in the request's language."))

    class Meta:
        model = IncidentAction
        fields = [
            "id",
            "kind",
            "actuator",
            "dry_run",
            "ok",
            "summary",
            "text",
            "message",
            "detail",
            "requested_at",
            "duration_s",
            "actor",
        ]
        read_only_fields = fields


class IncidentSerializer(ModelSerializer):
    cluster = SlugRelatedField(slug_field="slug", read_only=True)
    job = SlugRelatedField(slug_field="external_id", read_only=True)
    department = SlugRelatedField(slug_field="code", read_only=True)
    node = SlugRelatedField(slug_field="hostname", read_only=True)
    closed_by = SlugRelatedField(slug_field="username", read_only=True)
    mttr_s = serializers.FloatField(read_only=True, allow_null=True)
    time_to_detect_s = serializers.FloatField(read_only=True)
    time_to_locate_s = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = Incident
        fields = [
            "id",
            "cluster",
            "job",
            "department",
            "node",
            "gpu_index",
            "rank",
            "category",
            "severity",
            "code",
            "root_signature_id",
            "status",
            "confirmed",
            "occurred_at",
            "detected_at",
            "located_at",
            "restart_requested_at",
            "recovered_at",
            "mttr_s",
            "time_to_detect_s",
            "time_to_locate_s",
            "gpu_count",
            "gpu_hours_lost",
            "reasoning",
            "closed_at",
            "closed_by",
            "close_reason",
        ]
        read_only_fields = fields


class IncidentDetailSerializer(IncidentSerializer):
    signals = FaultSignalSerializer(many=True, read_only=True)
    actions = IncidentActionSerializer(many=True, read_only=True)
    operations = serializers.SerializerMethodField(
        help_text=_(
            "What a platform admin may do now: each action (isolate, restart, return-to-service, close) "
            "with null when it applies, else why it does not."
        )
    )

    class Meta(IncidentSerializer.Meta):
        fields = [*IncidentSerializer.Meta.fields, "operations", "signals", "actions"]
        read_only_fields = fields

    def get_operations(self, incident) -> dict[str, str | None]:
        return incident_operations(incident=incident)


class IncidentCloseSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=2000, help_text=_("Why the incident is closed without a recovery (required).")
    )


class IdleAllocationSerializer(serializers.Serializer):
    """A job that held GPUs while they sat idle for ``idle_hours`` in a row."""

    job = serializers.IntegerField(help_text=_("The job's id."))
    external_id = serializers.CharField()
    department = serializers.CharField(allow_null=True)
    start = DateTimeField()
    end = DateTimeField()
    idle_hours = serializers.IntegerField()
    wasted_gpu_hours = serializers.FloatField()


# --- Recommendations --------------------------------------------------------------------------

# The review service keeps at most this many characters of a reason, note or comment.
DECISION_TEXT_MAX = 2000
RECOMMENDATION_ACTIONS = (ACCEPT, REJECT, SNOOZE, COMMENT)


def visible_evidence_jobs(*, user, recommendations) -> dict[int, set[str]]:
    """Per recommendation, the external ids of its jobs that ``user`` may see (one query for a
    whole page): the evidence lines of other jobs are left out, as the pages leave them out
    (``selectors.recommendations.recommendation_evidence``)."""
    keys = {
        row.get("job")
        for rec in recommendations
        for row in rec.evidence
        if isinstance(row, dict) and row.get("job")
    }
    visible: dict[int, set[str]] = {rec.pk: set() for rec in recommendations}
    if not keys:
        return visible
    pairs = (
        job_list(user=user)
        .filter(recommendations__in=[rec.pk for rec in recommendations], external_id__in=keys)
        .values_list("recommendations", "external_id")
    )
    for rec_pk, external_id in pairs:
        visible[rec_pk].add(external_id)
    return visible


def _line_number(value) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


class RecommendationEvidenceSerializer(serializers.Serializer):
    file = serializers.CharField(help_text=_("The log file (or stream) the line came from."))
    line = serializers.IntegerField(help_text=_("1-based line number in that file."))
    text = serializers.CharField(help_text=_("The line as written."))
    job = serializers.CharField(help_text=_("External id of the job whose log it is."))


class ExpectedGainSerializer(serializers.Serializer):
    gpu_hours_per_week = serializers.FloatField(source="gain_gpu_h_week")
    percent = serializers.FloatField(
        source="gain_pct", help_text=_("Share of the subject's GPU-hours the change is expected to save.")
    )
    gpu_hours_per_week_of_family = serializers.FloatField(
        source="gpu_h_week", help_text=_("GPU-hours a week the subject (job family, user, node) uses.")
    )


class RecommendationListSerializer(serializers.ListSerializer):
    """Finds the visible evidence jobs of a whole page in one query."""

    def to_representation(self, data):
        recommendations = list(data.all() if isinstance(data, models.manager.BaseManager) else data)
        request = self.context.get("request")
        if request is not None:
            self.child.visible_jobs = visible_evidence_jobs(
                user=request.user, recommendations=recommendations
            )
        return super().to_representation(recommendations)


@extend_schema_field(
    {
        "type": "string",
        "enum": list(RecommendationState.values),
        "description": "\n".join(f"* `{value}` - {label}" for value, label in RecommendationState.choices),
    },
    component_name="RecommendationStateEnum",
)
class RecommendationStateField(serializers.ChoiceField):
    """The state, named in the schema: another ``state`` enum would otherwise get a hashed name."""

    def __init__(self, **kwargs):
        super().__init__(choices=RecommendationState.choices, **kwargs)


class RecommendationSerializer(ModelSerializer):
    """A recommendation with its rule's sentences in the request's language; what the requesting
    user may do with it now is ``actions``."""

    title = serializers.SerializerMethodField(help_text=_("The rule's title, in the request's language."))
    why = serializers.SerializerMethodField(help_text=_("Why it matters (null for an unknown rule)."))
    how = serializers.SerializerMethodField(
        help_text=_("How to apply the change (null for an unknown rule).")
    )
    source = serializers.SerializerMethodField(
        help_text=_("Published source of the ideal and of the expected gain (null for an unknown rule).")
    )
    subject = serializers.SerializerMethodField(
        help_text=_('What it is about, as text: "user · job name pattern", a hostname, a user, a department.')
    )
    department = SlugRelatedField(slug_field="code", read_only=True)
    node = SlugRelatedField(slug_field="hostname", read_only=True)
    state = RecommendationStateField(read_only=True)
    assignee_department = SlugRelatedField(
        slug_field="code",
        read_only=True,
        help_text=_("The department that makes the change (when accepted)."),
    )
    config = serializers.SerializerMethodField(
        help_text=_("The settings side by side with the ideal: [setting, observed, ideal].")
    )
    evidence = serializers.SerializerMethodField(
        help_text=_("The log lines that show it, of the jobs you may see (other jobs' lines are left out).")
    )
    expected_gain = ExpectedGainSerializer(source="*", read_only=True)
    actions = serializers.SerializerMethodField(
        help_text=_("What you may do with it now: the POST actions of this recommendation.")
    )

    class Meta:
        model = Recommendation
        list_serializer_class = RecommendationListSerializer
        fields = [
            "id",
            "rule",
            "title",
            "why",
            "how",
            "source",
            "subject_kind",
            "subject_key",
            "subject",
            "department",
            "user_name",
            "name_pattern",
            "node",
            "state",
            "observed",
            "ideal",
            "change",
            "config",
            "evidence",
            "expected_gain",
            "confidence",
            "first_seen",
            "last_seen",
            "closed_at",
            "snoozed_until",
            "assignee_department",
            "job_count",
            "actions",
        ]
        read_only_fields = fields

    visible_jobs: dict[int, set[str]] | None = None

    def _user(self):
        return self.context["request"].user

    def get_title(self, rec: Recommendation) -> str:
        return rule_title(rec.rule)

    def _text(self, rec: Recommendation, part: str) -> str | None:
        text = RULES.get(rec.rule)
        return None if text is None else str(getattr(text, part))

    def get_why(self, rec: Recommendation) -> str | None:
        return self._text(rec, "why")

    def get_how(self, rec: Recommendation) -> str | None:
        return self._text(rec, "how")

    def get_source(self, rec: Recommendation) -> str | None:
        return self._text(rec, "source")

    def get_subject(self, rec: Recommendation) -> str:
        return subject_text(rec)

    @extend_schema_field(
        {
            "type": "array",
            "items": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3},
        }
    )
    def get_config(self, rec: Recommendation) -> list[list[str]]:
        rows = [row for row in rec.config if isinstance(row, list | tuple)]
        return [["" if value is None else str(value) for value in [*row, None, None][:3]] for row in rows]

    @extend_schema_field(RecommendationEvidenceSerializer(many=True))
    def get_evidence(self, rec: Recommendation) -> list[dict]:
        if self.visible_jobs is None or rec.pk not in self.visible_jobs:
            self.visible_jobs = visible_evidence_jobs(user=self._user(), recommendations=[rec])
        visible = self.visible_jobs[rec.pk]
        return [
            {
                "file": str(row.get("file", "")),
                "line": _line_number(row.get("line")),
                "text": str(row.get("text", "")),
                "job": row["job"],
            }
            for row in rec.evidence
            if isinstance(row, dict) and row.get("job") in visible
        ]

    @extend_schema_field({"type": "array", "items": {"type": "string", "enum": list(RECOMMENDATION_ACTIONS)}})
    def get_actions(self, rec: Recommendation) -> list[str]:
        return recommendation_actions(rec, self._user())


class RecommendationDecisionSerializer(ModelSerializer):
    by = SlugRelatedField(
        source="user", slug_field="username", read_only=True, help_text=_("Who decided; null for the engine.")
    )
    assignee_department = SlugRelatedField(slug_field="code", read_only=True)

    class Meta:
        model = RecommendationDecision
        fields = ["action", "by", "at", "text", "snoozed_until", "assignee_department"]
        read_only_fields = fields


class RecommendationDetailSerializer(RecommendationSerializer):
    jobs = serializers.SerializerMethodField(
        help_text=_("External ids of the 20 newest of its jobs that you may see (job_count counts them all).")
    )
    decisions = RecommendationDecisionSerializer(many=True, read_only=True)

    class Meta(RecommendationSerializer.Meta):
        fields = [*RecommendationSerializer.Meta.fields, "jobs", "decisions"]
        read_only_fields = fields

    def get_jobs(self, rec: Recommendation) -> list[str]:
        return [job.external_id for job in recommendation_jobs(user=self._user(), recommendation=rec)]


class RecommendationAcceptSerializer(serializers.Serializer):
    department = SlugRelatedField(
        slug_field="code",
        queryset=Department.objects.none(),
        required=False,
        help_text=_("Code of the department that makes the change; by default the recommendation's."),
    )
    note = serializers.CharField(max_length=DECISION_TEXT_MAX, required=False, allow_blank=True)

    def __init__(self, *args, departments=None, **kwargs):
        super().__init__(*args, **kwargs)
        if departments is not None:
            self.fields["department"].queryset = departments


class RecommendationRejectSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=DECISION_TEXT_MAX,
        help_text=_("Why (required): it is not proposed again unless the evidence changes."),
    )


class RecommendationSnoozeSerializer(serializers.Serializer):
    until = serializers.DateField(
        input_formats=["%Y-%m-%d"], help_text=_("YYYY-MM-DD, after today and at most a year ahead.")
    )
    note = serializers.CharField(max_length=DECISION_TEXT_MAX, required=False, allow_blank=True)

    def validate_until(self, value):
        today = timezone.localdate()
        if value <= today:
            raise serializers.ValidationError(_("The snooze date must be after today."))
        if (value - today).days > 366:
            raise serializers.ValidationError(_("Snooze for at most a year."))
        return value


class RecommendationCommentSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=DECISION_TEXT_MAX)


# --- Tickets --------------------------------------------------------------------------------------

# What people may ask of a ticket (the portal's verification moves are not theirs).
TICKET_PEOPLE_ACTIONS = tuple(
    value
    for value in TicketAction.values
    if value not in ("verify", "measure_gain", "measure_no_gain", "measure_regression")
)
TICKET_CREATE_ORIGINS = (TicketOrigin.MANUAL, TicketOrigin.COMMITTEE)


def _named_choice_field(choices_class, component_name: str):
    """A ChoiceField whose enum has a name of its own in the schema (another ``state`` or
    ``severity`` enum would otherwise get a hashed name)."""

    @extend_schema_field(
        {
            "type": "string",
            "enum": list(choices_class.values),
            "description": "\n".join(f"* `{value}` - {label}" for value, label in choices_class.choices),
        },
        component_name=component_name,
    )
    class NamedChoiceField(serializers.ChoiceField):
        def __init__(self, **kwargs):
            super().__init__(choices=choices_class.choices, **kwargs)

    return NamedChoiceField


TicketStateField = _named_choice_field(TicketState, "TicketStateEnum")
TicketSeverityField = _named_choice_field(TicketSeverity, "TicketSeverityEnum")
TicketOriginField = _named_choice_field(TicketOrigin, "TicketOriginEnum")


class TicketGainSerializer(serializers.Serializer):
    percent = serializers.FloatField(allow_null=True, help_text=_("Share of the family's GPU-hours."))
    gpu_hours_per_week = serializers.FloatField(allow_null=True)


class TicketSerializer(ModelSerializer):
    """A ticket as a list shows it; ``sla`` is ``ok``, ``due_soon`` or ``overdue`` while the work is
    open (measured when it began to wait, if it waits), null once resolved or declined."""

    state = TicketStateField(read_only=True)
    severity = TicketSeverityField(read_only=True)
    origin = TicketOriginField(read_only=True)
    department = SlugRelatedField(slug_field="code", read_only=True)
    assignee = SlugRelatedField(slug_field="username", read_only=True)
    sla = serializers.SerializerMethodField(
        help_text=_("ok, due_soon or overdue; null when the clock stopped.")
    )
    actions = serializers.SerializerMethodField(
        help_text=_("The workflow actions you may take now (POST them to …/transition/).")
    )

    class Meta:
        model = Ticket
        fields = [
            "id",
            "title",
            "state",
            "severity",
            "origin",
            "department",
            "assignee",
            "due_at",
            "sla",
            "recommendation",
            "incident",
            "created_at",
            "updated_at",
            "actions",
        ]
        read_only_fields = fields

    def _now(self):
        return self.context.get("now") or timezone.now()

    @extend_schema_field(
        {"type": "string", "enum": ["ok", "due_soon", "overdue"], "nullable": True},
        component_name="TicketSlaEnum",
    )
    def get_sla(self, ticket: Ticket) -> str | None:
        return sla_status(ticket, self._now())

    @extend_schema_field({"type": "array", "items": {"type": "string", "enum": list(TICKET_PEOPLE_ACTIONS)}})
    def get_actions(self, ticket: Ticket) -> list[str]:
        return ticket_actions(ticket, self.context["request"].user)


class TicketDetailSerializer(TicketSerializer):
    created_by = SlugRelatedField(slug_field="username", read_only=True)
    expected_gain = serializers.SerializerMethodField()
    measured_gain = serializers.SerializerMethodField(
        help_text=_("What verification measured (percent); null until it has.")
    )
    verification = serializers.SerializerMethodField(
        help_text=_("The last verdict of the measurement: metric, before/after values, interval, shortfalls.")
    )
    jobs = serializers.PrimaryKeyRelatedField(many=True, read_only=True, help_text=_("Ids of linked jobs."))
    nodes = serializers.PrimaryKeyRelatedField(many=True, read_only=True, help_text=_("Ids of linked nodes."))
    incidents = serializers.PrimaryKeyRelatedField(
        many=True, read_only=True, help_text=_("Ids of linked incidents.")
    )

    class Meta(TicketSerializer.Meta):
        fields = [
            *TicketSerializer.Meta.fields,
            "description",
            "meeting",
            "created_by",
            "paused_at",
            "resolved_at",
            "verified_at",
            "closed_at",
            "family_user",
            "family_pattern",
            "expected_gain",
            "measured_gain",
            "verification",
            "jobs",
            "nodes",
            "incidents",
        ]
        read_only_fields = fields

    @extend_schema_field(TicketGainSerializer)
    def get_expected_gain(self, ticket: Ticket) -> dict:
        return {"percent": ticket.expected_gain_pct, "gpu_hours_per_week": ticket.expected_gain_gpu_h_week}

    @extend_schema_field(TicketGainSerializer)
    def get_measured_gain(self, ticket: Ticket) -> dict:
        return {"percent": ticket.measured_gain_pct, "gpu_hours_per_week": None}

    @extend_schema_field({"type": "object", "additionalProperties": True})
    def get_verification(self, ticket: Ticket) -> dict:
        return ticket.verification if isinstance(ticket.verification, dict) else {}


class TicketCreateSerializer(serializers.Serializer):
    """Open a ticket by hand (``title``, ``department`` …), or from an accepted recommendation
    (``{"recommendation": id}``) or an incident (``{"incident": id}``, the other fields optional)."""

    recommendation = serializers.IntegerField(
        required=False, min_value=1, help_text=_("Id of an accepted recommendation: its ticket.")
    )
    incident = serializers.IntegerField(
        required=False, min_value=1, help_text=_("Id of an incident to follow up.")
    )
    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    description = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    department = SlugRelatedField(
        slug_field="code", queryset=Department.objects.none(), required=False, help_text=_("Department code.")
    )
    severity = TicketSeverityField(required=False)
    assignee = SlugRelatedField(
        slug_field="username",
        queryset=get_user_model().objects.none(),
        required=False,
        allow_null=True,
        help_text=_("Username of a head of the department or of a platform admin."),
    )
    due_at = DateTimeField(
        required=False, allow_null=True, help_text=_("By default from the severity's SLA.")
    )
    origin = serializers.ChoiceField(choices=TICKET_CREATE_ORIGINS, required=False)
    meeting = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)

    def __init__(self, *args, departments=None, users=None, **kwargs):
        super().__init__(*args, **kwargs)
        if departments is not None:
            self.fields["department"].queryset = departments
        if users is not None:
            self.fields["assignee"].queryset = users

    def validate(self, attrs):
        sources = [name for name in ("recommendation", "incident") if name in attrs]
        if len(sources) > 1:
            raise serializers.ValidationError(
                {"incident": [_("Name a recommendation or an incident, not both.")]}
            )
        if "recommendation" in attrs:
            extra = sorted(set(attrs) - {"recommendation", "department"})
            if extra:
                raise serializers.ValidationError(
                    {extra[0]: [_("A recommendation's ticket takes this from the recommendation.")]}
                )
        if "incident" in attrs and "origin" in attrs:
            raise serializers.ValidationError(
                {"origin": [_("A ticket opened from an incident is of its origin.")]}
            )
        return attrs


class TicketUpdateSerializer(serializers.Serializer):
    """The fields a PATCH may change; a department head may only change ``assignee``."""

    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    description = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    severity = TicketSeverityField(required=False)
    assignee = SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.none(), required=False, allow_null=True
    )
    due_at = DateTimeField(required=False)
    meeting = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)

    def __init__(self, *args, users=None, **kwargs):
        super().__init__(*args, **kwargs)
        if users is not None:
            self.fields["assignee"].queryset = users

    def validate(self, attrs):
        if isinstance(self.initial_data, dict):
            unknown = sorted(set(self.initial_data) - set(TICKET_EDITABLE))
            if unknown:
                raise serializers.ValidationError(
                    {
                        name: [
                            _("This field cannot be changed here; editable are: %(fields)s.")
                            % {"fields": ", ".join(TICKET_EDITABLE)}
                        ]
                        for name in unknown
                    }
                )
        if not attrs:
            raise serializers.ValidationError(
                {
                    api_settings.NON_FIELD_ERRORS_KEY: [
                        _("Nothing to change; editable are: %(fields)s.")
                        % {"fields": ", ".join(TICKET_EDITABLE)}
                    ]
                }
            )
        return attrs


class KnownChoiceField(serializers.ChoiceField):
    """A choice field whose refusal lists the valid values (``what`` names the kind of value)."""

    def __init__(self, *, what: str, **kwargs):
        self.what = what
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str) and data in self.choice_strings_to_values:
            return self.choice_strings_to_values[data]
        raise serializers.ValidationError(
            _("Unknown %(what)s %(value)s; choose one of: %(known)s.")
            % {"what": self.what, "value": repr(data)[:50], "known": ", ".join(self.choice_strings_to_values)}
        )


class TicketTransitionSerializer(serializers.Serializer):
    action = KnownChoiceField(
        what=_("action"),
        choices=TICKET_PEOPLE_ACTIONS,
        help_text=_("One of the actions the ticket's ``actions`` lists."),
    )
    reason = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text=_("Why (required to reopen or decline): kept in the ticket's history."),
    )


class TicketCommentCreateSerializer(serializers.Serializer):
    text = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text=_("At most %(limit)d characters.") % {"limit": TICKET_MAX_COMMENT},
    )
    internal = serializers.BooleanField(
        default=False, help_text=_("An internal note: the committee and platform admins only.")
    )


class TicketCommentSerializer(ModelSerializer):
    by = SlugRelatedField(source="author", slug_field="username", read_only=True)

    class Meta:
        model = TicketComment
        fields = ["id", "at", "by", "text", "internal"]
        read_only_fields = fields


class TicketChangeSerializer(serializers.Serializer):
    field = serializers.CharField()
    # "from" is a keyword: the fields are named in to_representation.
    old = serializers.JSONField(allow_null=True)
    new = serializers.JSONField(allow_null=True)

    def to_representation(self, change):
        name, old, new = change
        return {"field": name, "from": _json_value(old), "to": _json_value(new)}


def _json_value(value):
    if isinstance(value, datetime):
        return DateTimeField().to_representation(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json_value(item) for key, item in value.items()}
    return str(value)


@extend_schema_field(
    {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"field": {"type": "string"}, "from": {}, "to": {}},
            "required": ["field", "from", "to"],
        },
    }
)
class TicketChangesField(serializers.ListField):
    child = TicketChangeSerializer()


class TicketHistorySerializer(serializers.Serializer):
    at = DateTimeField()
    by = serializers.CharField(allow_null=True, help_text=_("Who; null for the portal itself."))
    kind = serializers.ChoiceField(choices=["created", "changed", "deleted"])
    state = TicketStateField()
    reason = serializers.CharField(allow_blank=True, help_text=_("The reason given for a transition."))
    changes = TicketChangesField(help_text=_("Each changed field: from → to."))
