"""The first run of the demo: pages answer while the history fills, and say how far it has come;
ordinary refusals (403, 404) stay out of the error log."""

import logging
from datetime import UTC, datetime

import pytest
from django.urls import path
from django.utils import translation
from hypothesis import given
from hypothesis import strategies as st

from efficiency.services.demo_status import PHASES, history_status, history_status_write

STARTED = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


def test_no_notice_outside_the_demo(client, org, var_dir):
    client.force_login(org.committee)
    assert history_status() is None
    assert b"demo-history-status" not in client.get("/").content


def test_every_page_says_how_far_the_history_has_come(client, org, var_dir):
    history_status_write(phase="logs", phase_fraction=0.5, started_at=STARTED)
    # samples (35%) and jobs (5%) are done, half of the logs (35%): 57%
    assert history_status().percent == 57
    client.force_login(org.head_a)
    for url in ("/", "/jobs/", "/faults/"):
        page = client.get(url).content.decode()
        assert "The demo's history is being prepared: 57% done." in page, url
        assert "job and kernel logs" in page
    client.logout()
    assert "history is being prepared" in client.get("/login/").content.decode()


def test_the_notice_is_translated(client, org, var_dir):
    history_status_write(phase="samples", phase_fraction=0.2, started_at=STARTED)
    client.force_login(org.committee)
    client.cookies["django_language"] = "zh-hans"
    page = client.get("/")
    with translation.override("zh-hans"):
        expected = translation.gettext("Now: three weeks of GPU samples through the exporter parser.")
    assert expected != "Now: three weeks of GPU samples through the exporter parser."
    assert expected in page.content.decode()


def test_the_notice_goes_when_the_history_is_done(client, org, var_dir):
    history_status_write(phase="done", phase_fraction=1.0, started_at=STARTED)
    client.force_login(org.committee)
    assert b"demo-history-status" not in client.get("/").content


def test_a_failed_history_says_so(client, org, var_dir):
    history_status_write(phase="failed", started_at=STARTED)
    client.force_login(org.committee)
    assert "could not be prepared" in client.get("/").content.decode()


@given(st.lists(st.tuples(st.sampled_from(list(PHASES)), st.floats(0, 1)), min_size=2, max_size=12))
def test_progress_only_moves_forward_and_ends_at_100(tmp_path_factory, steps):
    """Reports in the order the backfill makes them (phase by phase, fractions rising) never
    show less done than before, and "done" is 100%."""
    from django.test import override_settings

    order = list(PHASES)
    steps = sorted(steps, key=lambda step: (order.index(step[0]), step[1]))
    with override_settings(VAR_DIR=tmp_path_factory.mktemp("var")):
        shown = []
        for phase, fraction in steps:
            history_status_write(phase=phase, phase_fraction=fraction, started_at=STARTED)
            shown.append(history_status().percent)
        history_status_write(phase="done", phase_fraction=1.0, started_at=STARTED)
        assert history_status().percent == 100
    assert shown == sorted(shown)


def _boom(request):
    raise RuntimeError("a real server error")


urlpatterns = [path("boom/", _boom)]


@pytest.mark.urls("tests.test_first_run")
def test_server_errors_are_still_logged(client, org, caplog):
    client.raise_request_exception = False
    client.force_login(org.committee)
    with caplog.at_level(logging.DEBUG):
        assert client.get("/boom/").status_code == 500
    assert [r.levelname for r in caplog.records if r.name == "django.request"] == ["ERROR"]


def test_ordinary_refusals_stay_out_of_the_error_log(client, org, caplog):
    client.force_login(org.head_a)
    with caplog.at_level(logging.DEBUG):
        assert client.get(f"/departments/{org.dept_b.code}/").status_code in (403, 404)
        assert client.get("/usage/").status_code == 403
        assert client.get("/no-such-page/").status_code == 404
    assert [r for r in caplog.records if r.name == "django.request"] == []
