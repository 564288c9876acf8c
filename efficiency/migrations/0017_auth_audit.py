"""API tokens (hashed, expiring, push tokens per source), the audit trail's historical tables,
and the platform_admin group's permissions on them and on django-axes' lockouts.

Plain-text DRF tokens are moved over: each becomes an ``ApiToken`` with the digest of its key,
valid PORTAL_API_TOKEN_DAYS from now, so existing clients keep working with the key they have,
and the plain-text row is deleted.
"""

import django.contrib.auth.validators
import django.db.models.deletion
import django.utils.timezone
import simple_history.models
from django.conf import settings
from django.db import migrations, models

from efficiency.permissions import role_permissions_grant_migration


def tokens_hash(apps, schema_editor):
    import hashlib
    from datetime import timedelta

    from django.utils import timezone

    legacy = apps.get_model("authtoken", "Token")
    api_token = apps.get_model("efficiency", "ApiToken")
    expires_at = timezone.now() + timedelta(days=settings.PORTAL_API_TOKEN_DAYS)
    for token in legacy.objects.all():
        api_token.objects.create(
            user_id=token.user_id,
            name="DRF token (moved)",
            prefix=token.key[:8],
            digest=hashlib.sha256(token.key.encode()).hexdigest(),
            expires_at=expires_at,
        )
    legacy.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("authtoken", "0004_alter_tokenproxy_options"),
        ("axes", "0010_accessattemptexpiration"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("efficiency", "0016_ingest"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        help_text="What or who uses this token.", max_length=100, verbose_name="name"
                    ),
                ),
                ("prefix", models.CharField(editable=False, max_length=8, verbose_name="starts with")),
                (
                    "digest",
                    models.CharField(
                        editable=False, max_length=64, unique=True, verbose_name="SHA-256 digest"
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True, verbose_name="created at")),
                ("expires_at", models.DateTimeField(verbose_name="expires at")),
                (
                    "last_used_at",
                    models.DateTimeField(blank=True, editable=False, null=True, verbose_name="last used"),
                ),
                (
                    "source",
                    models.ForeignKey(
                        blank=True,
                        help_text="A push token may only push log lines to this source and reads nothing.",
                        limit_choices_to={"kind": "log_push"},
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="push_tokens",
                        to="efficiency.datasource",
                        verbose_name="push source",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_tokens",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="user",
                    ),
                ),
            ],
            options={
                "verbose_name": "API token",
                "verbose_name_plural": "API tokens",
                "ordering": ["-created_at"],
            },
        ),
        migrations.CreateModel(
            name="HistoricalDataSource",
            fields=[
                (
                    "id",
                    models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name="ID"),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("prometheus", "Prometheus HTTP API"),
                            ("dcgm_scrape", "dcgm-exporter scrape"),
                            ("slurm", "Slurm sacct"),
                            ("kubernetes", "Kubernetes jobs"),
                            ("log_files", "Job log files"),
                            ("log_push", "Log push (NDJSON)"),
                            ("csv_import", "CSV import"),
                        ],
                        max_length=20,
                        verbose_name="kind",
                    ),
                ),
                ("name", models.CharField(max_length=100, verbose_name="name")),
                ("config", models.JSONField(blank=True, default=dict, verbose_name="configuration")),
                ("enabled", models.BooleanField(default=True, verbose_name="enabled")),
                (
                    "interval_s",
                    models.PositiveIntegerField(
                        default=60,
                        help_text="How often to collect, and the sample step.",
                        verbose_name="interval (s)",
                    ),
                ),
                ("created_at", models.DateTimeField(blank=True, editable=False, verbose_name="created at")),
                ("history_id", models.AutoField(primary_key=True, serialize=False)),
                ("history_date", models.DateTimeField(db_index=True)),
                ("history_change_reason", models.CharField(max_length=100, null=True)),
                (
                    "history_type",
                    models.CharField(
                        choices=[("+", "Created"), ("~", "Changed"), ("-", "Deleted")], max_length=1
                    ),
                ),
                (
                    "cluster",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.cluster",
                        verbose_name="cluster",
                    ),
                ),
                (
                    "history_user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "historical data source",
                "verbose_name_plural": "historical data sources",
                "ordering": ("-history_date", "-history_id"),
                "get_latest_by": ("history_date", "history_id"),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name="HistoricalDepartment",
            fields=[
                (
                    "id",
                    models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name="ID"),
                ),
                ("code", models.SlugField(verbose_name="code")),
                ("name", models.CharField(max_length=200, verbose_name="name")),
                ("is_active", models.BooleanField(default=True, verbose_name="active")),
                ("created_at", models.DateTimeField(blank=True, editable=False, verbose_name="created at")),
                ("history_id", models.AutoField(primary_key=True, serialize=False)),
                ("history_date", models.DateTimeField(db_index=True)),
                ("history_change_reason", models.CharField(max_length=100, null=True)),
                (
                    "history_type",
                    models.CharField(
                        choices=[("+", "Created"), ("~", "Changed"), ("-", "Deleted")], max_length=1
                    ),
                ),
                (
                    "history_user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "historical department",
                "verbose_name_plural": "historical departments",
                "ordering": ("-history_date", "-history_id"),
                "get_latest_by": ("history_date", "history_id"),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name="HistoricalDepartment_heads",
            fields=[
                (
                    "id",
                    models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name="ID"),
                ),
                ("m2m_history_id", models.AutoField(primary_key=True, serialize=False)),
                (
                    "department",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_tablespace="",
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.department",
                    ),
                ),
                (
                    "history",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        to="efficiency.historicaldepartment",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_tablespace="",
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "HistoricalDepartment_heads",
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name="HistoricalIncident",
            fields=[
                (
                    "id",
                    models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name="ID"),
                ),
                (
                    "gpu_index",
                    models.PositiveSmallIntegerField(blank=True, null=True, verbose_name="suspected GPU"),
                ),
                ("rank", models.IntegerField(blank=True, null=True, verbose_name="suspected rank")),
                (
                    "category",
                    models.CharField(
                        choices=[
                            ("hardware_gpu", "GPU hardware"),
                            ("hardware_memory_ecc", "GPU memory (ECC)"),
                            ("nvlink", "NVLink"),
                            ("network_rdma", "Network (RDMA)"),
                            ("nccl_timeout_hang", "NCCL timeout / hang"),
                            ("nccl_socket_fallback", "NCCL fell back to sockets"),
                            ("cuda_oom", "CUDA out of memory"),
                            ("cuda_illegal_access", "CUDA illegal memory access"),
                            ("loss_nan_inf", "Loss NaN / Inf"),
                            ("slowdown", "Slowdown / straggler"),
                            ("storage_io", "Storage I/O"),
                            ("software_error", "Software error"),
                        ],
                        max_length=30,
                        verbose_name="root cause",
                    ),
                ),
                (
                    "severity",
                    models.CharField(
                        choices=[("critical", "Critical"), ("error", "Error"), ("warning", "Warning")],
                        max_length=10,
                        verbose_name="severity",
                    ),
                ),
                ("code", models.CharField(blank=True, max_length=40, verbose_name="code")),
                ("title", models.CharField(max_length=300, verbose_name="title")),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("open", "Open"),
                            ("recovering", "Recovering"),
                            ("resolved", "Recovered"),
                            ("closed", "Closed without recovery"),
                        ],
                        default="open",
                        max_length=12,
                        verbose_name="status",
                    ),
                ),
                ("occurred_at", models.DateTimeField(verbose_name="occurred")),
                ("detected_at", models.DateTimeField(verbose_name="detected")),
                ("located_at", models.DateTimeField(blank=True, null=True, verbose_name="located")),
                (
                    "restart_requested_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="restart requested"),
                ),
                ("recovered_at", models.DateTimeField(blank=True, null=True, verbose_name="recovered")),
                (
                    "last_checkpoint_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="last checkpoint"),
                ),
                ("gpu_count", models.PositiveIntegerField(default=0, verbose_name="GPUs")),
                ("gpu_hours_lost", models.FloatField(blank=True, null=True, verbose_name="GPU-hours lost")),
                ("reasoning", models.JSONField(blank=True, default=dict, verbose_name="how it was located")),
                ("closed_at", models.DateTimeField(blank=True, null=True, verbose_name="closed")),
                ("close_reason", models.TextField(blank=True, verbose_name="why it was closed")),
                ("history_id", models.AutoField(primary_key=True, serialize=False)),
                ("history_date", models.DateTimeField(db_index=True)),
                ("history_change_reason", models.CharField(max_length=100, null=True)),
                (
                    "history_type",
                    models.CharField(
                        choices=[("+", "Created"), ("~", "Changed"), ("-", "Deleted")], max_length=1
                    ),
                ),
                (
                    "closed_by",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="closed by",
                    ),
                ),
                (
                    "cluster",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.cluster",
                    ),
                ),
                (
                    "department",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.department",
                    ),
                ),
                (
                    "history_user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "job",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.job",
                    ),
                ),
                (
                    "node",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.node",
                        verbose_name="suspected node",
                    ),
                ),
            ],
            options={
                "verbose_name": "historical incident",
                "verbose_name_plural": "historical incidents",
                "ordering": ("-history_date", "-history_id"),
                "get_latest_by": ("history_date", "history_id"),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name="HistoricalNode",
            fields=[
                (
                    "id",
                    models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name="ID"),
                ),
                ("hostname", models.CharField(max_length=255, verbose_name="hostname")),
                ("gpu_model", models.CharField(max_length=100, verbose_name="GPU model")),
                ("gpu_count", models.PositiveSmallIntegerField(verbose_name="GPU count")),
                ("rdma_capable", models.BooleanField(default=False, verbose_name="RDMA capable")),
                (
                    "fault_domain",
                    models.CharField(
                        blank=True,
                        help_text="Rack or switch, e.g. rack-03.",
                        max_length=100,
                        verbose_name="fault domain",
                    ),
                ),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("active", "Active"),
                            ("isolated", "Isolated"),
                            ("draining", "Draining"),
                            ("retired", "Retired"),
                        ],
                        default="active",
                        max_length=20,
                        verbose_name="state",
                    ),
                ),
                ("state_reason", models.CharField(blank=True, max_length=300, verbose_name="state reason")),
                (
                    "in_service_from",
                    models.DateTimeField(
                        blank=True,
                        help_text="Empty: since before any data.",
                        null=True,
                        verbose_name="in service from",
                    ),
                ),
                (
                    "in_service_until",
                    models.DateTimeField(
                        blank=True,
                        help_text="Set when the node is retired.",
                        null=True,
                        verbose_name="in service until",
                    ),
                ),
                ("created_at", models.DateTimeField(blank=True, editable=False, verbose_name="created at")),
                ("history_id", models.AutoField(primary_key=True, serialize=False)),
                ("history_date", models.DateTimeField(db_index=True)),
                ("history_change_reason", models.CharField(max_length=100, null=True)),
                (
                    "history_type",
                    models.CharField(
                        choices=[("+", "Created"), ("~", "Changed"), ("-", "Deleted")], max_length=1
                    ),
                ),
                (
                    "cluster",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.cluster",
                        verbose_name="cluster",
                    ),
                ),
                (
                    "history_user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "owner_department",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        help_text="Empty: no department owns the node (unowned).",
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.department",
                        verbose_name="owning department",
                    ),
                ),
            ],
            options={
                "verbose_name": "historical node",
                "verbose_name_plural": "historical nodes",
                "ordering": ("-history_date", "-history_id"),
                "get_latest_by": ("history_date", "history_id"),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name="HistoricalQuota",
            fields=[
                (
                    "id",
                    models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name="ID"),
                ),
                ("gpu_model", models.CharField(max_length=100, verbose_name="GPU model")),
                ("guaranteed_gpus", models.PositiveIntegerField(verbose_name="guaranteed GPUs")),
                (
                    "borrowing_limit_gpus",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Most GPUs the department may borrow from the shared pool; empty: no limit.",
                        null=True,
                        verbose_name="borrowing limit (GPUs)",
                    ),
                ),
                (
                    "previous_gpus",
                    models.PositiveIntegerField(blank=True, null=True, verbose_name="previous GPUs"),
                ),
                (
                    "proposed_gpus",
                    models.PositiveIntegerField(blank=True, null=True, verbose_name="proposed GPUs"),
                ),
                ("history_id", models.AutoField(primary_key=True, serialize=False)),
                ("history_date", models.DateTimeField(db_index=True)),
                ("history_change_reason", models.CharField(max_length=100, null=True)),
                (
                    "history_type",
                    models.CharField(
                        choices=[("+", "Created"), ("~", "Changed"), ("-", "Deleted")], max_length=1
                    ),
                ),
                (
                    "cycle",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.quotacycle",
                        verbose_name="cycle",
                    ),
                ),
                (
                    "department",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.department",
                        verbose_name="department",
                    ),
                ),
                (
                    "history_user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "historical quota",
                "verbose_name_plural": "historical quotas",
                "ordering": ("-history_date", "-history_id"),
                "get_latest_by": ("history_date", "history_id"),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name="HistoricalQuotaCycle",
            fields=[
                (
                    "id",
                    models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name="ID"),
                ),
                ("start", models.DateTimeField(verbose_name="start")),
                ("end", models.DateTimeField(verbose_name="end")),
                (
                    "status",
                    models.CharField(
                        choices=[("proposed", "Proposed"), ("approved", "Approved")],
                        max_length=10,
                        verbose_name="status",
                    ),
                ),
                ("capacity", models.JSONField(default=dict, verbose_name="capacity (GPUs per model)")),
                (
                    "proposal_settings",
                    models.JSONField(blank=True, default=dict, verbose_name="proposal settings"),
                ),
                ("demand_start", models.DateTimeField(blank=True, null=True, verbose_name="demand from")),
                ("demand_end", models.DateTimeField(blank=True, null=True, verbose_name="demand until")),
                ("origin", models.CharField(blank=True, max_length=200, verbose_name="origin")),
                ("created_at", models.DateTimeField(verbose_name="created at")),
                ("approved_at", models.DateTimeField(blank=True, null=True, verbose_name="approved at")),
                ("approval_comment", models.TextField(blank=True, verbose_name="approval comment")),
                ("history_id", models.AutoField(primary_key=True, serialize=False)),
                ("history_date", models.DateTimeField(db_index=True)),
                ("history_change_reason", models.CharField(max_length=100, null=True)),
                (
                    "history_type",
                    models.CharField(
                        choices=[("+", "Created"), ("~", "Changed"), ("-", "Deleted")], max_length=1
                    ),
                ),
                (
                    "approved_by",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="approved by",
                    ),
                ),
                (
                    "cluster",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="efficiency.cluster",
                        verbose_name="cluster",
                    ),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "history_user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "historical quota cycle",
                "verbose_name_plural": "historical quota cycles",
                "ordering": ("-history_date", "-history_id"),
                "get_latest_by": ("history_date", "history_id"),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name="HistoricalUser",
            fields=[
                ("id", models.IntegerField(auto_created=True, blank=True, db_index=True, verbose_name="ID")),
                (
                    "is_superuser",
                    models.BooleanField(
                        default=False,
                        help_text="Designates that this user has all permissions without explicitly assigning them.",
                        verbose_name="superuser status",
                    ),
                ),
                (
                    "username",
                    models.CharField(
                        db_index=True,
                        error_messages={"unique": "A user with that username already exists."},
                        help_text="Required. 150 characters or fewer. Letters, digits and @/./+/-/_ only.",
                        max_length=150,
                        validators=[django.contrib.auth.validators.UnicodeUsernameValidator()],
                        verbose_name="username",
                    ),
                ),
                ("first_name", models.CharField(blank=True, max_length=150, verbose_name="first name")),
                ("last_name", models.CharField(blank=True, max_length=150, verbose_name="last name")),
                ("email", models.EmailField(blank=True, max_length=254, verbose_name="email address")),
                (
                    "is_staff",
                    models.BooleanField(
                        default=False,
                        help_text="Designates whether the user can log into this admin site.",
                        verbose_name="staff status",
                    ),
                ),
                (
                    "is_active",
                    models.BooleanField(
                        default=True,
                        help_text="Designates whether this user should be treated as active. Unselect this instead of deleting accounts.",
                        verbose_name="active",
                    ),
                ),
                (
                    "date_joined",
                    models.DateTimeField(default=django.utils.timezone.now, verbose_name="date joined"),
                ),
                ("history_id", models.AutoField(primary_key=True, serialize=False)),
                ("history_date", models.DateTimeField(db_index=True)),
                ("history_change_reason", models.CharField(max_length=100, null=True)),
                (
                    "history_type",
                    models.CharField(
                        choices=[("+", "Created"), ("~", "Changed"), ("-", "Deleted")], max_length=1
                    ),
                ),
                (
                    "history_user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "historical user",
                "verbose_name_plural": "historical users",
                "ordering": ("-history_date", "-history_id"),
                "get_latest_by": ("history_date", "history_id"),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name="HistoricalUser_groups",
            fields=[
                ("id", models.IntegerField(auto_created=True, blank=True, db_index=True, verbose_name="ID")),
                ("m2m_history_id", models.AutoField(primary_key=True, serialize=False)),
                (
                    "group",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_tablespace="",
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="auth.group",
                    ),
                ),
                (
                    "history",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        to="efficiency.historicaluser",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_tablespace="",
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "HistoricalUser_groups",
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.RunPython(role_permissions_grant_migration, migrations.RunPython.noop),
        migrations.RunPython(tokens_hash, migrations.RunPython.noop),
    ]
