"""The portal's own health: database, broker and Celery worker heartbeats."""

import logging
from datetime import datetime, timedelta
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.db import connection
from django.utils import timezone

from efficiency.models import WorkerHeartbeat

logger = logging.getLogger(__name__)

BROKER_TIMEOUT_S = 3


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception:
        logger.exception("health: database check failed")
        return False


def _broker_ok() -> bool:
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_S)
            # The file-system transport "connects" to anything; make sure it can deliver.
            folder = conn.transport_options.get("data_folder_out")
            if folder is not None:
                return Path(folder).is_dir()
        return True
    except Exception:
        logger.exception("health: broker check failed")
        return False


def health_check(*, now: datetime | None = None) -> dict:
    """Database and broker reachability plus the freshest worker heartbeat.

    ``status`` is ``error`` when the database or the broker is down, ``degraded`` when no
    worker has beaten recently, else ``ok``.
    """
    now = now or timezone.now()
    database_ok = _database_ok()
    broker_ok = _broker_ok()
    last_seen = None
    if database_ok:
        last_seen = (
            WorkerHeartbeat.objects.order_by("-last_seen_at").values_list("last_seen_at", flat=True).first()
        )
    age_s = None if last_seen is None else round((now - last_seen).total_seconds())
    workers_ok = age_s is not None and age_s <= settings.PORTAL_WORKER_STALE_AFTER_S
    if not (database_ok and broker_ok):
        status = "error"
    elif not workers_ok:
        status = "degraded"
    else:
        status = "ok"
    return {
        "status": status,
        "database": {"ok": database_ok},
        "broker": {"ok": broker_ok, "transport": settings.CELERY_BROKER_URL.split("://", 1)[0]},
        "workers": {"ok": workers_ok, "last_heartbeat_age_s": age_s},
    }


def worker_heartbeat_record(*, hostname: str, now: datetime | None = None) -> WorkerHeartbeat:
    """Upsert this worker host's heartbeat; running it twice just moves the time."""
    heartbeat, _ = WorkerHeartbeat.objects.update_or_create(
        hostname=hostname[:255], defaults={"last_seen_at": now or timezone.now()}
    )
    return heartbeat


def worker_heartbeat_prune(*, now: datetime | None = None, older_than: timedelta = timedelta(days=7)) -> int:
    """Forget worker hosts that have not beaten for ``older_than``; returns how many."""
    cutoff = (now or timezone.now()) - older_than
    deleted, _ = WorkerHeartbeat.objects.filter(last_seen_at__lt=cutoff).delete()
    return deleted


def worker_heartbeat_list() -> list[WorkerHeartbeat]:
    return list(WorkerHeartbeat.objects.all()[:20])
