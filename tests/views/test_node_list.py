"""The node list: class, utilization and coverage over a range, sortable, filters kept, scoped,
in a fixed number of queries; the CSV holds what the page shows."""

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
import time_machine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.models import NodeHour
from efficiency.selectors.inventory import NODE_SORTS
from tests.factories import NodeClassificationFactory, NodeFactory, NodeHourFactory

NOW = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
RANGE_END = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)  # presets end after the current hour


def hours(node, count: int, *, busy: float, sampled: float = 1.0, end: datetime = RANGE_END) -> None:
    """``count`` hours before ``end``, 8 GPUs available, ``sampled`` of them sampled, ``busy``
    of the sampled time busy."""
    NodeHour.objects.bulk_create(
        NodeHourFactory.build(
            node=node,
            hour=end - timedelta(hours=n + 1),
            sampled_gpu_s=sampled * 8 * 3600,
            busy_gpu_s=busy * sampled * 8 * 3600,
        )
        for n in range(count)
    )


@pytest.fixture
def fleet(org):
    """Over the last 7 days: vision's node 60% busy (steady), radar's 5% (idle), an unowned node
    30% busy with half its GPU time sampled and no class yet, a retired node never sampled."""
    org.shared = NodeFactory(hostname="gpu-s01", cluster=org.cluster, owner_department=None)
    org.silent = NodeFactory(hostname="gpu-z09", cluster=org.cluster, owner_department=None)
    hours(org.node_a, 7 * 24, busy=0.6)
    hours(org.node_b, 7 * 24, busy=0.05)
    hours(org.shared, 7 * 24, busy=0.3, sampled=0.5)
    hours(org.node_a, 24, busy=0.0, end=RANGE_END - timedelta(days=7))  # before the range
    NodeClassificationFactory(node=org.node_a, node_class="steady")
    NodeClassificationFactory(node=org.node_b, node_class="idle", reason="idle_hours")
    with time_machine.travel(NOW, tick=False):
        yield org


def hostnames(body: str) -> list[str]:
    table = body[body.index('id="node-table"') :]
    return re.findall(r'<td><a href="/nodes/\d+/[^"]*">([^<]+)</a></td>', table)


def row_of(body: str, hostname: str) -> str:
    start = body.index(f">{hostname}</a>")
    return body[start : body.index("</tr>", start)]


def figures(body: str, hostname: str) -> list[str]:
    """The class, utilization and coverage cells of a node's row, as text."""
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row_of(body, hostname) + "</tr>", re.DOTALL)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in cells[-3:]]


def test_each_node_shows_its_class_utilization_and_coverage(client, fleet):
    client.force_login(fleet.admin)
    body = client.get("/nodes/").content.decode()
    assert "Last 7 days" in body
    assert figures(body, "gpu-a01") == ["Steady", "60.0%", "100.0%"]
    assert figures(body, "gpu-b01") == ["Idle", "5.0%", "100.0%"]
    assert figures(body, "gpu-s01") == ["Not classified yet", "30.0%", "50.0%"]
    assert figures(body, "gpu-z09") == ["Not classified yet", "—", "—"]  # no samples: not 0%


def test_sorting_by_utilization_finds_the_idle_nodes_first(client, fleet):
    client.force_login(fleet.admin)
    assert hostnames(client.get("/nodes/?sort=utilization").content.decode()) == [
        "gpu-b01", "gpu-s01", "gpu-a01", "gpu-z09",
    ]  # fmt: skip
    # Descending too, and a node without samples stays last either way.
    assert hostnames(client.get("/nodes/?sort=-utilization").content.decode()) == [
        "gpu-a01", "gpu-s01", "gpu-b01", "gpu-z09",
    ]  # fmt: skip
    assert hostnames(client.get("/nodes/?sort=class").content.decode())[:2] == ["gpu-b01", "gpu-a01"]


def test_the_range_changes_the_figures(client, fleet):
    client.force_login(fleet.admin)
    body = client.get("/nodes/?range=14d").content.decode()
    # 168 hours at 60% and 24 at 0%: 100.8 / 192 = 52.5%.
    assert "52.5%" in row_of(body, "gpu-a01")


def test_a_head_sees_their_own_nodes_only(client, fleet):
    client.force_login(fleet.head_a)
    assert hostnames(client.get("/nodes/?sort=-utilization").content.decode()) == ["gpu-a01"]


def test_an_unknown_sort_is_a_400_that_says_what_can_be_sorted(client, fleet):
    client.force_login(fleet.admin)
    response = client.get("/nodes/?sort=bogus")
    assert response.status_code == 400
    assert "Cannot sort by “bogus”; sort by one of: hostname, cluster" in response.content.decode()


def test_the_page_costs_the_same_queries_for_many_nodes(client, fleet, django_assert_max_num_queries):
    client.force_login(fleet.admin)
    with django_assert_max_num_queries(12) as few:
        client.get("/nodes/?sort=-coverage")
    for n in range(12):
        hours(NodeFactory(hostname=f"gpu-m{n:02d}", cluster=fleet.cluster), 3, busy=0.2)
    with django_assert_max_num_queries(len(few.captured_queries)):
        body = client.get("/nodes/?sort=-coverage").content.decode()
    assert len(hostnames(body)) == 16


def sort_links(body: str) -> dict[str, dict[str, list[str]]]:
    """Each column's sort link as its parsed query string, by sort value."""
    links = re.findall(r'<a href="\?([^"]*)" class="sort-link"', body)
    parsed = [parse_qs(unescape(link)) for link in links]
    return {query["sort"][0]: query for query in parsed}


FILTERS = {"owner": ["vision"], "state": ["active"], "range": ["24h"], "q": ["gpu"]}


# Read-only: the client and the fleet may be shared by every example.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from(sorted(NODE_SORTS)),
    descending=st.booleans(),
    filters=st.dictionaries(st.sampled_from(sorted(FILTERS)), st.none()),
)
def test_every_sort_keeps_the_filters_and_never_errors(client, fleet, key, descending, filters):
    client.force_login(fleet.admin)
    sort = f"-{key}" if descending else key
    query = {name: FILTERS[name][0] for name in filters}
    response = client.get("/nodes/", {**query, "sort": sort})
    assert response.status_code == 200
    body = response.content.decode()
    links = sort_links(body)
    assert len(links) == len(NODE_SORTS)
    for link in links.values():
        for name in filters:
            assert link[name] == FILTERS[name]
        assert "page" not in link
    # The column sorted by now offers the other direction; the others start ascending.
    assert (f"-{key}" if not descending else key) in links
    if filters.keys() >= {"owner"}:
        assert set(hostnames(body)) <= {"gpu-a01"}


def test_the_csv_link_downloads_the_rows_the_page_shows_in_its_order(client, fleet):
    client.force_login(fleet.admin)
    body = client.get("/nodes/?sort=-utilization&shared_pool=true&range=24h").content.decode()
    link = unescape(re.search(r'<a href="(\?[^"]*)" download class="csv-link"', body).group(1))
    assert parse_qs(urlsplit(link).query) == {
        "sort": ["-utilization"], "shared_pool": ["true"], "range": ["24h"], "export": ["csv"],
    }  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(client.get(f"/nodes/{link}").getvalue().decode("utf-8-sig"))))
    assert [row["Hostname"] for row in rows] == hostnames(body) == ["gpu-s01", "gpu-z09"]
    assert (rows[0]["Utilization (%)"], rows[0]["Coverage (%)"], rows[0]["Class"]) == ("30.0", "50.0", "")
    assert rows[1]["Utilization (%)"] == ""


def test_a_retired_node_promises_no_classification(client, fleet):
    from efficiency.choices import NodeState
    from efficiency.models import Node

    Node.objects.filter(hostname="gpu-z09").update(state=NodeState.RETIRED)
    client.force_login(fleet.admin)
    body = client.get("/nodes/?state=retired").content.decode()
    assert figures(body, "gpu-z09") == ["—", "—", "—"]
