"""The department page: its queue and waits, and a jobs table that says when it is cut short."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from efficiency.choices import JobState
from efficiency.models import JobHour
from efficiency.services import quotas as quota_services
from tests.factories import JobFactory
from tests.quota_fixtures import NOW, SETTINGS, make_planning


@pytest.fixture
def planning(db, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    settings.PORTAL_CYCLE_DAYS = 14
    planning = make_planning()
    quota_services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    return planning


def test_the_queue_section_lists_waiting_jobs_with_their_wait_and_reason(client, planning):
    client.force_login(planning.head_vision)
    with time_machine.travel(NOW, tick=False):
        body = client.get("/departments/vision/").content.decode()
    section = body[body.index('id="department-queue"') :]
    assert "2 jobs are waiting for 16 GPUs." in section
    assert section.count('<tr class="queued-job" data-reason="capacity"') == 2
    assert "15d 12:00:00" in section
    assert 'href="/jobs/?department=vision&amp;state=pending"' in section


def test_waits_of_jobs_started_in_the_range_are_shown_as_p50_and_p95(client, org):
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    started = now - timedelta(hours=2)
    for minutes in (20, 60):
        submitted = started - timedelta(minutes=minutes)
        JobFactory(department=org.dept_a, cluster=org.cluster, submitted_at=submitted, started_at=started)
    client.force_login(org.head_a)
    body = client.get("/departments/vision/?range=24h").content.decode()
    # Waits 10 (job A), 20 and 60 min: P50 20 min, P95 at rank 1.9 = 20 + 0.9 x 40 = 56 min.
    p50 = body[body.index('id="card-waits"') :]
    p95 = body[body.index('id="card-waits-p95"') :]
    assert "00:20:00" in p50[:300]
    assert "3 jobs started in this range" in p50[:500]
    assert "00:56:00" in p95[:300]


def test_a_department_with_nothing_waiting_says_so(client, org):
    client.force_login(org.head_a)
    body = client.get("/departments/vision/?range=24h").content.decode()
    assert "No jobs are waiting: every job submitted has started." in body


def _hours(org, jobs: int, now):
    hour = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    for index in range(jobs):
        job = JobFactory(department=org.dept_a, cluster=org.cluster, state=JobState.COMPLETED)
        JobHour.objects.create(
            job=job, hour=hour, department=org.dept_a, allocated_gpu_s=3600.0 * (index + 1), busy_gpu_s=0
        )


def test_the_jobs_table_says_it_shows_the_top_50_of_all(client, org):
    _hours(org, 53, timezone.now())
    client.force_login(org.head_a)
    body = client.get("/departments/vision/jobs/?range=24h").content.decode()
    assert "Top 50 of 53 jobs by GPU-hours." in body
    assert body.count("/jobs/") >= 50
    assert 'href="?range=24h&amp;export=jobs"' in body  # every one of them, in the CSV


def test_a_short_jobs_table_says_nothing_about_a_top(client, org):
    _hours(org, 3, timezone.now())
    client.force_login(org.head_a)
    body = client.get("/departments/vision/jobs/?range=24h").content.decode()
    assert "Top " not in body
