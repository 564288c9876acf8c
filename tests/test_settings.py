"""Settings come from the environment; production mode passes Django's deployment checks."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.envutils import env_bool, env_int, env_list

ROOT = Path(__file__).resolve().parent.parent


def _manage(*args: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PORTAL_", "DJANGO_", "CELERY_"))}
    clean.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, "PORTAL_VAR_DIR": str(tmp_path / "var"), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_mode_passes_check_deploy(tmp_path):
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env={
            "PORTAL_ENV": "production",
            "SECRET_KEY": "x" * 20 + "-production-secret-key-with-enough-entropy-9f8e7d6c5b4a",
            "ALLOWED_HOSTS": "portal.example.com",
            "DATABASE_URL": "postgres://portal@db.example.com/portal",
            "CELERY_BROKER_URL": "redis://redis.example.com:6379/0",
        },
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_production_mode_refuses_to_start_without_a_secret_key(tmp_path):
    result = _manage("check", env={"PORTAL_ENV": "production"}, tmp_path=tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_mode_refuses_debug(tmp_path):
    result = _manage(
        "check", env={"PORTAL_ENV": "production", "SECRET_KEY": "k" * 60, "DEBUG": "1"}, tmp_path=tmp_path
    )
    assert "DEBUG must be off" in result.stderr


def test_embedded_mode_keeps_one_generated_secret_key(tmp_path):
    first = _manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.SECRET_KEY)",
        env={},
        tmp_path=tmp_path,
    )
    second = _manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.SECRET_KEY)",
        env={},
        tmp_path=tmp_path,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().splitlines()[-1] == second.stdout.strip().splitlines()[-1]
    assert (tmp_path / "var" / "secret_key").stat().st_mode & 0o077 == 0


def test_env_bool_rejects_typos(monkeypatch):
    monkeypatch.setenv("SOME_FLAG", "ture")
    with pytest.raises(ImproperlyConfigured, match="not a boolean"):
        env_bool("SOME_FLAG", False)
    monkeypatch.setenv("SOME_FLAG", "Yes")
    assert env_bool("SOME_FLAG", False) is True


def test_env_int_and_list(monkeypatch):
    monkeypatch.setenv("N", "12")
    monkeypatch.setenv("HOSTS", "a.example.com, ,b.example.com")
    assert env_int("N", 1) == 12
    assert env_list("HOSTS", "") == ["a.example.com", "b.example.com"]
    monkeypatch.setenv("N", "twelve")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("N", 1)


def test_times_are_stored_in_utc_and_shown_in_shanghai_by_default(settings):
    assert settings.USE_TZ is True
    assert os.environ.get("TIME_ZONE", "Asia/Shanghai") == settings.TIME_ZONE


def test_production_static_files_collect_with_plotly_and_swagger_ui(tmp_path):
    env = {"PORTAL_ENV": "production", "SECRET_KEY": "k" * 60}
    result = _manage("collectstatic", "--noinput", env=env, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    manifest = (tmp_path / "var" / "static" / "staticfiles.json").read_text()
    for path in (
        "vendor/plotly/plotly.min.js",
        "vendor/pico/pico.min.css",
        "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js",
    ):
        assert f'"{path}"' in manifest


def test_a_scan_engine_typo_stops_the_process_at_start_up(tmp_path):
    result = _manage("check", env={"PORTAL_SCAN_ENGINE": "hyperscna"}, tmp_path=tmp_path)
    assert result.returncode != 0
    assert "PORTAL_SCAN_ENGINE='hyperscna': use 'hyperscan' or 'python'." in result.stderr


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("PORTAL_WORKING_ZONE", "Asia/Shangai", "No time zone found with key Asia/Shangai"),
        ("PORTAL_WORKING_HOURS", "18-9", "The working day must start before it ends"),
        ("PORTAL_HOLIDAYS_FILE", "/nonexistent/holidays.json", "No such file"),
        ("PORTAL_TICKET_SLA_HIGH_H", "0", "positive number of business hours"),
    ],
)
def test_a_working_calendar_typo_stops_the_process_at_start_up(tmp_path, name, value, says):
    result = _manage("check", env={name: value}, tmp_path=tmp_path)
    assert result.returncode != 0
    assert says in result.stderr
