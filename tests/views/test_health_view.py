"""/healthz: a bare status for anonymous callers, the detail for signed-in staff; plain-HTTP
probes are answered in production, not redirected."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db


def test_anonymous_health_probe_gets_the_status_only(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "degraded"}  # no worker has reported in a test


@pytest.mark.parametrize("role", ["head_a", "committee", "no_role"])
def test_signed_in_non_staff_get_the_status_only(client, org, role):
    client.force_login(getattr(org, role))
    assert set(client.get("/healthz").json()) == {"status"}


def test_platform_admin_gets_database_broker_and_workers(client, org):
    client.force_login(org.admin)
    body = client.get("/healthz").json()
    assert body["database"] == {"ok": True}
    assert body["broker"]["ok"] is True
    assert body["workers"] == {"ok": False, "last_heartbeat_age_s": None}


def test_django_staff_get_the_detail_too(client, org):
    org.no_role.is_staff = True
    org.no_role.save()
    client.force_login(org.no_role)
    assert "broker" in client.get("/healthz").json()


def test_production_answers_a_plain_http_probe_instead_of_redirecting(tmp_path):
    """Production settings (loaded in their own process): SecurityMiddleware lets /healthz over
    plain HTTP through to the view and still redirects every other page to HTTPS."""
    probe = (
        "from django.middleware.security import SecurityMiddleware; "
        "from django.test import RequestFactory; "
        "https = SecurityMiddleware(lambda request: None); "
        "get = RequestFactory(HTTP_HOST='portal.example.com').get; "
        "print(https.process_request(get('/healthz')) is None, "
        "https.process_request(get('/login/')).status_code)"
    )
    env = {
        "PORTAL_ENV": "production",
        "SECRET_KEY": "x" * 20 + "-production-secret-key-with-enough-entropy-9f8e7d6c5b4a",
        "ALLOWED_HOSTS": "portal.example.com",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
    }
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PORTAL_", "DJANGO_", "CELERY_"))}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", probe],
        cwd=ROOT,
        env={**clean, "PORTAL_VAR_DIR": str(tmp_path / "var"), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.split()[-2:] == ["True", "301"], result.stderr[-2000:]
