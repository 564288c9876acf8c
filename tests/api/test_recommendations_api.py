"""The recommendations API: scoped like the pages, filtered by the pages' FilterSet, and the review
actions through the service the pages call (403 for a role that may not, 409 in the wrong state,
400 for bad input; nothing written on a refusal)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone, translation

from efficiency.choices import RecommendationAction, RecommendationState, RecommendationSubject
from efficiency.models import RecommendationDecision
from efficiency.recommendation_messages import RULES
from efficiency.services.tokens import api_token_issue
from tests.factories import (
    DepartmentFactory,
    JobFactory,
    RecommendationDecisionFactory,
    RecommendationFactory,
)

URL = "/api/v1/recommendations/"


def evidence(job, line: int) -> dict:
    return {
        "file": f"slurm-{job.external_id}.out",
        "line": line,
        "text": "NCCL INFO NET/Socket",
        "job": job.external_id,
    }


@pytest.fixture
def recs(org):
    """Vision's job family (most to gain), radar's job family, and a rule on vision's node gpu-a01
    whose evidence comes from a vision job and a radar job that both ran there."""
    org.job_b.nodes.add(org.node_a)
    family_a = RecommendationFactory(
        department=org.dept_a, cluster=org.cluster, user_name="alice", name_pattern="vision-train",
        gain_gpu_h_week=120.0, evidence=[evidence(org.job_a, 41)],
    )  # fmt: skip
    family_a.jobs.add(org.job_a)
    RecommendationDecisionFactory(recommendation=family_a)
    family_b = RecommendationFactory(
        department=org.dept_b, cluster=org.cluster, user_name="bob", name_pattern="radar-train",
        gain_gpu_h_week=40.0, evidence=[evidence(org.job_b, 7)], rule="network.p2p-disabled",
    )  # fmt: skip
    family_b.jobs.add(org.job_b)
    node = RecommendationFactory(
        rule="storage.cache-metadata-only", subject_kind=RecommendationSubject.NODE,
        subject_key=org.node_a.hostname, department=None, user_name="", name_pattern="", node=org.node_a,
        cluster=org.cluster, gain_gpu_h_week=80.0, evidence=[evidence(org.job_a, 3), evidence(org.job_b, 9)],
    )  # fmt: skip
    node.jobs.add(org.job_a, org.job_b)
    return type("Recs", (), {"family_a": family_a, "family_b": family_b, "node": node})


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content[:300]
    return [row["id"] for row in response.json()["results"]]


def post(client, rec, action: str, body=None):
    return client.post(f"{URL}{rec.pk}/{action}/", body or {}, content_type="application/json")


# --- Scoping ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["committee", "admin"])
def test_committee_and_admins_list_every_recommendation_most_gain_first(client, org, recs, role):
    client.force_login(getattr(org, role))
    assert ids(client.get(URL)) == [recs.family_a.pk, recs.node.pk, recs.family_b.pk]


def test_a_head_lists_their_departments_and_their_nodes_recommendations_only(client, org, recs):
    client.force_login(org.head_a)
    assert ids(client.get(URL)) == [recs.family_a.pk, recs.node.pk]
    client.force_login(org.head_b)
    assert ids(client.get(URL)) == [recs.family_b.pk]


def test_another_departments_recommendation_is_not_found_for_a_head(client, org, recs):
    client.force_login(org.head_a)
    assert client.get(f"{URL}{recs.family_b.pk}/").status_code == 404
    client.force_login(org.head_b)
    assert client.get(f"{URL}{recs.node.pk}/").status_code == 404
    assert post(client, recs.family_a, "comment", {"text": "Hello"}).status_code == 404


def test_a_head_sees_what_is_assigned_to_their_department(client, org, recs):
    recs.family_b.state, recs.family_b.assignee_department = RecommendationState.ACCEPTED, org.dept_a
    recs.family_b.save()
    client.force_login(org.head_a)
    assert recs.family_b.pk in ids(client.get(URL))
    assert client.get(f"{URL}{recs.family_b.pk}/").json()["assignee_department"] == "vision"


def test_no_role_is_forbidden(client, org, recs):
    client.force_login(org.no_role)
    assert client.get(URL).status_code == 403
    assert client.get(f"{URL}{recs.family_a.pk}/").status_code == 403


# --- Fields ---------------------------------------------------------------------------------------


def test_the_detail_has_the_rule_text_the_numbers_and_the_decisions(client, org, recs):
    client.force_login(org.admin)
    data = client.get(f"{URL}{recs.family_a.pk}/").json()
    assert data["rule"] == "network.nccl-socket-on-rdma"
    assert data["title"] == "NCCL runs over TCP sockets on RDMA nodes"
    assert data["why"].startswith("The job spans several nodes")
    assert data["how"]
    assert data["source"]
    assert (data["subject_kind"], data["subject"], data["department"]) == (
        "job_family",
        "alice · vision-train",
        "vision",
    )
    assert data["node"] is None
    assert data["config"] == [["NCCL_IB_DISABLE", "1", "unset"], ["NCCL_NET", "Socket", "IB"]]
    assert data["expected_gain"] == {
        "gpu_hours_per_week": 120.0,
        "percent": 30.0,
        "gpu_hours_per_week_of_family": 320.0,
    }
    assert (data["state"], data["confidence"], data["job_count"]) == ("proposed", "high", 12)
    assert data["jobs"] == [org.job_a.external_id]
    assert data["decisions"] == [
        {"action": "proposed", "by": None, "at": data["decisions"][0]["at"], "text": "",
         "snoozed_until": None, "assignee_department": None},
    ]  # fmt: skip
    assert data["actions"] == ["accept", "reject", "snooze", "comment"]


def test_the_list_leaves_out_the_jobs_and_decisions(client, org, recs):
    client.force_login(org.committee)
    row = client.get(URL).json()["results"][0]
    assert "jobs" not in row
    assert "decisions" not in row
    assert row["actions"] == ["comment"]
    assert row["title"] == "NCCL runs over TCP sockets on RDMA nodes"


def test_a_head_may_only_comment_and_only_on_their_departments(client, org, recs):
    client.force_login(org.head_a)
    assert client.get(f"{URL}{recs.family_a.pk}/").json()["actions"] == ["comment"]
    assert client.get(f"{URL}{recs.node.pk}/").json()["actions"] == []


def test_the_rule_text_is_in_the_callers_language(client, org, recs):
    client.force_login(org.admin)
    data = client.get(f"{URL}{recs.family_a.pk}/", headers={"accept-language": "zh-hans"}).json()
    with translation.override("zh-hans"):
        text = RULES["network.nccl-socket-on-rdma"]
        assert (data["title"], data["why"], data["how"]) == (str(text.title), str(text.why), str(text.how))


@pytest.mark.parametrize("path", ["list", "detail"])
def test_evidence_of_jobs_the_head_cannot_see_is_left_out(client, org, recs, path):
    client.force_login(org.head_a)
    if path == "list":
        row = next(row for row in client.get(URL).json()["results"] if row["id"] == recs.node.pk)
    else:
        row = client.get(f"{URL}{recs.node.pk}/").json()
        assert row["jobs"] == [org.job_a.external_id]
    assert row["evidence"] == [evidence(org.job_a, 3)]
    client.force_login(org.committee)
    assert client.get(f"{URL}{recs.node.pk}/").json()["evidence"] == recs.node.evidence


def test_evidence_of_a_job_not_linked_to_the_recommendation_is_left_out(client, org, recs):
    stray = JobFactory(department=org.dept_a, cluster=org.cluster)
    recs.family_a.evidence = [*recs.family_a.evidence, evidence(stray, 5)]
    recs.family_a.save()
    client.force_login(org.admin)
    assert client.get(f"{URL}{recs.family_a.pk}/").json()["evidence"] == [evidence(org.job_a, 41)]


# --- Filters --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=proposed", ["family_a", "node", "family_b"]),
        ("department=radar", ["family_b"]),
        ("rule=network.p2p-disabled", ["family_b"]),
        ("confidence=high", ["family_a", "node", "family_b"]),
        ("min_gain=50", ["family_a", "node"]),
        ("sort=gain", ["family_b", "node", "family_a"]),
        ("sort=-gain", ["family_a", "node", "family_b"]),
    ],
)
def test_the_list_filters_and_sorts_like_the_page(client, org, recs, query, expected):
    client.force_login(org.committee)
    assert ids(client.get(f"{URL}?{query}")) == [getattr(recs, name).pk for name in expected]


@pytest.mark.parametrize(
    "query",
    [
        "state=open", "confidence=sure", "rule=no.such-rule", "min_gain=-1", "min_gain=lots",
        "department=nowhere", "sort=gpu_count", "ordering=-gain", "search=nccl", "page_size=0",
    ],
)  # fmt: skip
def test_a_bad_filter_value_is_a_400_naming_the_parameter(client, org, recs, query):
    client.force_login(org.committee)
    response = client.get(f"{URL}?{query}")
    assert response.status_code == 400
    assert list(response.json()) == [query.split("=")[0]]


def test_a_head_cannot_filter_by_another_department(client, org, recs):
    client.force_login(org.head_a)
    response = client.get(f"{URL}?department=radar")
    assert response.status_code == 400
    assert "department" in response.json()


# --- Actions --------------------------------------------------------------------------------------


def assert_unchanged(rec, state=RecommendationState.PROPOSED, decisions=1):
    rec.refresh_from_db()
    assert rec.state == state
    assert RecommendationDecision.objects.filter(recommendation=rec).count() == decisions


@pytest.mark.parametrize("action", ["accept", "reject", "snooze"])
@pytest.mark.parametrize("role", ["head_a", "committee", "no_role"])
def test_only_platform_admins_accept_reject_and_snooze(client, org, recs, action, role):
    client.force_login(getattr(org, role))
    body = {"reason": "No", "until": (timezone.localdate() + timedelta(days=7)).isoformat()}
    assert post(client, recs.family_a, action, body).status_code == 403
    assert_unchanged(recs.family_a)


def test_an_admin_accepts_for_the_recommendations_department_by_default(client, org, recs):
    client.force_login(org.admin)
    response = post(client, recs.family_a, "accept", {"note": "Ticket OPS-12"})
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["state"], data["assignee_department"]) == ("accepted", "vision")
    last = data["decisions"][-1]
    assert (last["action"], last["by"], last["text"], last["assignee_department"]) == (
        "accepted", "admin", "Ticket OPS-12", "vision"
    )  # fmt: skip
    assert data["actions"] == ["reject", "snooze", "comment"]
    assert_unchanged(recs.family_a, RecommendationState.ACCEPTED, 2)


def test_accepting_for_another_department_assigns_it_and_its_head_sees_the_decisions(client, org, recs):
    client.force_login(org.admin)
    assert (
        post(client, recs.family_a, "accept", {"department": "radar"}).json()["assignee_department"]
        == "radar"
    )
    client.force_login(org.head_b)
    data = client.get(f"{URL}{recs.family_a.pk}/").json()
    assert [(d["action"], d["by"]) for d in data["decisions"]] == [("proposed", None), ("accepted", "admin")]
    assert data["evidence"] == []  # vision's job's lines are still vision's


def test_accepting_twice_is_a_conflict_with_the_reason_and_writes_nothing(client, org, recs):
    client.force_login(org.admin)
    assert post(client, recs.family_a, "accept").status_code == 200
    response = post(client, recs.family_a, "accept", {"department": "radar"})
    assert response.status_code == 409
    assert response.json() == {"detail": "A recommendation that is accepted cannot be accepted."}
    assert_unchanged(recs.family_a, RecommendationState.ACCEPTED, 2)
    recs.family_a.refresh_from_db()
    assert recs.family_a.assignee_department == org.dept_a


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"department": "nowhere"}, "department"),
        ({"department": 1}, "department"),
        ({"note": "x" * 2001}, "note"),
    ],
)
def test_bad_accept_input_is_a_400_naming_the_field(client, org, recs, body, field):
    client.force_login(org.admin)
    response = post(client, recs.family_a, "accept", body)
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert_unchanged(recs.family_a)


def test_an_inactive_department_cannot_be_assigned(client, org, recs):
    DepartmentFactory(code="retired", is_active=False)
    client.force_login(org.admin)
    assert post(client, recs.family_a, "accept", {"department": "retired"}).status_code == 400
    assert_unchanged(recs.family_a)


def test_accepting_a_node_recommendation_needs_a_department(client, org, recs):
    client.force_login(org.admin)
    response = post(client, recs.node, "accept")
    assert response.status_code == 400
    assert response.json() == {"department": ["Choose the department that will make the change."]}
    assert_unchanged(recs.node, decisions=0)
    assert post(client, recs.node, "accept", {"department": "vision"}).status_code == 200


def test_rejecting_needs_a_reason(client, org, recs):
    client.force_login(org.admin)
    for body in ({}, {"reason": "   "}, {"reason": "x" * 2001}, {"reason": None}):
        response = post(client, recs.family_a, "reject", body)
        assert response.status_code == 400, body
        assert list(response.json()) == ["reason"]
    assert_unchanged(recs.family_a)
    response = post(client, recs.family_a, "reject", {"reason": "  The team moves to RoCE next month.  "})
    assert response.status_code == 200
    assert response.json()["decisions"][-1]["text"] == "The team moves to RoCE next month."
    assert_unchanged(recs.family_a, RecommendationState.REJECTED, 2)
    assert post(client, recs.family_a, "reject", {"reason": "again"}).status_code == 409
    assert_unchanged(recs.family_a, RecommendationState.REJECTED, 2)


@pytest.mark.parametrize(
    "until",
    ["2026-02-30", "next week", "01.03.2030", None, "today", "yesterday", "in a year and a day"],
)
def test_a_bad_snooze_date_is_a_400_naming_it(client, org, recs, until):
    today = timezone.localdate()
    until = {
        "today": today.isoformat(),
        "yesterday": (today - timedelta(days=1)).isoformat(),
        "in a year and a day": (today + timedelta(days=367)).isoformat(),
    }.get(until, until)
    client.force_login(org.admin)
    response = post(client, recs.family_a, "snooze", {"until": until})
    assert response.status_code == 400
    assert list(response.json()) == ["until"]
    assert_unchanged(recs.family_a)


def test_snoozing_until_a_date_and_not_when_rejected(client, org, recs):
    until = (timezone.localdate() + timedelta(days=14)).isoformat()
    client.force_login(org.admin)
    response = post(client, recs.family_a, "snooze", {"until": until, "note": "After the release"})
    assert response.status_code == 200
    assert (response.json()["state"], response.json()["snoozed_until"]) == ("snoozed", until)
    assert_unchanged(recs.family_a, RecommendationState.SNOOZED, 2)
    assert post(client, recs.family_a, "reject", {"reason": "Not worth it"}).status_code == 200
    response = post(client, recs.family_a, "snooze", {"until": until})
    assert response.status_code == 409
    assert "rejected" in response.json()["detail"]
    assert_unchanged(recs.family_a, RecommendationState.REJECTED, 3)


@pytest.mark.parametrize("role", ["head_a", "committee", "admin"])
def test_admins_committee_and_the_departments_heads_comment(client, org, recs, role):
    client.force_login(getattr(org, role))
    response = post(client, recs.family_a, "comment", {"text": "We will fix this in the next image."})
    assert response.status_code == 200
    last = response.json()["decisions"][-1]
    assert (last["action"], last["by"], last["text"]) == (
        RecommendationAction.COMMENTED, getattr(org, role).username, "We will fix this in the next image."
    )  # fmt: skip
    assert_unchanged(recs.family_a, RecommendationState.PROPOSED, 2)


def test_a_head_cannot_comment_on_a_recommendation_of_no_department_they_head(client, org, recs):
    client.force_login(org.head_a)  # sees it: it is about a node vision owns
    response = post(client, recs.node, "comment", {"text": "Hello"})
    assert response.status_code == 403
    assert "heads of the recommendation's department" in response.json()["detail"]
    assert_unchanged(recs.node, decisions=0)


@pytest.mark.parametrize("body", [{}, {"text": ""}, {"text": "x" * 2001}, {"text": ["a"]}])
def test_a_bad_comment_is_a_400(client, org, recs, body):
    client.force_login(org.head_a)
    response = post(client, recs.family_a, "comment", body)
    assert response.status_code == 400
    assert list(response.json()) == ["text"]
    assert_unchanged(recs.family_a)


def test_a_comment_is_taken_on_a_closed_recommendation_too(client, org, recs):
    recs.family_a.state = RecommendationState.CLOSED
    recs.family_a.save()
    client.force_login(org.committee)
    assert post(client, recs.family_a, "comment", {"text": "Fixed by the new image."}).status_code == 200


def test_bodies_are_json_only(client, org, recs):
    client.force_login(org.admin)
    response = client.post(f"{URL}{recs.family_a.pk}/reject/", {"reason": "form"})
    assert response.status_code == 415
    assert_unchanged(recs.family_a)
    malformed = client.post(f"{URL}{recs.family_a.pk}/reject/", "{", content_type="application/json")
    assert malformed.status_code == 400
    assert_unchanged(recs.family_a)


def test_a_session_needs_the_csrf_token_and_a_token_does_not(org, recs):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(org.admin)
    assert post(browser, recs.family_a, "reject", {"reason": "No"}).status_code == 403
    assert_unchanged(recs.family_a)
    key = api_token_issue(user=org.admin, name="script").key
    response = Client(enforce_csrf_checks=True).post(
        f"{URL}{recs.family_a.pk}/reject/",
        {"reason": "No"},
        content_type="application/json",
        headers={"authorization": f"Token {key}"},
    )
    assert response.status_code == 200
    assert_unchanged(recs.family_a, RecommendationState.REJECTED, 2)


def test_anonymous_callers_get_401(client, recs):
    assert client.get(URL).status_code == 401
    assert post(client, recs.family_a, "comment", {"text": "Hi"}).status_code == 401


def test_odd_stored_rows_do_not_break_the_answer(client, org, recs):
    recs.family_a.evidence = [{"job": org.job_a.external_id, "line": "x"}, "not a row"]
    recs.family_a.config = [["NCCL_NET", None], "not a row"]
    recs.family_a.rule = "retired.rule"
    recs.family_a.save()
    client.force_login(org.admin)
    data = client.get(f"{URL}{recs.family_a.pk}/").json()
    assert data["evidence"] == [{"file": "", "line": 0, "text": "", "job": org.job_a.external_id}]
    assert data["config"] == [["NCCL_NET", "", ""]]
    assert (data["title"], data["why"], data["how"], data["source"]) == ("retired.rule", None, None, None)
