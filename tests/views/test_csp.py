"""Every response carries the Content-Security-Policy; no template keeps an inline script."""

import re
from pathlib import Path

import pytest

from tests.views.test_fault_pages import incidents  # noqa: F401 - fixture

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


@pytest.mark.django_db
def test_pages_are_served_with_a_strict_policy(client, org):
    client.force_login(org.admin)
    policy = client.get("/").headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"


def test_no_template_has_an_inline_handler_or_script():
    for template in TEMPLATES.rglob("*.html"):
        text = template.read_text()
        assert not re.search(r"\son[a-z]+\s*=|javascript:", text), template
        assert not re.search(r"<script(?![^>]*\b(src|type=\"application/json\"))[^>]*>", text), template


@pytest.mark.django_db
def test_the_report_prints_through_the_static_script(client, org, incidents):  # noqa: F811
    client.force_login(org.head_a)
    body = client.get(f"/faults/incidents/{incidents[0].pk}/report/").content.decode()
    assert "data-print" in body
    assert "javascript:" not in body
