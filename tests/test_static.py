"""Vendored front-end files match the libraries they extend."""

import re
from pathlib import Path

import plotly

ROOT = Path(__file__).resolve().parent.parent
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
LOCALES = ROOT / "static" / "vendor" / "plotly-locales"


def test_the_chinese_plotly_locale_is_of_the_bundled_plotly_js_version():
    bundled = re.search(r"plotly\.js v(\d+\.\d+\.\d+)", PLOTLY_JS.read_text(encoding="utf-8")[:500]).group(1)
    assert f"plotly.js@{bundled}" in (LOCALES / "README.md").read_text(encoding="utf-8"), (
        f"the plotly wheel bundles plotly.js {bundled}: vendor its dist/plotly-locale-zh-cn.js"
    )
    locale = (LOCALES / "plotly-locale-zh-cn.js").read_text(encoding="utf-8")
    assert 'name:"zh-CN"' in locale
    assert "Plotly.register(locale)" in locale
    assert (LOCALES / "LICENSE").exists()


def test_the_css_colours_every_severity_and_node_class_the_charts_colour():
    from efficiency.charts.usage import NODE_CLASS_COLORS
    from efficiency.choices import Severity

    css = (ROOT / "static" / "efficiency" / "css" / "portal.css").read_text(encoding="utf-8")
    defined = set(re.findall(r"\.((?:severity|class)-[a-z_]+)\s*[{,]", css))
    assert {f"severity-{value}" for value in Severity.values} <= defined
    assert {f"class-{value}" for value in NODE_CLASS_COLORS} <= defined
