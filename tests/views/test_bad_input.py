"""Bad credentials and malformed parameters get a clear 4xx, never a 500."""

import pytest

from efficiency.services.tokens import api_token_issue


def test_wrong_password_shows_the_login_form_again_with_an_error(client, org):
    response = client.post("/login/", {"username": "head-a", "password": "not it"})
    assert response.status_code == 200
    assert "didn't match" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_right_password_signs_in_and_lands_on_home(client, org):
    response = client.post("/login/", {"username": "head-a", "password": "correct horse battery"})
    assert response.status_code == 302
    assert response["Location"] == "/"


def test_login_without_csrf_token_is_refused(org):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    response = client.post("/login/", {"username": "head-a", "password": "correct horse battery"})
    assert response.status_code == 403


def test_api_with_a_bad_token_is_401(client, org):
    response = client.get("/api/v1/jobs/", HTTP_AUTHORIZATION="Token not-a-real-token")
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token."}


def test_api_with_a_good_token_works_and_stays_scoped(client, org):
    token = api_token_issue(user=org.head_b, name="t")
    response = client.get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200
    assert [job["name"] for job in response.json()["results"]] == ["radar-train"]


def test_api_post_with_session_but_no_csrf_token_is_refused(org):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(org.admin)
    assert client.post("/api/v1/jobs/", {}).status_code == 403


@pytest.mark.parametrize(
    ("path", "bad_field"),
    [
        ("/api/v1/jobs/?submitted_after=yesterday", "submitted_after"),
        ("/api/v1/jobs/?state=exploded", "state"),
        ("/api/v1/jobs/?min_gpus=eight", "min_gpus"),
        ("/api/v1/jobs/?department=radar", "department"),  # not head A's department
        ("/api/v1/nodes/?rdma_capable=maybe", "rdma_capable"),
        ("/api/v1/nodes/?shared_pool=1", "shared_pool"),
        ("/api/v1/nodes/?cluster=no-such-cluster", "cluster"),
    ],
)
def test_api_malformed_filter_is_400_naming_the_field(client, org, path, bad_field):
    client.force_login(org.head_a)
    response = client.get(path)
    assert response.status_code == 400
    assert bad_field in response.json()


@pytest.mark.parametrize("path", ["/api/v1/jobs/?page=abc", "/api/v1/jobs/?page=999"])
def test_api_bad_page_is_404_with_a_message(client, org, path):
    client.force_login(org.head_a)
    response = client.get(path)
    assert response.status_code == 404
    assert response.json() == {"detail": "Invalid page."}


def test_api_unknown_ordering_field_is_a_400_naming_the_parameter(client, org):
    client.force_login(org.committee)
    response = client.get("/api/v1/jobs/?ordering=password")
    assert response.status_code == 400
    assert "ordering" in response.json()


@pytest.mark.parametrize(
    "path",
    [
        "/jobs/?submitted_after=not-a-date",
        "/jobs/?state=exploded",
        "/jobs/?department=radar",
        "/nodes/?rdma_capable=maybe",
    ],
)
def test_page_with_malformed_filter_is_400_with_the_form_error(client, org, path):
    client.force_login(org.head_a)
    response = client.get(path)
    assert response.status_code == 400
    assert "Some filters are not valid" in response.content.decode()


@pytest.mark.parametrize("path", ["/jobs/?page=abc", "/jobs/?page=-1", "/jobs/?page=99999"])
def test_page_with_odd_page_number_still_renders(client, org, path):
    client.force_login(org.head_a)
    assert client.get(path).status_code == 200


@pytest.mark.parametrize("path", ["/nodes/notanumber/", "/jobs/99999999999999999999999/"])
def test_detail_with_bad_id_is_404(client, org, path):
    client.force_login(org.committee)
    assert client.get(path).status_code == 404


def test_hostile_search_text_is_escaped_in_the_page(client, org):
    client.force_login(org.committee)
    body = client.get("/jobs/?q=<script>alert(1)</script>").content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;" in body


def test_yes_no_filters_filter_both_ways(client, org):
    from tests.factories import NodeFactory

    NodeFactory(hostname="gpu-pool", owner_department=None, cluster=org.cluster, rdma_capable=False)
    client.force_login(org.committee)
    pool = client.get("/api/v1/nodes/?shared_pool=true").json()["results"]
    owned = client.get("/api/v1/nodes/?shared_pool=false").json()["results"]
    no_rdma = client.get("/api/v1/nodes/?rdma_capable=false").json()["results"]
    assert [n["hostname"] for n in pool] == ["gpu-pool"]
    assert {n["hostname"] for n in owned} == {"gpu-a01", "gpu-b01"}
    assert [n["hostname"] for n in no_rdma] == ["gpu-pool"]
