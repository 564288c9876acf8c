"""Backtest: the demand window's jobs replayed under the fixed partition, the quotas before and this
cycle's quotas."""

import dataclasses
import math
import time
from datetime import datetime

from django.utils import timezone

from efficiency.analysis.backtest import Policy, QueuePolicy, backtest_jobs, compare_policies
from efficiency.analysis.quotas import Key
from efficiency.models import QuotaBacktest, QuotaCycle
from efficiency.selectors.quotas import owned_gpus, quota_job_rows
from efficiency.services.quotas.cycles import cycle_borrowing_limits, cycle_guarantees, cycle_length


def backtest_policy(
    key: str, capacity: dict[str, int], guarantees: dict[Key, int], limits: dict[Key, int]
) -> Policy:
    return Policy(
        key=key,
        capacity=capacity,
        quotas={k: QueuePolicy(gpus, limits.get(k)) for k, gpus in guarantees.items()},
    )


def quota_backtest_run(*, cycle: QuotaCycle, now: datetime | None = None) -> QuotaBacktest:
    """Replay the demand window's jobs under the fixed partition, the quotas in force before
    this cycle, and this cycle's quotas; store the figures side by side."""
    now = now or timezone.now()
    cluster = cycle.cluster
    window_end = cycle.demand_end or min(now, cycle.start)
    window_start = cycle.demand_start or window_end - cycle_length()
    start_s, end_s = window_start.timestamp(), window_end.timestamp()
    rows = quota_job_rows(cluster=cluster, start=window_start, end=window_end)
    jobs = backtest_jobs(rows, start_s=start_s, end_s=end_s)
    capacity = {model: int(gpus) for model, gpus in cycle.capacity.items()}
    previous = (
        QuotaCycle.objects.approved()
        .filter(cluster=cluster, start__lt=cycle.start)
        .exclude(pk=cycle.pk)
        .order_by("-start")
        .first()
    )
    policies = [
        backtest_policy("fixed", capacity, _fit(owned_gpus(cluster=cluster), capacity), {}),
        backtest_policy(
            "current",
            capacity,
            _fit(cycle_guarantees(previous, cluster), capacity),
            cycle_borrowing_limits(previous),
        ),
        backtest_policy(
            "cycle", capacity, _fit(cycle_guarantees(cycle, cluster), capacity), cycle_borrowing_limits(cycle)
        ),
    ]
    known = [row.busy_fraction for row in rows if row.busy_fraction is not None]
    began = time.perf_counter()
    results = compare_policies(
        jobs,
        policies,
        start_s=start_s,
        end_s=end_s,
        default_busy_fraction=sum(known) / len(known) if known else 0.0,
    )
    elapsed = time.perf_counter() - began
    return QuotaBacktest.objects.create(
        cycle=cycle,
        computed_at=now,
        window_start=window_start,
        window_end=window_end,
        job_count=len(jobs),
        duration_s=elapsed,
        results=[_jsonable(dataclasses.asdict(result)) for result in results],
    )


def _fit(guarantees: dict[Key, int], capacity: dict[str, int]) -> dict[Key, int]:
    """Guarantees of models the cluster still has (nodes may have been retired since)."""
    return {key: gpus for key, gpus in guarantees.items() if key[1] in capacity}


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    return value
