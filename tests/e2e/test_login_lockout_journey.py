"""A person who types the wrong password ten times is told, on the login page, why the right one
is refused now and for how long; a platform admin lifts the lock in the admin."""

import pytest

from efficiency.services.organisation import demo_organisation_create
from tests.e2e.conftest import log_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo(transactional_db):
    demo_organisation_create(password="e2e-password")


def try_password(page, password: str) -> None:
    page.get_by_label("Username").fill("head-vision")
    page.get_by_label("Password").fill(password)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()


def test_ten_wrong_passwords_lock_the_login_and_an_admin_lifts_it(page, demo, screenshot, browser):
    page.goto("/login/")
    for _ in range(10):
        try_password(page, "not-it")
    try_password(page, "e2e-password")
    alert = page.get_by_role("alert")
    assert "Too many failed sign-ins" in alert.inner_text()
    assert "15 minutes" in alert.inner_text()
    assert page.get_by_label("Username").input_value() == "head-vision"
    assert page.url.endswith("/login/")
    screenshot("login-locked-en")

    admin_context = browser.new_context(base_url=page.url.split("/login/")[0])
    admin_page = admin_context.new_page()
    log_in(admin_page, "admin", "e2e-password")
    admin_page.goto("/admin/axes/accessattempt/")
    row = admin_page.locator("#result_list tbody tr", has_text="head-vision")
    row.locator("th a").click()
    admin_page.get_by_role("link", name="Delete").click()
    with admin_page.expect_navigation():
        admin_page.get_by_role("button", name="Yes, I’m sure").click()
    admin_context.close()

    log_in(page, "head-vision", "e2e-password")
