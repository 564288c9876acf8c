"""A department head's home: every figure is the one the linked page shows, and each block links there."""

from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from efficiency.analysis.queue import CAPACITY
from efficiency.choices import IncidentStatus, JobState
from efficiency.collectors.records import GpuReading
from efficiency.models import Incident
from efficiency.services import quotas as quota_services
from efficiency.services.ingest import dirty_hours_mark, gpu_readings_ingest
from efficiency.services.rollups import rollups_refresh
from tests.factories import JobFactory, NodeFactory
from tests.quota_fixtures import NOW, SETTINGS, make_planning


@pytest.fixture
def sampled(org):
    """Three hours ago job A ran on node A for an hour at 40%; the hour before, nothing ran."""
    now = timezone.now()
    start = (now - timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    org.job_a.started_at = start
    org.job_a.save()
    readings = [
        GpuReading(
            "gpu-a01", gpu, int((start + timedelta(minutes=m)).timestamp() * 1000), gr_engine_active_pct=40.0
        )
        for m in range(60)
        for gpu in range(8)
    ]
    gpu_readings_ingest(cluster=org.cluster, readings=readings, interval_s=60, now=now)
    dirty_hours_mark(cluster=org.cluster, hours=[start], now=now)
    rollups_refresh(now=now)
    return org


@pytest.fixture
def planning(db, settings):
    """Vision runs 16 GPUs and has two 8-GPU jobs waiting since 15 days 12 hours before NOW; the
    fixed partition is in force and a proposal awaits approval (tests/quota_fixtures.py)."""
    settings.TIME_ZONE = "Asia/Shanghai"
    settings.PORTAL_CYCLE_DAYS = 14
    planning = make_planning()
    quota_services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    return planning


def incident(org, job, dept, *, minutes_ago, status=IncidentStatus.OPEN):
    at = timezone.now() - timedelta(minutes=minutes_ago)
    return Incident.objects.create(
        cluster=org.cluster, job=job, department=dept, node=job.nodes.first(), category="hardware_gpu",
        severity="critical", code="79", root_signature_id="xid-79", occurred_at=at, detected_at=at,
        status=status,
    )  # fmt: skip


def test_home_utilization_and_allocation_are_the_usage_apis_for_the_same_range(client, sampled):
    client.force_login(sampled.head_a)
    home = client.get("/?range=24h").context["home"]
    api = client.get("/api/v1/usage/?range=24h").json()["total"]
    assert home.totals.utilization == api["utilization"] == pytest.approx(0.4)
    assert home.totals.allocation_rate == api["allocation_rate"]
    (vision,) = home.departments
    assert (vision.department.code, vision.totals.utilization) == ("vision", api["utilization"])


def test_home_compares_with_the_period_before(client, sampled):
    client.force_login(sampled.head_a)
    body = client.get("/?range=24h").content.decode()
    # The 24 hours before had no samples: no change to show rather than a made-up one.
    assert "no previous period to compare" in body
    assert "40.0%" in body


def test_the_queue_says_how_many_wait_how_long_and_why(client, planning):
    client.force_login(planning.head_vision)
    with time_machine.travel(NOW, tick=False):
        response = client.get("/")
    queue = response.context["home"].queue
    # Vision holds all 16 GPUs it owns; radar owns the other 24: no shared pool to borrow from.
    assert (queue.totals.jobs, queue.totals.gpus) == (2, 16)
    assert queue.totals.longest_wait_s == (15 * 24 + 12) * 3600
    assert queue.totals.by_reason == {CAPACITY: (2, 16)}
    body = response.content.decode()
    assert "2 jobs are waiting for 16 GPUs." in body
    assert "The longest has waited 15d 12:00:00." in body
    assert body.count('<tr class="queued-job" data-reason="capacity"') == 2
    assert "within quota, but no GPU of this model is free" in body
    assert "/jobs/?department=vision&amp;state=pending" in body


def test_the_guarantee_vs_use_is_the_quota_pages(client, planning):
    client.force_login(planning.head_vision)
    with time_machine.travel(NOW, tick=False):
        home = client.get("/").context["home"]
        page = client.get("/quotas/").context["overview"]
    assert home.quota.cycle == page.cycle
    rows = [(u.quota.department.code, u.quota.guaranteed_gpus, u.mean_used_gpus) for u in home.quota.uses]
    assert rows == [(u.quota.department.code, u.quota.guaranteed_gpus, u.mean_used_gpus) for u in page.uses]
    assert rows == [("vision", 16, 16.0)]  # the fixed partition: 16 owned, 16 in use every hour


def test_the_incident_count_is_what_the_fault_list_shows_the_head(client, org):
    incident(org, org.job_a, org.dept_a, minutes_ago=30)
    incident(org, org.job_a, org.dept_a, minutes_ago=90, status=IncidentStatus.RESOLVED)
    incident(org, org.job_a, org.dept_a, minutes_ago=60 * 24 * 3)  # open, before the range
    incident(org, org.job_b, org.dept_b, minutes_ago=10)  # radar's
    client.force_login(org.head_a)
    response = client.get("/?range=24h")
    home = response.context["home"]
    faults = client.get("/faults/?range=24h").context["summary"]
    assert home.incidents_in_range == faults.incidents == 2
    assert home.open_incident_count == 2  # open ones of any age, none of radar's
    assert "2 incidents in this range" in response.content.decode()


def test_each_block_links_to_its_page(client, sampled):
    client.force_login(sampled.head_a)
    body = client.get("/?range=24h").content.decode()
    for link in (
        "/departments/vision/?range=24h",
        "/jobs/?department=vision&amp;state=pending",
        "/quotas/",
        "/faults/?range=24h",
        "/departments/vision/?range=24h#idle-allocations",
    ):
        assert f'href="{link}"' in body, link
        assert client.get(link.replace("&amp;", "&").split("#")[0]).status_code == 200, link


def test_a_head_with_nothing_waiting_no_cycle_and_no_incidents_reads_sentences(client, org):
    client.force_login(org.head_a)
    body = client.get("/").content.decode()
    assert "No jobs are waiting: every job submitted has started." in body
    assert "No quota cycle is in force yet" in body
    assert "No open incidents on your departments' nodes and jobs." in body
    assert "No idle allocations in this range." in body


def test_a_bad_range_is_a_400_with_the_reason(client, org):
    client.force_login(org.head_a)
    response = client.get("/?range=custom&start=2026-11-10&end=2026-11-01")
    assert response.status_code == 400
    assert 'role="alert"' in response.content.decode()


def test_other_roles_keep_their_home(client, org):
    client.force_login(org.committee)
    response = client.get("/")
    assert response.status_code == 200
    assert "home" not in response.context


def _home_queries(client, user) -> int:
    client.force_login(user)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/?range=7d").status_code == 200
    return len(queries)


def test_home_queries_do_not_grow_with_jobs_and_nodes(client, org, django_assert_max_num_queries):
    incident(org, org.job_a, org.dept_a, minutes_ago=30)
    JobFactory(department=org.dept_a, cluster=org.cluster, state=JobState.PENDING, started_at=None)
    few = _home_queries(client, org.head_a)
    now = timezone.now()
    for index in range(20):
        node = NodeFactory(owner_department=org.dept_a, cluster=org.cluster)
        job = JobFactory(department=org.dept_a, cluster=org.cluster, state=JobState.PENDING, started_at=None)
        running = JobFactory(
            department=org.dept_a, cluster=org.cluster, submitted_at=now - timedelta(hours=index)
        )
        running.nodes.add(node)
        incident(org, running, org.dept_a, minutes_ago=index)
        job.nodes.add(node)
    assert _home_queries(client, org.head_a) == few
    with django_assert_max_num_queries(30):
        client.get("/?range=7d")
