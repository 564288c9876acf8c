import json

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import Http404
from django.shortcuts import redirect
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from rest_framework.authtoken.models import TokenProxy
from simple_history.admin import SimpleHistoryAdmin as _SimpleHistoryAdmin

from efficiency.actuators import actuator_config_validate
from efficiency.choices import DeliveryState, NotificationEvent, Role
from efficiency.config_secrets import MASK, literal_secret_keys, secrets_keep, secrets_mask
from efficiency.models import (
    Action,
    ActuatorConfig,
    ApiToken,
    AuditEntry,
    Cluster,
    DataSource,
    Decision,
    Delivery,
    Department,
    DepartmentMapping,
    FaultPolicy,
    Gpu,
    Incident,
    Job,
    JobLogFacts,
    LogFactsCursor,
    Node,
    NodeStateChange,
    Notification,
    NotificationChannel,
    NotificationSubscription,
    Quota,
    QuotaCycle,
    RateCard,
    Recommendation,
    RecommendationDecision,
    ReviewMeeting,
    ReviewPack,
    SourceRun,
    Ticket,
    TicketComment,
    WorkerHeartbeat,
)
from efficiency.services.discovery import nodes_confirm
from efficiency.services.notifications import delivery_retry
from efficiency.services.notifications.channels import channel_config_problems
from efficiency.services.sources import SourceConfigError, SourceOutsideRoots, source_config_validate
from efficiency.services.tokens import TokenError, api_token_build


class SimpleHistoryAdmin(_SimpleHistoryAdmin):
    """django-simple-history's admin, where a history URL that names no version is a 404.

    Its ``<id>/history/<version>/`` takes any text as the version: the user form's relative
    "change password" link, followed from a historical version's page, led to
    ``…/history/password/`` and a 500.
    """

    def history_form_view(self, request, object_id, version_id, extra_context=None):
        if version_id == "password" and hasattr(self, "user_change_password"):
            # The user form's relative "this form" password link, followed from a past version:
            # it means the user's own password page.
            opts = self.opts
            return redirect(f"admin:{opts.app_label}_{opts.model_name}_password_change", object_id)
        if not str(version_id).isdigit():
            raise Http404
        return super().history_form_view(request, object_id, version_id, extra_context)


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "node_count", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_node_count=Count("nodes"))

    @admin.display(description=_("nodes"), ordering="_node_count")
    def node_count(self, obj: Cluster) -> int:
        return obj._node_count


class DepartmentMappingInline(admin.TabularInline):
    model = DepartmentMapping
    extra = 0


@admin.register(Department)
class DepartmentAdmin(SimpleHistoryAdmin):
    list_display = ["code", "name", "head_names", "is_active"]
    list_filter = ["is_active"]
    search_fields = ["code", "name", "heads__username"]
    filter_horizontal = ["heads"]
    inlines = [DepartmentMappingInline]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("heads")

    @admin.display(description=_("heads"))
    def head_names(self, obj: Department) -> str:
        return ", ".join(user.username for user in obj.heads.all())


@admin.register(DepartmentMapping)
class DepartmentMappingAdmin(admin.ModelAdmin):
    list_display = ["kind", "value", "department", "cluster"]
    list_filter = ["kind", "cluster", "department"]
    search_fields = ["value", "department__code", "department__name"]
    list_select_related = ["department", "cluster"]


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0


@admin.register(Node)
class NodeAdmin(SimpleHistoryAdmin):
    list_display = [
        "hostname",
        "cluster",
        "gpu_model",
        "gpu_count",
        "rdma_capable",
        "fault_domain",
        "state",
        "owner_department",
        "last_seen_at",
    ]
    list_filter = ["state", "cluster", "gpu_model", "rdma_capable", "fault_domain", "owner_department"]
    search_fields = ["hostname", "fault_domain"]
    list_select_related = ["cluster", "owner_department"]
    # What the sources report: shown, never typed (the next collection would overwrite it).
    readonly_fields = [
        "last_seen_at",
        "discovered_by",
        "listed_by",
        "missing_since",
        "reported_state",
        "reported_reason",
        "source_labels",
    ]
    inlines = [GpuInline]
    actions = ["confirm_discovered"]

    def save_model(self, request, obj, form, change):
        # The reason goes with the state: a new state without a new reason clears the old one.
        if change and "state" in form.changed_data and "state_reason" not in form.changed_data:
            obj.state_reason = ""
        super().save_model(request, obj, form, change)

    @admin.action(description=_("Confirm discovered nodes"))
    def confirm_discovered(self, request, queryset):
        confirmed = nodes_confirm(nodes=queryset, actor=request.user)
        self.message_user(
            request,
            gettext("Confirmed: %(count)d node(s), now counted in capacity and quotas.")
            % {"count": confirmed},
            messages.SUCCESS if confirmed else messages.WARNING,
        )


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = ["__str__", "uuid", "model", "memory_mib"]
    list_filter = ["model"]
    search_fields = ["uuid", "node__hostname"]
    list_select_related = ["node"]
    raw_id_fields = ["node"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "external_id",
        "name",
        "department",
        "user_name",
        "state",
        "gpu_count",
        "submitted_at",
        "started_at",
        "ended_at",
    ]
    list_filter = ["cluster", "source", "state", "framework", "department"]
    search_fields = ["external_id", "name", "user_name", "account"]
    list_select_related = ["department", "cluster"]
    raw_id_fields = ["nodes"]
    date_hierarchy = "submitted_at"


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "last_seen_at"]


CONFIG_HELP = _(
    "JSON. Secrets (a Prometheus auth_header, a webhook secret or headers) are shown as "
    '"%(mask)s": leave that to keep the stored value, or replace it. Better, keep '
    'them out of the database: write {"env": "NAME"} and set NAME in the workers\' environment.'
)


class SecretConfigForm(forms.ModelForm):
    """A model form whose ``config`` never shows a secret: ``MASK`` stands for each stored one,
    and a form sent back with ``MASK`` keeps it. ``config_kind`` says which keys are secrets;
    ``config_validate`` checks the configuration with the code that runs it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields.get("config")
        if field is None:
            return
        field.help_text = CONFIG_HELP % {"mask": MASK}
        if self.instance.pk is not None:
            self.initial["config"] = secrets_mask(
                self.config_kind(self.instance.config), self.instance.config
            )

    def config_kind(self, config) -> str:
        raise NotImplementedError

    def config_validate(self, config) -> None:
        raise NotImplementedError

    def clean_config(self):
        config = self.cleaned_data["config"]
        if self.instance.pk is not None:
            config = secrets_keep(self.config_kind(config), config, self.instance.config)
        self.config_validate(config)
        return config


class DataSourceForm(SecretConfigForm):
    class Meta:
        model = DataSource
        fields = "__all__"  # noqa: DJ007 -- the admin lists its fields and read-only ones itself

    def config_kind(self, config) -> str:
        return getattr(self, "cleaned_data", {}).get("kind") or self.instance.kind

    def config_validate(self, config) -> None:
        try:
            source_config_validate(kind=self.config_kind(config), config=config)
        except SourceOutsideRoots as error:
            raise ValidationError(
                _(
                    "%(path)s is outside the directories file sources may read "
                    "(PORTAL_SOURCE_ROOTS: %(roots)s)."
                ),
                params={"path": error.path, "roots": error.roots},
            ) from None
        except SourceConfigError as error:
            raise ValidationError(
                _("This configuration cannot be used: %(reason)s."), params={"reason": error}
            ) from None


def _literal_secrets_warn(request, kind: str, config) -> None:
    keys = literal_secret_keys(kind, config)
    if keys:
        messages.warning(
            request,
            _(
                "The secret in %(keys)s is written into the configuration, so it is stored in the "
                'database and its history. Set it in the workers\' environment and write {"env": '
                '"NAME"} instead.'
            )
            % {"keys": ", ".join(keys)},
        )


@admin.register(DataSource)
class DataSourceAdmin(SimpleHistoryAdmin):
    form = DataSourceForm
    list_display = [
        "name",
        "cluster",
        "kind",
        "enabled",
        "interval_s",
        "watermark",
        "last_success_at",
        "consecutive_failures",
    ]
    list_filter = ["cluster", "kind", "enabled"]
    search_fields = ["name"]
    readonly_fields = [
        "running_since",
        "last_attempt_at",
        "last_success_at",
        "last_error",
        "last_error_at",
        "consecutive_failures",
    ]
    actions = ["reset_watermark"]

    @admin.action(description=_("Forget the watermark (re-collect the initial window)"))
    def reset_watermark(self, request, queryset):
        queryset.update(watermark=None, state={})

    def get_fields(self, request, obj=None):
        fields = list(super().get_fields(request, obj))
        if obj is not None and not self.has_change_permission(request, obj):
            # Shown read-only: the masked configuration, not the field's own value.
            fields = ["shown_config" if name == "config" else name for name in fields]
        return fields

    def get_readonly_fields(self, request, obj=None):
        return [*super().get_readonly_fields(request, obj), "shown_config"]

    @admin.display(description=_("configuration"))
    def shown_config(self, obj: DataSource) -> str:
        return json.dumps(secrets_mask(obj.kind, obj.config), ensure_ascii=False, sort_keys=True)

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        _literal_secrets_warn(request, obj.kind, obj.config)

    def set_history_delta_changes(self, request, historical_records, foreign_keys_are_objs=True):
        # The history lists each change's old and new value: secrets masked before the diff.
        for record in historical_records:
            record.config = secrets_mask(record.kind, record.config)
        super().set_history_delta_changes(request, historical_records, foreign_keys_are_objs)


@admin.register(SourceRun)
class SourceRunAdmin(admin.ModelAdmin):
    list_display = ["source", "started_at", "status", "received", "stored", "duplicates", "rejected"]
    list_filter = ["status", "source"]
    date_hierarchy = "started_at"
    list_select_related = ["source__cluster"]


@admin.register(FaultPolicy)
class FaultPolicyAdmin(admin.ModelAdmin):
    list_display = ["category", "isolate_node", "restart_job", "notify"]
    list_editable = ["isolate_node", "restart_job", "notify"]


class ActuatorConfigForm(SecretConfigForm):
    class Meta:
        model = ActuatorConfig
        fields = "__all__"  # noqa: DJ007 -- every field of an actuator is the admin's to edit

    def config_kind(self, config) -> str:
        kind = config.get("type") if isinstance(config, dict) else None
        return kind if isinstance(kind, str) else ""

    def config_validate(self, config) -> None:
        try:
            actuator_config_validate(config)
        except ValueError as error:
            raise ValidationError(
                _("This configuration cannot be used: %(reason)s"), params={"reason": error}
            ) from None


@admin.register(ActuatorConfig)
class ActuatorConfigAdmin(admin.ModelAdmin):
    form = ActuatorConfigForm
    list_display = ["name", "action", "dry_run", "enabled"]
    list_filter = ["action", "dry_run", "enabled"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        _literal_secrets_warn(request, form.config_kind(obj.config), obj.config)


admin.site.site_header = _("GPU Efficiency Portal administration")
admin.site.site_title = _("GPU Efficiency Portal")
admin.site.index_title = _("Inventory, data sources, fault handling and users")

User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class PortalUserAdmin(SimpleHistoryAdmin, UserAdmin):
    """Users and their roles (the role is the group). Only a superuser grants superuser status
    or single permissions: a platform admin runs the portal but cannot raise their own rights."""

    list_display = ["username", "email", "role_names", "is_active", "is_staff", "last_login"]
    list_filter = ["is_active", "is_staff", "is_superuser", "groups"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("groups")

    @admin.display(description=_("roles"))
    def role_names(self, obj) -> str:
        labels = dict(Role.choices)
        return ", ".join(str(labels.get(group.name, group.name)) for group in obj.groups.all())

    def get_readonly_fields(self, request, obj=None):
        readonly = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            readonly += ["is_superuser", "user_permissions"]
        return readonly


# --- API tokens and the audit trail ---------------------------------------------------------

# Plain-text DRF tokens are not used (efficiency.auth.ApiTokenAuthentication reads ApiToken).
admin.site.unregister(TokenProxy)


class ApiTokenAddForm(forms.ModelForm):
    days = forms.IntegerField(
        label=_("valid for (days)"), min_value=1, initial=lambda: settings.PORTAL_API_TOKEN_DAYS
    )

    class Meta:
        model = ApiToken
        fields = ["user", "name", "source"]

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            self.issued = api_token_build(
                user=cleaned["user"], name=cleaned["name"], days=cleaned["days"], source=cleaned.get("source")
            )
        except TokenError as error:
            raise forms.ValidationError(str(error)) from error
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Issue a token (its key is shown once, here), shorten its life, or delete it to revoke."""

    list_display = ["prefix", "name", "user", "source", "created_at", "expires_at", "last_used_at"]
    list_filter = ["source"]
    search_fields = ["name", "prefix", "user__username"]
    list_select_related = ["user", "source__cluster"]
    raw_id_fields = ["user"]
    readonly_fields = ["user", "prefix", "source", "created_at", "last_used_at"]
    fields = ["user", "name", "prefix", "source", "created_at", "expires_at", "last_used_at"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user" and not request.user.is_superuser:
            # A token acts as its user: only a superuser issues one for a superuser.
            kwargs["queryset"] = User.objects.filter(is_superuser=False)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        return ["user", "name", "source", "days"] if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else self.readonly_fields

    def save_model(self, request, obj, form, change):
        if not change:
            issued = form.issued
            obj.prefix, obj.digest, obj.expires_at = (
                issued.token.prefix,
                issued.token.digest,
                issued.token.expires_at,
            )
            messages.warning(
                request,
                _("The new token is %(key)s — copy it now: it is shown only this once and not stored.")
                % {"key": issued.key},
            )
        super().save_model(request, obj, form, change)


class ReadOnlyAdminMixin:
    """Rows the portal's own pages and services change: in the admin only to read."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class AuditedReadOnlyAdmin(ReadOnlyAdminMixin, SimpleHistoryAdmin):
    """Rows the portal's own pages change: here only to read, with their history."""


@admin.register(Incident)
class IncidentAdmin(AuditedReadOnlyAdmin):
    list_display = ["pk", "root_signature_id", "category", "status", "node", "department", "occurred_at"]
    list_filter = ["status", "category", "severity"]
    search_fields = ["root_signature_id", "node__hostname", "job__external_id"]
    list_select_related = ["node", "department"]


@admin.register(QuotaCycle)
class QuotaCycleAdmin(AuditedReadOnlyAdmin):
    list_display = ["pk", "cluster", "start", "end", "status", "approved_by", "approved_at"]
    list_filter = ["cluster", "status"]
    list_select_related = ["cluster", "approved_by"]


@admin.register(Quota)
class QuotaAdmin(AuditedReadOnlyAdmin):
    list_display = ["cycle", "department", "gpu_model", "guaranteed_gpus", "borrowing_limit_gpus"]
    list_filter = ["cycle__cluster", "department"]
    list_select_related = ["cycle__cluster", "department"]
    exclude = ["demand_gpus", "explanation"]


@admin.register(NodeStateChange)
class NodeStateChangeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Node states moved by the fault service (isolate, return to service), with the incident."""

    list_display = ["node", "at", "previous_state", "state", "incident", "actor"]
    list_filter = ["state"]
    search_fields = ["node__hostname"]
    list_select_related = ["node", "incident", "actor"]


# --- Recommendations: decided on the portal's pages, read here ------------------------------------


class RecommendationDecisionInline(admin.TabularInline):
    """The decisions, as recorded: read only (an inline's permission checks take the parent too)."""

    model = RecommendationDecision
    fields = ["at", "action", "user", "text", "snoozed_until", "assignee_department"]
    readonly_fields = fields
    extra = 0

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Recommendation)
class RecommendationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The review itself happens on the portal's queue (accept, reject, snooze, with reasons)."""

    list_display = [
        "pk",
        "rule",
        "subject_key",
        "department",
        "state",
        "gain_gpu_h_week",
        "confidence",
        "last_seen",
    ]
    list_filter = ["state", "rule", "confidence", "department"]
    search_fields = ["rule", "subject_key", "user_name"]
    list_select_related = ["department"]
    exclude = ["jobs"]
    inlines = [RecommendationDecisionInline]


@admin.register(JobLogFacts)
class JobLogFactsAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """What each job's logs said about its set-up (NCCL transports, settings), read once per chunk."""

    list_display = ["job", "last_chunk_id", "updated_at"]
    search_fields = ["job__external_id"]
    list_select_related = ["job"]


@admin.register(LogFactsCursor)
class LogFactsCursorAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """How far the log facts worker has read each source's log chunks."""

    list_display = ["source", "last_chunk_id"]
    list_select_related = ["source"]


# --- Tickets: worked on the portal's pages, read here with their history ---------------------------


class TicketCommentInline(admin.TabularInline):
    """The comments and internal notes, as written: read only."""

    model = TicketComment
    fields = ["at", "author", "internal", "text"]
    readonly_fields = fields
    extra = 0

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Ticket)
class TicketAdmin(AuditedReadOnlyAdmin):
    """Tickets move along their workflow on the portal's pages (with the SLA clock and reasons);
    here only to read, with every saved change in the history."""

    list_display = ["pk", "title", "department", "state", "severity", "assignee", "due_at", "origin"]
    list_filter = ["state", "severity", "origin", "department"]
    search_fields = ["title", "assignee__username", "family_pattern"]
    list_select_related = ["department", "assignee"]
    date_hierarchy = "created_at"
    exclude = ["jobs", "nodes", "incidents", "sla_notified"]
    inlines = [TicketCommentInline]


@admin.register(TicketComment)
class TicketCommentAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["ticket", "at", "author", "internal"]
    list_filter = ["internal"]
    search_fields = ["text", "ticket__title"]
    list_select_related = ["ticket", "author"]


# --- Notifications: channels configured here, deliveries read (and retried) here ------------------


class NotificationChannelForm(SecretConfigForm):
    class Meta:
        model = NotificationChannel
        fields = "__all__"  # noqa: DJ007 -- every field of a channel is the admin's to edit

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["events"] = forms.MultipleChoiceField(
            label=_("events"),
            choices=NotificationEvent.choices,
            widget=forms.CheckboxSelectMultiple,
            required=False,
            initial=self.instance.events,
        )
        self.fields["config"].help_text = _(
            'Webhooks: {"url": "<the robot\'s webhook address>", "secret": "<signing secret, DingTalk '
            'and Feishu>"}; email: {"to": ["list@example.com"]}. The URL and the secret are secrets: '
            'shown as "%(mask)s"; better, write {"env": "NAME"} and set NAME in the workers\' environment.'
        ) % {"mask": MASK}

    def config_kind(self, config) -> str:
        return getattr(self, "cleaned_data", {}).get("kind") or self.instance.kind

    def config_validate(self, config) -> None:
        problems = channel_config_problems(self.config_kind(config), config)
        if problems:
            raise ValidationError(" ".join(str(problem) for problem in problems))


@admin.register(NotificationChannel)
class NotificationChannelAdmin(admin.ModelAdmin):
    """Department chat groups and mailing lists; a channel without a department hears every one."""

    form = NotificationChannelForm
    list_display = ["name", "kind", "department", "is_active"]
    list_filter = ["kind", "is_active", "department"]
    list_select_related = ["department"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        _literal_secrets_warn(request, obj.kind, obj.config)


@admin.register(NotificationSubscription)
class NotificationSubscriptionAdmin(admin.ModelAdmin):
    list_display = ["user", "email", "updated_at"]
    search_fields = ["user__username", "user__email"]
    list_select_related = ["user"]


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "event", "department", "ticket", "recommendation", "incident", "routed_at"]
    list_filter = ["event"]
    list_select_related = ["department", "ticket", "recommendation", "incident"]
    date_hierarchy = "created_at"


@admin.action(description=_("Try the selected deliveries again now"), permissions=["change"])
def delivery_retry_action(modeladmin, request, queryset):
    for delivery in queryset.exclude(state__in=[DeliveryState.SENT, DeliveryState.SENDING]):
        delivery_retry(delivery)
    messages.success(request, _("The deliveries will be tried again within a minute."))


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    """Every message sent or to send; a failed one shows its error and may be tried again."""

    list_display = [
        "created_at",
        "target",
        "state",
        "attempts",
        "notification_count",
        "digest",
        "last_error",
        "sent_at",
    ]
    list_filter = ["state", "digest"]
    list_select_related = ["channel", "user"]
    search_fields = ["channel__name", "user__username", "last_error"]
    readonly_fields = [field.name for field in Delivery._meta.fields] + ["notifications"]
    actions = [delivery_retry_action]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_notification_count=Count("notifications"))

    @admin.display(description=_("to"))
    def target(self, obj):
        return str(obj.channel) if obj.channel_id else (obj.user.email or str(obj.user))

    @admin.display(description=_("notifications"), ordering="_notification_count")
    def notification_count(self, obj):
        return obj._notification_count

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# The committee's records: written by its pages (sealed, never edited), read here.


@admin.register(ReviewPack)
class ReviewPackAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["pk", "cluster", "period_start", "period_end", "version", "content_hash", "generated_at"]
    list_filter = ["cluster"]
    list_select_related = ["cluster"]
    exclude = ["content_json"]


@admin.register(ReviewMeeting)
class ReviewMeetingAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["pk", "title", "cluster", "scheduled_for", "status", "minutes_approved_at"]
    list_filter = ["cluster", "status"]
    list_select_related = ["cluster"]


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["pk", "meeting", "number", "kind", "title", "decided_at", "supersedes"]
    list_filter = ["kind"]
    list_select_related = ["meeting", "supersedes"]
    search_fields = ["title", "outcome"]


@admin.register(Action)
class ActionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["pk", "title", "owner", "due_on", "status", "carried", "meeting"]
    list_filter = ["status"]
    list_select_related = ["owner", "meeting"]
    search_fields = ["title"]


@admin.register(RateCard)
class RateCardAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["version", "effective_from", "currency", "default_rate", "created_at"]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["seq", "at", "actor_name", "verb", "object_type", "object_id", "entry_hash"]
    list_filter = ["object_type", "verb"]
    search_fields = ["actor_name", "entry_hash"]
