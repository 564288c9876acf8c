"""Every "Download CSV" link downloads the CSV of exactly what its page shows, filters and all."""

import csv
import io
import re
from html import unescape
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest

from efficiency.choices import JobState
from efficiency.services import quotas as quota_services
from tests.factories import JobFactory, NodeFactory
from tests.quota_fixtures import NOW, SETTINGS, make_planning

CSV_LINK = re.compile(r'<a href="([^"]*)" download[^>]*>Download CSV</a>')


def csv_links(body: str) -> list[str]:
    return [unescape(href) for href in CSV_LINK.findall(body)]


def follow(client, page_url: str, href: str):
    return client.get(urljoin(page_url, href))


def csv_rows(response) -> list[dict]:
    assert response["Content-Type"].startswith("text/csv"), response["Content-Type"]
    return list(csv.DictReader(io.StringIO(response.getvalue().decode("utf-8-sig"))))


@pytest.mark.parametrize(
    "page_url",
    [
        "/jobs/",
        "/jobs/?department=vision",
        "/jobs/?state=running&department=vision&page=1",
        "/nodes/",
        "/nodes/?owner=vision",
        "/usage/?range=24h",
        "/faults/?range=24h",
    ],
)
def test_every_csv_link_downloads_csv(client, org, page_url):
    client.force_login(org.admin)
    page = client.get(page_url)
    assert page.status_code == 200
    (href,) = csv_links(page.content.decode())
    assert "??" not in href
    query = parse_qs(urlsplit(href).query)
    assert query["export"] == ["csv"]
    assert "page" not in query
    csv_rows(follow(client, page_url, href))


def test_job_csv_link_keeps_the_first_filter(client, org):
    for _ in range(3):
        JobFactory(department=org.dept_b, cluster=org.cluster)
    client.force_login(org.committee)
    page_url = "/jobs/?department=vision&state=running"
    (href,) = csv_links(client.get(page_url).content.decode())
    rows = csv_rows(follow(client, page_url, href))
    assert [row["Job"] for row in rows] == [org.job_a.external_id]


def test_node_csv_link_keeps_every_filter(client, org):
    NodeFactory(hostname="gpu-a02", cluster=org.cluster, owner_department=org.dept_a, rdma_capable=False)
    NodeFactory(hostname="gpu-b02", cluster=org.cluster, owner_department=org.dept_b, rdma_capable=False)
    client.force_login(org.committee)
    page_url = "/nodes/?owner=vision&rdma_capable=false"
    (href,) = csv_links(client.get(page_url).content.decode())
    rows = csv_rows(follow(client, page_url, href))
    assert [row["Hostname"] for row in rows] == ["gpu-a02"]


def test_csv_of_a_list_has_every_filtered_row_not_just_the_first_page(client, org):
    JobFactory.create_batch(60, department=org.dept_a, cluster=org.cluster, state=JobState.COMPLETED)
    client.force_login(org.head_a)
    page_url = "/jobs/?state=completed&page=2"
    page = client.get(page_url).content.decode()
    (href,) = csv_links(page)
    assert len(csv_rows(follow(client, page_url, href))) == 60
    assert "60 jobs" in page


def test_department_page_csv_links_keep_the_range(client, org):
    client.force_login(org.head_a)
    page_url = "/departments/vision/jobs/?range=30d"
    links = csv_links(client.get(page_url).content.decode())
    assert len(links) == 2
    for href in links:
        assert parse_qs(urlsplit(href).query)["range"] == ["30d"]
        csv_rows(follow(client, "/departments/vision/?range=30d", href))


def test_quota_pages_csv_links_download_csv(client, db):
    planning = make_planning()
    cycle = quota_services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    quota_services.quota_backtest_run(cycle=cycle, now=NOW)
    quota_services.quota_cycle_approve(cycle=cycle, actor=planning.committee, comment="Agreed.")
    client.force_login(planning.admin)
    for page_url in (
        f"/quotas/?cluster={planning.cluster.slug}",
        f"/quotas/cycles/{cycle.pk}/",
        f"/quotas/cycles/{cycle.pk}/backtest/",
    ):
        (href,) = csv_links(client.get(page_url).content.decode())
        assert parse_qs(urlsplit(href).query)["export"] == ["csv"]
        assert csv_rows(follow(client, page_url, href))
    (href,) = csv_links(client.get(f"/quotas/?cluster={planning.cluster.slug}").content.decode())
    assert parse_qs(urlsplit(href).query)["cluster"] == [planning.cluster.slug]
