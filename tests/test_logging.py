"""Logs: JSON lines in production, each with the request id or the Celery task it was written under."""

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.utils.module_loading import import_string

from efficiency.choices import SourceKind
from efficiency.services import sources
from efficiency.services.sources import source_collect
from efficiency.tasks import collect_source_task
from tests.factories import DataSourceFactory

ROOT = Path(__file__).resolve().parent.parent


def _build(config: dict):
    options = {key: value for key, value in config.items() if key != "()"}
    return import_string(config["()"])(**options)


@pytest.fixture
def json_log(settings):
    """The production formatter and context filter of ``settings.LOGGING`` on a handler we read."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_build(settings.LOGGING["formatters"]["json"]))
    for name in settings.LOGGING["handlers"]["console"]["filters"]:
        handler.addFilter(_build(settings.LOGGING["filters"][name]))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


def test_a_request_logs_a_json_line_with_the_id_the_response_returns(client, db, json_log):
    response = client.get("/login/")

    request_id = response["X-Request-ID"]
    assert len(request_id) == 32
    [line] = [r for r in json_log() if r["logger"] == "efficiency.request"]
    assert line["request_id"] == request_id
    assert (line["level"], line["method"], line["path"], line["status"]) == ("INFO", "GET", "/login/", 200)
    assert "time" in line
    assert "task_id" not in line


def test_a_sane_incoming_request_id_is_kept_and_a_hostile_one_replaced(client, db, json_log):
    kept = client.get("/login/", headers={"X-Request-ID": "lb-7f3a.2026:01"})
    replaced = client.get("/login/", headers={"X-Request-ID": 'x" injected\nline'})

    assert kept["X-Request-ID"] == "lb-7f3a.2026:01"
    assert replaced["X-Request-ID"] != 'x" injected\nline'
    assert [r["request_id"] for r in json_log() if r["logger"] == "efficiency.request"] == [
        "lb-7f3a.2026:01",
        replaced["X-Request-ID"],
    ]


def test_lines_written_during_a_request_carry_its_id_and_none_leak_after_it(client, db, json_log):
    response = client.get("/login/")
    logging.getLogger("efficiency.test").warning("after the request")

    request_ids = {r["message"]: r.get("request_id") for r in json_log()}
    assert request_ids["GET /login/ 200"] == response["X-Request-ID"]
    assert request_ids["after the request"] is None


def test_a_failed_collection_in_a_task_logs_the_source_the_reason_and_the_task(db, json_log):
    # A push source cannot be collected periodically: a configuration error, stored and logged.
    source = DataSourceFactory(kind=SourceKind.LOG_PUSH)

    result = collect_source_task.apply(args=[source.pk])

    # The task ends with the failure as its result: one warning line, no traceback from Celery.
    assert result.successful()
    assert result.result["status"] == "failed"
    assert "not collected periodically" in result.result["error"]
    assert not [r for r in json_log() if r["level"] == "ERROR"]
    [line] = [r for r in json_log() if r["logger"] == "efficiency.services.sources"]
    assert line["level"] == "WARNING"
    assert (line["source_id"], line["source_kind"]) == (source.pk, "log_push")
    assert "not collected periodically" in line["reason"]
    assert line["task_id"] == result.id
    assert line["task_name"] == "efficiency.tasks.collect_source_task"
    source.refresh_from_db()
    assert source.last_error == line["reason"]


def test_an_unexpected_collection_error_is_logged_with_its_traceback(db, json_log, monkeypatch):
    source = DataSourceFactory(kind=SourceKind.DCGM_SCRAPE, config={"urls": []})

    def broken(*args, **kwargs):
        raise KeyError("bug")

    monkeypatch.setitem(sources._COLLECTORS, SourceKind.DCGM_SCRAPE, broken)
    with pytest.raises(KeyError):
        source_collect(source_id=source.pk)

    [line] = [r for r in json_log() if r["logger"] == "efficiency.services.sources"]
    assert line["level"] == "ERROR"
    assert "KeyError" in line["exc_info"]
    assert "task_id" not in line


def test_production_writes_json_lines_with_the_request_id(tmp_path):
    # The real production configuration, end to end: a plain-HTTP request is redirected to HTTPS
    # before any view runs, and that answer is logged as JSON with the caller's request id.
    script = (
        "import django; django.setup();"
        "from django.test import Client;"
        "r = Client().get('/login/', headers={'X-Request-ID': 'edge-42'}, HTTP_HOST='portal.example.com');"
        "print(r.status_code, r['X-Request-ID'])"
    )
    prefixes = ("PORTAL_", "DJANGO_", "CELERY_", "LOG_")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    clean.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PORTAL_ENV": "production",
            "PORTAL_VAR_DIR": str(tmp_path / "var"),
            "SECRET_KEY": "k" * 60,
            "ALLOWED_HOSTS": "portal.example.com",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["301", "edge-42"]
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    expected = {"logger": "efficiency.request", "request_id": "edge-42", "status": 301}
    assert expected.items() <= lines[-1].items()


def test_development_lines_are_readable_with_the_request_in_brackets(client, db, settings):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_build(settings.LOGGING["formatters"]["text"]))
    handler.addFilter(_build(settings.LOGGING["filters"]["context"]))
    logging.getLogger().addHandler(handler)
    try:
        response = client.get("/login/")
    finally:
        logging.getLogger().removeHandler(handler)

    assert stream.getvalue().endswith(
        f" INFO efficiency.request [request={response['X-Request-ID']}] GET /login/ 200\n"
    )


def test_a_celery_worker_logs_through_the_portal_configuration_at_its_own_level(tmp_path):
    # Celery would install its own format on the root logger; the portal's receiver keeps LOGGING.
    script = (
        "import logging; from portal.celery import app; app.log.setup(loglevel='WARNING');"
        "root = logging.getLogger();"
        "print(logging.getLevelName(root.level), [type(h.formatter).__name__ for h in root.handlers])"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PORTAL_VAR_DIR": str(tmp_path / "var"), "LOG_FORMAT": "json"},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "WARNING ['PortalJsonFormatter']"
