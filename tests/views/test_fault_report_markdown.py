"""The Markdown fault report carries users' text (job names, log lines, close reasons) as text:
rendered by a CommonMark renderer (markdown-it-py, what GitLab-style trackers follow) it adds no
link, image, HTML or heading, and reads exactly as written."""

import html

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from efficiency.markdown_text import markdown_code, markdown_text
from efficiency.models import FaultSignal
from tests.views.test_fault_pages import incidents  # noqa: F401 - fixture

RENDER = MarkdownIt("commonmark").enable("table").enable("strikethrough")
HOSTILE = [
    '<a href="https://evil.example">click</a>',
    "[click](https://evil.example)",
    "![x](https://evil.example/t.png)",
    "**bold** _it_ ~~gone~~ | cell |",
    "line\n# heading\n- item",
    "`code` ``two``",
    "&lt;not a tag&gt; &amp;",
    "\\*escaped\\*",
]
# CommonMark replaces NUL with U+FFFD whatever the escaping: not a character to test with.
text = st.one_of(st.sampled_from(HOSTILE), st.text(st.characters(exclude_characters="\x00"), max_size=40))


def _inline_html(markdown: str) -> str:
    rendered = RENDER.render(markdown).strip()
    assert rendered.startswith("<p>"), rendered
    assert rendered.endswith("</p>"), rendered
    return rendered[3:-4]


@settings(max_examples=200, deadline=None)
@given(text)
def test_markdown_text_renders_as_written(value):
    value = value.replace("\r", " ").replace("\n", " ").replace("\u2028", " ").replace("\u2029", " ")
    if not value.strip() or value != value.strip():
        return  # a paragraph drops leading and trailing blanks; values sit between words
    assert html.unescape(_inline_html(f"x {markdown_text(value)} x")) == f"x {value} x"


@settings(max_examples=200, deadline=None)
@given(text)
def test_markdown_code_span_holds_anything(value):
    value = value.replace("\r", " ").replace("\n", " ").replace("\u2028", " ").replace("\u2029", " ")
    if not value.strip(" "):
        return
    rendered = _inline_html(f"x {markdown_code(value)} x")
    assert rendered.startswith("x <code>")
    assert rendered.endswith("</code> x")
    assert html.unescape(rendered[len("x <code>") : -len("</code> x")]).strip(" ") == value.strip(" ")


@pytest.mark.django_db
def test_a_job_named_like_a_link_stays_text_in_the_markdown_report(client, org, incidents):  # noqa: F811
    incident = incidents[0]
    org.job_a.name = '<a href="https://evil.example">rerun</a> [click](https://evil.example)'
    org.job_a.save()
    FaultSignal.objects.filter(incident=incident).update(
        message="Xid 79 `; rm -rf / #` ![x](https://e.example/t)"
    )
    client.force_login(org.head_a)
    markdown = client.get(f"/faults/incidents/{incident.pk}/report/?format=md").content.decode()
    rendered = RENDER.render(markdown)
    assert "<a " not in rendered
    assert "<img" not in rendered
    assert '<a href="https://evil.example">rerun</a> [click](https://evil.example)' in html.unescape(rendered)
