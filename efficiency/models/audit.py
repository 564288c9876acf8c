"""The audit trail: who changed a quota, incident, node, source, department or user, when, and
from what to what (django-simple-history).

Each change that goes through ``save()`` (the admin, the pages, the API, the services) writes a
historical row with the acting user (``HistoryRequestMiddleware``; none for the workers). A
save that touches only fields the trail leaves out records nothing, so the collectors' run
bookkeeping (watermark, health, cursors every minute) and sign-ins stay out of it. Telemetry,
rollups, jobs and log chunks have no history at all: they are written in bulk.

Node states changed by the fault service are recorded in ``NodeStateChange`` with the incident
that caused them.
"""

from django.contrib.auth import get_user_model
from django.db import models
from simple_history import register
from simple_history.models import HistoricalRecords

from efficiency.models.faults import Incident
from efficiency.models.inventory import Department, Node
from efficiency.models.quotas import Quota, QuotaCycle
from efficiency.models.telemetry import DataSource
from efficiency.models.tickets import Ticket

BASELINE_REASON = "state before the first recorded change"


class AuditRecords(HistoricalRecords):
    """History that skips saves of left-out fields only (``save(update_fields=[...])``), and
    whose first change of a row also records the row as it was before it.

    Rows made in bulk (a quota proposal) or before the trail existed have no history yet; the
    baseline gives their first change its "from" (no user: nobody made it a change).
    """

    def finalize(self, sender, **kwargs):
        super().finalize(sender, **kwargs)
        if sender is self.cls:
            models.signals.pre_save.connect(self.pre_save, sender=sender, weak=False)

    def _tracked(self, update_fields) -> bool:
        return not update_fields or not set(update_fields) <= set(self.excluded_fields)

    def pre_save(self, instance, raw=False, using=None, update_fields=None, **kwargs):
        if not raw and not instance._state.adding and self._tracked(update_fields):
            self._baseline_ensure(instance, using)

    def post_save(self, instance, created, using=None, **kwargs):
        if not created and not self._tracked(kwargs.get("update_fields")):
            return
        super().post_save(instance, created, using=using, **kwargs)

    def m2m_changed(self, instance, action, attr, pk_set, reverse, **kwargs):
        if reverse:
            return  # group.user_set.add(user): the trail follows the user's side only
        if action in ("pre_add", "pre_remove", "pre_clear"):
            self._baseline_ensure(instance, kwargs.get("using"))
        super().m2m_changed(instance, action, attr, pk_set, reverse, **kwargs)
        if action in ("post_add", "post_remove", "post_clear"):
            # Removing what was not there (user_role_assign drops the other roles) changes nothing.
            record = getattr(instance, self.manager_name).first()
            previous = record.prev_record if record is not None else None
            if previous is not None and not record.diff_against(previous).changes:
                record.delete()

    def _baseline_ensure(self, instance, using) -> None:
        if instance.pk is None or hasattr(instance, "skip_history_when_saving"):
            return
        if getattr(instance, self.manager_name).exists():
            return
        before = type(instance)._default_manager.using(using).filter(pk=instance.pk).first()
        if before is None:
            return
        before._history_user = None
        before._change_reason = BASELINE_REASON
        self.create_historical_record(before, "~", using=using)


# Bookkeeping of each collection run, written every minute: not a change of the source.
SOURCE_RUN_FIELDS = [
    "watermark",
    "state",
    "running_since",
    "last_attempt_at",
    "last_success_at",
    "last_error",
    "last_error_at",
    "consecutive_failures",
]

User = get_user_model()

register(
    User,
    app="efficiency",
    records_class=AuditRecords,
    # The password hash never goes into the trail; a sign-in (last_login) is not a change.
    excluded_fields=["password", "last_login"],
    m2m_fields=["groups"],
)
register(Department, app="efficiency", records_class=AuditRecords, m2m_fields=["heads"])
# When a source last saw a node is bookkeeping of every collection, not a change of the node.
register(Node, app="efficiency", records_class=AuditRecords, excluded_fields=["updated_at", "last_seen_at"])
register(DataSource, app="efficiency", records_class=AuditRecords, excluded_fields=SOURCE_RUN_FIELDS)
register(Incident, app="efficiency", records_class=AuditRecords, excluded_fields=["updated_at"])
register(QuotaCycle, app="efficiency", records_class=AuditRecords)
register(Quota, app="efficiency", records_class=AuditRecords, excluded_fields=["demand_gpus", "explanation"])
# A ticket's history is its page's: every field, and who moved it; the SLA notification marker is
# bookkeeping of the notifier.
register(
    Ticket,
    app="efficiency",
    records_class=AuditRecords,
    excluded_fields=["updated_at", "sla_notified"],
    m2m_fields=["jobs", "nodes", "incidents"],
)
