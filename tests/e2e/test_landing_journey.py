"""A department head signs in, sees their landing page with its chart, and switches to Chinese."""

import pytest

from efficiency.services.organisation import demo_organisation_create
from tests.e2e.conftest import log_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo(transactional_db):
    demo_organisation_create(password="e2e-password")


def test_department_head_sees_the_chart_drawn_and_chinese_navigation(page, demo, screenshot):
    log_in(page, "head-vision", "e2e-password")

    assert page.get_by_role("heading", name="My departments").is_visible()
    # The Plotly figure was built on the server and drawn in the browser: utilization and
    # allocation rate of the head's departments (tests/e2e/test_head_home_journey.py has the rest).
    page.locator("#trend-chart svg.main-svg").first.wait_for()
    assert page.evaluate("document.getElementById('trend-chart').data.length") == 2
    assert "Vehicle vision" in page.locator("#home-departments").inner_text()
    assert "Radar perception" not in page.content()
    screenshot("landing-department-head-en")

    with page.expect_navigation():  # the switch posts the form as soon as it changes
        page.get_by_label("Language").select_option("zh-hans")
    nav = page.locator("#main-nav")
    assert "首页" in nav.inner_text()
    assert "我的部门" in nav.inner_text()
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    page.locator("#trend-chart svg.main-svg").first.wait_for()
    screenshot("landing-department-head-zh")


def test_committee_member_sees_every_department_on_the_overview(page, demo, screenshot):
    log_in(page, "committee", "e2e-password")
    page.locator("#ownership-chart svg.main-svg").first.wait_for()
    table = page.locator("table").first.inner_text()
    for name in ("Vehicle vision", "Radar perception", "In-cabin assistant"):
        assert name in table
    assert page.locator("#ownership-chart g.trace.bars").count() == 2  # H100 and A100
    screenshot("landing-committee-en")


def test_wrong_password_keeps_the_user_on_the_login_page(page, demo):
    page.goto("/login/")
    page.get_by_label("Username").fill("head-vision")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").is_visible()
    assert "/login/" in page.url


def test_platform_admin_landing_links_to_health_and_admin(page, demo, screenshot):
    log_in(page, "admin", "e2e-password")
    assert page.get_by_role("heading", name="Platform").is_visible()
    assert page.locator("#main-nav").get_by_role("link", name="Administration").is_visible()
    page.locator("#ownership-chart svg.main-svg").first.wait_for()
    screenshot("landing-platform-admin-en")
