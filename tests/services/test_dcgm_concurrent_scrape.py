"""A dcgm source of 1,250 exporters is scraped within its interval: the pages are fetched
concurrently, a bounded number at a time, not one URL after another.

Each exporter is a real HTTP endpoint on a local server that answers after 50 ms with a real
dcgm-exporter page (a captured one, with the node's hostname); one after another the scrape
would take 1,250 x 50 ms = 62.5 s.
"""

import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from efficiency.choices import RunStatus, SourceKind
from efficiency.models import DataSource, GpuSample, Node
from efficiency.services.sources import source_collect
from tests.factories import ClusterFactory, DepartmentFactory, NodeFactory

FIXTURE = (
    Path(__file__).resolve().parent.parent / "fixtures" / "dcgm" / "dcgm_exporter_issue363_rtx_a5000.txt"
)
NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
EXPORTERS = 1_250
ANSWER_S = 0.05
CONCURRENCY = 32
INTERVAL_S = 15  # the cadence of beat's collect-due-sources pass


class _SlowExporters(BaseHTTPRequestHandler):
    """``/<hostname>/metrics`` after ``ANSWER_S``; counts the requests in flight at once."""

    page = FIXTURE.read_text()
    lock = threading.Lock()
    in_flight = 0
    most_in_flight = 0
    served = 0

    def do_GET(self):
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.most_in_flight = max(cls.most_in_flight, cls.in_flight)
        try:
            time.sleep(ANSWER_S)
            hostname = self.path.split("/")[1]
            body = self.page.replace('Hostname="k8s-gpu1"', f'Hostname="{hostname}"').encode()
        finally:
            # Counted out before the first byte of the answer leaves: once the client has read it,
            # its next request may arrive before this thread would get to count this one out.
            with cls.lock:
                cls.in_flight -= 1
                cls.served += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default (5) refuses connections under a burst of 32


@pytest.fixture
def exporters():
    _SlowExporters.in_flight = _SlowExporters.most_in_flight = _SlowExporters.served = 0
    server = _Server(("127.0.0.1", 0), _SlowExporters)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_1250_exporters_are_scraped_concurrently_within_the_sources_interval(db, exporters, settings):
    settings.PORTAL_SCRAPE_CONCURRENCY = CONCURRENCY
    cluster = ClusterFactory(slug="fleet")
    department = DepartmentFactory()
    hostnames = [f"fleet-{i:04d}" for i in range(EXPORTERS)]
    Node.objects.bulk_create(
        NodeFactory.build(cluster=cluster, owner_department=department, hostname=name, gpu_count=1)
        for name in hostnames
    )
    urls = [f"{exporters}/{name}/metrics" for name in hostnames]
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.DCGM_SCRAPE,
        name="fleet dcgm",
        interval_s=INTERVAL_S,
        config={"urls": urls},
    )

    started = time.monotonic()
    run = source_collect(source_id=source.pk, now=NOW)
    elapsed_s = time.monotonic() - started

    sequential_s = EXPORTERS * ANSWER_S
    print(
        f"{EXPORTERS} exporters answering in {ANSWER_S * 1000:.0f} ms: one collection took {elapsed_s:.1f} s "
        f"at {CONCURRENCY} at a time (one after another: {sequential_s:.1f} s; interval {INTERVAL_S} s); "
        f"at most {_SlowExporters.most_in_flight} requests in flight"
    )
    assert run.status == RunStatus.OK, run.rejects[:3]
    assert _SlowExporters.served == EXPORTERS
    # Every exporter's page stored once: one sample per node's GPU.
    assert GpuSample.objects.filter(node__cluster=cluster).count() == EXPORTERS
    assert set(GpuSample.objects.values_list("node__hostname", flat=True)) == set(hostnames)
    source.refresh_from_db()
    assert len(source.state["targets"]) == EXPORTERS
    assert {target["health"] for target in source.state["targets"].values()} == {"up"}
    # Concurrent, and bounded by the setting.
    assert 1 < _SlowExporters.most_in_flight <= CONCURRENCY
    assert elapsed_s < INTERVAL_S, (
        f"the scrape took {elapsed_s:.1f} s, longer than its {INTERVAL_S} s interval"
    )


def test_a_scrape_never_has_more_requests_in_flight_than_the_setting(db, exporters, settings):
    settings.PORTAL_SCRAPE_CONCURRENCY = 4
    cluster = ClusterFactory(slug="small")
    hostnames = [f"small-{i:02d}" for i in range(40)]
    for name in hostnames:
        NodeFactory(cluster=cluster, hostname=name, gpu_count=1)
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.DCGM_SCRAPE,
        name="small dcgm",
        config={"urls": [f"{exporters}/{name}/metrics" for name in hostnames]},
    )

    run = source_collect(source_id=source.pk, now=NOW)

    assert run.status == RunStatus.OK
    assert run.stored == len(hostnames)
    assert _SlowExporters.most_in_flight == 4
