"""Quota planning, the write side: cycles, proposals, review, backtests, exports, capacity alerts.

The life of a cycle: the first one of a cluster is its fixed partition (what each department
owns). A few days before the cycle in force ends, the next one is *proposed* from the demand of
the last cycle (efficiency.analysis.quotas) and backtested; committee members edit numbers and
approve it (each change recorded with who, when and why); department heads see their proposal
and may object. Once approved it comes into force at its start and can be exported as Kueue,
Volcano or Slurm configuration.
"""

import dataclasses
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency import dispatch
from efficiency.analysis import scheduler_config
from efficiency.analysis.backtest import BacktestJob, Policy, QueuePolicy, compare_policies, run_backtest
from efficiency.analysis.capacity import (
    PoolHour,
    days_until_crossing,
    fewest_sufficient,
    linear_trend,
    pool_exhausted,
)
from efficiency.analysis.quotas import Key, ProposalSettings, propose_quotas
from efficiency.analysis.stats import percentile
from efficiency.choices import CapacityAlertKind, MappingKind, QuotaCycleStatus, QuotaEventKind
from efficiency.models import (
    CapacityAlert,
    Cluster,
    Department,
    DepartmentMapping,
    Node,
    Quota,
    QuotaBacktest,
    QuotaCycle,
    QuotaEvent,
    QuotaObjection,
)
from efficiency.selectors.quotas import (
    JobRow,
    cluster_capacity,
    hourly_demand,
    hourly_use,
    owned_gpus,
    quota_cycle_in_force,
    quota_job_rows,
)

HOUR_S = 3600.0


class QuotaError(Exception):
    """A planning action that cannot be done (shown to the user as is)."""


def cycle_length() -> timedelta:
    return timedelta(days=settings.PORTAL_CYCLE_DAYS)


def local_midnight(at: datetime) -> datetime:
    """The start of ``at``'s day in the display time zone (cycles begin at local midnight)."""
    local = timezone.localtime(at)
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


def proposal_settings() -> ProposalSettings:
    return ProposalSettings(
        percentile=settings.PORTAL_QUOTA_PERCENTILE,
        max_change_pct=settings.PORTAL_QUOTA_MAX_CHANGE_PCT,
        floor_gpus=settings.PORTAL_QUOTA_FLOOR_GPUS,
        guaranteed_share=settings.PORTAL_QUOTA_GUARANTEED_SHARE,
    )


def _event(cycle: QuotaCycle, kind: str, *, actor=None, at: datetime, **fields) -> QuotaEvent:
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
        end=start + cycle_length(),
        status=QuotaCycleStatus.APPROVED,
        capacity=cluster_capacity(cluster=cluster),
        origin="fixed_partition",
        created_at=now,
        created_by=actor,
        approved_at=now,
        approved_by=actor,
    )
    Quota.objects.bulk_create(
        Quota(cycle=cycle, department=departments[code], gpu_model=model, guaranteed_gpus=gpus)
        for (code, model), gpus in sorted(owned_gpus(cluster=cluster).items())
    )
    _event(cycle, QuotaEventKind.CREATED, actor=actor, at=now)
    return cycle


def _guarantees(cycle: QuotaCycle | None, cluster: Cluster) -> dict[Key, int]:
    if cycle is None:
        return owned_gpus(cluster=cluster)
    return {
        (code, model): gpus
        for code, model, gpus in cycle.quotas.values_list("department__code", "gpu_model", "guaranteed_gpus")
    }


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
                cluster=cluster, start=local_midnight(now) - cycle_length(), actor=actor, now=now
            )
        if start is None:
            start = max(in_force.end, local_midnight(now)) if in_force else local_midnight(now)
        if QuotaCycle.objects.filter(cluster=cluster, start=start).exists():
            raise QuotaError(_("A cycle starting %(start)s already exists.") % {"start": _day(start)})
        demand_end = min(now, start)
        demand_start = demand_end - cycle_length()
        rows = quota_job_rows(cluster=cluster, start=demand_start, end=demand_end)
        demand = hourly_demand(rows, start=demand_start, end=demand_end)
        capacity = cluster_capacity(cluster=cluster)
        current = _guarantees(in_force, cluster)
        proposals = propose_quotas(demand, current, capacity, knobs)
        cycle = QuotaCycle.objects.create(
            cluster=cluster,
            start=start,
            end=start + cycle_length(),
            status=QuotaCycleStatus.PROPOSED,
            capacity=capacity,
            proposal_settings=dataclasses.asdict(knobs),
            demand_start=demand_start,
            demand_end=demand_end,
            origin="proposal",
            created_at=now,
            created_by=actor,
        )
        departments = {d.code: d for d in Department.objects.all()}
        previous_limits = _borrowing_limits(in_force)
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
        _event(cycle, QuotaEventKind.PROPOSED, actor=actor, at=now)
        dispatch.quota_backtest(cycle.pk)
    return cycle


def _borrowing_limits(cycle: QuotaCycle | None) -> dict[Key, int]:
    if cycle is None:
        return {}
    return {
        (code, model): limit
        for code, model, limit in cycle.quotas.filter(borrowing_limit_gpus__isnull=False).values_list(
            "department__code", "gpu_model", "borrowing_limit_gpus"
        )
    }


def _day(at: datetime) -> str:
    return f"{timezone.localtime(at):%Y-%m-%d}"


def _must_be_proposed(cycle: QuotaCycle) -> None:
    if cycle.status != QuotaCycleStatus.PROPOSED:
        raise QuotaError(_("This cycle is approved; its quotas can no longer change."))


def _require_comment(comment: str) -> str:
    comment = comment.strip()
    if not comment:
        raise ValidationError({"comment": _("Say why: a comment is required.")})
    return comment


class QuotaOverCapacity(ValidationError):
    """Guarantees of some GPU models exceed their capacity (the shared pool would be negative).

    ``by_model`` maps each to its message with the numbers. With ``field``, the messages belong
    to that field (``guaranteed_gpus`` for an edit).
    """

    def __init__(self, messages: dict[str, str], *, field: str | None = None) -> None:
        self.by_model = dict(messages)
        texts = [messages[model] for model in sorted(messages)]
        super().__init__({field: texts} if field else texts)


def _over_capacity(capacity: dict, guaranteed: dict[str, int]) -> dict[str, str]:
    return {
        model: _("%(model)s: %(guaranteed)d GPUs guaranteed but only %(capacity)d in the cluster.")
        % {"model": model, "guaranteed": gpus, "capacity": capacity.get(model, 0)}
        for model, gpus in guaranteed.items()
        if gpus > capacity.get(model, 0)
    }


def _guaranteed_per_model(quotas) -> dict[str, int]:
    guaranteed: dict[str, int] = defaultdict(int)
    for quota in quotas:
        guaranteed[quota.gpu_model] += quota.guaranteed_gpus
    return guaranteed


def check_within_capacity(cycle: QuotaCycle) -> None:
    """QuotaOverCapacity naming each GPU model whose guarantees exceed its capacity.

    The one check behind both edits and approval: a shared pool is never negative.
    """
    errors = _over_capacity(cycle.capacity, _guaranteed_per_model(cycle.quotas.all()))
    if errors:
        raise QuotaOverCapacity(errors)


@transaction.atomic
def quota_cycle_edit(
    *,
    cycle: QuotaCycle,
    actor,
    numbers: Mapping[int, tuple[int, int | None]],
    comment: str,
    now: datetime | None = None,
) -> int:
    """A committee member sets proposed quotas of one cycle; returns how many changed.

    ``numbers`` maps a quota's id to its (guaranteed GPUs, borrowing limit or None). Every change
    is recorded with who, when and the comment, which is required. The numbers are checked
    together, as approval checks them: when a GPU model's guarantees would exceed its capacity
    (a negative shared pool) nothing changes and QuotaOverCapacity names the field and numbers.
    """
    now = now or timezone.now()
    cycle = QuotaCycle.objects.select_for_update().get(pk=cycle.pk)
    _must_be_proposed(cycle)
    for guaranteed_gpus, borrowing_limit_gpus in numbers.values():
        if guaranteed_gpus < 0 or (borrowing_limit_gpus is not None and borrowing_limit_gpus < 0):
            raise QuotaError(_("GPU numbers cannot be negative."))
    quotas = list(cycle.quotas.select_for_update().select_related("department").order_by("pk"))
    changed = [
        (quota, *numbers[quota.pk])
        for quota in quotas
        if quota.pk in numbers
        and (quota.guaranteed_gpus, quota.borrowing_limit_gpus) != tuple(numbers[quota.pk])
    ]
    if not changed:
        return 0
    comment = _require_comment(comment)
    after = {quota.pk: quota.guaranteed_gpus for quota in quotas}
    after.update({quota.pk: gpus for quota, gpus, _limit in changed})
    guaranteed: dict[str, int] = defaultdict(int)
    for quota in quotas:
        guaranteed[quota.gpu_model] += after[quota.pk]
    errors = _over_capacity(cycle.capacity, guaranteed)
    if errors:
        raise QuotaOverCapacity(errors, field="guaranteed_gpus")
    for quota, guaranteed_gpus, borrowing_limit_gpus in changed:
        detail = {}
        if quota.borrowing_limit_gpus != borrowing_limit_gpus:
            detail = {
                "borrowing_limit_from_gpus": quota.borrowing_limit_gpus,
                "borrowing_limit_to_gpus": borrowing_limit_gpus,
            }
        _event(
            cycle,
            QuotaEventKind.EDITED,
            actor=actor,
            at=now,
            department=quota.department,
            gpu_model=quota.gpu_model,
            from_gpus=quota.guaranteed_gpus,
            to_gpus=guaranteed_gpus,
            comment=comment,
            detail=detail,
        )
        quota.guaranteed_gpus = guaranteed_gpus
        quota.borrowing_limit_gpus = borrowing_limit_gpus
        quota.save(update_fields=["guaranteed_gpus", "borrowing_limit_gpus"])
    return len(changed)


def quota_update(
    *,
    quota: Quota,
    actor,
    guaranteed_gpus: int,
    borrowing_limit_gpus: int | None,
    comment: str,
    now: datetime | None = None,
) -> bool:
    """A committee member sets one proposed quota (see quota_cycle_edit); whether it changed."""
    changed = quota_cycle_edit(
        cycle=quota.cycle,
        actor=actor,
        numbers={quota.pk: (guaranteed_gpus, borrowing_limit_gpus)},
        comment=comment,
        now=now,
    )
    return changed > 0


@transaction.atomic
def quota_cycle_approve(*, cycle: QuotaCycle, actor, comment: str, now: datetime | None = None) -> QuotaCycle:
    """A committee member approves a proposal: its quotas come into force at its start.

    Needs a comment; refused (QuotaOverCapacity) while a GPU model's guarantees exceed its capacity.
    """
    now = now or timezone.now()
    cycle = QuotaCycle.objects.select_for_update().get(pk=cycle.pk)
    _must_be_proposed(cycle)
    comment = _require_comment(comment)
    check_within_capacity(cycle)
    cycle.status = QuotaCycleStatus.APPROVED
    cycle.approved_at, cycle.approved_by, cycle.approval_comment = now, actor, comment
    cycle.save(update_fields=["status", "approved_at", "approved_by", "approval_comment"])
    _event(cycle, QuotaEventKind.APPROVED, actor=actor, at=now, comment=comment)
    return cycle


@transaction.atomic
def quota_objection_file(
    *, cycle: QuotaCycle, department: Department, author, text: str, now: datetime | None = None
) -> QuotaObjection:
    """A department head objects to their department's proposal (the committee sees it)."""
    now = now or timezone.now()
    text = text.strip()
    if not text:
        raise QuotaError(_("Say what you object to."))
    _must_be_proposed(cycle)
    objection = QuotaObjection.objects.create(
        cycle=cycle, department=department, author=author, text=text, created_at=now
    )
    _event(cycle, QuotaEventKind.OBJECTION, actor=author, at=now, department=department, comment=text)
    return objection


@transaction.atomic
def quota_objection_answer(
    *, objection: QuotaObjection, actor, response: str, now: datetime | None = None
) -> QuotaObjection:
    now = now or timezone.now()
    response = response.strip()
    if not response:
        raise QuotaError(_("Write an answer."))
    objection.response, objection.responded_by, objection.responded_at = response, actor, now
    objection.save(update_fields=["response", "responded_by", "responded_at"])
    _event(
        objection.cycle,
        QuotaEventKind.ANSWERED,
        actor=actor,
        at=now,
        department=objection.department,
        comment=response,
    )
    return objection


# --- Backtest ---------------------------------------------------------------------------------


def backtest_jobs(rows: list[JobRow], *, start_s: float, end_s: float) -> list[BacktestJob]:
    """Jobs as the backtest replays them.

    A job still waiting gets the median run time of its department's jobs; one still running, its
    run time so far. A job its user cancelled before it started gets that median too, and its wait
    as its patience: the replay drops it again unless the policy starts it by then.
    """
    runtimes: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row.start_s is not None and row.end_s is not None:
            runtimes[row.department].append(row.end_s - row.start_s)
    everyone = [value for values in runtimes.values() for value in values]
    fallback = statistics.median(everyone) if everyone else HOUR_S
    medians = {queue: statistics.median(values) for queue, values in runtimes.items()}
    jobs = []
    for row in rows:
        patience = None
        if row.start_s is None:
            duration = medians.get(row.department, fallback)
            if row.end_s is not None:
                patience = max(row.end_s - row.submit_s, 0.0)
        else:
            duration = (row.end_s if row.end_s is not None else end_s) - row.start_s
        jobs.append(
            BacktestJob(
                queue=row.department,
                gpu_model=row.gpu_model,
                gpus=row.gpus,
                submit_s=row.submit_s,
                duration_s=max(duration, 1.0),
                started_s=row.start_s if row.start_s is not None and row.start_s < start_s else None,
                busy_fraction=row.busy_fraction,
                patience_s=patience,
            )
        )
    return jobs


def _policy(key: str, capacity: dict[str, int], guarantees: dict[Key, int], limits: dict[Key, int]) -> Policy:
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
        _policy("fixed", capacity, _fit(owned_gpus(cluster=cluster), capacity), {}),
        _policy(
            "current", capacity, _fit(_guarantees(previous, cluster), capacity), _borrowing_limits(previous)
        ),
        _policy("cycle", capacity, _fit(_guarantees(cycle, cluster), capacity), _borrowing_limits(cycle)),
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


# --- Export -----------------------------------------------------------------------------------

EXPORT_FORMATS = {
    "kueue": ("kueue-clusterqueues.yaml", "application/yaml", scheduler_config.kueue_manifests),
    "volcano": ("volcano-queues.yaml", "application/yaml", scheduler_config.volcano_queues),
    "slurm": ("slurm-qos.sh", "text/x-shellscript", scheduler_config.slurm_qos_commands),
}


def quota_plan(cycle: QuotaCycle) -> scheduler_config.QuotaPlan:
    """An approved cycle's quotas with each department's namespaces and Slurm accounts."""
    mappings: dict[tuple[int, str], list[str]] = defaultdict(list)
    for department_id, kind, value in (
        DepartmentMapping.objects.filter(Q(cluster=cycle.cluster_id) | Q(cluster__isnull=True))
        .order_by("value")
        .values_list("department_id", "kind", "value")
    ):
        mappings[(department_id, kind)].append(value)
    quotas = cycle.quotas.select_related("department").order_by("department__code", "gpu_model")
    return scheduler_config.QuotaPlan(
        cluster=cycle.cluster.slug,
        cycle_label=f"{_day(cycle.start)} – {_day(cycle.end)}",
        capacity={model: int(gpus) for model, gpus in cycle.capacity.items()},
        quotas=[
            scheduler_config.QueueQuota(
                department_code=q.department.code,
                gpu_model=q.gpu_model,
                guaranteed_gpus=q.guaranteed_gpus,
                borrowing_limit_gpus=q.borrowing_limit_gpus,
                namespaces=tuple(mappings[(q.department_id, MappingKind.K8S_NAMESPACE)]),
                slurm_accounts=tuple(mappings[(q.department_id, MappingKind.SLURM_ACCOUNT)]),
            )
            for q in quotas
            if q.gpu_model in cycle.capacity
        ],
    )


def quota_export(
    *, cycle: QuotaCycle, fmt: str, actor=None, now: datetime | None = None
) -> tuple[str, str, str]:
    """An approved cycle as scheduler configuration: (file name, content type, text)."""
    if fmt not in EXPORT_FORMATS:
        raise QuotaError(_("Unknown export format %(format)s.") % {"format": fmt})
    if cycle.status != QuotaCycleStatus.APPROVED:
        raise QuotaError(_("Only approved quotas can be exported."))
    name, content_type, render = EXPORT_FORMATS[fmt]
    try:
        text = render(quota_plan(cycle))
    except ValueError as error:
        raise QuotaError(str(error)) from None
    _event(cycle, QuotaEventKind.EXPORTED, actor=actor, at=now or timezone.now(), comment=fmt)
    return f"{cycle.cluster.slug}-{timezone.localtime(cycle.start):%Y%m%d}-{name}", content_type, text


# --- Periodic work ----------------------------------------------------------------------------


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


def capacity_check(*, cluster: Cluster, now: datetime | None = None) -> list[CapacityAlert]:
    """Raise, refresh or resolve the capacity alerts of every GPU model of ``cluster``."""
    now = now or timezone.now()
    capacity = cluster_capacity(cluster=cluster)
    in_force = quota_cycle_in_force(cluster=cluster, at=now)
    guarantees = _guarantees(in_force, cluster)
    limits = _borrowing_limits(in_force)
    trend_days = settings.PORTAL_CAPACITY_TREND_DAYS
    history_start = local_midnight(now) - timedelta(days=trend_days)
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
    hours = []
    for h in range(sustained):
        hour_end_s = (start + timedelta(hours=h + 1)).timestamp()
        borrowed = sum(max(0.0, series[h] - guarantees.get(key, 0)) for key, series in use.items())
        waits = [
            hour_end_s - row.submit_s
            for row in rows
            if row.submit_s < hour_end_s
            and (row.start_s is None or row.start_s > hour_end_s)
            and (row.end_s is None or row.end_s > hour_end_s)
        ]
        hours.append(PoolHour(borrowed, max(waits, default=0.0)))
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
            jobs, _policy("extra", {model: gpus + extra}, own, limits), start_s=start_s, end_s=end_s
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
    days, peaks = [], []
    for day in range(len(total) // 24):
        hours = total[day * 24 : (day + 1) * 24]
        if any(hours):
            days.append(float(day))
            peaks.append(percentile(hours, 95))
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
