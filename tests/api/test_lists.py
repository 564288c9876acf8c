"""List endpoints: pagination, filtering, ordering and a query count that does not grow."""

import pytest

from efficiency.choices import JobState
from tests.factories import JobFactory, NodeFactory


@pytest.fixture
def many_jobs(org):
    for _ in range(30):
        job = JobFactory(department=org.dept_a, cluster=org.cluster)
        job.nodes.add(org.node_a)
    JobFactory.create_batch(
        5, department=org.dept_a, cluster=org.cluster, state=JobState.PENDING, started_at=None
    )
    return org


def test_job_list_is_paginated_with_a_page_size_parameter(client, many_jobs):
    client.force_login(many_jobs.committee)
    body = client.get("/api/v1/jobs/?page_size=10").json()
    assert body["count"] == 37
    assert len(body["results"]) == 10
    assert "page=2" in body["next"]


def test_page_size_is_capped(client, many_jobs):
    client.force_login(many_jobs.committee)
    assert len(client.get("/api/v1/jobs/?page_size=100000").json()["results"]) == 37


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/nodes/", "/api/v1/departments/"])
def test_list_query_count_does_not_grow_with_rows(client, many_jobs, django_assert_max_num_queries, path):
    for n in range(20):
        NodeFactory(hostname=f"extra-{n}", cluster=many_jobs.cluster, owner_department=many_jobs.dept_a)
    client.force_login(many_jobs.head_a)
    # session + user + groups + departments + count + page: a few, whatever the row count.
    # If this fails, a serializer field is probably doing a query per row: add select_related.
    with django_assert_max_num_queries(7):
        assert client.get(path).status_code == 200


def test_filter_by_state_accepts_several_values(client, many_jobs):
    client.force_login(many_jobs.head_a)
    pending = client.get("/api/v1/jobs/?state=pending").json()
    both = client.get("/api/v1/jobs/?state=pending&state=running").json()
    assert pending["count"] == 5
    assert both["count"] == 36


def test_ordering_by_gpu_count(client, org):
    JobFactory(department=org.dept_a, cluster=org.cluster, gpu_count=64, name="big")
    client.force_login(org.head_a)
    rows = client.get("/api/v1/jobs/?ordering=-gpu_count").json()["results"]
    assert rows[0]["name"] == "big"


def test_job_detail_lists_nodes_and_config(client, org):
    org.job_a.config = {"env": {"NCCL_IB_DISABLE": "1"}, "storage_cache_mode": "metadata"}
    org.job_a.save()
    client.force_login(org.head_a)
    body = client.get(f"/api/v1/jobs/{org.job_a.pk}/").json()
    assert body["nodes"] == ["gpu-a01"]
    assert body["config"]["env"]["NCCL_IB_DISABLE"] == "1"
    assert body["department"] == "vision"
    assert body["wait_s"] == 600.0


def test_department_list_counts_owned_gpus_and_running_jobs(client, org):
    NodeFactory(hostname="gpu-a02", cluster=org.cluster, owner_department=org.dept_a, gpu_count=4)
    client.force_login(org.head_a)
    (row,) = client.get("/api/v1/departments/").json()["results"]
    assert row == {
        "id": org.dept_a.pk,
        "code": "vision",
        "name": "Vehicle vision",
        "is_active": True,
        "node_count": 2,
        "gpu_count": 12,
        "running_job_count": 1,
        "running_gpu_count": 8,
    }


def test_node_detail_includes_gpus(client, org):
    from tests.factories import GpuFactory

    GpuFactory(node=org.node_a, index=0)
    GpuFactory(node=org.node_a, index=1)
    client.force_login(org.head_a)
    body = client.get(f"/api/v1/nodes/{org.node_a.pk}/").json()
    assert [gpu["index"] for gpu in body["gpus"]] == [0, 1]


def test_openapi_schema_describes_the_read_endpoints(client, org):
    client.force_login(org.committee)
    schema = client.get("/api/v1/schema/?format=json").json()
    assert {"/api/v1/jobs/", "/api/v1/nodes/", "/api/v1/departments/"} <= set(schema["paths"])


def test_swagger_ui_is_served_from_our_own_static_files(client, org):
    client.force_login(org.committee)
    body = client.get("/api/v1/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in body
    assert "cdn" not in body.lower()
