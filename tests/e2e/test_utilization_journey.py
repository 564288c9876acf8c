"""Utilization pages in a real browser, on simulated history fed through the real collectors."""

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from efficiency.models import Cluster
from efficiency.services.demo import demo_history_backfill, demo_simulator
from efficiency.services.organisation import DEMO_CLUSTER_SLUG, demo_organisation_create
from tests.e2e.conftest import log_in
from tests.snapshot import DatabaseSnapshot, build_settings, flush

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def built_history(django_db_setup, django_db_blocker, tmp_path_factory):
    """Built once for the module; each test gets it back as built (tests/snapshot.py)."""
    var = tmp_path_factory.mktemp("history")
    with django_db_blocker.unblock(), build_settings(VAR_DIR=var):
        try:
            demo_organisation_create(password="e2e-password")
            now = timezone.now().replace(microsecond=0)
            sim = demo_simulator(days=2, now=now)
            demo_history_backfill(
                sim=sim,
                cluster=Cluster.objects.get(slug=DEMO_CLUSTER_SLUG),
                until=now,
                step=timedelta(minutes=30),
                log_days=0.25,  # these pages need no fault history: keep the setup short
            )
            snapshot = DatabaseSnapshot.take()
        finally:
            flush()
    return var, snapshot


@pytest.fixture
def history(built_history, transactional_db, settings):
    var, snapshot = built_history
    settings.VAR_DIR = var
    snapshot.restore()


def _traces(page, chart_id: str) -> int:
    page.locator(f"#{chart_id} svg.main-svg").first.wait_for()
    return page.evaluate(f"document.getElementById('{chart_id}').data.length")


def test_department_head_changes_range_sees_charts_and_csv_matches_page(page, history, screenshot):
    log_in(page, "head-vision", "e2e-password")
    page.goto("/departments/vision/")
    page.get_by_role("link", name="Last 24 hours").click()
    page.wait_for_url("**range=24h*")
    assert _traces(page, "gpu-hours-chart") == 3  # owned, allocated, busy
    assert _traces(page, "trend-chart") == 2  # utilization, allocation rate
    assert _traces(page, "heatmap-chart") == 2  # the cells, and the grey "no samples" key
    assert page.locator("#heatmap-chart g.hm, #heatmap-chart .heatmaplayer image").count() >= 1
    screenshot("department-vision-24h")

    allocated_on_page = float(page.locator("#allocated-gpu-hours").get_attribute("data-value"))
    with page.expect_download() as download_info:
        page.locator("#jobs-csv").click()
    rows = list(csv.DictReader(io.StringIO(download_info.value.path().read_text(encoding="utf-8-sig"))))
    assert rows, "the CSV lists the department's jobs"
    assert sum(float(row["GPU-hours"]) for row in rows) == pytest.approx(
        allocated_on_page, abs=0.01 * len(rows) + 0.01
    )

    response = page.goto("/departments/radar/")
    assert response.status == 404
    assert page.goto("/usage/").status == 403


def test_committee_sees_every_department_on_the_overview(page, history, screenshot):
    log_in(page, "committee", "e2e-password")
    page.goto("/usage/?range=24h")
    assert _traces(page, "water-level-chart") == 2
    assert _traces(page, "department-chart") == 2
    table = page.locator("#department-usage").inner_text()
    for name in ("Vehicle vision", "Radar perception", "BEV", "Mapping", "In-cabin assistant"):
        assert name in table
    # Nine departments, then the shared pool and the total (as in the CSV).
    assert page.locator("#department-usage tbody tr").count() == 11
    screenshot("overview-24h")
