"""Lists, usage pages and downloads in a real browser, on simulated history fed through the real
collectors: every "Download CSV" link, filters, a 390 px phone, charts in Chinese."""

import csv
import io
import re
from datetime import timedelta
from urllib.parse import urljoin

import pytest
from django.utils import timezone

from efficiency.choices import JobSource, JobState
from efficiency.models import Cluster, Department, Job, Node
from efficiency.services import quotas as quota_services
from efficiency.services.demo import demo_history_backfill, demo_simulator
from efficiency.services.organisation import DEMO_CLUSTER_SLUG, demo_organisation_create
from tests.e2e.conftest import ARTIFACTS, log_in
from tests.snapshot import DatabaseSnapshot, build_settings, flush

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "e2e-password"
PHONE = {"width": 390, "height": 844}


def _build_world() -> dict:
    """Two days of the demo cluster, a quota proposal with its backtest, a job still waiting."""
    demo_organisation_create(password=PASSWORD)
    now = timezone.now().replace(microsecond=0)
    cluster = Cluster.objects.get(slug=DEMO_CLUSTER_SLUG)
    demo_history_backfill(
        sim=demo_simulator(days=2, now=now),
        cluster=cluster,
        until=now,
        step=timedelta(minutes=30),
        log_days=0.25,  # these pages need no fault history: keep the setup short
    )
    proposal = quota_services.quota_proposal_create(cluster=cluster, now=now)
    quota_services.quota_backtest_run(cycle=proposal, now=now)
    waiting = Job.objects.create(
        cluster=cluster, source=JobSource.SLURM, external_id="e2e-waiting", name="waiting-for-gpus",
        department=Department.objects.get(code="vision"), account="vision", user_name="e2e",
        state=JobState.PENDING, gpu_count=16, submitted_at=now - timedelta(hours=3, minutes=20),
    )  # fmt: skip
    return {
        "proposal": proposal.pk,
        "waiting": waiting.pk,
        "node": Node.objects.order_by("hostname").first().pk,
    }


@pytest.fixture(scope="module")
def built_world(django_db_setup, django_db_blocker, tmp_path_factory):
    """The world is built once for the module (minutes of simulated history); each test gets it
    back, rows and keys exactly as built, after the previous test's flush (tests/snapshot.py)."""
    var = tmp_path_factory.mktemp("world")
    with django_db_blocker.unblock(), build_settings(VAR_DIR=var):
        try:
            ids = _build_world()
            snapshot = DatabaseSnapshot.take()
        finally:
            flush()
    return var, ids, snapshot


@pytest.fixture
def world(built_world, transactional_db, settings):
    var, ids, snapshot = built_world
    settings.VAR_DIR = var
    snapshot.restore()
    return ids


def rows_shown(page, link_id: str) -> int | None:
    """How many rows the page shows for what its link downloads (None: only "some")."""

    def table_rows(selector: str) -> int:
        rows = page.locator(f"{selector} tbody tr")
        return sum(1 for index in range(rows.count()) if rows.nth(index).locator("td[colspan]").count() == 0)

    if link_id in ("jobs-csv", "nodes-csv") and page.locator("#row-count").count():
        return int(re.match(r"\d+", page.locator("#row-count").inner_text().replace(",", "")).group())
    counts = {
        "departments-csv": "#department-usage",
        "incidents-csv": "#incident-list",
        "quotas-csv": "#quota-use",
        "cycle-csv": "#quota-table",
        "jobs-csv": "#job-usage",  # the department page's, at most 50 rows
        "idle-csv": "#idle-allocations",
    }
    if link_id == "backtest-csv":  # a whole-cluster row and a row per department, per policy
        policies = page.locator("#backtest-summary thead th.num").count()
        return policies * (1 + table_rows("#backtest-departments"))
    return table_rows(counts[link_id])


def follow_csv_link(page, link_id: str) -> list[list[str]]:
    link = page.locator(f"#{link_id}")
    response = page.request.get(urljoin(page.url, link.get_attribute("href")))
    assert response.headers["content-type"].startswith("text/csv"), (page.url, link_id)
    with page.expect_download() as download:
        link.click()
    assert download.value.suggested_filename.endswith(".csv")
    return list(csv.reader(io.StringIO(download.value.path().read_text(encoding="utf-8-sig"))))


def switch_user(page, username: str) -> None:
    page.context.clear_cookies()
    log_in(page, username, PASSWORD)


def test_every_csv_link_downloads_the_rows_its_page_shows(page, world):
    cycle = f"/quotas/cycles/{world['proposal']}/"
    today = timezone.localdate()
    visits = {
        "head-vision": [
            ("/jobs/?state=completed&state=running", ["jobs-csv"]),
            ("/nodes/?rdma_capable=true", ["nodes-csv"]),
            ("/departments/vision/?range=24h", ["jobs-csv", "idle-csv"]),
            ("/faults/?range=7d", ["incidents-csv"]),
            ("/quotas/", ["quotas-csv"]),
            (cycle, ["cycle-csv"]),
        ],
        "committee": [
            ("/jobs/?department=vision&state=completed", ["jobs-csv"]),
            ("/nodes/?owner=vision", ["nodes-csv"]),
            ("/usage/?range=24h", ["departments-csv"]),
            ("/faults/?range=7d", ["incidents-csv"]),
            ("/quotas/", ["quotas-csv"]),
            (cycle, ["cycle-csv"]),
            (cycle + "backtest/", ["backtest-csv"]),
        ],
        "admin": [
            ("/jobs/?department=radar&page=2", ["jobs-csv"]),
            ("/nodes/?shared_pool=false&state=active", ["nodes-csv"]),
            (f"/usage/?range=custom&start={today - timedelta(days=3)}&end={today}", ["departments-csv"]),
            ("/departments/radar/?range=7d", ["jobs-csv", "idle-csv"]),
        ],
    }
    for username, pages in visits.items():
        switch_user(page, username)
        for path, link_ids in pages:
            assert page.goto(path).status == 200, path
            for link_id in link_ids:
                page.locator(f"#{link_id}").wait_for()
                shown = rows_shown(page, link_id)
                header, *rows = follow_csv_link(page, link_id)
                assert header, (username, path, link_id)
                if link_id in ("jobs-csv", "idle-csv") and "/departments/" in path and shown == 50:
                    assert len(rows) >= 50, (username, path, link_id)  # the page shows the top 50
                else:
                    assert len(rows) == shown, (username, path, link_id)
    # The filtered job list's CSV is that department's only, not every department's.
    switch_user(page, "committee")
    page.goto("/jobs/?department=vision")
    _header, *rows = follow_csv_link(page, "jobs-csv")
    assert rows
    assert {row[2] for row in rows} == {"vision"}


def test_an_untouched_node_filter_form_finds_nodes_by_hostname(page, world, screenshot):
    log_in(page, "committee", PASSWORD)
    page.goto("/nodes/")
    page.get_by_label("Hostname").fill("gpu-00")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**q=gpu-00*")
    assert page.locator("#row-count").inner_text() == "9 nodes"
    assert page.locator("select[name=shared_pool]").input_value() == ""
    screenshot("node-list-filtered-en")


def open_page(page, path: str) -> None:
    """Go to a page and wait until every chart on it (htmx parts too) is drawn."""
    response = page.goto(path)
    assert response.status == 200, path
    page.wait_for_load_state("networkidle")
    drawn = "Array.from(document.querySelectorAll('.chart')).every(c => c.querySelector('svg.main-svg'))"
    # Polled from here: wait_for_function evaluates a string in the page, which its CSP forbids.
    for _ in range(100):
        if page.evaluate(drawn):
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"charts of {path} not drawn")


def _chart_geometry(page) -> list[dict]:
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('.chart')).map(chart => {
          const box = chart.getBoundingClientRect();
          const rect = el => {
            if (!el) return null;
            const r = el.getBoundingClientRect();
            return {left: r.left - box.left, right: r.right - box.left,
                    top: r.top - box.top, bottom: r.bottom - box.top};
          };
          return {id: chart.id, width: box.width, title: rect(chart.querySelector('.gtitle')),
                  legend: rect(chart.querySelector('.legend')), plot: rect(chart.querySelector('.nsewdrag'))};
        })"""
    )


def _assert_charts_fit(page, path: str) -> None:
    for chart in _chart_geometry(page):
        title, legend, plot = chart["title"], chart["legend"], chart["plot"]
        where = (path, chart["id"])
        assert title, where
        assert title["left"] >= 0, where
        assert title["right"] <= chart["width"] + 1, where
        assert title["top"] >= 0, where
        if plot:
            assert title["bottom"] <= plot["top"] + 1, where
        if legend and plot:
            overlaps = not (legend["top"] >= title["bottom"] or legend["bottom"] <= title["top"])
            assert not overlaps or legend["left"] >= title["right"], where


def test_main_pages_fit_a_phone_in_english_and_chinese(browser, live_server, world):
    context = browser.new_context(base_url=live_server.url, viewport=PHONE)
    page = context.new_page()
    page.set_default_timeout(15_000)
    log_in(page, "committee", PASSWORD)
    paths = [
        "/",
        "/usage/?range=7d",
        "/departments/",
        "/departments/vision/?range=7d",
        "/nodes/",
        f"/nodes/{world['node']}/?range=7d",
        "/jobs/",
        f"/jobs/{Job.objects.filter(state='running').first().pk}/",
        "/quotas/",
        "/faults/?range=7d",
        "/committee/",
        "/committee/rate-cards/",
        "/committee/audit/",
    ]
    for language in ("en", "zh-hans"):
        context.add_cookies([{"name": "django_language", "value": language, "url": live_server.url}])
        for path in paths:
            open_page(page, path)
            overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, (language, path, overflow)
            _assert_charts_fit(page, path)
        for name, path in (("overview", paths[1]), ("jobs", paths[6]), ("node", paths[5])):
            open_page(page, path)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"phone-{name}-{language[:2]}.png"), full_page=True)
    context.close()


def test_chinese_charts_speak_chinese_dates(page, world, live_server, screenshot):
    log_in(page, "committee", PASSWORD)
    page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": live_server.url}])
    open_page(page, "/usage/?range=7d")
    ticks = page.locator("#trend-chart .xtick text").all_text_contents()
    assert any("月" in tick for tick in ticks), ticks
    assert not any(re.search(r"[A-Z][a-z]{2} \d", tick) for tick in ticks), ticks  # no "Nov 26"
    hover_format = page.evaluate("document.getElementById('trend-chart')._fullLayout.xaxis.hoverformat")
    assert "年" in hover_format
    screenshot("overview-zh")
    open_page(page, "/usage/?range=24h")  # two days of history: the day before is there to compare
    assert "个百分点" in page.locator("#card-utilization").inner_text()


def test_list_and_detail_pages_in_english_and_chinese(page, world, live_server, screenshot):
    log_in(page, "committee", PASSWORD)
    running = Job.objects.filter(state="running").first().pk
    pages = {
        "node-list": "/nodes/",
        "node-detail": f"/nodes/{world['node']}/?range=7d",
        "job-list": "/jobs/?state=pending&state=running",
        "job-detail": f"/jobs/{running}/",
        "job-waiting": f"/jobs/{world['waiting']}/",
        "overview": "/usage/?range=7d",
    }
    for language in ("en", "zh-hans"):
        page.context.add_cookies([{"name": "django_language", "value": language, "url": live_server.url}])
        for name, path in pages.items():
            open_page(page, path)
            screenshot(f"{name}-{language[:2]}")
        page.goto(f"/jobs/{world['waiting']}/")
        wait = page.locator("#job-wait").inner_text()
        assert re.search(r"\b0[34]:\d\d:\d\d\b", wait), wait  # submitted 3 h 20 min before the setup ended
        assert ("so far" in wait) if language == "en" else ("仍在排队" in wait), wait
        page.goto(f"/nodes/{world['node']}/?range=24h")
        card = page.locator("#card-utilization").inner_text()
        assert ("vs previous period" in card) if language == "en" else ("较上一周期" in card), card
