"""The job and node lists: filters a user can submit as they are, the wait of a job, CSV values."""

import csv
import io
import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from tests.factories import NodeFactory


def select_defaults(body: str) -> dict[str, str]:
    """What a browser submits for each <select> of the filter form left untouched."""
    form = body[body.index('class="filter-form"') : body.index("</form>", body.index('class="filter-form"'))]
    defaults = {}
    for name, options in re.findall(r'<select name="([^"]+)"[^>]*>(.*?)</select>', form, re.S):
        values = re.findall(r'<option value="([^"]*)"( selected)?', options)
        chosen = [value for value, selected in values if selected] or [values[0][0]]
        defaults[name] = chosen[0]
    return defaults


@pytest.mark.parametrize("path", ["/nodes/", "/departments/", "/jobs/"])
def test_untouched_yes_no_filters_default_to_any(client, org, path):
    client.force_login(org.committee)
    defaults = select_defaults(client.get(path).content.decode())
    for name in ("shared_pool", "rdma_capable", "is_active"):
        if name in defaults:
            assert defaults[name] == "", name


def test_a_hostname_search_submitted_with_the_untouched_form_finds_the_node(client, org):
    NodeFactory(hostname="gpu-pool-01", cluster=org.cluster, owner_department=None, rdma_capable=False)
    client.force_login(org.committee)
    defaults = select_defaults(client.get("/nodes/").content.decode())
    body = client.get("/nodes/", {**defaults, "q": "gpu-a0"}).content.decode()
    assert "gpu-a01" in body
    body = client.get("/nodes/", {**defaults, "q": "pool"}).content.decode()
    assert "gpu-pool-01" in body
    body = client.get("/nodes/", {**defaults, "shared_pool": "true"}).content.decode()
    assert "gpu-pool-01" in body
    assert "gpu-a01" not in body


@pytest.fixture
def pending_job(org):
    from efficiency.choices import JobState
    from tests.factories import JobFactory

    submitted = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    job = JobFactory(
        department=org.dept_a,
        cluster=org.cluster,
        state=JobState.PENDING,
        submitted_at=submitted,
        started_at=None,
        name="waiting-job",
    )
    with time_machine.travel(submitted + timedelta(hours=2, minutes=5), tick=False):
        yield job


def test_a_pending_job_shows_its_wait_so_far_everywhere(client, org, pending_job):
    client.force_login(org.head_a)
    detail = client.get(f"/jobs/{pending_job.pk}/").content.decode()
    assert "(waiting for 02:05:00 so far)" in detail
    listing = client.get("/jobs/?state=pending").content.decode()
    assert "02:05:00" in listing
    api = client.get(f"/api/v1/jobs/{pending_job.pk}/").json()
    assert api["wait_s"] == 7500.0
    rows = list(
        csv.DictReader(
            io.StringIO(client.get("/jobs/?state=pending&export=csv").getvalue().decode("utf-8-sig"))
        )
    )
    assert rows[0]["Wait (s)"] == "7500.0"


def test_a_started_job_shows_how_long_it_waited(client, org):
    client.force_login(org.head_a)
    detail = client.get(f"/jobs/{org.job_a.pk}/").content.decode()
    assert "(waited 00:10:00)" in detail


def csv_of(client, url: str, **headers) -> list[dict]:
    response = client.get(url, **headers)
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.getvalue().decode("utf-8-sig"))))


def test_job_csv_is_in_the_readers_language_and_time_zone(client, org):
    org.job_a.submitted_at = datetime(2026, 11, 20, 17, 30, tzinfo=UTC)
    org.job_a.started_at = None
    org.job_a.ended_at = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)
    org.job_a.state = "cancelled"
    org.job_a.save()
    client.force_login(org.head_a)
    (row,) = csv_of(client, "/jobs/?export=csv")
    assert row["State"] == "Cancelled"
    assert row["Submitted"] == "2026-11-21T01:30:00+08:00"  # as the page shows it, in Asia/Shanghai
    assert row["Wait (s)"] == "1800.0"
    client.cookies["django_language"] = "zh-hans"
    (row,) = csv_of(client, "/jobs/?export=csv")
    assert row["状态"] == "已取消"


def test_node_csv_is_in_the_readers_language(client, org):
    NodeFactory(hostname="gpu-pool-01", cluster=org.cluster, owner_department=None, rdma_capable=False)
    client.force_login(org.committee)
    rows = {row["Hostname"]: row for row in csv_of(client, "/nodes/?export=csv")}
    assert rows["gpu-pool-01"]["RDMA capable"] == "No"
    assert rows["gpu-pool-01"]["Owner"] == "Shared pool"
    assert rows["gpu-a01"]["State"] == "Active"
    assert rows["gpu-a01"]["Owner"] == "vision"
    client.cookies["django_language"] = "zh-hans"
    rows = {row["主机名"]: row for row in csv_of(client, "/nodes/?export=csv")}
    assert rows["gpu-pool-01"]["支持 RDMA"] == "否"
    assert rows["gpu-pool-01"]["归属"] == "共享资源池"
    assert rows["gpu-a01"]["状态"] == "在用"


def test_csv_file_names_carry_the_days_of_the_display_time_zone(client, org):
    client.force_login(org.committee)
    # 17:00 UTC is 01:00 the next day in Asia/Shanghai.
    with time_machine.travel(datetime(2026, 11, 20, 17, 0, tzinfo=UTC), tick=False):
        response = client.get("/usage/?range=24h&export=csv")
    assert response["Content-Disposition"] == 'attachment; filename="department-usage-20261120-20261121.csv"'
    response = client.get("/usage/?range=custom&start=2026-11-01&end=2026-11-14&export=csv")
    assert response["Content-Disposition"] == 'attachment; filename="department-usage-20261101-20261114.csv"'
    response = client.get("/departments/vision/?range=custom&start=2026-11-01&end=2026-11-14&export=jobs")
    assert response["Content-Disposition"] == 'attachment; filename="jobs-vision-20261101-20261114.csv"'


def test_a_running_job_shows_its_run_time_so_far_on_the_list_and_its_page(client, org):
    from efficiency.choices import JobState
    from tests.factories import JobFactory

    started = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    job = JobFactory(
        department=org.dept_a,
        cluster=org.cluster,
        state=JobState.RUNNING,
        submitted_at=started - timedelta(minutes=10),
        started_at=started,
        ended_at=None,
        name="running-job",
    )
    client.force_login(org.head_a)
    with time_machine.travel(started + timedelta(hours=3, minutes=30), tick=False):
        detail = client.get(f"/jobs/{job.pk}/").content.decode()
        listing = client.get("/jobs/?state=running").content.decode()

    assert "still running (03:30:00 so far)" in detail
    row = listing.split("running-job")[1].split("</tr>")[0]
    assert "03:30:00 <small>so far</small>" in row
