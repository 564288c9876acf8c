"""The usage overview and API per cluster, and a cluster whose nodes are all in the shared pool."""

import csv
import io
import re
from datetime import timedelta
from html import unescape
from urllib.parse import parse_qs

import pytest
from django.utils import timezone

from efficiency.collectors.records import GpuReading
from efficiency.services.ingest import dirty_hours_mark, gpu_readings_ingest
from efficiency.services.rollups import rollups_refresh
from tests.factories import ClusterFactory, NodeFactory


def sample_hour(cluster, hostnames, start, busy_pct: float, now) -> None:
    """One hour of one-minute samples on every GPU of these nodes at ``busy_pct``."""
    readings = [
        GpuReading(
            host, gpu, int((start + timedelta(minutes=m)).timestamp() * 1000), gr_engine_active_pct=busy_pct
        )
        for host in hostnames
        for m in range(60)
        for gpu in range(8)
    ]
    gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=60, now=now)
    dirty_hours_mark(cluster=cluster, hours=[start], now=now)


@pytest.fixture
def two_clusters(org):
    """The org's cluster (vision's node 60% busy for an hour) and a second cluster "pool" whose
    two nodes nobody owns (40% busy for an hour)."""
    now = timezone.now()
    start = (now - timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    pool = ClusterFactory(slug="pool", name="Shared pool cluster")
    for host in ("pool-01", "pool-02"):
        NodeFactory(hostname=host, cluster=pool, owner_department=None)
    sample_hour(org.cluster, ["gpu-a01"], start, 60.0, now)
    sample_hour(pool, ["pool-01", "pool-02"], start, 40.0, now)
    rollups_refresh(now=now)
    org.pool = pool
    return org


def csv_rows(client, query: str) -> list[dict]:
    response = client.get(f"/usage/?{query}")
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.getvalue().decode("utf-8-sig"))))


def test_the_csv_of_a_cluster_whose_nodes_are_all_unowned_holds_its_figures(client, two_clusters):
    client.force_login(two_clusters.committee)
    rows = {row["Department"]: row for row in csv_rows(client, "range=24h&cluster=pool&export=csv")}
    # Two nodes x 8 GPUs x 1 hour = 16 GPU-hours, 40% busy = 6.4, all sampled.
    pool = rows["Shared pool (unowned nodes)"]
    assert (pool["Available GPU-hours"], pool["Busy GPU-hours"], pool["Utilization (%)"]) == (
        "16.0",
        "6.4",
        "40.0",
    )
    assert pool["Coverage (%)"] == "100.0"
    assert rows["Total"]["Busy GPU-hours"] == "6.4"
    # The departments own nothing there and ran nothing there.
    assert rows["Vehicle vision"]["Available GPU-hours"] == "0.0"


def test_each_cluster_on_its_own_and_all_summed(client, two_clusters):
    client.force_login(two_clusters.committee)
    ad = {
        row["Department"]: row
        for row in csv_rows(client, f"range=24h&cluster={two_clusters.cluster.slug}&export=csv")
    }
    assert ad["Vehicle vision"]["Available GPU-hours"] == "8.0"
    assert ad["Total"]["Busy GPU-hours"] == "4.8"  # 8 GPU-hours at 60%
    assert ad["Shared pool (unowned nodes)"]["Available GPU-hours"] == "0.0"
    every = {row["Department"]: row for row in csv_rows(client, "range=24h&export=csv")}
    assert every["Total"]["Busy GPU-hours"] == "11.2"  # 4.8 + 6.4
    # Radar's node was in service that hour too, unsampled: 8 + 8 + 16 GPU-hours available.
    assert every["Total"]["Available GPU-hours"] == "32.0"


def test_the_page_offers_the_clusters_and_keeps_the_choice_in_its_links(client, two_clusters):
    client.force_login(two_clusters.admin)
    body = client.get("/usage/?range=24h&cluster=pool").content.decode()
    assert '<option value="pool" selected>Shared pool cluster</option>' in body
    csv_link = unescape(re.search(r'<a href="(\?[^"]*)" download id="departments-csv"', body).group(1))
    assert parse_qs(csv_link[1:]) == {"range": ["24h"], "cluster": ["pool"], "export": ["csv"]}
    # Switching the range keeps the cluster.
    assert 'href="?cluster=pool&amp;range=7d"' in body
    assert 'id="shared-pool-row"' in body


def test_one_cluster_needs_no_select(client, org):
    client.force_login(org.committee)
    assert 'id="cluster-select"' not in client.get("/usage/").content.decode()


def test_an_unknown_cluster_is_a_400_naming_the_clusters(client, two_clusters):
    client.force_login(two_clusters.committee)
    response = client.get("/usage/?cluster=nope")
    assert response.status_code == 400
    body = response.content.decode()
    assert f"There is no cluster “nope”; the clusters are: {two_clusters.cluster.slug}, pool." in body


def test_the_api_filters_by_cluster_and_refuses_an_unknown_one(client, two_clusters):
    client.force_login(two_clusters.committee)
    data = client.get("/api/v1/usage/?range=24h&cluster=pool").json()
    assert data["cluster"] == "pool"
    assert round(data["total"]["busy_gpu_hours"], 3) == 6.4
    assert round(data["shared_pool"]["available_gpu_hours"], 3) == 16.0
    assert data["shared_pool"]["utilization"] == pytest.approx(0.4)
    summed = client.get("/api/v1/usage/?range=24h").json()
    assert round(summed["total"]["busy_gpu_hours"], 3) == 11.2
    response = client.get("/api/v1/usage/?cluster=nope")
    assert response.status_code == 400
    assert response.json() == {
        "cluster": [f"There is no cluster “nope”; the clusters are: {two_clusters.cluster.slug}, pool."]
    }


def test_a_head_gets_no_shared_pool_figures(client, two_clusters):
    client.force_login(two_clusters.head_a)
    data = client.get("/api/v1/usage/?range=24h&cluster=pool").json()
    assert data["shared_pool"] is None
    assert data["total"]["busy_gpu_hours"] == 0
