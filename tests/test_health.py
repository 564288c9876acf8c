from datetime import timedelta

import pytest
from celery import current_app
from django.utils import timezone

from efficiency.models import WorkerHeartbeat
from efficiency.services.health import health_check, worker_heartbeat_prune, worker_heartbeat_record
from efficiency.tasks import worker_heartbeat_task


@pytest.fixture
def client(client, django_user_model):
    # The detail (database, broker, workers) is for staff; anonymous callers get the status only.
    client.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    return client


@pytest.mark.django_db
def test_no_worker_heartbeat_is_degraded_but_up(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "degraded"
    assert response.json()["workers"] == {"ok": False, "last_heartbeat_age_s": None}


@pytest.mark.django_db
def test_recent_heartbeat_makes_health_ok(client):
    worker_heartbeat_record(hostname="worker-1", now=timezone.now() - timedelta(seconds=30))
    body = client.get("/healthz").json()
    assert body["status"] == "ok"
    assert 29 <= body["workers"]["last_heartbeat_age_s"] <= 60


@pytest.mark.django_db
def test_stale_heartbeat_is_degraded(settings):
    now = timezone.now()
    worker_heartbeat_record(
        hostname="worker-1", now=now - timedelta(seconds=settings.PORTAL_WORKER_STALE_AFTER_S + 1)
    )
    assert health_check(now=now)["status"] == "degraded"


@pytest.mark.django_db
def test_unreachable_broker_is_an_error_503(client, monkeypatch):
    # Celery reads CELERY_BROKER_URL from the environment before its own settings.
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:1/0")
    assert current_app.conf.broker_url == "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["broker"]["ok"] is False
    assert "127.0.0.1" not in response.content.decode()


@pytest.mark.django_db
def test_heartbeat_task_is_idempotent_per_host():
    worker_heartbeat_task()
    worker_heartbeat_task()
    assert WorkerHeartbeat.objects.count() == 1


@pytest.mark.django_db
def test_prune_forgets_hosts_gone_for_a_week():
    now = timezone.now()
    worker_heartbeat_record(hostname="old", now=now - timedelta(days=8))
    worker_heartbeat_record(hostname="new", now=now - timedelta(minutes=1))
    assert worker_heartbeat_prune(now=now) == 1
    assert list(WorkerHeartbeat.objects.values_list("hostname", flat=True)) == ["new"]
