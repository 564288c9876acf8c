"""The periodic roll: every cluster with nodes gets its first cycle, and the next one proposed in time."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from efficiency.models import Cluster, QuotaCycle
from efficiency.selectors.quotas import quota_cycle_in_force
from efficiency.services.quotas.cycles import local_midnight, quota_cycle_initial_create
from efficiency.services.quotas.proposal import quota_proposal_create


def quota_cycles_roll(*, now: datetime | None = None) -> dict:
    """Give every cluster with nodes its first cycle, and propose the next one in time."""
    now = now or timezone.now()
    created = proposed = 0
    for cluster in Cluster.objects.annotate(n=Count("nodes")).filter(n__gt=0):
        if not QuotaCycle.objects.filter(cluster=cluster).exists():
            quota_cycle_initial_create(cluster=cluster, start=local_midnight(now), now=now)
            created += 1
            continue
        in_force = quota_cycle_in_force(cluster=cluster, at=now)
        if in_force is None:
            continue
        due = in_force.end - timedelta(days=settings.PORTAL_QUOTA_PROPOSE_DAYS_AHEAD) <= now
        if due and not QuotaCycle.objects.filter(cluster=cluster, start__gt=in_force.start).exists():
            quota_proposal_create(cluster=cluster, now=now)
            proposed += 1
    return {"created": created, "proposed": proposed}
