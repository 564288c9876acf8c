"""The one way to enqueue follow-up work: after the surrounding transaction commits.

Services and faces never import ``efficiency.tasks`` (a task module imports the services, so that
would be a cycle, and a task queued inside a transaction could run before the rows it reads are
committed). They call one of these functions instead; each queues its task with Celery's
``delay_on_commit``, so nothing is queued if the transaction rolls back. The import-linter layer
contract allows this module, and only this module, to reach the tasks from below.

Ingest returns what it found; the caller (a task, a view) decides what runs next by calling here.

The tasks are imported when a function is called, not with this module: ``efficiency.tasks``
imports the services, which import this module, so a module-level import would be a cycle.
"""


def _tasks():
    from efficiency import tasks

    return tasks


def incidents_group(cluster_id: int) -> None:
    """Group a cluster's new fault signals into incidents."""
    _tasks().incidents_group_task.delay_on_commit(cluster_id)


def incident_policy(incident_id: int) -> None:
    """Apply the fault policy (dry run or act) to an incident that was just opened or located."""
    _tasks().incident_policy_task.delay_on_commit(incident_id)


def fault_scan_source(source_id: int) -> None:
    """Scan a log source's newly stored chunks for fault signatures."""
    _tasks().fault_scan_source_task.delay_on_commit(source_id)


def quota_backtest(cycle_id: int) -> None:
    """Replay the last cycle's jobs under a proposed cycle's quotas."""
    _tasks().quota_backtest_task.delay_on_commit(cycle_id)


def source_collect(source_id: int) -> None:
    """Collect once from a source now (the Data sources page's "Collect now")."""
    _tasks().collect_source_task.delay_on_commit(source_id)


def demo_fix_applied(ticket_id: int) -> None:
    """Demo only: a ticket was resolved; the simulated cluster applies its fix to the job family.
    Nothing is queued outside the demo (no simulated cluster on this portal)."""
    from efficiency.services.demo import demo_active

    if demo_active():
        _tasks().demo_fix_apply_task.delay_on_commit(ticket_id)


def committee_pack_generate(
    *, cluster_id: int, user_id: int | None = None, corrects_id: int | None = None, reason: str = ""
) -> None:
    """Build a review pack (or a correction) in a worker: never in the request."""
    _tasks().committee_pack_request_task.delay_on_commit(cluster_id, user_id, corrects_id, reason)


def notification_route(notification_id: int) -> None:
    """Route a notification just recorded to its people and channels."""
    _tasks().notification_route_task.delay_on_commit(notification_id)


def notifications_deliver(countdown_s: float = 0) -> None:
    """Send the notification deliveries that are due, ``countdown_s`` after the commit (the end of
    a batching window); the minutely sweep sends any this misses."""
    from django.db import transaction

    task = _tasks().notifications_deliver_task
    transaction.on_commit(lambda: task.apply_async(countdown=countdown_s))
