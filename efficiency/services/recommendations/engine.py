"""The recommendation engine: read jobs, logs and rollups → the rules (pure) → recommendations.

``recommendations_refresh`` runs after collections (incremental: the families of jobs that ran in
the last hours or got new log lines) and nightly (full: every family of the window, plus the node
and department rules). A family's recommendation holds while the family's latest job that can be
judged (enough GPU time, or logs) still shows the condition; when it no longer does, the engine
closes the recommendation with that job's start. A rejected recommendation is proposed again only
when its fingerprint (the observed values) changes; a snoozed one when its date has come.
"""

import logging
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, F, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from efficiency.analysis.recommendations.families import Draft, JobFindings, family_key, group_findings
from efficiency.analysis.recommendations.logfacts import LogFacts
from efficiency.analysis.recommendations.rules import (
    FamilyWindow,
    JobMetrics,
    JobView,
    Settings,
    audit_job,
    guarantee_finding,
    judged_rules,
    low_efficiency,
    node_class_finding,
)
from efficiency.analysis.stats import percentile
from efficiency.choices import FaultCategory, RecommendationAction, RecommendationState, RecommendationSubject
from efficiency.models import (
    GpuSample,
    Incident,
    Job,
    JobHour,
    JobLogFacts,
    Node,
    NodeClassification,
    QuotaCycle,
    Recommendation,
    RecommendationDecision,
)
from efficiency.services.recommendations.logfacts import job_log_facts_update

logger = logging.getLogger(__name__)

RECENT = timedelta(hours=2)  # an incremental run re-evaluates families with a job running this recently
LOW_EFFICIENCY_DAYS = 7
MTBF_DAYS = 30
# Failures that end a job through no fault of its own code: the checkpoint interval is sized for these.
INFRASTRUCTURE_FAULTS = (
    FaultCategory.HARDWARE_GPU,
    FaultCategory.HARDWARE_MEMORY_ECC,
    FaultCategory.NVLINK,
    FaultCategory.NETWORK_RDMA,
    FaultCategory.NCCL_TIMEOUT_HANG,
    FaultCategory.STORAGE_IO,
)


@dataclass
class RefreshSummary:
    jobs: int = 0
    families: int = 0
    created: int = 0
    updated: int = 0
    reopened: int = 0
    closed: int = 0
    facts_read: int = 0
    rules: dict[str, int] = field(default_factory=dict)


def rule_settings() -> Settings:
    return Settings(**settings.PORTAL_RECOMMENDATIONS)


def recommendations_refresh(*, now: datetime | None = None, full: bool = False) -> RefreshSummary:
    """Run the engine (see the module's docstring); idempotent."""
    now = now or timezone.now()
    rules = rule_settings()
    window_days = settings.PORTAL_RECOMMENDATION_WINDOW_DAYS
    window_start = now - timedelta(days=window_days)
    summary = RefreshSummary()
    touched_jobs = job_log_facts_update()
    summary.facts_read = len(touched_jobs)

    jobs = Job.objects.filter(started_at__isnull=False, started_at__lt=now).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=window_start)
    )
    if not full:
        recent = Q(ended_at__isnull=True) | Q(ended_at__gte=now - RECENT) | Q(pk__in=list(touched_jobs))
        families = {
            (department, user, name)
            for department, user, name in jobs.filter(recent).values_list(
                "department_id", "user_name", "name"
            )
        }
        if not families:
            return summary
        keys = {family_key(str(d or "-"), u, n) for d, u, n in families}
        users = {u for _, u, _ in families}
        jobs = jobs.filter(user_name__in=users)
    else:
        keys = None
    rows = list(
        jobs.values(
            "pk",
            "external_id",
            "name",
            "user_name",
            "department_id",
            "cluster_id",
            "gpu_count",
            "gpu_milli",
            "node_count",
            "gpu_model",
            "config",
            "framework",
            "started_at",
            "ended_at",
        )
    )
    if keys is not None:
        rows = [
            r for r in rows if family_key(str(r["department_id"] or "-"), r["user_name"], r["name"]) in keys
        ]
    summary.jobs = len(rows)
    views = _job_views(rows, jobs, now=now, window_start=window_start, rules=rules)
    findings = [
        JobFindings(
            job=view,
            job_id=row["pk"],
            findings=tuple(audit_job(view, rules)),
            allocated_gpu_h=view.metrics.allocated_gpu_h if view.metrics else 0.0,
            start=row["started_at"],
            end=row["ended_at"],
        )
        for row, view in zip(rows, views, strict=True)
    ]
    drafts = group_findings(findings, window_days=window_days)
    latest = _latest_rules(findings, rules)
    family_rows: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        family_rows[family_key(str(row["department_id"] or "-"), row["user_name"], row["name"])].append(row)
    drafts += _low_efficiency_drafts(family_rows, jobs, now=now, rules=rules, latest=latest)
    summary.families = len(family_rows)
    clusters = {
        family_key(str(r["department_id"] or "-"), r["user_name"], r["name"]): r["cluster_id"] for r in rows
    }
    evaluated = {(RecommendationSubject.JOB_FAMILY, key) for key in family_rows}
    node_drafts = _node_drafts(now=now) if full else []
    department_drafts = _department_drafts(now=now) if full else []
    with transaction.atomic():
        _store(
            [(d, RecommendationSubject.JOB_FAMILY, latest.get(d.subject_key, set())) for d in drafts]
            + [(d, RecommendationSubject.NODE, None) for d, _ in node_drafts]
            + [(d, RecommendationSubject.DEPARTMENT, None) for d in department_drafts],
            clusters=clusters,
            nodes={d.subject_key: node_id for d, node_id in node_drafts},
            evaluated=evaluated,
            full=full,
            now=now,
            summary=summary,
            min_gain_pct=rules.min_gain_pct,
        )
    for draft in drafts:
        summary.rules[draft.rule] = summary.rules.get(draft.rule, 0) + 1
    logger.info(
        "Recommendations refreshed (%s): %d jobs, %d families, %d created, %d updated, %d reopened, "
        "%d closed.",
        "full" if full else "incremental",
        summary.jobs,
        summary.families,
        summary.created,
        summary.updated,
        summary.reopened,
        summary.closed,
    )
    return summary


# --- Reading ---------------------------------------------------------------------------------


def _job_views(
    rows: list[dict], jobs: QuerySet, *, now: datetime, window_start: datetime, rules: Settings
) -> list[JobView]:
    """The rules' view of each job. ``jobs`` is the window's queryset the rows came from: related
    rows are read with it as a subquery (no list of ids to build and bind), and rows of jobs that
    are not in ``rows`` are ignored."""
    window = jobs.values("pk")
    metrics = _job_metrics(window, rows, window_start=window_start, rules=rules)
    facts = {}
    for job_id, data in (
        JobLogFacts.objects.filter(job_id__in=window).values_list("job_id", "facts").iterator(chunk_size=5000)
    ):
        if data:
            facts[job_id] = LogFacts.from_dict(data)
    rdma: dict[int, list[bool]] = defaultdict(list)
    node_gpus: dict[int, int] = defaultdict(int)
    job_nodes: dict[int, list[int]] = defaultdict(list)
    for job_id, node_id, capable, gpus in Job.nodes.through.objects.filter(job_id__in=window).values_list(
        "job_id", "node_id", "node__rdma_capable", "node__gpu_count"
    ):
        rdma[job_id].append(capable)
        node_gpus[job_id] += gpus
        job_nodes[job_id].append(node_id)
    mtbf = _mtbf_per_node_h(now=now)
    views = []
    metrics = {
        row["pk"]: _with_sharing(metrics.get(row["pk"]), row, node_gpus.get(row["pk"])) for row in rows
    }
    active = _gpus_active(rows, metrics, job_nodes, now=now, rules=rules)
    for row in rows:
        capable = rdma.get(row["pk"])
        nodes = row["node_count"] or 1
        views.append(
            JobView(
                key=row["external_id"],
                name=row["name"],
                user=row["user_name"],
                department=str(row["department_id"] or "-"),
                gpu_count=row["gpu_count"],
                node_count=row["node_count"],
                gpu_model=row["gpu_model"],
                rdma=all(capable) if capable else None,
                config=row["config"] if isinstance(row["config"], dict) else {},
                framework=row["framework"],
                log=facts.get(row["pk"]),
                metrics=(
                    replace(metrics[row["pk"]], gpus_active=active[row["pk"]])
                    if row["pk"] in active
                    else metrics[row["pk"]]
                ),
                checkpoint_mtbf_h=mtbf / nodes if mtbf is not None else None,
            )
        )
    return views


MAX_GPU_COUNT_CHECKS = 2_000  # jobs per run whose GPUs are counted one by one from raw samples
ACTIVE_GPU_PCT = 5.0  # a GPU whose mean activity over the job reached this was used


def _gpus_active(
    rows: list[dict],
    metrics: dict[int, JobMetrics | None],
    job_nodes: dict[int, list[int]],
    *,
    now: datetime,
    rules: Settings,
) -> dict[int, int]:
    """How many of its GPUs each candidate job really used, counted from the raw samples of its
    nodes: jobs that held whole nodes (so every GPU of those nodes is theirs), at least two GPUs and
    a GPU-hour, and a low activity (a busy job uses its GPUs). The busiest candidates by GPU-hours
    first, at most ``MAX_GPU_COUNT_CHECKS`` a run."""
    candidates = [
        row
        for row in rows
        if (m := metrics.get(row["pk"])) is not None
        and not m.shared
        and row["gpu_count"] >= 2
        and m.allocated_gpu_h >= rules.min_gpu_h
        and m.activity is not None
        and m.activity < rules.overrequest_ratio
        and row["started_at"] is not None
    ]
    candidates.sort(key=lambda row: -metrics[row["pk"]].allocated_gpu_h)
    active: dict[int, int] = {}
    for row in candidates[:MAX_GPU_COUNT_CHECKS]:
        per_gpu = (
            GpuSample.objects.filter(
                node_id__in=job_nodes.get(row["pk"], []),
                ts__gte=row["started_at"],
                ts__lt=row["ended_at"] or now,
            )
            .values("node_id", "gpu_index")
            .annotate(mean=Avg(Coalesce("gr_engine_active_pct", "util_pct")))
        )
        means = [entry["mean"] for entry in per_gpu if entry["mean"] is not None]
        if means:  # raw samples past retention: nothing to count
            active[row["pk"]] = sum(1 for mean in means if mean >= ACTIVE_GPU_PCT)
    return active


def _with_sharing(metrics: JobMetrics | None, row: dict, node_gpus: int | None) -> JobMetrics | None:
    """Mark a job that did not hold every GPU of its nodes: its activity is a share of theirs."""
    if metrics is None:
        return None
    held = (row["gpu_milli"] or row["gpu_count"] * 1000) / 1000
    shared = node_gpus is None or held < node_gpus
    return replace(metrics, shared=shared) if shared else metrics


def _job_metrics(
    window: QuerySet, rows: list[dict], *, window_start: datetime, rules: Settings
) -> dict[int, JobMetrics]:
    """Per job: GPU-hours held and busy in the window, and its longest stretch held near 0%."""
    idle_line = rules.idle_activity_pct / 100
    hours = JobHour.objects.filter(job_id__in=window, hour__gte=window_start)
    idle: dict[int, list[tuple[datetime, float]]] = defaultdict(list)
    for job_id, hour, allocated in (
        hours.filter(allocated_gpu_s__gt=0, busy_gpu_s__lte=F("allocated_gpu_s") * idle_line)
        .order_by("job_id", "hour")
        .values_list("job_id", "hour", "allocated_gpu_s")
    ):
        idle[job_id].append((hour, allocated))
    gpus = {row["pk"]: (row["gpu_milli"] or row["gpu_count"] * 1000) / 1000 for row in rows}
    totals: dict[int, JobMetrics] = {}
    for job_id, allocated, busy, sm in (
        hours.values("job_id")
        .annotate(a=Sum("allocated_gpu_s"), b=Sum("busy_gpu_s"), s=Sum("sm_active_busy_gpu_s"))
        .values_list("job_id", "a", "b", "s")
    ):
        if job_id not in gpus:
            continue
        minutes, until = _longest_idle(idle.get(job_id, ()), gpus=gpus[job_id] or 1.0)
        sm, busy = sm or 0.0, busy or 0.0
        totals[job_id] = JobMetrics(
            start=None,
            end=None,
            allocated_gpu_h=(allocated or 0.0) / 3600,
            busy_gpu_h=busy / 3600,
            # No SM activity at all beside engine activity: the exporter reports none.
            sm_busy_gpu_h=sm / 3600 if sm > 0 or busy == 0 else None,
            idle_minutes=minutes,
            idle_until=until,
        )
    return totals


def _longest_idle(hours: Iterable[tuple[datetime, float]], *, gpus: float) -> tuple[float, datetime | None]:
    """The longest run of consecutive idle hours, in minutes the job held its GPUs (a partial
    first or last hour counts what it held)."""
    best, best_until = 0.0, None
    run, previous = 0.0, None
    for hour, allocated in hours:
        if previous is not None and hour - previous != timedelta(hours=1):
            run = 0.0
        run += allocated / max(gpus, 1e-9) / 60
        previous = hour
        if run > best:
            best, best_until = run, hour + timedelta(hours=1)
    return best, best_until


def _mtbf_per_node_h(*, now: datetime) -> float | None:
    """Mean time between infrastructure failures per node, measured over the last 30 days:
    node-hours of jobs over incidents that ended or struck a job (None without a failure)."""
    since = now - timedelta(days=MTBF_DAYS)
    failures = Incident.objects.filter(
        occurred_at__gte=since, job__isnull=False, category__in=INFRASTRUCTURE_FAULTS
    ).count()
    if not failures:
        return None
    gpu_s = JobHour.objects.filter(hour__gte=since).aggregate(total=Sum("allocated_gpu_s"))["total"] or 0.0
    gpus_per_node = Node.objects.filter(gpu_count__gt=0).values_list("gpu_count", flat=True).first() or 8
    node_h = gpu_s / 3600 / gpus_per_node
    return node_h / failures if node_h > 0 else None


def _latest_rules(findings: list[JobFindings], rules: Settings) -> dict[str, set[str]]:
    """Per family: the rules that still hold, each decided by the family's latest job that rule
    can judge (a single-node run says nothing of the network; a job without metrics nothing of
    activity)."""
    latest: dict[tuple[str, str], tuple[datetime, bool]] = {}
    for item in findings:
        if item.start is None:
            continue
        key = family_key(item.job.department, item.job.user, item.job.name)
        found = {f.rule for f in item.findings}
        for rule, cause in judged_rules(item.job, rules).items():
            previous = latest.get((key, rule))
            if previous is None or item.start >= previous[0]:
                latest[(key, rule)] = (item.start, rule in found if cause is None else cause)
    holding: dict[str, set[str]] = defaultdict(set)
    for (key, rule), (_, holds) in latest.items():
        if holds:
            holding[key].add(rule)
    return holding


def _low_efficiency_drafts(
    family_rows: dict[str, list[dict]],
    jobs: QuerySet,
    *,
    now: datetime,
    rules: Settings,
    latest: dict[str, set[str]],
) -> list[Draft]:
    since = now - timedelta(days=LOW_EFFICIENCY_DAYS)
    ids = {row["pk"]: key for key, rows in family_rows.items() for row in rows}
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for job_id, allocated, busy, sm in (
        JobHour.objects.filter(job_id__in=jobs.values("pk"), hour__gte=since)
        .values("job_id")
        .annotate(a=Sum("allocated_gpu_s"), b=Sum("busy_gpu_s"), s=Sum("sm_active_busy_gpu_s"))
        .values_list("job_id", "a", "b", "s")
    ):
        if job_id not in ids:
            continue
        entry = sums[ids[job_id]]
        entry[0] += allocated or 0.0
        entry[1] += busy or 0.0
        entry[2] += sm or 0.0
    drafts = []
    for key, (allocated, busy, sm) in sums.items():
        window = FamilyWindow(
            days=LOW_EFFICIENCY_DAYS,
            allocated_gpu_h=allocated / 3600,
            busy_gpu_h=busy / 3600,
            sm_busy_gpu_h=sm / 3600 if sm > 0 or busy == 0 else None,
        )
        finding = low_efficiency(window, rules)
        if finding is None:
            continue
        latest.setdefault(key, set()).add(finding.rule)
        rows = family_rows[key]
        first = rows[0]
        drafts.append(
            Draft.of_finding(
                finding,
                subject_key=key,
                department=str(first["department_id"] or "-"),
                user=first["user_name"],
                pattern=key.split("/", 2)[2],
                job_ids=[row["pk"] for row in rows],
                gain_gpu_h_week=(finding.gain_gpu_h or 0.0) / (LOW_EFFICIENCY_DAYS / 7),
                gpu_h_week=window.allocated_gpu_h / (LOW_EFFICIENCY_DAYS / 7),
                first_seen=min(r["started_at"] for r in rows),
                last_seen=max(r["ended_at"] or now for r in rows),
            )
        )
    return drafts


def _department_drafts(*, now: datetime) -> list[Draft]:
    """Guarantees far above or below demand, from the latest cycle with a proposal: the in-force
    guarantee (``previous_gpus``) against the P90 of the hourly demand the proposal used."""
    cycle = (
        QuotaCycle.objects.filter(quotas__proposed_gpus__isnull=False, end__gt=now)
        .order_by("-start")
        .distinct()
        .first()
    )
    if cycle is None:
        return []
    drafts = []
    for quota in cycle.quotas.select_related("department"):
        demand = [float(v) for v in quota.demand_gpus if isinstance(v, int | float)]
        if not demand:
            continue
        guaranteed = quota.previous_gpus if quota.previous_gpus is not None else quota.guaranteed_gpus
        finding = guarantee_finding(
            department=quota.department.code,
            guaranteed_gpus=float(guaranteed),
            demand_p90_gpus=round(percentile(demand, 90) or 0.0, 1),
            proposed_gpus=quota.proposed_gpus,
        )
        if finding is None:
            continue
        finding = replace(finding, params={**finding.params, "cycle": cycle.pk, "gpu_model": quota.gpu_model})
        drafts.append(
            Draft.of_finding(
                finding,
                subject_key=f"{quota.department_id}/{quota.gpu_model}",
                department=str(quota.department_id),
                gain_gpu_h_week=finding.gain_gpu_h or 0.0,
                gpu_h_week=float(guaranteed) * 24 * 7,
                first_seen=cycle.demand_start or cycle.start,
                last_seen=cycle.demand_end or now,
            )
        )
    return drafts


def _node_drafts(*, now: datetime) -> list[tuple[Draft, int]]:
    """Idle and hot nodes of the latest classification of each node."""
    latest = (
        NodeClassification.objects.filter(
            node_class__in=("idle", "hot"), cycle_end__gte=now - timedelta(days=2)
        )
        .select_related("node")
        .order_by("node_id", "-cycle_end")
    )
    drafts, seen = [], set()
    for row in latest:
        if row.node_id in seen:
            continue
        seen.add(row.node_id)
        days = max((row.cycle_end - row.cycle_start).total_seconds() / 86400, 1.0)
        finding = node_class_finding(
            hostname=row.node.hostname,
            node_class=row.node_class,
            gpu_count=row.node.gpu_count,
            util_pct=row.mean_util_pct,
            cycle_days=days,
        )
        if finding is None:
            continue
        weekly = (finding.gain_gpu_h or 0.0) / (days / 7)
        draft = Draft.of_finding(
            finding,
            subject_key=row.node.hostname,
            department=str(row.node.owner_department_id or "-"),
            gain_gpu_h_week=weekly,
            gpu_h_week=row.node.gpu_count * 24 * 7,
            first_seen=row.cycle_start,
            last_seen=row.cycle_end,
        )
        drafts.append((draft, row.node_id))
    return drafts


# --- Writing ---------------------------------------------------------------------------------


def _department_id(value: str) -> int | None:
    return int(value) if value and value != "-" else None


def _store(
    drafts: list[tuple[Draft, str, set[str] | None]],
    *,
    clusters: dict[str, int],
    nodes: dict[str, int],
    evaluated: set[tuple[str, str]],
    full: bool,
    now: datetime,
    summary: RefreshSummary,
    min_gain_pct: float,
) -> None:
    existing = {
        (rec.rule, rec.subject_kind, rec.subject_key): rec
        for rec in Recommendation.objects.filter(
            Q(subject_key__in=[d.subject_key for d, _, _ in drafts]) | Q(state__in=RecommendationState.open())
        )
    }
    decisions: list[RecommendationDecision] = []
    holding: set[tuple[str, str, str]] = set()
    for draft, kind, latest_rules in drafts:
        holds = latest_rules is None or draft.rule in latest_rules
        key = (draft.rule, kind, draft.subject_key)
        rec = existing.get(key)
        if not holds:
            continue  # older jobs had it, the latest one does not: closed below if stored
        holding.add(key)
        values = _values(draft, now=now)
        if rec is None:
            if kind == RecommendationSubject.JOB_FAMILY and draft.gain_pct < min_gain_pct:
                continue  # not worth proposing; one already proposed keeps being updated
            rec = Recommendation.objects.create(
                rule=draft.rule,
                subject_kind=kind,
                subject_key=draft.subject_key,
                cluster_id=clusters.get(draft.subject_key),
                department_id=_department_id(draft.department),
                user_name=draft.user,
                name_pattern=draft.pattern,
                node_id=nodes.get(draft.subject_key),
                first_seen=draft.first_seen or now,
                **values,
            )
            decisions.append(
                RecommendationDecision(recommendation=rec, action=RecommendationAction.PROPOSED, at=now)
            )
            summary.created += 1
        else:
            reopen = (
                rec.state == RecommendationState.CLOSED
                or (
                    rec.state == RecommendationState.REJECTED
                    and values["fingerprint"] != rec.rejected_fingerprint
                )
                or (
                    rec.state == RecommendationState.SNOOZED
                    and rec.snoozed_until is not None
                    and rec.snoozed_until <= timezone.localdate(now)
                )
            )
            for name, value in values.items():
                setattr(rec, name, value)
            if draft.first_seen and draft.first_seen < rec.first_seen:
                rec.first_seen = draft.first_seen
            if reopen:
                rec.state, rec.closed_at, rec.snoozed_until = RecommendationState.PROPOSED, None, None
                decisions.append(
                    RecommendationDecision(recommendation=rec, action=RecommendationAction.REOPENED, at=now)
                )
                summary.reopened += 1
            rec.save()
            summary.updated += 1
        if kind == RecommendationSubject.JOB_FAMILY:
            rec.jobs.set(draft.job_ids[-200:])
    for key, rec in existing.items():
        if rec.state not in RecommendationState.open() or key in holding:
            continue
        if not full and (rec.subject_kind, rec.subject_key) not in evaluated:
            continue  # an incremental run looks at some families only
        rec.state, rec.closed_at = RecommendationState.CLOSED, now
        rec.save(update_fields=["state", "closed_at", "updated_at"])
        decisions.append(
            RecommendationDecision(recommendation=rec, action=RecommendationAction.CLOSED, at=now)
        )
        summary.closed += 1
    RecommendationDecision.objects.bulk_create(decisions)


def _values(draft: Draft, *, now: datetime) -> dict:
    finding = draft.finding
    return {
        "observed": finding.observed,
        "ideal": finding.ideal,
        "change": finding.change,
        "evidence": draft.evidence,
        "config": [list(row) for row in finding.config],
        "params": dict(finding.params),
        "gain_gpu_h_week": round(draft.gain_gpu_h_week, 3) if math.isfinite(draft.gain_gpu_h_week) else 0.0,
        "gain_pct": round(draft.gain_pct, 2),
        "gpu_h_week": round(draft.gpu_h_week, 3),
        "confidence": draft.confidence,
        "fingerprint": draft.fingerprint,
        "last_seen": draft.last_seen or now,
        "job_count": len(draft.job_ids),
    }
