"""Quota pages on a projector (1400 px) and a phone (390 px), in English and Chinese: every
chart's title is shown whole, inside its chart and clear of the legend."""

import pytest

from efficiency.services import quotas as services
from tests.conftest import PASSWORD
from tests.e2e.conftest import ARTIFACTS
from tests.quota_fixtures import NOW, SETTINGS, make_planning

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def proposal(transactional_db):
    planning = make_planning()
    cycle = services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    services.quota_backtest_run(cycle=cycle, now=NOW)
    return cycle


def chart_boxes(page):
    """(chart id, chart box, title box, legend box or None) of every chart drawn on the page."""
    boxes = []
    for chart in page.locator("div.chart").all():
        chart.locator("svg.main-svg").first.wait_for()
        legend = chart.locator("g.legend")
        boxes.append(
            (
                chart.get_attribute("id"),
                chart.bounding_box(),
                chart.locator(".gtitle").first.bounding_box(),
                legend.first.bounding_box() if legend.count() else None,
            )
        )
    return boxes


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("width", [1400, 390])
def test_quota_chart_titles_are_whole_at_any_width(browser, live_server, proposal, width, language):
    context = browser.new_context(base_url=live_server.url, viewport={"width": width, "height": 900})
    context.add_cookies([{"name": "django_language", "value": language, "url": live_server.url}])
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto("/login/")
    page.locator("input[name=username]").fill("chair")
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("button[type=submit]").click()
    page.wait_for_url("**/")
    pages = {
        "cycle": f"/quotas/cycles/{proposal.pk}/",
        "cycles": "/quotas/cycles/",
        "in-force": "/quotas/",
        "backtest": f"/quotas/cycles/{proposal.pk}/backtest/",
    }
    seen = 0
    for name, path in pages.items():
        page.goto(path)
        # The page itself never scrolls sideways (wide tables scroll inside their wrapper; the
        # committee's edit inputs carry visually hidden labels that must stay inside it too).
        assert page.evaluate("document.documentElement.scrollWidth") <= width, (name, width, language)
        for chart_id, chart, title, legend in chart_boxes(page):
            seen += 1
            where = (name, chart_id, width, language)
            assert title is not None, where
            assert title["x"] >= chart["x"] - 1, where
            assert title["x"] + title["width"] <= chart["x"] + chart["width"] + 1, where
            assert title["y"] >= chart["y"] - 1, where
            if legend is not None:
                assert legend["y"] >= title["y"] + title["height"], where
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"quota-{name}-{language}-{width}.png"), full_page=True)
    assert seen >= 5  # demand, history, use, and the backtest's two
    if language == "zh-hans":
        page.goto(pages["cycle"])
        steps = page.locator("#quota-table tr[data-department='vision'] ol.why-steps li").all_inner_texts()
        assert len(steps) == 5
        assert steps[0].startswith("百分位：")
        assert not any(word in " ".join(steps) for word in ("Percentile", "Bound", "Share", "Rounding"))
    context.close()
