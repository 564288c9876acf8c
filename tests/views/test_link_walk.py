"""A walk through the portal as each role, in both languages, following every link it is shown.

The invariant: a link the portal shows a user opens for that user — no 404 for a department
head who followed a link on their own node page, no 500 anywhere, every "Download CSV" is a CSV
file, and no link is malformed (``??``, ``&&``, empty). Links are followed breadth first from the
home page over a small organisation with one of everything (a proposal, an objection, an
incident on a job, an incident on a node without a job, waiting and finished jobs).
"""

from collections import deque
from datetime import timedelta
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from django.utils import timezone

from efficiency.choices import JobState, NodeState
from efficiency.models import Incident
from tests.factories import JobFactory
from tests.views.test_url_matrix import _objection, _proposal, _signal

ROLES = ["head_a", "head_b", "committee", "admin"]
LANGUAGES = ["en", "zh-hans"]
# Links that change state, leave the portal's pages, or are Django's own admin (tested apart).
SKIP_PREFIXES = ("/logout", "/admin/", "/i18n/", "/static/", "/api/v1/schema", "/api/v1/docs")
MAX_PAGES = 400


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")


def _links(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.hrefs


def _key(url: str) -> tuple:
    """Pages that differ only in the values of the same parameters are one page to the walk."""
    parts = urlsplit(url)
    return parts.path, frozenset(name for name, _ in parse_qsl(parts.query, keep_blank_values=True))


@pytest.fixture
def world(org):
    now = timezone.now()
    _objection(org)
    _signal(org)  # and the incident on department A's job
    # A fault seen only in the metrics of department B's node: no job, so no department of its own.
    node_incident = Incident.objects.create(
        cluster=org.cluster, node=org.node_b, category="hardware_memory_ecc", severity="critical",
        code="48", root_signature_id="xid-48", occurred_at=now - timedelta(hours=2),
        detected_at=now - timedelta(hours=2),
    )  # fmt: skip
    org.node_b.state, org.node_b.state_reason = NodeState.ISOLATED, f"incident {node_incident.pk}: xid-48"
    org.node_b.save()
    JobFactory(
        department=org.dept_a, cluster=org.cluster, name="vision-waiting", state=JobState.PENDING,
        started_at=None, submitted_at=now - timedelta(hours=5),
    )  # fmt: skip
    finished = JobFactory(
        department=org.dept_b, cluster=org.cluster, name="radar-done", state=JobState.COMPLETED,
        started_at=now - timedelta(hours=6), ended_at=now - timedelta(hours=1),
    )  # fmt: skip
    finished.nodes.add(org.node_b)
    _proposal(org)
    return org


def _walk(client, start: str = "/") -> dict[str, list[str]]:
    """Follow every in-portal link from ``start``; the problems found, by kind."""
    problems: dict[str, list[str]] = {"status": [], "malformed": [], "csv": []}
    queue, seen = deque([(start, "(start)")]), {_key(start)}
    visited = 0
    while queue and visited < MAX_PAGES:
        url, found_on = queue.popleft()
        response = client.get(url)
        visited += 1
        if response.status_code != 200:
            problems["status"].append(f"{url} -> {response.status_code} (linked from {found_on})")
            continue
        content_type = response.get("Content-Type", "")
        if "export=csv" in url or "/export/" in url:
            if "export=csv" in url and not content_type.startswith("text/csv"):
                problems["csv"].append(f"{url} is {content_type} (linked from {found_on})")
            continue
        if not content_type.startswith("text/html"):
            continue
        for href in _links(response.content.decode()):
            if href.startswith(("#", "mailto:", "javascript:")):
                continue
            if not href or "??" in href or "&&" in href or (href.endswith("?") and href != "?"):
                problems["malformed"].append(f"{href!r} on {url}")
                continue
            if urlsplit(href).netloc:
                continue  # another site (documentation links)
            target = href if href.startswith("/") else urlsplit(url).path + href
            if target.startswith(SKIP_PREFIXES):
                continue
            # Keep at most a few values of each query: the walk covers shapes, not every range.
            query = urlencode(parse_qsl(urlsplit(target).query, keep_blank_values=True))
            target = urlsplit(target).path + (f"?{query}" if query else "")
            if _key(target) not in seen:
                seen.add(_key(target))
                queue.append((target, url))
    assert visited < MAX_PAGES, "the walk did not end: a link builds ever new URLs"
    return problems


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("role", ROLES)
def test_every_link_a_user_is_shown_opens_for_them(client, world, role, language):
    client.force_login(getattr(world, role))
    client.cookies["django_language"] = language
    problems = _walk(client)
    assert problems == {"status": [], "malformed": [], "csv": []}
