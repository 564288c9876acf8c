"""Building and sealing the committee's review pack for one period.

``pack_generate`` reads the period's figures through the same selectors the live pages use
(utilization and allocation, departments, faults, quotas, recommendations, tickets), with every
department in view (``committee_system_user``), adds what only the pack shows (GPU-hours by
state, showback, phase distributions: ``efficiency.analysis.committee``), seals the content as
canonical JSON with its SHA-256, stores it as a new ``ReviewPack`` version and appends the
``pack_sealed`` audit entry in the same transaction. A pack is never changed afterwards: a
correction is a new version that ``supersedes`` the one it replaces.

The content is schema 1 (README of issue 18, "The pack content"); a section whose data is missing
is ``{"available": false, "reason": ...}``. Runs in a worker (minutes at 10,000 GPUs), never in a
web request.
"""

import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from efficiency.analysis.committee.kpis import kpi_rows, previous_values
from efficiency.analysis.committee.pareto import idle_pareto, pareto
from efficiency.analysis.committee.phases import IncidentTimes, phase_distributions
from efficiency.analysis.committee.seal import seal
from efficiency.analysis.committee.showback import RateCardValue, department_costs, showback
from efficiency.analysis.committee.states import down_per_hour, state_series
from efficiency.analysis.stats import percentile
from efficiency.choices import NotificationEvent, QuotaCycleStatus, RecommendationState, TicketState
from efficiency.models import Notification, ReviewPack
from efficiency.scoping import User
from efficiency.selectors import committee as packs
from efficiency.selectors.faults import fault_summary, incident_list, job_ettr
from efficiency.selectors.quotas import (
    capacity_alert_list,
    cluster_capacity,
    hourly_demand,
    quota_backtest_latest,
    quota_job_rows,
)
from efficiency.selectors.recommendations import recommendation_list
from efficiency.selectors.tickets import overdue_q, ticket_list, ticket_state_counts
from efficiency.selectors.usage import cluster_usage, department_usage_list, node_class_counts
from efficiency.timeranges import TimeRange
from efficiency.times import portal_day_zone

SCHEMA = 1
DEFINITIONS_VERSION = "2026-12.1"
AGEING_BUCKETS = ((7, "0-7d"), (14, "7-14d"), (30, "14-30d"), (None, "30d+"))


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _r3(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


def _r6(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def _unavailable(reason: str) -> dict:
    return {"available": False, "reason": reason}


def _name(user) -> str:
    full = user.get_full_name()
    return f"{user.get_username()} ({full})" if full else user.get_username()


# --- The period ------------------------------------------------------------------------------------


def pack_period_for(cluster, now: datetime) -> tuple[datetime, datetime]:
    """The last complete review period at ``now``: the latest quota cycle that has ended, else
    the ``PORTAL_CYCLE_DAYS`` days ending at the last midnight in the portal's time zone."""
    cycle = packs.latest_ended_quota_cycle(cluster=cluster, now=now)
    if cycle is not None:
        return cycle.start, cycle.end
    zone = portal_day_zone()
    local = now.astimezone(zone)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0).astimezone(UTC)
    return midnight - timedelta(days=settings.PORTAL_CYCLE_DAYS), midnight


def _targets() -> dict:
    return {
        "utilization": settings.PORTAL_COMMITTEE_TARGET_UTILIZATION,
        "allocation_rate": settings.PORTAL_COMMITTEE_TARGET_ALLOCATION_RATE,
        "idle_gpu_hours": None,
        "mttr_s": settings.PORTAL_COMMITTEE_TARGET_MTTR_S,
        "ettr": settings.PORTAL_COMMITTEE_TARGET_ETTR,
        "overdue_tickets": settings.PORTAL_COMMITTEE_TARGET_OVERDUE_TICKETS,
    }


# --- Building --------------------------------------------------------------------------------------


def pack_content(*, cluster, start: datetime, end: datetime, now: datetime | None = None) -> dict:
    """The pack's content for [start, end) of ``cluster`` (not sealed, not stored)."""
    now = now or timezone.now()
    user = packs.committee_system_user()
    time_range = TimeRange("custom", start, end)
    hours = packs.period_hours(start, end)
    previous = packs.pack_previous(cluster=cluster, before=start)

    # Cluster: GPU-hours by state per hour (capacity = available GPU-hours).
    hourly = packs.pack_cluster_hours(cluster=cluster, hours=hours)
    down = down_per_hour(packs.pack_down_intervals(cluster=cluster, start=start, end=end), hours)
    states = state_series(capacity=hourly.available, allocated=hourly.allocated, busy=hourly.busy, down=down)
    totals = cluster_usage(user=user, time_range=time_range, cluster=cluster)
    state_totals = {name: states.total(name) for name in ("busy", "allocated_idle", "unallocated", "down")}

    # Departments and showback.
    usage = department_usage_list(user=user, time_range=time_range, cluster=cluster)
    codes = [item.department.code for item in usage]
    guarantees = packs.pack_guarantees(cluster=cluster, hours=hours)
    allocated = packs.pack_allocated_by_department_model(cluster=cluster, hours=hours)
    capacity = packs.pack_capacity_by_model(cluster=cluster, hours=hours)
    split = showback(
        hours=len(hours), capacity=capacity, guarantees=guarantees, allocated=allocated, departments=codes
    )

    # Faults of this cluster in the period (the faults page's selector and summary).
    incidents = list(incident_list(user=user, time_range=time_range).filter(cluster=cluster))
    faults = fault_summary(incidents)
    ettr_values = _ettr_values(incidents, now=end)
    ettr = percentile(ettr_values, 50)

    # Tickets at the period's end.
    tickets = ticket_list(user=user)
    overdue = tickets.filter(overdue_q(end)).count()

    idle_gpu_hours = state_totals["allocated_idle"] + state_totals["unallocated"]
    kpis = kpi_rows(
        {
            "utilization": totals.utilization,
            "allocation_rate": totals.allocation_rate,
            "idle_gpu_hours": idle_gpu_hours,
            "mttr_s": faults.mttr_median_s,
            "ettr": ettr,
            "overdue_tickets": overdue,
        },
        previous=previous_values(previous.content if previous else None),
        targets=_targets(),
    )
    proposals, proposal_cycle = _proposals(user, cluster, end)
    capacity_section, alerts = _capacity(user, cluster, start, end)
    decisions_requested = []
    if proposal_cycle is not None and proposal_cycle.status == QuotaCycleStatus.PROPOSED:
        decisions_requested.append(
            {
                "kind": "quota",
                "ref": proposal_cycle.pk,
                "title_key": "approve_quota_cycle",
                "params": {"start": _iso(proposal_cycle.start), "end": _iso(proposal_cycle.end)},
            }
        )
    for alert in alerts:
        decisions_requested.append(
            {
                "kind": "capacity",
                "ref": alert.pk,
                "title_key": "capacity_alert",
                "params": {
                    "gpu_model": alert.gpu_model,
                    "kind": alert.kind,
                    "gpus_needed": alert.gpus_needed,
                },
            }
        )
    for ticket in tickets.filter(overdue_q(end)).order_by("due_at", "pk")[:10]:
        decisions_requested.append(
            {
                "kind": "ticket",
                "ref": ticket.pk,
                "title_key": "overdue_ticket",
                "params": {"title": ticket.title, "department": ticket.department.code},
            }
        )

    return {
        "schema": SCHEMA,
        "definitions_version": DEFINITIONS_VERSION,
        "cluster": {"slug": cluster.slug, "name": cluster.name},
        "period": {
            "start": _iso(start),
            "end": _iso(end),
            "time_zone": settings.TIME_ZONE,
            "hours": len(hours),
        },
        "previous": None
        if previous is None
        else {
            "pack_id": previous.pk,
            "version": previous.version,
            "hash": previous.content_hash,
            "start": _iso(previous.period_start),
            "end": _iso(previous.period_end),
        },
        "generated_at": _iso(now),
        "completeness": _completeness(cluster, end, totals.coverage),
        "committee": [_name(member) for member in packs.committee_members()],
        "summary": {"kpis": kpis, "decisions_requested": decisions_requested},
        "since_last": _since_last(cluster, previous, start, end),
        "cluster_section": _cluster_section(cluster, start, end, hours, states, state_totals, totals, user),
        "departments": _departments(usage, hours, split),
        "pareto_idle": idle_pareto(
            (
                item.department.code,
                split.departments[item.department.code].total("unused")
                if item.department.code in split.departments
                else 0.0,
                max(item.totals.allocated_gpu_hours - item.totals.busy_gpu_hours, 0.0),
            )
            for item in usage
        ),
        "proposals": proposals,
        "capacity": capacity_section,
        "reliability": _reliability(incidents, faults, ettr),
        "recommendations": _recommendations(user, cluster),
        "tickets": _tickets(tickets, overdue, start, end),
        "showback": _showback(usage, split, end, down=state_totals["down"]),
    }


def _ettr_values(incidents, *, now: datetime) -> list[float]:
    by_job = defaultdict(list)
    for incident in incidents:
        if incident.job_id:
            by_job[incident.job_id].append(incident)
    values = []
    for items in by_job.values():
        ratio = job_ettr(items[0].job, items, now=now)
        if ratio is not None:
            values.append(ratio)
    return values


def _completeness(cluster, end: datetime, coverage: float | None) -> list[dict]:
    rows = [
        {
            "source": source.name,
            "kind": source.kind,
            "watermark": _iso(source.watermark),
            "coverage": None,
            "complete": source.watermark is not None and source.watermark >= end,
        }
        for source in packs.pack_sources(cluster=cluster)
    ]
    rows.append(
        {
            "source": "gpu_activity",
            "kind": "rollup",
            "watermark": None,
            "coverage": _r6(coverage),
            "complete": coverage is not None and coverage >= 0.99,
        }
    )
    return rows


def _since_last(cluster, previous, start: datetime, end: datetime) -> dict:
    since = previous.period_end if previous is not None else start
    decisions = [
        {
            "id": decision.pk,
            "meeting_id": decision.meeting_id,
            "number": decision.number,
            "title": decision.title,
            "kind": decision.kind,
            "decided_at": _iso(decision.decided_at),
            "effect": None,
        }
        for decision in packs.pack_decisions_between(cluster=cluster, start=since, end=end)
    ]
    today = end.date()
    actions = [
        {
            "id": action.pk,
            "title": action.title,
            "owner": _name(action.owner) if action.owner else "",
            "due_on": action.due_on.isoformat(),
            "carried": action.carried,
            "overdue": action.due_on < today,
        }
        for action in packs.pack_open_actions(cluster=cluster)
    ]
    changes = [
        {
            "cycle_id": event.cycle_id,
            "at": _iso(event.at),
            "department": event.department.code,
            "gpu_model": event.gpu_model,
            "from": event.from_gpus,
            "to": event.to_gpus,
            "kind": event.kind,
        }
        for event in packs.pack_quota_events(cluster=cluster, start=start, end=end)
    ]
    return {"decisions": decisions, "actions_open": actions, "quota_changes": changes}


def _cluster_section(cluster, start, end, hours, states, state_totals, totals, user) -> dict:
    if not hours or states.capacity <= 0:
        return _unavailable(gettext_noop("no GPU-hours were recorded for this cluster in the period"))
    heatmap = packs.pack_heatmap(cluster=cluster, start=start, end=end)
    counts, _cycle_end = node_class_counts(user=user, cluster=cluster)
    class_gpus = packs.pack_node_class_gpus(cluster=cluster)
    capacity = states.capacity
    waterfall = [{"key": "capacity", "gpu_hours": _r3(capacity)}]
    waterfall += [
        {"key": name, "gpu_hours": _r3(state_totals[name])}
        for name in ("down", "unallocated", "allocated_idle", "busy")
    ]
    return {
        "capacity_waterfall": waterfall,
        "states": {
            "hours": [_iso(hour) for hour in hours],
            **{name: states.series(name) for name in ("busy", "allocated_idle", "unallocated", "down")},
        },
        "totals": {
            "capacity_gpu_hours": _r3(capacity),
            **{name: _r3(value) for name, value in state_totals.items()},
            "utilization": _r6(totals.utilization),
            "allocation_rate": _r6(totals.allocation_rate),
        },
        "heatmap": {
            "rows": heatmap.rows,
            "columns": [_iso(column) for column in heatmap.columns],
            "values": heatmap.values,
            "row_block": heatmap.row_block,
            "column_hours": heatmap.column_hours,
        },
        "node_classes": [
            {"class": name, "nodes": counts.get(name, 0), "gpus": class_gpus.get(name, 0)}
            for name in ("idle", "hot", "fluctuating", "steady", "unknown")
        ],
    }


def _departments(usage, hours, split) -> list[dict]:
    out = []
    for item in usage:
        code = item.department.code
        show = split.departments.get(code)
        t = item.totals
        entry = {
            "id": item.department.pk,
            "code": code,
            "name": item.department.name,
            "hours": [_iso(hour) for hour in hours],
            "guarantee": show.series("guarantee") if show else [0.0] * len(hours),
            "within": show.series("within") if show else [0.0] * len(hours),
            "borrowed": show.series("borrowed") if show else [0.0] * len(hours),
            "unused_guarantee": show.series("unused") if show else [0.0] * len(hours),
            "totals": {
                "allocated_gpu_hours": _r3(t.allocated_gpu_hours),
                "busy_gpu_hours": _r3(t.busy_gpu_hours),
                "utilization": _r6(t.utilization),
                "allocation_rate": _r6(t.allocation_rate),
                "guaranteed_gpu_hours": _r3(show.total("guarantee")) if show else 0.0,
                "within_gpu_hours": _r3(show.total("within")) if show else 0.0,
                "borrowed_gpu_hours": _r3(show.total("borrowed")) if show else 0.0,
                "lent_gpu_hours": _r3(show.total("lent")) if show else 0.0,
                "unused_guarantee_gpu_hours": _r3(show.total("unused")) if show else 0.0,
                "idle_gpu_hours": _r3(max(t.allocated_gpu_hours - t.busy_gpu_hours, 0.0)),
            },
        }
        out.append(entry)
    return out


def _proposals(user: User, cluster, end: datetime):
    cycle = packs.pack_proposed_cycle(cluster=cluster, after=end)
    if cycle is None:
        return _unavailable(gettext_noop("no quota cycle follows this period yet")), None
    rows = [
        {
            "department": quota.department.code,
            "gpu_model": quota.gpu_model,
            "current": quota.previous_gpus,
            "proposed": quota.proposed_gpus if quota.proposed_gpus is not None else quota.guaranteed_gpus,
            "explanation": quota.explanation,
        }
        for quota in cycle.quotas.select_related("department").order_by("department__code", "gpu_model")
    ]
    backtest = quota_backtest_latest(user=user, cycle=cycle)
    objections = [
        {"department": objection.department.code, "text": objection.text, "response": objection.response}
        for objection in cycle.objections.select_related("department").order_by("created_at", "pk")
    ]
    return (
        {
            "available": True,
            "cycle_id": cycle.pk,
            "status": cycle.status,
            "start": _iso(cycle.start),
            "end": _iso(cycle.end),
            "rows": rows,
            "proposal_settings": cycle.proposal_settings,
            "backtest": None if backtest is None else _backtest_summary(backtest.results),
            "objections": objections,
        },
        cycle,
    )


def _backtest_summary(results: list[dict]) -> list[dict]:
    """Each replayed policy's headline figures (the backtest page has the hour-by-hour detail)."""
    rows = []
    for result in results:
        queues = (result.get("queues") or {}).values()
        waits = [q["wait_p95_s"] for q in queues if q.get("wait_p95_s") is not None]
        capacity = result.get("capacity_gpu_s") or 0.0
        busy = result.get("busy_gpu_s")
        rows.append(
            {
                "policy": result.get("key", ""),
                "allocation_rate": _r6(result.get("allocation_rate")),
                "utilization": _r6(busy / capacity) if capacity and busy is not None else None,
                "unmet_gpu_hours": _r3(sum(q.get("unmet_gpu_hours") or 0.0 for q in queues)),
                "jobs_started": result.get("jobs_started"),
                "jobs_cancelled": result.get("jobs_cancelled"),
                "worst_wait_p95_s": _r3(max(waits)) if waits else None,
            }
        )
    return rows


def _capacity(user: User, cluster, start: datetime, end: datetime):
    capacity = cluster_capacity(cluster=cluster)
    alerts = list(capacity_alert_list(user=user).filter(cluster=cluster).order_by("raised_at", "pk"))
    if not capacity:
        return _unavailable(gettext_noop("the cluster has no GPUs in service")), alerts
    demand = hourly_demand(quota_job_rows(cluster=cluster, start=start, end=end), start=start, end=end)
    by_model: dict[str, list[float]] = {}
    for (_code, model), series in demand.items():
        total = by_model.setdefault(model, [0.0] * len(series))
        for index, gpus in enumerate(series):
            total[index] += gpus
    models = []
    for model in sorted(set(capacity) | set(by_model)):
        series = by_model.get(model, [])
        gpus = capacity.get(model, 0)
        models.append(
            {
                "gpu_model": model,
                "capacity_gpus": gpus,
                "demand_peak": _r3(max(series, default=0.0)),
                "unmet_gpu_hours": _r3(sum(max(value - gpus, 0.0) for value in series)),
                "forecast": [],
            }
        )
    return (
        {
            "available": True,
            "models": models,
            "alerts": [
                {
                    "gpu_model": alert.gpu_model,
                    "kind": alert.kind,
                    "gpus_needed": alert.gpus_needed,
                    "raised_at": _iso(alert.raised_at),
                }
                for alert in alerts
            ],
        },
        alerts,
    )


def _reliability(incidents, faults, ettr) -> dict:
    lost_by_category: dict[str, float] = defaultdict(float)
    for incident in incidents:
        lost_by_category[incident.category] += incident.gpu_hours_lost or 0.0
    by_node = Counter(incident.node.hostname for incident in incidents if incident.node_id)
    return {
        "incidents": [
            {
                "id": incident.pk,
                "category": incident.category,
                "severity": incident.severity,
                "node": incident.node.hostname if incident.node_id else None,
                "occurred_at": _iso(incident.occurred_at),
                "recovered_at": _iso(incident.recovered_at),
                "lost_gpu_hours": _r3(incident.gpu_hours_lost or 0.0),
            }
            for incident in sorted(incidents, key=lambda i: (i.occurred_at, i.pk))
        ],
        "pareto": [
            {
                "category": row.key[0],
                "count": faults.by_category[row.key[0]],
                "lost_gpu_hours": _r3(lost_by_category[row.key[0]]),
            }
            for row in pareto(
                (((category,), float(count)) for category, count in faults.by_category.items()),
            )
        ],
        "phases": phase_distributions(
            IncidentTimes(i.occurred_at, i.detected_at, i.located_at, i.restart_requested_at, i.recovered_at)
            for i in incidents
        ),
        "mttr_s": _r3(faults.mttr_median_s),
        "repeat_nodes": [
            {"node": node, "incidents": count}
            for node, count in sorted(by_node.items(), key=lambda kv: (-kv[1], kv[0]))
            if count > 1
        ],
        "ettr": _r6(ettr),
    }


def _recommendations(user: User, cluster) -> dict:
    rows = recommendation_list(user=user).filter(cluster=cluster).order_by()
    by_state = dict(Counter(rows.values_list("state", flat=True)))
    return {
        "by_state": by_state,
        "accepted": by_state.get(RecommendationState.ACCEPTED, 0),
        "rejected": by_state.get(RecommendationState.REJECTED, 0),
        "open": sum(by_state.get(state, 0) for state in RecommendationState.open()),
    }


def _tickets(tickets, overdue: int, start: datetime, end: datetime) -> dict:
    active = tickets.filter(state__in=TicketState.active())
    ageing = Counter()
    for created_at in active.values_list("created_at", flat=True):
        days = (end - created_at).total_seconds() / 86400
        label = next(label for limit, label in AGEING_BUCKETS if limit is None or days < limit)
        ageing[label] += 1
    verified = tickets.filter(verified_at__gte=start, verified_at__lt=end).order_by("verified_at", "pk")
    return {
        "by_state": ticket_state_counts(tickets),
        "open": active.count(),
        "overdue": overdue,
        "ageing": [{"bucket": label, "count": ageing.get(label, 0)} for _limit, label in AGEING_BUCKETS],
        "verified": [
            {
                "id": ticket.pk,
                "title": ticket.title,
                "department": ticket.department.code,
                "expected_gain_pct": ticket.expected_gain_pct,
                "measured_gain_pct": ticket.measured_gain_pct,
            }
            for ticket in verified
        ],
    }


def _showback(usage, split, end: datetime, *, down: float) -> dict:
    card = packs.rate_card_in_force(at=end)
    value = (
        None
        if card is None
        else RateCardValue(card.version, card.currency, dict(card.rates or {}), card.default_rate or "")
    )
    busy = {item.department.code: item.totals.busy_gpu_hours for item in usage}
    costs, central_cost, unpriced = department_costs(split, value, busy)
    names = {item.department.code: item.department.name for item in usage}
    total = sum((row.cost for row in costs), Decimal("0.00")) + central_cost
    central = split.central / 1000
    return {
        "rate_card": None
        if card is None
        else {
            "version": card.version,
            "currency": card.currency,
            "rates": {model: str(rate) for model, rate in (card.rates or {}).items()},
            "default_rate": card.default_rate or "",
        },
        "departments": [
            {
                "code": row.code,
                "name": names.get(row.code, row.code),
                "guaranteed_gpu_hours": _r3(split.departments[row.code].total("guarantee")),
                "borrowed_gpu_hours": _r3(split.departments[row.code].total("borrowed")),
                "lent_gpu_hours": _r3(split.departments[row.code].total("lent")),
                "charged_gpu_hours": _r3(row.charged_gpu_hours),
                "cost": float(row.cost),
                "busy_gpu_hours": _r3(row.busy_gpu_hours),
                "cost_per_effective_gpu_hour": None
                if row.cost_per_effective_gpu_hour is None
                else float(row.cost_per_effective_gpu_hour),
                "by_model": row.by_model,
            }
            for row in costs
        ],
        "central": {
            "gpu_hours": _r3(central),
            "unallocated_idle_gpu_hours": _r3(central - down),
            "down_gpu_hours": _r3(down),
            "cost": float(central_cost),
        },
        "capacity_gpu_hours": _r3(split.capacity / 1000),
        "total_cost": float(total),
        "unpriced_models": unpriced,
    }


# --- Sealing ---------------------------------------------------------------------------------------


def pack_generate(
    *,
    cluster,
    start: datetime,
    end: datetime,
    user=None,
    supersedes: ReviewPack | None = None,
    reason: str = "",
    now: datetime | None = None,
) -> ReviewPack:
    """Compute, seal and store the pack of [start, end): version 1 of the period, or the next
    version correcting ``supersedes`` (with ``reason``). The audit entry commits with it."""
    from efficiency.services.committee.audit import audit_append

    began = time.perf_counter()
    now = now or timezone.now()
    content = pack_content(cluster=cluster, start=start, end=end, now=now)
    text, digest = seal(content)
    card = packs.rate_card_in_force(at=end)
    with transaction.atomic():
        pack = ReviewPack(
            cluster=cluster,
            period_start=start,
            period_end=end,
            version=packs.pack_next_version(cluster=cluster, period_start=start),
            supersedes=supersedes,
            correction_reason=reason,
            definitions_version=DEFINITIONS_VERSION,
            time_zone=settings.TIME_ZONE,
            rate_card=card,
            content_json=text,
            content_hash=digest,
            generated_at=now,
            generated_by=user if user is not None and user.pk else None,
            generation_s=round(time.perf_counter() - began, 3),
        )
        pack.save()
        audit_append(
            actor=user if user is not None and user.pk else None,
            verb="pack_sealed",
            obj=pack,
            payload={"hash": digest, "version": pack.version},
            at=now,
        )
    return pack


def pack_notify(pack: ReviewPack, *, now: datetime | None = None) -> Notification:
    """Tell the committee the pack is ready (routed to the committee group after commit)."""
    from efficiency import dispatch

    notification = Notification.objects.create(
        event=NotificationEvent.PACK_READY,
        created_at=now or timezone.now(),
        payload={
            "id": pack.pk,
            "cluster": pack.cluster.name,
            "version": pack.version,
            "period_start": _iso(pack.period_start),
            "period_end": _iso(pack.period_end),
            "hash": pack.content_hash,
        },
    )
    dispatch.notification_route(notification.pk)
    return notification


def pack_generate_due(*, now: datetime | None = None) -> list[ReviewPack]:
    """For each cluster, generate the pack of the last complete period unless it exists, and
    notify the committee. Idempotent: a second run in the same period does nothing."""
    now = now or timezone.now()
    made = []
    for cluster in packs.pack_clusters():
        start, end = pack_period_for(cluster, now)
        if end > now or packs.pack_latest_for_period(cluster=cluster, period_start=start) is not None:
            continue
        if not packs.pack_has_data(cluster=cluster, start=start, end=end):
            continue
        pack = pack_generate(cluster=cluster, start=start, end=end, now=now)
        pack_notify(pack, now=now)
        made.append(pack)
    return made


def pack_request(
    *, cluster_id: int, user_id: int | None = None, corrects_id: int | None = None, reason: str = ""
) -> ReviewPack | None:
    """Build a pack a person asked for (in a worker): the correction of pack ``corrects_id``
    (same period, with ``reason``), or the last complete period's pack when it has none yet.
    Returns None when there is nothing to do (already built, already corrected, gone)."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    if corrects_id is not None:
        old = ReviewPack.objects.select_related("cluster").filter(pk=corrects_id).first()
        if old is None or not old.is_current:
            return None
        return pack_generate(
            cluster=old.cluster,
            start=old.period_start,
            end=old.period_end,
            user=user,
            supersedes=old,
            reason=reason,
        )
    cluster = next((c for c in packs.pack_clusters() if c.pk == cluster_id), None)
    if cluster is None:
        return None
    now = timezone.now()
    start, end = pack_period_for(cluster, now)
    if packs.pack_latest_for_period(cluster=cluster, period_start=start) is not None:
        return None
    pack = pack_generate(cluster=cluster, start=start, end=end, user=user, now=now)
    pack_notify(pack, now=now)
    return pack
