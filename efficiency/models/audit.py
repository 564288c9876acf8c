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
from simple_history import register
from simple_history.models import HistoricalRecords

from efficiency.models.faults import Incident
from efficiency.models.inventory import Department, Node
from efficiency.models.quotas import Quota, QuotaCycle
from efficiency.models.telemetry import DataSource


class AuditRecords(HistoricalRecords):
    """History that skips saves of left-out fields only (``save(update_fields=[...])``)."""

    def post_save(self, instance, created, using=None, **kwargs):
        update_fields = kwargs.get("update_fields")
        if not created and update_fields and set(update_fields) <= self.untracked_fields:
            return
        super().post_save(instance, created, using=using, **kwargs)

    @property
    def untracked_fields(self) -> set[str]:
        return set(self.excluded_fields)


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
register(Department, records_class=AuditRecords, m2m_fields=["heads"])
register(Node, records_class=AuditRecords, excluded_fields=["updated_at"])
register(DataSource, records_class=AuditRecords, excluded_fields=SOURCE_RUN_FIELDS)
register(Incident, records_class=AuditRecords, excluded_fields=["updated_at"])
register(QuotaCycle, records_class=AuditRecords)
register(Quota, records_class=AuditRecords, excluded_fields=["demand_gpus", "explanation"])
