"""Celery tasks: thin adapters that call one service and return a small summary."""

import socket
from datetime import datetime

from celery import shared_task
from celery.signals import worker_ready
from django.db import DatabaseError

from efficiency.choices import SourceKind
from efficiency.models import Cluster, DataSource, Incident, Notification, QuotaCycle
from efficiency.services import faults, notifications, quotas, recommendations
from efficiency.services.classification import node_classes_refresh
from efficiency.services.health import worker_heartbeat_prune, worker_heartbeat_record
from efficiency.services.rollups import retention_prune, rollups_refresh
from efficiency.services.sources import SourceConfigError, SourceUnavailable, source_collect, sources_due


@shared_task
def ping_task(payload: str = "") -> dict:
    """Echo back, with the worker's host: proves a round trip through broker and backend."""
    return {"pong": payload, "hostname": socket.gethostname()}


@shared_task(acks_late=False)
def worker_heartbeat_task() -> dict:
    """Record that a worker on this host is alive (a lost beat is replaced a minute later)."""
    heartbeat = worker_heartbeat_record(hostname=socket.gethostname())
    return {"hostname": heartbeat.hostname, "last_seen_at": heartbeat.last_seen_at.isoformat()}


@shared_task
def worker_heartbeat_prune_task() -> dict:
    return {"deleted": worker_heartbeat_prune()}


@worker_ready.connect
def _heartbeat_on_worker_start(sender=None, **kwargs) -> None:
    # Beat's first heartbeat comes a minute after start; report at once so /healthz is green,
    # through a queue this worker consumes (on a host of its own, no other worker may take it).
    queues = [queue.name for queue in getattr(getattr(sender, "task_consumer", None), "queues", ())]
    worker_heartbeat_task.apply_async(queue=queues[0] if queues else None)


@shared_task
def collect_due_sources_task() -> dict:
    """Queue one collection for every source whose interval has passed."""
    due = sources_due()
    for source_id in due:
        collect_source_task.delay(source_id, due_only=True)
    return {"queued": len(due)}


@shared_task(
    autoretry_for=(SourceUnavailable,),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=3,
    bind=True,
)
def collect_source_task(self, source_id: int, due_only: bool = False) -> dict:
    """Collect once from one source; a source that does not answer is retried with backoff.

    Nothing is lost while it is down: the next run starts from the source's watermark. The
    periodic pass sets ``due_only``: a source collected since it was queued is left alone (a
    retry is not, as its own failed attempt is the last one).
    """
    try:
        run = source_collect(source_id=source_id, due_only=due_only and not self.request.retries)
    except SourceConfigError as error:
        # Recorded on the run and logged as one warning line: a traceback every minute until an
        # admin fixes the configuration (or sets the missing variable) would drown the log.
        return {"status": "failed", "error": str(error)}
    if run is None:
        return {"skipped": "another worker is collecting this source, or has just collected it"}
    if run.stored and run.source.kind in LOG_KINDS:
        # Scan new log lines for faults at once: detection within a minute of the line.
        fault_scan_source_task.delay(source_id)
    return {"run": run.pk, "status": run.status, "stored": run.stored, "rejected": run.rejected}


@shared_task
def rollups_refresh_task() -> dict:
    """Recompute the hourly rollups of every hour that received new or late data."""
    return {"hours": rollups_refresh()}


@shared_task
def node_classes_refresh_task() -> dict:
    """Classify the nodes of every cluster over the cycle that just ended (idempotent per day)."""
    return {cluster.slug: node_classes_refresh(cluster=cluster) for cluster in Cluster.objects.all()}


@shared_task
def retention_prune_task() -> dict:
    return retention_prune()


@shared_task
def quota_cycles_roll_task() -> dict:
    """First cycle for new clusters; the next cycle's proposal a few days before it begins."""
    return quotas.quota_cycles_roll()


@shared_task
def quota_backtest_task(cycle_id: int) -> dict:
    """Backtest a cycle's quotas against the last cycle's jobs (a new row each run)."""
    cycle = QuotaCycle.objects.select_related("cluster").filter(pk=cycle_id).first()
    if cycle is None:
        return {"skipped": "no such cycle"}
    backtest = quotas.quota_backtest_run(cycle=cycle)
    return {"backtest": backtest.pk, "jobs": backtest.job_count, "seconds": round(backtest.duration_s, 2)}


@shared_task
def capacity_check_task() -> dict:
    """Raise or resolve capacity alerts on every cluster."""
    return {
        cluster.slug: len(quotas.capacity_check(cluster=cluster))
        for cluster in Cluster.objects.filter(nodes__isnull=False).distinct()
    }


LOG_KINDS = {SourceKind.LOG_FILES, SourceKind.LOG_PUSH}


@shared_task
def fault_scan_source_task(source_id: int) -> dict:
    """Scan one log source's new chunks for faults, group them into incidents and act."""
    source = DataSource.objects.filter(pk=source_id).select_related("cluster").first()
    if source is None:
        return {"skipped": "no such source"}
    summary = faults.fault_scan_source(source=source)
    return {"chunks": summary.chunks, "signals": summary.signals, "incidents": summary.incidents}


@shared_task
def fault_scan_task() -> dict:
    """Catch-up scan of every log source (collections also trigger a scan of their own)."""
    return {name: summary.signals for name, summary in faults.fault_scan_sources().items()}


@shared_task
def fault_detect_task() -> dict:
    """Run the progress detectors (slowdown, straggler node, hang) and the metric Xid detector."""
    return {
        cluster.slug: faults.fault_detect_jobs(cluster=cluster) + faults.fault_detect_metrics(cluster=cluster)
        for cluster in Cluster.objects.all()
    }


@shared_task
def incidents_group_task(cluster_id: int) -> dict:
    """Group new fault evidence (e.g. Xid counts from a scrape) into incidents."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    return {"opened": faults.incidents_group(cluster=cluster) if cluster else 0}


@shared_task
def incident_policy_task(incident_id: int) -> dict:
    """Apply a located incident's policy: isolate, restart, notify (each action logged)."""
    incident = Incident.objects.select_related("node", "job", "cluster").filter(pk=incident_id).first()
    if incident is None:
        return {"skipped": "no such incident"}
    return {"actions": [action.kind for action in faults.incident_policy_apply(incident=incident)]}


@shared_task
def incidents_refresh_task() -> dict:
    """Mark incidents recovered when their job or its resubmission runs again."""
    return {cluster.slug: faults.incidents_refresh(cluster=cluster) for cluster in Cluster.objects.all()}


@shared_task(ignore_result=True)
def recommendations_refresh_task(full: bool = False) -> dict:
    """Recommendations: incremental every few minutes, full nightly (closes what no longer holds)."""
    summary = recommendations.recommendations_refresh(full=full)
    return {"jobs": summary.jobs, "created": summary.created, "closed": summary.closed}


@shared_task
def tickets_verify_task() -> dict:
    """Measure the gain of every resolved ticket still verifying; move those whose data is in."""
    from efficiency.services.tickets import tickets_verify

    return tickets_verify()


@shared_task
def demo_fix_apply_task(ticket_id: int) -> dict:
    """Demo only: apply a resolved ticket's fix to its job family in the simulated cluster."""
    from efficiency.models import Ticket
    from efficiency.services.demo import demo_fix_apply

    ticket = Ticket.objects.select_related("recommendation__department").filter(pk=ticket_id).first()
    return {"applied": ticket is not None and demo_fix_apply(ticket)}


# --- Notifications ---------------------------------------------------------------------------------


def _at(now: str | None) -> datetime | None:
    return datetime.fromisoformat(now) if now else None


# A busy database (SQLite's lock, a PostgreSQL deadlock) is worth another try, a little later.
@shared_task(autoretry_for=(DatabaseError,), retry_backoff=5, max_retries=5)
def notification_route_task(notification_id: int) -> dict:
    """Add a just-recorded notification to the pending delivery of each of its targets."""
    notification = Notification.objects.select_related("ticket").filter(pk=notification_id).first()
    if notification is None:
        return {"skipped": "no such notification"}
    return {"targets": notifications.notification_route(notification)}


@shared_task(ignore_result=True)
def notifications_deliver_task(now: str | None = None) -> dict:
    """Send the deliveries whose batching window or retry delay has passed (each failure is
    recorded on its delivery, so the task itself does not retry)."""
    return notifications.notifications_deliver(now=_at(now))


@shared_task
def notifications_sla_scan_task(now: str | None = None) -> dict:
    """Announce tickets that became due soon or overdue, once per due date."""
    return notifications.notifications_sla_scan(now=_at(now))


# --- Committee -------------------------------------------------------------------------------------


@shared_task
def committee_pack_request_task(
    cluster_id: int, user_id: int | None = None, corrects_id: int | None = None, reason: str = ""
) -> dict:
    """Build the pack (or the correction) a committee member asked for on the committee's page."""
    from efficiency.services.committee.pack import pack_request

    pack = pack_request(cluster_id=cluster_id, user_id=user_id, corrects_id=corrects_id, reason=reason)
    return {"pack": None if pack is None else pack.pk}


@shared_task
def committee_pack_generate_task(now: str | None = None) -> dict:
    """Seal the review pack of each cluster's period that has ended, once, and tell the committee."""
    from efficiency.services.committee.pack import pack_generate_due

    made = pack_generate_due(now=_at(now))
    return {"packs": [pack.pk for pack in made]}
