"""The demo's data: weeks of simulated history, then live data, through the production collectors.

The simulator writes what real systems write (dcgm-exporter text, ``sacct`` output, job and
kernel logs); the history goes through the same parse → map → ingest path as a live scrape,
and live data is collected by ordinary data sources pointed at the simulator.
"""

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from efficiency.actuators.command import SLURM_DRAIN, SLURM_REQUEUE, SLURM_RESUME
from efficiency.choices import ActionKind, JobSource, SourceKind
from efficiency.collectors.dcgm import gpu_readings_from_exposition
from efficiency.collectors.slurm import parse_sacct
from efficiency.days import day_start_after
from efficiency.models import ActuatorConfig, Cluster, DataSource, Incident, QuotaCycle, RollupDirtyHour
from efficiency.services import quotas
from efficiency.services.classification import node_classes_refresh
from efficiency.services.faults import (
    fault_detect_jobs,
    fault_policies_ensure,
    fault_scan_source,
    incident_policy_apply,
    incidents_group,
    incidents_refresh,
)
from efficiency.services.ingest import jobs_ingest
from efficiency.services.recommendations import recommendations_refresh
from efficiency.services.rollups import rollups_refresh
from efficiency.services.sources import gpu_readings_store, source_collect
from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes
from efficiency.times import portal_day_zone

logger = logging.getLogger(__name__)

DEMO_COMMITTEE_USERNAME = "committee"  # demo_organisation_create makes this login
LOG_HISTORY_STEP = timedelta(minutes=15)
DETECT_EVERY = timedelta(hours=6)  # progress detectors over the history (live: every minute)
# How long after its evidence the live demo sees a fault: the log source is read every 15 s, the
# progress detectors run every minute. The replay stamps detection by these, not by its steps.
LOG_SCAN_LATENCY = timedelta(seconds=15)
DETECTOR_LATENCY = timedelta(minutes=1)
LOG_DAYS = 2  # job logs are bulky: the demo keeps the last two days of them
SACCT_WINDOW = timedelta(days=2)


@dataclass(frozen=True)
class DemoPaths:
    root: Path

    @property
    def state(self) -> Path:
        return self.root / "simulator.json"

    @property
    def sacct(self) -> Path:
        return self.root / "sacct.txt"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def fixes(self) -> Path:
        return self.root / "fixes.json"


def demo_paths() -> DemoPaths:
    return DemoPaths(Path(settings.VAR_DIR) / "sim")


def demo_simulator(*, days: int = 21, seed: int = 7, now: datetime | None = None) -> ClusterSimulator:
    """The demo's simulator; its seed and start are kept in var/sim so every process agrees."""
    paths = demo_paths()
    paths.root.mkdir(parents=True, exist_ok=True)
    if paths.state.exists():
        state = json.loads(paths.state.read_text())
    else:
        now = now or timezone.now()
        # The simulation's epoch (its seed's day), not a portal day: UTC midnight, as before.
        start = (now - timedelta(days=days)).replace(hour=0, minute=0, second=0, microsecond=0)
        # The portal took over fault recovery a day before the demo began: the logs kept (the
        # last LOG_DAYS) show faults recovered by hand first, then by the portal's restarts.
        automated_from = now - timedelta(days=1)
        state = {
            "seed": seed,
            "start": start.isoformat(),
            "automated_recovery_from": automated_from.isoformat(),
        }
        paths.state.write_text(json.dumps(state))
    automated_from = state.get("automated_recovery_from")
    return ClusterSimulator(
        reference_nodes(),
        seed=state["seed"],
        start=datetime.fromisoformat(state["start"]),
        automated_recovery_from=datetime.fromisoformat(automated_from) if automated_from else None,
        fixes=demo_fixes(),
    )


def demo_sources_ensure(*, cluster: Cluster) -> list[DataSource]:
    """Data sources that collect the simulator's live output, like a real deployment would."""
    paths = demo_paths()
    specs = [
        (
            "dcgm-exporter",
            SourceKind.DCGM_SCRAPE,
            {"urls": [f"http://127.0.0.1:{settings.PORTAL_SIMULATOR_PORT}/metrics"]},
        ),
        ("slurm", SourceKind.SLURM, {"path": str(paths.sacct), "timezone": "UTC"}),
        ("job-logs", SourceKind.LOG_FILES, {"root": str(paths.logs)}),
    ]
    sources = []
    for name, kind, config in specs:
        # Logs are read every 15 s so that a fault is detected within a minute of its line.
        interval_s = 15 if kind == SourceKind.LOG_FILES else 60
        source, _ = DataSource.objects.get_or_create(
            cluster=cluster, name=name, defaults={"kind": kind, "config": config, "interval_s": interval_s}
        )
        sources.append(source)
    return sources


def demo_history_backfill(
    *,
    sim: ClusterSimulator,
    cluster: Cluster,
    until: datetime,
    step: timedelta = timedelta(minutes=10),
    progress: Callable[[str, float], None] | None = None,
    log_days: float = LOG_DAYS,
    since: datetime | None = None,
) -> dict[str, int]:
    """Feed the simulator's history up to ``until`` through the production parse/ingest path.

    The scheduler's job records go first, so that a fault seen in the metrics finds the job it
    hit; each exporter page is ingested at its own time and the faults in it are grouped, located
    and acted on at that simulated moment, as the live portal would have.
    ``progress(phase, fraction_of_phase)`` is told how far it got (demo_status.PHASES). Job logs
    are replayed for the last ``log_days`` only: they are bulky, and collected in 15-minute steps.
    ``since``: continue a history already fed up to that time (samples and logs from there on).
    """
    progress = progress or (lambda phase, fraction: None)
    start = sim.start
    counts = {"pages": 0, "samples": 0, "jobs": 0}
    progress("jobs", 0.0)
    fault_policies_ensure()
    demo_actuators_ensure()
    jobs = parse_sacct(sim.sacct_text(start, until, timezone=UTC), timezone=UTC)
    counts["jobs"] = jobs_ingest(
        cluster=cluster, source=JobSource.SLURM, records=jobs.records, now=until
    ).stored
    at = since or start
    while at < until:
        readings = gpu_readings_from_exposition(sim.exposition(at), scrape_time_ms=int(at.timestamp() * 1000))
        result = gpu_readings_store(
            cluster=cluster, readings=readings.records, interval_s=int(step.total_seconds()), now=at
        )
        _faults_act(cluster, at=at)
        counts["pages"] += 1
        counts["samples"] += result.stored
        at += step
        if counts["pages"] % 288 == 0:
            logger.info("demo backfill: %s of history done", at - start)
            progress("samples", (at - (since or start)) / (until - (since or start)))
    _logs_history_collect(
        sim,
        cluster=cluster,
        since=max(since or start, until - timedelta(days=log_days)),
        until=until,
        progress=lambda fraction: progress("logs", fraction),
    )
    # Jobs that were already running at the start mark earlier hours, which have no samples:
    # the demo's portal started collecting at ``start``, so it has no rollups before it.
    RollupDirtyHour.objects.filter(cluster=cluster, hour__lt=start).delete()
    progress("rollups", 0.0)
    while rollups_refresh(now=until):
        pass
    node_classes_refresh(cluster=cluster, now=until)
    progress("quotas", 0.0)
    demo_quota_history(cluster=cluster, history_start=start, now=until)
    # The nightly full run of the recommendation engine, so that the first page shows its findings.
    recommendations_refresh(now=until, full=True)
    return counts


def _faults_act(cluster: Cluster, *, at: datetime) -> None:
    """What the live portal does with faults, at the simulated moment ``at``: group new evidence,
    run the policy of each incident located meanwhile at the moment it was located (live, the
    policy runs right after), and mark incidents recovered or closed."""
    incidents_group(cluster=cluster, now=at)
    for incident in Incident.objects.filter(cluster=cluster, actions__isnull=True).select_related(
        "node", "job", "cluster"
    ):
        incident_policy_apply(incident=incident, now=incident.located_at or at)
    incidents_refresh(cluster=cluster, now=at)


def demo_quota_history(*, cluster: Cluster, history_start: datetime, now: datetime) -> None:
    """The demo's planning history: the fixed partition, one approved cycle, one open proposal.

    The first cycle (the fixed partition) begins on the first whole day of the history, the
    second was proposed from its demand and approved by the demo committee member, and the third
    is proposed from the last cycle's demand and waits for the committee, as it would in the
    week before a review.
    """
    if QuotaCycle.objects.filter(cluster=cluster).exists():
        return
    committee = get_user_model().objects.filter(username=DEMO_COMMITTEE_USERNAME).first()
    first_start = day_start_after(history_start, 1, portal_day_zone())
    first = quotas.quota_cycle_initial_create(cluster=cluster, start=first_start, now=first_start)
    if first.end > now:
        return
    second = quotas.quota_proposal_create(cluster=cluster, now=first.end, actor=committee)
    quotas.quota_backtest_run(cycle=second, now=first.end)
    quotas.quota_cycle_approve(
        cycle=second,
        actor=committee,
        comment="Agreed in the biweekly review.",
        now=first.end + timedelta(hours=2),
    )
    proposal = quotas.quota_proposal_create(cluster=cluster, now=now)
    quotas.quota_backtest_run(cycle=proposal, now=now)
    quotas.capacity_check(cluster=cluster, now=now)


def _logs_history_collect(
    sim: ClusterSimulator,
    *,
    cluster: Cluster,
    since: datetime,
    until: datetime,
    progress: Callable[[float], None] = lambda fraction: None,
) -> None:
    """Write the last days' logs in steps, collecting and scanning after each as the live
    demo does; faults are stamped detected when the live demo would have seen them (the line's
    time plus ``LOG_SCAN_LATENCY``), not at the end of their step."""
    source = next(s for s in demo_sources_ensure(cluster=cluster) if s.kind == SourceKind.LOG_FILES)
    at, last_detect = since, since
    while at < until:
        step_end = min(until, at + LOG_HISTORY_STEP)
        _logs_write(sim, since=at, until=step_end)
        source.refresh_from_db()
        source.running_since = None
        source.save(update_fields=["running_since"])
        source_collect(source_id=source.pk, now=step_end)
        fault_scan_source(source=source, now=step_end, seen_after=LOG_SCAN_LATENCY)
        if step_end - last_detect >= DETECT_EVERY or step_end == until:
            fault_detect_jobs(cluster=cluster, now=step_end, seen_after=DETECTOR_LATENCY)
            last_detect = step_end
        _faults_act(cluster, at=step_end)
        at = step_end
        progress((at - since) / (until - since))


def demo_actuators_ensure() -> None:
    """The demo's actuators, in dry run: Slurm drain, requeue and resume as a real cluster would
    use, and a chat webhook for notifications. In dry run they change nothing (the inventory
    included): the incident pages show what they would have run."""
    specs = [
        ("slurm-drain", ActionKind.ISOLATE_NODE, {"type": "command", "argv": list(SLURM_DRAIN)}),
        ("slurm-requeue", ActionKind.RESTART_JOB, {"type": "command", "argv": list(SLURM_REQUEUE)}),
        ("slurm-resume", ActionKind.RESUME_NODE, {"type": "command", "argv": list(SLURM_RESUME)}),
        (
            "chat-notify",
            ActionKind.NOTIFY,
            {"type": "webhook", "url": "https://chat.example.com/hooks/gpu-faults"},
        ),
    ]
    for name, action, config in specs:
        ActuatorConfig.objects.get_or_create(
            name=name, defaults={"action": action, "config": config, "dry_run": True}
        )


def _logs_write(sim: ClusterSimulator, *, since: datetime, until: datetime) -> None:
    """Append log lines of [since, until) and remember how far the logs go (no gap, no repeat)."""
    paths = demo_paths()
    sim.write_job_logs(paths.logs, since, until)
    sim.write_kernel_logs(paths.logs, since, until)
    state = json.loads(paths.state.read_text())
    state["logs_until"] = until.isoformat()
    paths.state.write_text(json.dumps(state))


def demo_live_tick(*, sim: ClusterSimulator, now: datetime) -> None:
    """Write what the cluster produced up to ``now``: current scheduler output and new log lines."""
    paths = demo_paths()
    for (department, user, pattern), at in demo_fixes().items():
        sim.fix_family(department, user, pattern, at=at)  # a fix the portal applied meanwhile
    text = sim.sacct_text(now - SACCT_WINDOW, now, timezone=UTC)
    partial = paths.sacct.with_suffix(".tmp")
    partial.write_text(text)
    partial.replace(paths.sacct)  # atomic: the collector never reads half a file
    state = json.loads(paths.state.read_text())
    since = datetime.fromisoformat(state.get("logs_until", now.isoformat()))
    if now > since:
        _logs_write(sim, since=since, until=now)


# --- Fixes: a resolved ticket's change reaches the simulated cluster --------------------------
#
# In the demo the departments' engineers are simulated too: when a ticket for a misconfigured job
# family is resolved, the family's later runs use the fixed set-up, so that the portal's
# verification has a real gain to measure. The portal records the fix in ``var/sim/fixes.json``;
# every process that simulates reads it: ``demo_simulator`` when it builds the simulator, the live
# ``simulate serve`` process at each tick (``demo_live_tick``). A shared file, not an HTTP control
# endpoint on the simulated exporter: the exporter stays what it stands in for (a read-only
# dcgm-exporter), the simulator already keeps its state in var/sim for the same reason (every
# process must agree), and the fix survives a restart of the simulator. The file is written
# only where the demo's simulator state exists (``demo_active``), which a production portal never
# has; the simulator rewrites runs already drawn, so it does not matter when it reads the file.

DEMO_FIX_RULES = frozenset(
    {"network.nccl-socket-on-rdma", "storage.cache-metadata-only", "kernels.stock-framework"}
)


def demo_active() -> bool:
    """Whether this portal runs the demo's simulated cluster (its state file exists)."""
    return demo_paths().state.exists()


def demo_fixes() -> dict[tuple[str, str, str], datetime]:
    """The fixes applied so far: (department code, user, name pattern) → from when."""
    path = demo_paths().fixes
    try:
        rows = json.loads(path.read_text()) if path.exists() else []
        return {
            (row["department"], row["user"], row["pattern"]): datetime.fromisoformat(row["at"])
            for row in rows
        }
    except (OSError, ValueError, KeyError, TypeError):
        logger.warning("demo fixes file %s unreadable; no fixes applied", path)
        return {}


def demo_fix_apply(ticket, *, sim: ClusterSimulator | None = None) -> bool:
    """Demo only: apply a resolved ticket's fix to its job family in the simulated cluster, from
    the moment it was resolved. Returns whether a fix was recorded (False outside the demo, for a
    ticket that is not about a misconfigured family, or not resolved). ``sim``: a simulator in
    this process to tell at once (others read the file)."""
    recommendation = ticket.recommendation
    if (
        not demo_active()
        or recommendation is None
        or recommendation.rule not in DEMO_FIX_RULES
        or not ticket.family_pattern
        or ticket.resolved_at is None
        or recommendation.department is None
    ):
        return False
    key = (recommendation.department.code, ticket.family_user, ticket.family_pattern)
    fixes = demo_fixes()
    if key not in fixes or ticket.resolved_at < fixes[key]:
        fixes[key] = ticket.resolved_at
    rows = [
        {"department": d, "user": u, "pattern": p, "at": at.isoformat()}
        for (d, u, p), at in sorted(fixes.items())
    ]
    path = demo_paths().fixes
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(rows, indent=1))
    partial.replace(path)  # atomic: the simulator never reads half a file
    if sim is not None:
        sim.fix_family(*key, at=fixes[key])
    logger.info("demo: fix of %s applied from %s", "/".join(key), fixes[key].isoformat())
    return True
