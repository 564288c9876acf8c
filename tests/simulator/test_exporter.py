"""The simulated dcgm-exporter answers /metrics over HTTP."""

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from efficiency.simulator.exporter import make_server
from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes
from tests.simulator.conftest import SEED


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    # The exporter serves "now": start the history a day ago so the first scrape simulates little.
    now = datetime.now(tz=UTC).replace(microsecond=0)
    simulator = ClusterSimulator(reference_nodes(), seed=SEED, start=now - timedelta(days=1))
    server = make_server(simulator, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}"
    server.shutdown()
    server.server_close()


def test_metrics_for_one_node_carry_only_that_node(base_url):
    with urllib.request.urlopen(f"{base_url}/metrics?node=gpu-002", timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    families = {family.name: family.samples for family in text_string_to_metric_families(text)}
    utilization = families["DCGM_FI_DEV_GPU_UTIL"]
    assert len(utilization) == 8
    assert {sample.labels["Hostname"] for sample in utilization} == {"gpu-002"}


def test_metrics_without_a_node_cover_the_whole_cluster(base_url):
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=30) as response:
        text = response.read().decode()
    assert text.count("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") == 64 * 8


@pytest.mark.parametrize("path", ["/metrics?node=nope", "/other"])
def test_unknown_paths_and_nodes_are_not_found(base_url, path):
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{base_url}{path}", timeout=30)
    assert caught.value.code == 404
