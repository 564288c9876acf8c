"""Cycles: what every quota service shares (the error, the cycle length and day, the event log,
a cycle's guarantees and limits) and a cluster's first cycle, its fixed partition."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency.analysis.quotas import Key
from efficiency.choices import QuotaCycleOrigin, QuotaCycleStatus, QuotaEventKind
from efficiency.days import day_start_after, day_start_of
from efficiency.models import Cluster, Department, Quota, QuotaCycle, QuotaEvent
from efficiency.selectors.quotas import cluster_capacity, owned_gpus
from efficiency.times import portal_day_text, portal_day_zone

HOUR_S = 3600.0


class QuotaError(Exception):
    """A planning action that cannot be done (shown to the user as is)."""


def cycle_length() -> timedelta:
    return timedelta(days=settings.PORTAL_CYCLE_DAYS)


def local_midnight(at: datetime) -> datetime:
    """The start (UTC) of ``at``'s portal day: cycles begin at a portal-day midnight."""
    return day_start_of(at, portal_day_zone())


def cycle_end(start: datetime) -> datetime:
    """Where a cycle from ``start`` ends: ``PORTAL_CYCLE_DAYS`` whole portal days later (one hour
    more or less than 24 x days across a daylight-saving change)."""
    return day_start_after(start, settings.PORTAL_CYCLE_DAYS, portal_day_zone())


def cycle_event(cycle: QuotaCycle, kind: str, *, actor=None, at: datetime, **fields) -> QuotaEvent:
    return QuotaEvent.objects.create(cycle=cycle, kind=kind, actor=actor, at=at, **fields)


@transaction.atomic
def quota_cycle_initial_create(
    *, cluster: Cluster, start: datetime, actor=None, now: datetime | None = None
) -> QuotaCycle:
    """The first cycle of a cluster: the fixed partition (each department's owned GPUs)."""
    now = now or timezone.now()
    if QuotaCycle.objects.filter(cluster=cluster).exists():
        raise QuotaError(_("This cluster already has quota cycles."))
    departments = {d.code: d for d in Department.objects.all()}
    cycle = QuotaCycle.objects.create(
        cluster=cluster,
        start=start,
        end=cycle_end(start),
        status=QuotaCycleStatus.APPROVED,
        capacity=cluster_capacity(cluster=cluster),
        origin=QuotaCycleOrigin.FIXED_PARTITION,
        created_at=now,
        created_by=actor,
        approved_at=now,
        approved_by=actor,
    )
    Quota.objects.bulk_create(
        Quota(cycle=cycle, department=departments[code], gpu_model=model, guaranteed_gpus=gpus)
        for (code, model), gpus in sorted(owned_gpus(cluster=cluster).items())
    )
    cycle_event(cycle, QuotaEventKind.CREATED, actor=actor, at=now)
    return cycle


def cycle_guarantees(cycle: QuotaCycle | None, cluster: Cluster) -> dict[Key, int]:
    if cycle is None:
        return owned_gpus(cluster=cluster)
    return {
        (code, model): gpus
        for code, model, gpus in cycle.quotas.values_list("department__code", "gpu_model", "guaranteed_gpus")
    }


def cycle_borrowing_limits(cycle: QuotaCycle | None) -> dict[Key, int]:
    if cycle is None:
        return {}
    return {
        (code, model): limit
        for code, model, limit in cycle.quotas.filter(borrowing_limit_gpus__isnull=False).values_list(
            "department__code", "gpu_model", "borrowing_limit_gpus"
        )
    }


def day_text(at: datetime) -> str:
    return portal_day_text(at)
