from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.utils.translation import gettext_lazy as _

from efficiency.choices import Role
from efficiency.models import (
    ActuatorConfig,
    Cluster,
    DataSource,
    Department,
    DepartmentMapping,
    FaultPolicy,
    Gpu,
    Job,
    Node,
    SourceRun,
    WorkerHeartbeat,
)
from efficiency.services.sources import SourceConfigError, SourceOutsideRoots, source_config_check


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
class DepartmentAdmin(admin.ModelAdmin):
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
class NodeAdmin(admin.ModelAdmin):
    list_display = [
        "hostname",
        "cluster",
        "gpu_model",
        "gpu_count",
        "rdma_capable",
        "fault_domain",
        "state",
        "owner_department",
    ]
    list_filter = ["cluster", "state", "gpu_model", "rdma_capable", "fault_domain", "owner_department"]
    search_fields = ["hostname", "fault_domain"]
    list_select_related = ["cluster", "owner_department"]
    inlines = [GpuInline]


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


class DataSourceForm(forms.ModelForm):
    class Meta:
        model = DataSource
        fields = "__all__"  # noqa: DJ007 -- the admin lists its fields and read-only ones itself

    def clean_config(self):
        config = self.cleaned_data["config"]
        try:
            source_config_check(config)
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
        return config


@admin.register(DataSource)
class DataSourceAdmin(admin.ModelAdmin):
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


@admin.register(ActuatorConfig)
class ActuatorConfigAdmin(admin.ModelAdmin):
    list_display = ["name", "action", "dry_run", "enabled"]
    list_filter = ["action", "dry_run", "enabled"]


admin.site.site_header = _("GPU Efficiency Portal administration")
admin.site.site_title = _("GPU Efficiency Portal")
admin.site.index_title = _("Inventory, data sources, fault handling and users")

User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class PortalUserAdmin(UserAdmin):
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
