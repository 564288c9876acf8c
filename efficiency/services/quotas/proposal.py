"""Proposal: the next cycle's quotas from the last cycle's demand, backtested."""

import dataclasses
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency import dispatch
from efficiency.analysis.quotas import ProposalSettings, propose_quotas
from efficiency.choices import QuotaCycleOrigin, QuotaCycleStatus, QuotaEventKind
from efficiency.days import day_start_after
from efficiency.models import Cluster, Department, Quota, QuotaCycle
from efficiency.selectors.quotas import cluster_capacity, hourly_demand, quota_cycle_in_force, quota_job_rows
from efficiency.services.quotas.cycles import (
    QuotaError,
    cycle_borrowing_limits,
    cycle_end,
    cycle_event,
    cycle_guarantees,
    cycle_length,
    day_text,
    local_midnight,
    quota_cycle_initial_create,
)
from efficiency.times import portal_day_zone


def proposal_settings() -> ProposalSettings:
    return ProposalSettings(
        percentile=settings.PORTAL_QUOTA_PERCENTILE,
        max_change_pct=settings.PORTAL_QUOTA_MAX_CHANGE_PCT,
        floor_gpus=settings.PORTAL_QUOTA_FLOOR_GPUS,
        guaranteed_share=settings.PORTAL_QUOTA_GUARANTEED_SHARE,
    )


def quota_proposal_create(
    *,
    cluster: Cluster,
    actor=None,
    now: datetime | None = None,
    start: datetime | None = None,
    settings_override: ProposalSettings | None = None,
) -> QuotaCycle:
    """Propose the next cycle's quotas from the last cycle's demand, and backtest them.

    The next cycle begins when the cycle in force ends (or today, if that is past); its demand
    window is the cycle length before min(now, its start). A cluster without cycles first gets
    its fixed partition as the cycle in force.
    """
    now = now or timezone.now()
    knobs = settings_override or proposal_settings()
    with transaction.atomic():
        in_force = quota_cycle_in_force(cluster=cluster, at=now)
        if in_force is None and not QuotaCycle.objects.filter(cluster=cluster).exists():
            in_force = quota_cycle_initial_create(
                cluster=cluster,
                start=day_start_after(now, -settings.PORTAL_CYCLE_DAYS, portal_day_zone()),
                actor=actor,
                now=now,
            )
        if start is None:
            start = max(in_force.end, local_midnight(now)) if in_force else local_midnight(now)
        if QuotaCycle.objects.filter(cluster=cluster, start=start).exists():
            raise QuotaError(_("A cycle starting %(start)s already exists.") % {"start": day_text(start)})
        demand_end = min(now, start)
        demand_start = demand_end - cycle_length()
        rows = quota_job_rows(cluster=cluster, start=demand_start, end=demand_end)
        demand = hourly_demand(rows, start=demand_start, end=demand_end)
        capacity = cluster_capacity(cluster=cluster)
        current = cycle_guarantees(in_force, cluster)
        proposals = propose_quotas(demand, current, capacity, knobs)
        cycle = QuotaCycle.objects.create(
            cluster=cluster,
            start=start,
            end=cycle_end(start),
            status=QuotaCycleStatus.PROPOSED,
            capacity=capacity,
            proposal_settings=dataclasses.asdict(knobs),
            demand_start=demand_start,
            demand_end=demand_end,
            origin=QuotaCycleOrigin.PROPOSAL,
            created_at=now,
            created_by=actor,
        )
        departments = {d.code: d for d in Department.objects.all()}
        previous_limits = cycle_borrowing_limits(in_force)
        Quota.objects.bulk_create(
            Quota(
                cycle=cycle,
                department=departments[p.department],
                gpu_model=p.gpu_model,
                guaranteed_gpus=p.proposed_gpus,
                proposed_gpus=p.proposed_gpus,
                previous_gpus=p.current_gpus,
                borrowing_limit_gpus=previous_limits.get((p.department, p.gpu_model)),
                explanation=p.explanation(),
                demand_gpus=[round(v, 2) for v in demand.get((p.department, p.gpu_model), [])],
            )
            for p in proposals
            if p.department in departments
        )
        cycle_event(cycle, QuotaEventKind.PROPOSED, actor=actor, at=now)
        dispatch.quota_backtest(cycle.pk)
    return cycle
