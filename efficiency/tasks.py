"""Celery tasks: thin adapters that call one service and return a small summary."""

import socket

from celery import shared_task
from celery.signals import worker_ready

from efficiency.services.health import worker_heartbeat_prune, worker_heartbeat_record


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
    # Beat's first heartbeat comes a minute after start; report at once so /healthz is green.
    worker_heartbeat_task.delay()
