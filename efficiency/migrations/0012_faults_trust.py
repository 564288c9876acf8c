"""Faults: closing is not recovering, a node history, messages as facts, phases in order.

Before the constraints are added, rows written by earlier versions are brought in line:
incidents closed by hand (logged as a "Notify" by the operator, with the close time as their
recovery) become closed, not recovered; incidents marked resolved without ever recovering become
closed; phases stamped out of order are moved up to the phase before them; a signal stamped as
detected before it occurred is taken to have occurred when it was detected; a node that a dry
run marked isolated (every isolation logged on its incident was a dry run) is back in service.
"""

import re

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import F

PHASES = ("occurred_at", "detected_at", "located_at", "restart_requested_at", "recovered_at")


def bring_rows_in_line(apps, schema_editor):
    Incident = apps.get_model("efficiency", "Incident")
    IncidentAction = apps.get_model("efficiency", "IncidentAction")
    FaultSignal = apps.get_model("efficiency", "FaultSignal")
    hand_closes = IncidentAction.objects.filter(kind="notify", actuator="operator", summary="closed by hand")
    for action in hand_closes.select_related("incident"):
        incident = action.incident
        if incident.recovered_at is None or incident.recovered_at == action.requested_at:
            # The close stamped its own time as the recovery: undo that.
            incident.status = "closed"
            incident.recovered_at = None
            incident.gpu_hours_lost = None
            incident.closed_at = action.requested_at
            incident.closed_by_id = action.actor_id
            incident.save(
                update_fields=["status", "recovered_at", "gpu_hours_lost", "closed_at", "closed_by"]
            )
        action.kind = "close"
        action.save(update_fields=["kind"])
    Incident.objects.filter(status="resolved", recovered_at__isnull=True).update(
        status="closed", closed_at=F("updated_at")
    )
    for incident in Incident.objects.iterator():
        latest, changed = None, []
        for phase in PHASES:
            moment = getattr(incident, phase)
            if moment is None:
                continue
            if latest is not None and moment < latest:
                setattr(incident, phase, latest)
                changed.append(phase)
            else:
                latest = moment
        if changed:
            incident.save(update_fields=changed)
    FaultSignal.objects.filter(detected_at__lt=F("occurred_at")).update(occurred_at=F("detected_at"))
    Node = apps.get_model("efficiency", "Node")
    for node in Node.objects.filter(state="isolated", state_reason__startswith="incident "):
        match = re.match(r"incident (\d+):", node.state_reason)
        isolations = IncidentAction.objects.filter(incident_id=match and int(match[1]), kind="isolate_node")
        if isolations.exists() and not isolations.filter(dry_run=False, ok=True).exists():
            node.state, node.state_reason = "active", ""
            node.save(update_fields=["state", "state_reason"])


class Migration(migrations.Migration):
    dependencies = [
        ("efficiency", "0011_platform_admin_permissions"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="NodeStateChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField(verbose_name="when")),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("active", "Active"),
                            ("isolated", "Isolated"),
                            ("draining", "Draining"),
                            ("retired", "Retired"),
                        ],
                        max_length=20,
                        verbose_name="state",
                    ),
                ),
                (
                    "previous_state",
                    models.CharField(
                        choices=[
                            ("active", "Active"),
                            ("isolated", "Isolated"),
                            ("draining", "Draining"),
                            ("retired", "Retired"),
                        ],
                        max_length=20,
                        verbose_name="previous state",
                    ),
                ),
            ],
            options={
                "verbose_name": "node state change",
                "verbose_name_plural": "node state changes",
                "ordering": ["-at", "-id"],
            },
        ),
        migrations.AddField(
            model_name="faultsignal",
            name="facts",
            field=models.JSONField(blank=True, default=dict, verbose_name="facts"),
        ),
        migrations.AddField(
            model_name="incident",
            name="close_reason",
            field=models.TextField(blank=True, verbose_name="why it was closed"),
        ),
        migrations.AddField(
            model_name="incident",
            name="closed_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="closed"),
        ),
        migrations.AddField(
            model_name="incident",
            name="closed_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
                verbose_name="closed by",
            ),
        ),
        migrations.AddField(
            model_name="incidentaction",
            name="message",
            field=models.JSONField(blank=True, default=dict, verbose_name="message"),
        ),
        migrations.AlterField(
            model_name="incident",
            name="status",
            field=models.CharField(
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
        migrations.AlterField(
            model_name="incidentaction",
            name="kind",
            field=models.CharField(
                choices=[
                    ("isolate_node", "Isolate node"),
                    ("restart_job", "Restart job from checkpoint"),
                    ("notify", "Notify"),
                    ("resume_node", "Return node to service"),
                    ("close", "Close"),
                ],
                max_length=20,
                verbose_name="action",
            ),
        ),
        migrations.AddIndex(
            model_name="faultsignal",
            index=models.Index(fields=["node", "occurred_at"], name="efficiency__node_id_816108_idx"),
        ),
        migrations.AddIndex(
            model_name="incident",
            index=models.Index(fields=["node", "-occurred_at"], name="efficiency__node_id_3e3149_idx"),
        ),
        migrations.RunPython(bring_rows_in_line, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="faultsignal",
            constraint=models.CheckConstraint(
                condition=models.Q(("detected_at__gte", models.F("occurred_at"))),
                name="faultsignal_detected_after_occurred",
            ),
        ),
        migrations.AddConstraint(
            model_name="incident",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("occurred_at__isnull", True),
                        ("detected_at__isnull", True),
                        ("detected_at__gte", models.F("occurred_at")),
                        _connector="OR",
                    ),
                    models.Q(
                        ("occurred_at__isnull", True),
                        ("located_at__isnull", True),
                        ("located_at__gte", models.F("occurred_at")),
                        _connector="OR",
                    ),
                    models.Q(
                        ("occurred_at__isnull", True),
                        ("restart_requested_at__isnull", True),
                        ("restart_requested_at__gte", models.F("occurred_at")),
                        _connector="OR",
                    ),
                    models.Q(
                        ("occurred_at__isnull", True),
                        ("recovered_at__isnull", True),
                        ("recovered_at__gte", models.F("occurred_at")),
                        _connector="OR",
                    ),
                    models.Q(
                        ("detected_at__isnull", True),
                        ("located_at__isnull", True),
                        ("located_at__gte", models.F("detected_at")),
                        _connector="OR",
                    ),
                    models.Q(
                        ("detected_at__isnull", True),
                        ("restart_requested_at__isnull", True),
                        ("restart_requested_at__gte", models.F("detected_at")),
                        _connector="OR",
                    ),
                    models.Q(
                        ("detected_at__isnull", True),
                        ("recovered_at__isnull", True),
                        ("recovered_at__gte", models.F("detected_at")),
                        _connector="OR",
                    ),
                    models.Q(
                        ("located_at__isnull", True),
                        ("restart_requested_at__isnull", True),
                        ("restart_requested_at__gte", models.F("located_at")),
                        _connector="OR",
                    ),
                    models.Q(
                        ("located_at__isnull", True),
                        ("recovered_at__isnull", True),
                        ("recovered_at__gte", models.F("located_at")),
                        _connector="OR",
                    ),
                    models.Q(
                        ("restart_requested_at__isnull", True),
                        ("recovered_at__isnull", True),
                        ("recovered_at__gte", models.F("restart_requested_at")),
                        _connector="OR",
                    ),
                ),
                name="incident_phases_in_order",
                violation_error_message="An incident's phases must follow each other in time.",
            ),
        ),
        migrations.AddConstraint(
            model_name="incident",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("status", "closed"), _negated=True),
                    ("recovered_at__isnull", True),
                    _connector="OR",
                ),
                name="incident_closed_is_not_recovered",
            ),
        ),
        migrations.AddField(
            model_name="nodestatechange",
            name="actor",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="nodestatechange",
            name="incident",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="node_state_changes",
                to="efficiency.incident",
            ),
        ),
        migrations.AddField(
            model_name="nodestatechange",
            name="node",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="state_changes",
                to="efficiency.node",
            ),
        ),
        migrations.AddIndex(
            model_name="nodestatechange",
            index=models.Index(fields=["node", "-at"], name="efficiency__node_id_f608be_idx"),
        ),
    ]
