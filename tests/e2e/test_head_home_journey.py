"""A department head opens the portal: every block of their home is there and every link opens a page."""

from datetime import timedelta

import pytest
from django.utils import timezone

from efficiency.choices import JobState
from efficiency.collectors.records import GpuReading
from efficiency.models import Cluster, Department, Incident, Node
from efficiency.services.ingest import dirty_hours_mark, gpu_readings_ingest
from efficiency.services.organisation import DEMO_CLUSTER_SLUG, demo_organisation_create
from efficiency.services.quotas import quota_cycle_initial_create
from efficiency.services.rollups import rollups_refresh
from tests.e2e.conftest import log_in
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db(transaction=True)

BLOCKS = ("#home-usage", "#home-queue", "#home-quota", "#home-incidents", "#home-idle")


@pytest.fixture
def vision_at_work(transactional_db):
    """Vision fills its nodes: one job idles on the first for three hours; two jobs wait (one
    held by Slurm's QOS); the fixed partition is the cycle in force; one incident is open."""
    demo_organisation_create(password="e2e-password")
    cluster = Cluster.objects.get(slug=DEMO_CLUSTER_SLUG)
    vision = Department.objects.get(code="vision")
    now = timezone.now().replace(microsecond=0)
    start = (now - timedelta(hours=4)).replace(minute=0, second=0)
    nodes = list(Node.objects.filter(owner_department=vision).order_by("hostname"))
    running = []
    for index, node in enumerate(nodes):
        job = JobFactory(
            cluster=cluster, department=vision, gpu_model="", gpu_count=node.gpu_count,
            name=f"bev-train-{index}", user_name="xiao.ming",
            submitted_at=start - timedelta(minutes=5), started_at=start,
        )  # fmt: skip
        job.nodes.add(node)
        running.append(job)
    readings = [
        GpuReading(node.hostname, gpu, int((start + timedelta(minutes=m)).timestamp() * 1000),
                   gr_engine_active_pct=0.0 if node == nodes[0] else 85.0)
        for node in nodes
        for m in range(0, 180, 5)
        for gpu in range(node.gpu_count)
    ]  # fmt: skip
    gpu_readings_ingest(cluster=cluster, readings=readings, interval_s=300, now=now)
    dirty_hours_mark(cluster=cluster, hours=[start + timedelta(hours=h) for h in range(3)], now=now)
    rollups_refresh(now=now)
    for hours, reason in ((30, "QOSMaxGRESPerAccount"), (2, "")):
        JobFactory(
            cluster=cluster, department=vision, gpu_model="", gpu_count=16, state=JobState.PENDING,
            submitted_at=now - timedelta(hours=hours), started_at=None, name="lane-seg-pretrain",
            user_name="zhao.lei", config={"pending_reason": reason} if reason else {},
        )  # fmt: skip
    quota_cycle_initial_create(cluster=cluster, start=now - timedelta(days=3), now=now)
    Incident.objects.create(
        cluster=cluster, job=running[1], department=vision, node=nodes[1], category="hardware_gpu",
        severity="critical", code="79", root_signature_id="xid-79", occurred_at=now - timedelta(hours=1),
        detected_at=now - timedelta(hours=1),
    )  # fmt: skip


def _block_links(page) -> list[str]:
    hrefs = []
    for block in BLOCKS:
        for link in page.locator(f"{block} a[href]").all():
            href = link.get_attribute("href")
            if href not in hrefs:
                hrefs.append(href)
    return hrefs


def test_head_home_shows_each_block_and_every_link_opens_a_page(page, vision_at_work, screenshot):
    log_in(page, "head-vision", "e2e-password")
    for block in BLOCKS:
        assert page.locator(block).is_visible(), block
    page.locator("#trend-chart svg.main-svg").first.wait_for()
    assert "2 jobs are waiting for 32 GPUs." in page.locator("#home-queue").inner_text()
    queue = page.locator("#home-queue-jobs").inner_text()
    assert "Quota" in queue
    assert "QOSMaxGRESPerAccount" in queue
    assert "Capacity" in queue  # vision's own GPUs are all held, and nobody else's are free
    assert "Vehicle vision" in page.locator("#home-quota-use").inner_text()
    assert page.locator("#home-incident-list li").count() == 1
    assert page.locator("#home-idle-allocations tbody tr").count() == 1  # the job on the idle node
    assert "Radar perception" not in page.content()
    screenshot("home-head-en-1400")
    page.set_viewport_size({"width": 390, "height": 900})
    page.reload()
    page.locator("#trend-chart svg.main-svg").first.wait_for()
    screenshot("home-head-en-390")

    links = _block_links(page)
    assert len(links) >= 8
    for href in links:
        response = page.goto(href)
        assert response.status == 200, href


def test_head_home_in_chinese_on_a_phone(page, vision_at_work, screenshot):
    log_in(page, "head-vision", "e2e-password")
    with page.expect_navigation():
        page.get_by_label("Language").select_option("zh-hans")
    assert page.locator("#home-queue h2").inner_text() == "排队"
    assert "配额" in page.locator("#home-queue-jobs").inner_text()
    page.locator("#trend-chart svg.main-svg").first.wait_for()
    screenshot("home-head-zh-1400")
    page.set_viewport_size({"width": 390, "height": 900})
    page.reload()
    page.locator("#trend-chart svg.main-svg").first.wait_for()
    screenshot("home-head-zh-390")
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto("/departments/vision/")
    page.locator("#jobs-part table").first.wait_for()
    assert "排队与等待" in page.locator("#department-queue").inner_text()
    screenshot("department-vision-queue-zh-1400")
