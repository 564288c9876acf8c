"""Capacity alerts: the shared pool exhausted, or demand trending to capacity, with the GPUs needed."""

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from efficiency.analysis.backtest import run_backtest
from efficiency.analysis.capacity import (
    daily_peaks,
    days_until_crossing,
    fewest_sufficient,
    linear_trend,
    pool_exhausted,
    pool_hours,
)
from efficiency.analysis.quotas import Key
from efficiency.choices import CapacityAlertKind
from efficiency.days import day_start_after
from efficiency.models import CapacityAlert, Cluster, Node
from efficiency.selectors.quotas import (
    JobRow,
    cluster_capacity,
    hourly_demand,
    hourly_use,
    quota_cycle_in_force,
    quota_job_rows,
)
from efficiency.services.quotas.backtest import backtest_jobs, backtest_policy
from efficiency.services.quotas.cycles import (
    cycle_borrowing_limits,
    cycle_guarantees,
    cycle_length,
    local_midnight,
)
from efficiency.times import portal_day_zone


def capacity_check(*, cluster: Cluster, now: datetime | None = None) -> list[CapacityAlert]:
    """Raise, refresh or resolve the capacity alerts of every GPU model of ``cluster``."""
    now = now or timezone.now()
    capacity = cluster_capacity(cluster=cluster)
    in_force = quota_cycle_in_force(cluster=cluster, at=now)
    guarantees = cycle_guarantees(in_force, cluster)
    limits = cycle_borrowing_limits(in_force)
    trend_days = settings.PORTAL_CAPACITY_TREND_DAYS
    history_start = day_start_after(now, -trend_days, portal_day_zone())
    rows = quota_job_rows(cluster=cluster, start=min(history_start, now - cycle_length()), end=now)
    open_alerts = []
    for model, gpus in capacity.items():
        model_rows = [row for row in rows if row.gpu_model == model]
        shared = gpus - sum(g for (_code, m), g in guarantees.items() if m == model)
        exhausted = _pool_exhausted(model_rows, guarantees, shared, now=now)
        crossing = _demand_trend(model_rows, gpus, start=history_start, now=now)
        needed = None
        if exhausted or crossing:
            # Either way the answer is the same question to the backtest: how many GPUs in the
            # shared pool would have kept last cycle's P95 wait under the target.
            node_gpus = (
                Node.objects.filter(cluster=cluster, gpu_model=model)
                .order_by("-gpu_count")
                .values_list("gpu_count", flat=True)
                .first()
            )
            needed = _gpus_for_wait_target(model_rows, model, gpus, guarantees, limits, node_gpus, now=now)
        detail = {
            "shared_pool_gpus": shared,
            "capacity_gpus": gpus,
            "wait_target_s": settings.PORTAL_CAPACITY_WAIT_TARGET_S,
        }
        if exhausted:
            open_alerts.append(
                _alert_upsert(cluster, model, CapacityAlertKind.POOL_EXHAUSTED, now, needed, detail)
            )
        else:
            _alert_resolve(cluster, model, CapacityAlertKind.POOL_EXHAUSTED, now)
        if crossing:
            days, demand_at_horizon = crossing
            trend = {**detail, "days_until": round(days, 1), "demand_at_horizon_gpus": demand_at_horizon}
            open_alerts.append(
                _alert_upsert(cluster, model, CapacityAlertKind.DEMAND_TREND, now, needed, trend)
            )
        else:
            _alert_resolve(cluster, model, CapacityAlertKind.DEMAND_TREND, now)
    return open_alerts


def _pool_exhausted(rows: list[JobRow], guarantees: dict[Key, int], shared: int, *, now: datetime) -> bool:
    sustained = settings.PORTAL_CAPACITY_SUSTAINED_HOURS
    end = now.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=sustained)
    use = hourly_use(rows, start=start, end=end)
    hours = pool_hours(rows, use, guarantees, start_s=start.timestamp(), hours=sustained)
    return pool_exhausted(
        hours,
        shared_pool_gpus=shared,
        wait_threshold_s=settings.PORTAL_CAPACITY_WAIT_THRESHOLD_S,
        sustained_hours=sustained,
    )


def _gpus_for_wait_target(
    rows: list[JobRow],
    model: str,
    gpus: int,
    guarantees: dict[Key, int],
    limits: dict[Key, int],
    node_gpus: int | None,
    *,
    now: datetime,
) -> int | None:
    """Fewest GPUs (whole nodes) added to the shared pool that bring last cycle's P95 wait of
    this model's jobs under the target, by backtest."""
    start = now - cycle_length()
    start_s, end_s = start.timestamp(), now.timestamp()
    window_rows = [row for row in rows if row.end_s is None or row.end_s > start_s]
    jobs = backtest_jobs(window_rows, start_s=start_s, end_s=end_s)
    own = {key: g for key, g in guarantees.items() if key[1] == model}
    target = settings.PORTAL_CAPACITY_WAIT_TARGET_S

    def meets(extra: int) -> bool:
        result = run_backtest(
            jobs, backtest_policy("extra", {model: gpus + extra}, own, limits), start_s=start_s, end_s=end_s
        )
        return result.wait_p95_s is None or result.wait_p95_s <= target

    return fewest_sufficient(meets, step=node_gpus or 8, upper=gpus)


def _demand_trend(
    rows: list[JobRow], gpus: int, *, start: datetime, now: datetime
) -> tuple[float, int] | None:
    """(days until demand reaches capacity, demand at the horizon in GPUs) when within the horizon."""
    end = local_midnight(now)
    if end <= start:
        return None
    demand = hourly_demand(rows, start=start, end=end)
    total = [sum(values) for values in zip(*demand.values(), strict=True)] if demand else []
    days, peaks = daily_peaks(total)
    trend = linear_trend(days, peaks)
    if trend is None:
        return None
    today = (end - start).total_seconds() / 86_400
    horizon = settings.PORTAL_CAPACITY_HORIZON_WEEKS * 7
    until = days_until_crossing(trend, today=today, capacity=gpus)
    if until is None or until > horizon:
        return None
    return until, math.ceil(trend.at(today + horizon))


def _alert_upsert(cluster, model, kind, now, gpus_needed, detail) -> CapacityAlert:
    alert, created = CapacityAlert.objects.get_or_create(
        cluster=cluster,
        gpu_model=model,
        kind=kind,
        resolved_at=None,
        defaults={"raised_at": now, "checked_at": now, "gpus_needed": gpus_needed, "detail": detail},
    )
    if not created:
        alert.checked_at, alert.gpus_needed, alert.detail = now, gpus_needed, detail
        alert.save(update_fields=["checked_at", "gpus_needed", "detail"])
    return alert


def _alert_resolve(cluster, model, kind, now) -> None:
    CapacityAlert.objects.filter(
        cluster=cluster, gpu_model=model, kind=kind, resolved_at__isnull=True
    ).update(resolved_at=now, checked_at=now)
