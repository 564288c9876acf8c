"""A dcgm scrape run isolates a failed target as Prometheus does: the others are stored."""

import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from efficiency.choices import RunStatus, SourceKind
from efficiency.models import DataSource, GpuSample
from efficiency.services.sources import source_collect
from tests.factories import ClusterFactory, NodeFactory

FIXTURE = (
    Path(__file__).resolve().parent.parent / "fixtures" / "dcgm" / "dcgm_exporter_issue363_rtx_a5000.txt"
)
NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


class _Exporter(BaseHTTPRequestHandler):
    pages: dict[str, tuple[int, bytes]] = {}

    def do_GET(self):
        status, body = self.pages.get(self.path, (404, b"404 page not found\n"))
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def exporter():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield _Exporter.pages, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def cluster(db):
    cluster = ClusterFactory(slug="c1")
    NodeFactory(cluster=cluster, hostname="k8s-gpu1", gpu_count=1)
    NodeFactory(cluster=cluster, hostname="k8s-gpu2", gpu_count=1)
    return cluster


def test_a_404_and_an_absurd_timestamp_mark_their_targets_and_the_good_one_is_stored(cluster, exporter):
    pages, base = exporter
    good = FIXTURE.read_bytes()
    pages["/good"] = (200, good)
    # The same page from another host, with one sample stamped -99999999999999999 ms.
    pages["/absurd"] = (
        200,
        good.replace(b'Hostname="k8s-gpu1"', b'Hostname="k8s-gpu2"')
        + b'DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="k8s-gpu2"} 41 -99999999999999999\n',
    )
    urls = [f"{base}/gone", f"{base}/absurd", f"{base}/good"]
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.DCGM_SCRAPE, name="dcgm", config={"urls": urls}
    )

    run = source_collect(source_id=source.pk, now=NOW)

    assert run.status == RunStatus.PARTIAL
    assert list(GpuSample.objects.values_list("node__hostname", flat=True)) == ["k8s-gpu1"]
    reasons = [item["reason"] for item in run.rejects]
    # The exposition format's value is a float: -99999999999999999 reads as -1e17.
    assert "sample at -100000000000000000 ms since the epoch is older than retention" in reasons
    assert f"{base}/gone answered HTTP 404" in reasons
    source.refresh_from_db()
    health = {url: target["health"] for url, target in source.state["targets"].items()}
    assert health == {urls[0]: "down", urls[1]: "up", urls[2]: "up"}
    assert source.state["targets"][urls[0]]["last_error"] == f"{base}/gone answered HTTP 404"
    assert source.watermark == NOW
    assert source.consecutive_failures == 0


def test_the_sources_page_lists_its_targets_with_the_one_down_first(client, cluster, exporter):
    from efficiency.permissions import Role
    from tests.factories import UserFactory

    pages, base = exporter
    pages["/good"] = (200, FIXTURE.read_bytes())
    urls = [f"{base}/good", f"{base}/gone"]
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.DCGM_SCRAPE, name="dcgm", config={"urls": urls}
    )
    source_collect(source_id=source.pk, now=NOW)
    client.force_login(UserFactory(role=Role.PLATFORM_ADMIN))

    page = client.get(f"/sources/{source.pk}/", HTTP_ACCEPT_LANGUAGE="en").content.decode()

    targets = page.split('id="targets"')[1].split("</section>")[0]
    rows = targets.split("<tr class=")[1:]
    assert [row.split(">")[0] for row in rows] == ['"target-down"', '"target-up"']
    assert f"{base}/gone answered HTTP 404" in rows[0]
    assert "Down" in rows[0]
    assert "Up" in rows[1]


def test_each_target_is_read_against_its_own_last_page(cluster, exporter):
    # Two exporters serve pages alike but for their host; each page is compared with the one read
    # before from the same URL (collectors.dcgm templates), so the second run's values are each
    # target's own.
    from datetime import timedelta

    from efficiency.collectors import dcgm

    pages, base = exporter
    good = FIXTURE.read_bytes()
    other = good.replace(b'Hostname="k8s-gpu1"', b'Hostname="k8s-gpu2"')
    urls = [f"{base}/one", f"{base}/two"]
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.DCGM_SCRAPE, name="dcgm", config={"urls": urls}
    )
    dcgm._TEMPLATES.clear()
    pages["/one"], pages["/two"] = (200, good), (200, other)
    source_collect(source_id=source.pk, now=NOW)
    assert {key[0] for key in dcgm._TEMPLATES} == set(urls)
    later = NOW + timedelta(seconds=15)
    pages["/one"] = (
        200,
        good.replace(
            b'Hostname="k8s-gpu1",DCGM_FI_DRIVER_VERSION="550.54.15"} 21383',
            b'Hostname="k8s-gpu1",DCGM_FI_DRIVER_VERSION="550.54.15"} 1000',
        ),
    )
    pages["/two"] = (
        200,
        other.replace(
            b'Hostname="k8s-gpu2",DCGM_FI_DRIVER_VERSION="550.54.15"} 21383',
            b'Hostname="k8s-gpu2",DCGM_FI_DRIVER_VERSION="550.54.15"} 2000',
        ),
    )
    assert pages["/one"][1] != good
    assert pages["/two"][1] != other

    source_collect(source_id=source.pk, now=later)

    stored = dict(GpuSample.objects.filter(ts=later).values_list("node__hostname", "fb_used_mib"))
    assert stored == {"k8s-gpu1": 1000.0, "k8s-gpu2": 2000.0}
