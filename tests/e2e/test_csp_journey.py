"""The Content-Security-Policy holds on the main pages: Chromium reports no violation while they
load, htmx fetches their parts and plotly.js draws their charts (and Swagger UI starts)."""

import pytest

from efficiency.services.organisation import demo_organisation_create
from tests.e2e.conftest import log_in

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = [
    "/",
    "/usage/",
    "/departments/",
    "/departments/vision/",
    "/nodes/",
    "/jobs/",
    "/quotas/",
    "/quotas/cycles/",
    "/faults/",
    "/sources/",
    "/api/v1/docs/",
]
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (event) {
  window.__cspViolations.push(event.violatedDirective + " " + (event.blockedURI || "inline") + " " +
    (event.sourceFile || "") + ":" + event.lineNumber);
});
"""


@pytest.fixture
def demo(transactional_db):
    demo_organisation_create(password="e2e-password")


def test_no_page_breaks_the_content_security_policy(page, demo):
    console_errors = []
    page.on("console", lambda message: message.type == "error" and console_errors.append(message.text))
    page.add_init_script(RECORD_VIOLATIONS)
    log_in(page, "admin", "e2e-password")
    for path in PAGES:
        response = page.goto(path)
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("networkidle")
        if page.locator(".chart").count():
            page.locator(".chart svg.main-svg").first.wait_for()
        assert page.evaluate("window.__cspViolations") == [], path
    assert not [text for text in console_errors if "Content Security Policy" in text]
