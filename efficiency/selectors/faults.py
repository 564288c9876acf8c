"""Faults as the pages, reports and API read them, scoped like everything else."""

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime

from django.conf import settings
from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from efficiency.analysis.faults.ettr import FaultLoss, ettr
from efficiency.analysis.stats import percentile
from efficiency.choices import IncidentStatus, NodeState
from efficiency.models import FaultSignal, Incident, IncidentAction, Job, Node, NodeStateChange
from efficiency.scoping import User, scope_queryset
from efficiency.timeranges import TimeRange


def incident_list(*, user: User, time_range: TimeRange | None = None) -> QuerySet[Incident]:
    incidents = scope_queryset(
        Incident.objects.select_related("job", "node", "department", "cluster", "closed_by"), user
    )
    if time_range is not None:
        incidents = incidents.filter(occurred_at__gte=time_range.start, occurred_at__lt=time_range.end)
    return incidents.order_by("-occurred_at")


def incident_detail_list(*, user: User) -> QuerySet[Incident]:
    """Incidents with the evidence the user may see (in time order) and their actions, prefetched:
    what an incident's page and the API's detail show."""
    return incident_list(user=user).prefetch_related(
        Prefetch(
            "signals",
            queryset=scope_queryset(FaultSignal.objects.select_related("node", "job"), user).order_by(
                "occurred_at", "pk"
            ),
        ),
        Prefetch(
            "actions",
            queryset=IncidentAction.objects.select_related("actor").order_by("requested_at", "pk"),
        ),
    )


def incident_get(*, user: User, pk: int) -> Incident:
    """An incident with the evidence the user may see (in time order) and its actions."""
    return incident_detail_list(user=user).get(pk=pk)


def fault_signal_list(*, user: User, time_range: TimeRange) -> QuerySet[FaultSignal]:
    signals = scope_queryset(FaultSignal.objects.select_related("node", "job"), user)
    return signals.filter(occurred_at__gte=time_range.start, occurred_at__lt=time_range.end).order_by(
        "occurred_at"
    )


@dataclass(frozen=True)
class NodeFaultState:
    """A node's fault side for its page: the incident it is isolated for, its recent incidents and
    its state history, as far as the user may see them."""

    isolating_incident: Incident | None
    incidents: list[Incident]
    history: list[NodeStateChange]


def node_isolating_incident(*, node: Node) -> Incident | None:
    """The incident a node was isolated for: the one its history names, else its latest incident."""
    change = node.state_changes.filter(state=NodeState.ISOLATED, incident__isnull=False).first()
    if change is not None:
        return change.incident
    return node.incidents.order_by("-occurred_at").first()


def node_fault_state(*, user: User, node: Node, limit: int = 10) -> NodeFaultState:
    """What the node page shows of faults (efficiency.templatetags.faults)."""
    visible = incident_list(user=user).filter(node=node)
    isolating = None
    if node.state == NodeState.ISOLATED:
        candidate = node_isolating_incident(node=node)
        isolating = visible.filter(pk=candidate.pk).first() if candidate else None
    history = scope_queryset(NodeStateChange.objects.filter(node=node), user).select_related(
        "actor", "incident"
    )
    return NodeFaultState(
        isolating_incident=isolating,
        incidents=list(visible.select_related(None).select_related("job")[:limit]),
        history=list(history[:limit]),
    )


@dataclass
class FaultSummary:
    """``resolved``: incidents that recovered (the job ran again); ``closed``: ended without a
    recovery, in no MTTR."""

    incidents: int = 0
    resolved: int = 0
    closed: int = 0
    mttr_median_s: float | None = None
    detect_median_s: float | None = None
    locate_median_s: float | None = None
    gpu_hours_lost: float = 0.0
    by_category: Counter = field(default_factory=Counter)
    by_fault_domain: Counter = field(default_factory=Counter)  # fault domain, '' or None -> count


def fault_summary(incidents: list[Incident]) -> FaultSummary:
    """Counts, medians of MTTR and of the time to detect and to locate, GPU-hours lost."""
    summary = FaultSummary(incidents=len(incidents))
    mttr, detect, locate = [], [], []
    for incident in incidents:
        summary.by_category[incident.category] += 1
        # None: no node located yet; "": a node without a fault domain.
        summary.by_fault_domain[incident.node.fault_domain if incident.node else None] += 1
        summary.gpu_hours_lost += incident.gpu_hours_lost or 0.0
        detect.append(incident.time_to_detect_s)
        if incident.time_to_locate_s is not None:
            locate.append(incident.time_to_locate_s)
        if incident.mttr_s is not None:
            summary.resolved += 1
            mttr.append(incident.mttr_s)
        elif incident.status == IncidentStatus.CLOSED:
            summary.closed += 1
    summary.mttr_median_s = percentile(mttr, 50)
    summary.detect_median_s = percentile(detect, 50)
    summary.locate_median_s = percentile(locate, 50)
    return summary


@dataclass(frozen=True)
class DayTrend:
    day: date
    mttr_median_s: float | None
    detect_median_s: float | None
    locate_median_s: float | None
    ettr_median: float | None = None


def fault_daily_trend(incidents: list[Incident], *, now: datetime | None = None) -> list[DayTrend]:
    """Per day (display time zone) of occurrence: median MTTR, time to detect and to locate, and
    the median ETTR of the jobs hit that day."""
    now = now or timezone.now()
    by_job: dict[int, list[Incident]] = defaultdict(list)
    for incident in incidents:
        if incident.job_id:
            by_job[incident.job_id].append(incident)
    by_day: dict[date, list[Incident]] = defaultdict(list)
    for incident in incidents:
        by_day[timezone.localtime(incident.occurred_at).date()].append(incident)
    trend = []
    for day in sorted(by_day):
        day_incidents = by_day[day]
        trend.append(
            DayTrend(
                day=day,
                mttr_median_s=percentile([i.mttr_s for i in day_incidents if i.mttr_s is not None], 50),
                detect_median_s=percentile([i.time_to_detect_s for i in day_incidents], 50),
                locate_median_s=percentile(
                    [i.time_to_locate_s for i in day_incidents if i.time_to_locate_s is not None], 50
                ),
                ettr_median=percentile(
                    [
                        ratio
                        for job_id in {i.job_id for i in day_incidents if i.job_id}
                        if (ratio := job_ettr(by_job[job_id][0].job, by_job[job_id], now=now)) is not None
                    ],
                    50,
                ),
            )
        )
    return trend


def rollback_s(incident: Incident) -> float:
    """Work since the last checkpoint, redone after the restart: assumed half a checkpoint
    interval when the logs did not say, and never more than the job had run."""
    if incident.last_checkpoint_at is not None:
        return max(0.0, (incident.occurred_at - incident.last_checkpoint_at).total_seconds())
    assumed = settings.PORTAL_CHECKPOINT_INTERVAL_S / 2
    if incident.job is not None and incident.job.started_at is not None:
        assumed = min(assumed, (incident.occurred_at - incident.job.started_at).total_seconds())
    return max(0.0, assumed)


def job_ettr(job: Job, incidents: list[Incident], *, now: datetime) -> float | None:
    """A job's effective training time ratio (efficiency.analysis.faults.ettr)."""
    if job.started_at is None:
        return None
    end = job.ended_at or now
    losses = [FaultLoss(i.occurred_at, rollback_s(i), i.recovered_at or job.ended_at) for i in incidents]
    return ettr(job.started_at, end, losses)


def ettr_list(incidents: list[Incident], *, now: datetime, limit: int = 20) -> list[tuple[Job, float]]:
    """The jobs hit by these incidents with their ETTR, lowest first."""
    by_job: dict[int, list[Incident]] = defaultdict(list)
    jobs = {}
    for incident in incidents:
        if incident.job is not None:
            by_job[incident.job_id].append(incident)
            jobs[incident.job_id] = incident.job
    ratios = [(jobs[pk], job_ettr(jobs[pk], items, now=now)) for pk, items in by_job.items()]
    return sorted(((job, ratio) for job, ratio in ratios if ratio is not None), key=lambda item: item[1])[
        :limit
    ]
