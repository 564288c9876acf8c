"""Utilization pages: range handling, CSV exports, node and job usage parts."""

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from efficiency.collectors.records import GpuReading
from efficiency.models import NodeClassification
from efficiency.services.ingest import gpu_readings_ingest
from efficiency.services.rollups import rollups_refresh


@pytest.fixture
def sampled(org):
    """An hour of samples on node A at 40% while job A ran there."""
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
    from efficiency.services.ingest import dirty_hours_mark

    dirty_hours_mark(cluster=org.cluster, hours=[start], now=now)
    rollups_refresh(now=now)
    return org


@pytest.mark.parametrize(
    "query",
    [
        "range=1y",
        "range=custom",
        "range=custom&start=2026-11-10&end=2026-11-01",
        "range=custom&start=2020-01-01&end=2026-01-01",
    ],
)
def test_bad_range_is_a_400_with_the_reason(client, org, query):
    client.force_login(org.committee)
    response = client.get(f"/usage/?{query}")
    assert response.status_code == 400
    assert 'role="alert"' in response.content.decode()


def test_custom_range_is_kept_in_the_links(client, sampled):
    client.force_login(sampled.committee)
    body = client.get("/usage/?range=custom&start=2026-11-01&end=2026-11-14").content.decode()
    assert "range=custom&amp;start=2026-11-01&amp;end=2026-11-14&amp;export=csv" in body


def test_overview_csv_has_every_department_with_the_pages_numbers(client, sampled):
    client.force_login(sampled.committee)
    response = client.get("/usage/?range=24h&export=csv")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.getvalue().decode("utf-8-sig"))))
    by_code = {row["Code"]: row for row in rows if row["Code"]}
    assert set(by_code) == {"vision", "radar"}
    assert by_code["vision"]["Utilization (%)"] == "40.0"
    assert by_code["vision"]["Busy GPU-hours"] == "3.2"  # 8 GPUs x 1 h x 40%
    # Then the shared pool (no unowned node here: nothing) and the total, which is vision's hour.
    assert [row["Department"] for row in rows[-2:]] == ["Shared pool (unowned nodes)", "Total"]
    assert rows[-2]["Available GPU-hours"] == "0.0"
    assert rows[-1]["Busy GPU-hours"] == "3.2"


def test_csv_cells_that_look_like_formulas_are_defused(client, sampled):
    sampled.dept_a.name = "=HYPERLINK(evil)"
    sampled.dept_a.save()
    client.force_login(sampled.committee)
    text = client.get("/usage/?range=24h&export=csv").getvalue().decode("utf-8-sig")
    assert "'=HYPERLINK(evil)" in text


def test_department_head_gets_their_jobs_csv_and_not_another_departments(client, sampled):
    client.force_login(sampled.head_a)
    rows = list(
        csv.DictReader(
            io.StringIO(
                client.get("/departments/vision/?range=24h&export=jobs").getvalue().decode("utf-8-sig")
            )
        )
    )
    assert [row["Job"] for row in rows] == [sampled.job_a.external_id]
    assert client.get("/departments/radar/?range=24h&export=jobs").status_code == 404


def test_node_page_shows_activity_per_gpu_and_class_history(client, sampled):
    now = timezone.now()
    NodeClassification.objects.create(
        node=sampled.node_a, cycle_start=now - timedelta(days=14), cycle_end=now, node_class="hot",
        covered_hours=300, mean_util_pct=85.0, idle_hour_share=0.0, hot_hour_share=0.7, stddev_pct=5.0,
        reason="hot_hours", computed_at=now,
    )  # fmt: skip
    client.force_login(sampled.head_a)
    body = client.get(f"/nodes/{sampled.node_a.pk}/?range=24h").content.decode()
    gpu_table = body[body.index('id="gpu-usage"') : body.index("</table>", body.index('id="gpu-usage"'))]
    assert gpu_table.count(">40.0%<") == 8
    assert "above 80% in many hours (70%)" in body


def test_job_page_draws_the_jobs_metrics(client, sampled):
    client.force_login(sampled.head_a)
    body = client.get(f"/jobs/{sampled.job_a.pk}/").content.decode()
    assert 'id="job-chart"' in body
    assert "No GPU samples for this job" not in body


def test_overview_and_department_page_query_counts_do_not_grow_with_data(
    client, sampled, django_assert_max_num_queries
):
    from tests.factories import DepartmentFactory, NodeFactory

    for n in range(5):
        NodeFactory(cluster=sampled.cluster, hostname=f"extra-{n}", owner_department=DepartmentFactory())
    client.force_login(sampled.committee)
    # Every number comes from a handful of aggregates over the rollups; if this fails, something
    # is querying per department, node or job.
    with django_assert_max_num_queries(16):
        assert client.get("/usage/?range=7d").status_code == 200
    with django_assert_max_num_queries(20):
        assert client.get("/departments/vision/?range=7d").status_code == 200


def test_job_and_node_lists_download_the_filtered_rows_as_csv(client, org):
    client.force_login(org.head_a)
    jobs = list(csv.DictReader(io.StringIO(client.get("/jobs/?export=csv").getvalue().decode("utf-8-sig"))))
    nodes = list(csv.DictReader(io.StringIO(client.get("/nodes/?export=csv").getvalue().decode("utf-8-sig"))))
    assert [row["Job"] for row in jobs] == [org.job_a.external_id]
    assert [row["Hostname"] for row in nodes] == ["gpu-a01"]
    client.force_login(org.committee)
    running = client.get("/jobs/?state=running&export=csv").getvalue().decode("utf-8-sig")
    assert running.count("\n") == 3  # header and both running jobs


def test_job_chart_axes_carry_their_units(client, sampled):
    import json

    from efficiency.models import GpuSample

    GpuSample.objects.filter(node=sampled.node_a).update(fb_used_mib=40960.0, power_w=500.0)
    client.force_login(sampled.head_a)
    body = client.get(f"/jobs/{sampled.job_a.pk}/").content.decode()
    start = body.index('id="job-chart-data"')
    figure = json.loads(body[body.index(">", start) + 1 : body.index("</script>", start)])
    titles = [figure["layout"][f"yaxis{n}"]["title"]["text"] for n in ("", "2", "3", "4")]
    assert titles == ["Activity (%)", "SM active (%)", "Memory used (GiB)", "Power (W)"]
    memory = [value for value in figure["data"][2]["y"] if value is not None]
    assert memory
    assert set(memory) == {40.0}
