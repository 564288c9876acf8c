"""Page markup every reader relies on: plotly.js only where a chart is drawn, a skip link, table
headers with their scope, captions, labelled inputs, the language of the error page, and range
presets that keep the page's other parameters."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.test import RequestFactory
from django.utils import translation
from django.views.defaults import server_error

from efficiency.services import quotas as quota_services
from tests.quota_fixtures import NOW, SETTINGS, make_planning

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
PLOTLY = "vendor/plotly/plotly.min.js"
# Partials with a chart that htmx loads into a page, and that page.
CHART_PARTIALS = {
    "efficiency/inventory/partials/department_heatmap.html": "efficiency/inventory/department_detail.html"
}


class _Markup(HTMLParser):
    """The inputs and labels of a page, and its tables' headers."""

    def __init__(self):
        super().__init__()
        self.inputs: list[dict] = []
        self.label_targets: set[str] = set()
        self.headers: list[dict] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "input":
            self.inputs.append(attributes)
        elif tag == "label" and attributes.get("for"):
            self.label_targets.add(attributes["for"])
        elif tag == "th":
            self.headers.append(attributes)


def markup(body: str) -> _Markup:
    parser = _Markup()
    parser.feed(body)
    return parser


def template_sources():
    return {
        path.relative_to(TEMPLATES).as_posix(): path.read_text(encoding="utf-8")
        for path in TEMPLATES.rglob("*.html")
    }


@pytest.fixture
def proposal(db):
    planning = make_planning()
    cycle = quota_services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    return planning, cycle


def test_the_login_page_loads_no_plotly_and_offers_a_skip_link(client, db):
    body = client.get("/login/").content.decode()

    assert "plotly" not in body
    assert "charts.js" not in body
    assert '<a href="#main-content" class="skip-link">Skip to main content</a>' in body
    assert 'id="main-content"' in body


@pytest.mark.parametrize("url", ["/nodes/", "/jobs/", "/departments/"])
def test_lists_without_charts_load_no_plotly(client, org, url):
    client.force_login(org.committee)
    body = client.get(url).content.decode()

    assert "data-plotly" not in body
    assert "plotly" not in body
    assert "skip-link" in body


def test_a_chart_page_loads_plotly_its_chinese_locale_and_the_chart_script(client, org):
    client.force_login(org.committee)
    body = client.get("/usage/").content.decode()
    assert "data-plotly" in body
    assert PLOTLY in body
    assert "efficiency/js/charts.js" in body
    assert "plotly-locale-zh-cn.js" not in body

    client.cookies["django_language"] = "zh-hans"
    chinese = client.get("/usage/", headers={"accept-language": "zh-hans"}).content.decode()
    assert 'lang="zh-hans"' in chinese
    assert "plotly-locale-zh-cn.js" in chinese


def test_every_template_that_draws_a_chart_loads_plotly():
    sources = template_sources()
    for name, source in sources.items():
        if "{% plotly_chart" not in source:
            continue
        page = CHART_PARTIALS.get(name, name)
        assert sources[page].startswith('{% extends "base_charts.html" %}'), (
            f"{page} draws a chart: extend base_charts.html, which loads plotly.js"
        )


def test_every_table_header_has_a_scope_and_every_table_a_caption():
    for name, source in template_sources().items():
        for header in re.findall(r"<th\b[^>]*>", source):
            assert re.search(r'scope="(col|row|colgroup|rowgroup)"', header), f"{name}: {header}"
        for table in re.finditer(r"<table\b[^>]*>", source):
            assert source[table.end() :].lstrip().startswith("<caption"), f"{name}: a table without a caption"


def test_a_rendered_page_has_scoped_headers_and_a_caption(client, org):
    client.force_login(org.committee)
    body = client.get("/nodes/").content.decode()

    page = markup(body)
    assert page.headers
    assert all(header.get("scope") == "col" for header in page.headers)
    assert '<caption class="visually-hidden">Nodes</caption>' in body


def test_every_quota_edit_input_has_a_label_naming_its_department_and_model(client, proposal):
    planning, cycle = proposal
    client.force_login(planning.committee)
    body = client.get(f"/quotas/cycles/{cycle.pk}/").content.decode()

    page = markup(body)
    numbers = [field for field in page.inputs if field.get("type") == "number"]
    assert len(numbers) == 2 * cycle.quotas.count()
    assert all(field["id"] in page.label_targets for field in numbers)
    assert "Guaranteed GPUs of Radar perception · " in body
    assert "Borrowing limit (GPUs) of Vehicle vision · " in body


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_server_error_page_names_its_language(db, language):
    with translation.override(language):
        response = server_error(RequestFactory().get("/"))

    assert f'<html lang="{language}">' in response.content.decode()


def test_range_presets_keep_the_pages_other_parameters(client, org):
    client.force_login(org.committee)
    body = client.get("/faults/?range=24h&department=vision&model=h100&page=3").content.decode()

    assert 'href="?department=vision&amp;model=h100&amp;range=7d"' in body
    assert "page=3" not in body.split('id="range-picker"')[1].split("</form>")[0]
    # The custom range form keeps them too.
    assert '<input type="hidden" name="department" value="vision">' in body
    assert '<input type="hidden" name="model" value="h100">' in body


def test_range_presets_drop_the_custom_days(client, org):
    client.force_login(org.committee)
    body = client.get(
        "/usage/?range=custom&start=2026-11-01&end=2026-11-14&department=radar"
    ).content.decode()

    picker = body.split('id="range-picker"')[1].split("</form>")[0]
    assert 'href="?department=radar&amp;range=24h"' in picker
    assert "start=" not in picker
