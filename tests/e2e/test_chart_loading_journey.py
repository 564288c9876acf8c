"""plotly.js only where a chart is drawn, and the skip link, in a real browser."""

import pytest

from efficiency.services.organisation import demo_organisation_create
from tests.e2e.conftest import log_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def organisation(transactional_db, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    demo_organisation_create(password="e2e-password")


def _plotly_requests(page) -> list[str]:
    requests: list[str] = []
    page.on("request", lambda request: "plotly" in request.url and requests.append(request.url))
    return requests


def test_the_skip_link_shows_only_when_focused_and_leads_to_the_main_content(page, organisation, screenshot):
    plotly = _plotly_requests(page)
    page.goto("/login/")
    skip = page.get_by_role("link", name="Skip to main content")
    # Out of sight until the keyboard reaches it: the first stop of the Tab key.
    assert skip.bounding_box()["y"] + skip.bounding_box()["height"] <= 0
    screenshot("login-skip-link-hidden")
    assert plotly == []

    # The login page puts the focus in its username field: try the link on a page that does not.
    log_in(page, "committee", "e2e-password")
    page.goto("/nodes/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert skip.bounding_box()["y"] >= 0
    screenshot("nodes-skip-link-focused")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main-content"


def test_charts_still_draw_where_plotly_is_loaded_and_lists_load_none(page, organisation, screenshot):
    plotly = _plotly_requests(page)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, "admin", "e2e-password")

    page.locator("#ownership-chart svg.main-svg").first.wait_for()
    assert page.evaluate("document.getElementById('ownership-chart').data.length") >= 1
    assert any(url.endswith("plotly.min.js") for url in plotly)
    screenshot("home-admin-ownership-chart")

    plotly.clear()
    page.goto("/nodes/")
    page.get_by_role("heading", name="Nodes").wait_for()
    assert plotly == []
    assert errors == []
