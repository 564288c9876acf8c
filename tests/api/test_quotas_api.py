"""Quota planning API: who sees which quotas, and the committee's and heads' actions.

The cluster and its demand are tests.quota_fixtures' hand-checked ones: the proposal gives
vision 20 and radar 12 of 40 H100 GPUs, a shared pool of 8 (tests/services/test_quotas.py).
"""

from datetime import timedelta

import pytest
import time_machine
import yaml
from django.test import Client

from efficiency.choices import CapacityAlertKind, QuotaCycleStatus, QuotaEventKind
from efficiency.models import CapacityAlert, Quota, QuotaCycle, QuotaEvent
from efficiency.services import quotas as services
from tests.factories import UserFactory
from tests.quota_fixtures import H100, MIDNIGHT, NOW, SETTINGS, make_planning, past_cycles_make


@pytest.fixture
def planning(db, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    settings.PORTAL_CYCLE_DAYS = 14
    return make_planning()


@pytest.fixture
def proposal(planning):
    # The backtest the service enqueues on commit never runs inside the test's transaction.
    return services.quota_proposal_create(cluster=planning.cluster, now=NOW, settings_override=SETTINGS)


def quota_of(cycle, department):
    return Quota.objects.get(cycle=cycle, department=department)


def cycle_url(cycle, action=""):
    return f"/api/v1/quota-cycles/{cycle.pk}/{action}"


# --- Reading cycles -------------------------------------------------------------------------


def test_committee_lists_cycles_with_their_shared_pool(client, planning, proposal):
    client.force_login(planning.committee)
    rows = client.get("/api/v1/quota-cycles/").json()["results"]
    assert [(row["id"], row["status"], row["origin"]) for row in rows] == [
        (proposal.pk, "proposed", "proposal"),
        (QuotaCycle.objects.get(origin="fixed_partition").pk, "approved", "fixed_partition"),
    ]
    assert rows[0]["cluster"] == "ad-platform"
    assert rows[0]["capacity"] == {H100: 40}
    assert rows[0]["shared_pool"] == {H100: 8}
    assert rows[1]["shared_pool"] == {H100: 0}  # the fixed partition guarantees everything


def test_cycle_list_filters_by_status_and_cluster(client, planning, proposal):
    client.force_login(planning.admin)
    approved = client.get("/api/v1/quota-cycles/?status=approved").json()["results"]
    assert [row["origin"] for row in approved] == ["fixed_partition"]
    assert client.get("/api/v1/quota-cycles/?cluster=ad-platform").json()["count"] == 2
    response = client.get("/api/v1/quota-cycles/?cluster=nowhere")
    assert response.status_code == 400
    assert "cluster" in response.json()


def test_department_head_sees_only_their_quotas_and_the_whole_shared_pool(client, planning, proposal):
    client.force_login(planning.head_vision)
    body = client.get(cycle_url(proposal)).json()
    # The pool is the cluster's (40 - 20 - 12), not what is left beside vision's quota alone.
    assert body["shared_pool"] == {"NVIDIA H100 80GB HBM3": 8}
    assert [(q["department"], q["department_name"], q["guaranteed_gpus"]) for q in body["quotas"]] == [
        ("vision", "Vehicle vision", 20)
    ]
    assert body["quotas"][0]["previous_gpus"] == 16
    assert body["quotas"][0]["explanation"]["percentile_gpus"] == 32


def test_explanation_steps_come_as_facts_and_as_text_in_the_callers_language(client, planning, proposal):
    client.force_login(planning.head_vision)
    [quota] = client.get(cycle_url(proposal)).json()["quotas"]
    assert [step["step"] for step in quota["explanation"]["steps"]] == [
        "percentile",
        "bound",
        "floor",
        "share",
        "rounding",
    ]
    assert quota["explanation_text"][1] == (
        "Bound: at most ±25% from the current 16, i.e. 12 to 20: capped at 20."
    )
    assert len(quota["explanation_text"]) == 5
    [quota] = client.get(cycle_url(proposal), HTTP_ACCEPT_LANGUAGE="zh-hans").json()["quotas"]
    assert len(quota["explanation_text"]) == 5
    assert "Bound" not in quota["explanation_text"][1]
    assert "20" in quota["explanation_text"][1]


def test_committee_sees_every_quota_of_a_cycle(client, planning, proposal):
    client.force_login(planning.committee)
    body = client.get(cycle_url(proposal)).json()
    assert {q["department"]: q["guaranteed_gpus"] for q in body["quotas"]} == {"vision": 20, "radar": 12}
    assert body["shared_pool"] == {H100: 8}
    assert [event["kind"] for event in body["events"]] == [QuotaEventKind.PROPOSED]


def test_department_head_sees_only_their_departments_objections_and_events(client, planning, proposal):
    services.quota_objection_file(
        cycle=proposal, department=planning.radar, author=planning.head_radar, text="We grow in December."
    )
    client.force_login(planning.head_vision)
    body = client.get(cycle_url(proposal)).json()
    assert body["objections"] == []
    assert [event["kind"] for event in body["events"]] == [QuotaEventKind.PROPOSED]
    assert client.get(cycle_url(proposal, "objections/")).json() == []
    client.force_login(planning.head_radar)
    [objection] = client.get(cycle_url(proposal, "objections/")).json()
    assert (objection["department"], objection["author"], objection["text"]) == (
        "radar",
        "head-radar",
        "We grow in December.",
    )


def test_department_head_cannot_read_another_departments_quota(client, planning, proposal):
    radar = quota_of(proposal, planning.radar)
    client.force_login(planning.head_vision)
    assert client.get(f"/api/v1/quotas/{radar.pk}/").status_code == 404
    client.force_login(planning.head_radar)
    assert client.get(f"/api/v1/quotas/{radar.pk}/").json()["guaranteed_gpus"] == 12


def test_cycle_list_query_count_does_not_grow_with_cycles(
    client, planning, proposal, django_assert_max_num_queries
):
    past_cycles_make(planning, 5, approved_by=planning.committee)
    client.force_login(planning.committee)
    # session + user + groups + cluster + count + page + the quotas behind the shared pools.
    # If this fails, a field is probably doing a query per cycle: select or prefetch it.
    with django_assert_max_num_queries(7):
        response = client.get("/api/v1/quota-cycles/")
    assert response.json()["count"] == 7
    assert {row["shared_pool"][H100] for row in response.json()["results"][2:]} == {4}


# --- Editing and approving ------------------------------------------------------------------


def test_committee_patch_changes_the_numbers_and_records_who_and_why(client, planning, proposal):
    radar = quota_of(proposal, planning.radar)
    client.force_login(planning.committee)
    response = client.patch(
        f"/api/v1/quotas/{radar.pk}/",
        {"guaranteed_gpus": 14, "borrowing_limit_gpus": 4, "comment": "Radar retires two projects"},
        content_type="application/json",
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["guaranteed_gpus"], body["borrowing_limit_gpus"], body["proposed_gpus"]) == (14, 4, 12)
    event = QuotaEvent.objects.get(kind=QuotaEventKind.EDITED)
    assert (event.actor, event.department, event.from_gpus, event.to_gpus) == (
        planning.committee,
        planning.radar,
        12,
        14,
    )
    assert event.comment == "Radar retires two projects"
    # A field left out keeps its value; null lifts the borrowing limit.
    body = client.patch(
        f"/api/v1/quotas/{radar.pk}/",
        {"borrowing_limit_gpus": None, "comment": "No limit after all"},
        content_type="application/json",
    ).json()
    assert (body["guaranteed_gpus"], body["borrowing_limit_gpus"]) == (14, None)


def test_a_patch_beyond_capacity_is_a_400_naming_the_field_and_the_numbers(client, planning, proposal):
    radar = quota_of(proposal, planning.radar)
    client.force_login(planning.committee)
    response = client.patch(
        f"/api/v1/quotas/{radar.pk}/",
        {"guaranteed_gpus": 500, "comment": "More for radar"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "guaranteed_gpus": ["NVIDIA H100 80GB HBM3: 520 GPUs guaranteed but only 40 in the cluster."]
    }
    assert quota_of(proposal, planning.radar).guaranteed_gpus == 12
    assert not QuotaEvent.objects.filter(kind=QuotaEventKind.EDITED).exists()


def test_patch_and_approval_need_a_comment(client, planning, proposal):
    radar = quota_of(proposal, planning.radar)
    client.force_login(planning.committee)
    response = client.patch(
        f"/api/v1/quotas/{radar.pk}/", {"guaranteed_gpus": 10}, content_type="application/json"
    )
    assert response.status_code == 400
    assert list(response.json()) == ["comment"]
    response = client.post(cycle_url(proposal, "approve/"), {"comment": " "}, content_type="application/json")
    assert response.status_code == 400
    assert list(response.json()) == ["comment"]
    proposal.refresh_from_db()
    assert proposal.status == QuotaCycleStatus.PROPOSED


def test_department_head_may_not_patch_even_their_own_quota(client, planning, proposal):
    vision = quota_of(proposal, planning.vision)
    client.force_login(planning.head_vision)
    response = client.patch(
        f"/api/v1/quotas/{vision.pk}/",
        {"guaranteed_gpus": 40, "comment": "more"},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert quota_of(proposal, planning.vision).guaranteed_gpus == 20


def test_negative_gpus_are_refused_naming_the_field(client, planning, proposal):
    radar = quota_of(proposal, planning.radar)
    client.force_login(planning.committee)
    response = client.patch(
        f"/api/v1/quotas/{radar.pk}/",
        {"guaranteed_gpus": -1, "borrowing_limit_gpus": 2, "comment": "fewer"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert list(response.json()) == ["guaranteed_gpus"]
    assert not QuotaEvent.objects.filter(kind=QuotaEventKind.EDITED).exists()


def test_committee_approves_a_proposal(client, planning, proposal):
    client.force_login(planning.committee)
    response = client.post(
        cycle_url(proposal, "approve/"), {"comment": "Agreed in the review"}, content_type="application/json"
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["approved_by"], body["approval_comment"]) == (
        "approved",
        "chair",
        "Agreed in the review",
    )
    proposal.refresh_from_db()
    assert proposal.status == QuotaCycleStatus.APPROVED


def test_approval_beyond_capacity_is_refused_with_the_reason(client, planning, proposal):
    radar = quota_of(proposal, planning.radar)
    Quota.objects.filter(pk=radar.pk).update(guaranteed_gpus=27)  # an admin's edit in the database
    client.force_login(planning.committee)
    response = client.post(
        cycle_url(proposal, "approve/"), {"comment": "ok"}, content_type="application/json"
    )
    assert response.status_code == 400
    [reason] = response.json()["non_field_errors"]
    assert "47 GPUs guaranteed but only 40" in reason
    proposal.refresh_from_db()
    assert proposal.status == QuotaCycleStatus.PROPOSED


def test_quotas_of_an_approved_cycle_cannot_change(client, planning, proposal):
    services.quota_cycle_approve(cycle=proposal, actor=planning.committee, comment="ok", now=NOW)
    radar = quota_of(proposal, planning.radar)
    client.force_login(planning.committee)
    response = client.patch(
        f"/api/v1/quotas/{radar.pk}/",
        {"guaranteed_gpus": 1, "comment": "less"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "approved" in response.json()["detail"]
    response = client.post(
        cycle_url(proposal, "approve/"), {"comment": "again"}, content_type="application/json"
    )
    assert response.status_code == 400


def test_department_head_may_not_approve(client, planning, proposal):
    client.force_login(planning.head_vision)
    assert client.post(cycle_url(proposal, "approve/")).status_code == 403


# --- Objections -----------------------------------------------------------------------------


def test_head_objects_for_their_own_department_and_the_committee_answers(client, planning, proposal):
    client.force_login(planning.head_vision)
    response = client.post(
        cycle_url(proposal, "objections/"),
        {"department": "vision", "text": "Our waiting jobs need 32 GPUs."},
        content_type="application/json",
    )
    assert response.status_code == 201
    objection = response.json()
    assert (objection["department"], objection["author"], objection["response"]) == (
        "vision",
        "head-vision",
        "",
    )
    assert QuotaEvent.objects.filter(kind=QuotaEventKind.OBJECTION, department=planning.vision).exists()

    answer_url = f"/api/v1/quota-objections/{objection['id']}/answer/"
    assert client.post(answer_url, {"response": "No."}, content_type="application/json").status_code == 403
    client.force_login(planning.committee)
    response = client.post(answer_url, {"response": "Borrow from the pool."}, content_type="application/json")
    assert response.status_code == 200
    assert (response.json()["response"], response.json()["responded_by"]) == (
        "Borrow from the pool.",
        "chair",
    )


def test_head_cannot_object_for_another_department(client, planning, proposal):
    client.force_login(planning.head_vision)
    response = client.post(
        cycle_url(proposal, "objections/"),
        {"department": "radar", "text": "Radar has too much."},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "department" in response.json()


def test_objections_are_for_department_heads_only(client, planning, proposal):
    client.force_login(planning.committee)
    response = client.post(
        cycle_url(proposal, "objections/"),
        {"department": "vision", "text": "x"},
        content_type="application/json",
    )
    assert response.status_code == 403


def test_objection_to_an_approved_cycle_is_refused(client, planning, proposal):
    services.quota_cycle_approve(cycle=proposal, actor=planning.committee, comment="ok", now=NOW)
    client.force_login(planning.head_vision)
    response = client.post(
        cycle_url(proposal, "objections/"),
        {"department": "vision", "text": "Too late?"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "approved" in response.json()["detail"]


# --- Export, backtest, proposals ------------------------------------------------------------


def test_export_of_an_approved_cycle_is_kueue_yaml(client, planning, proposal):
    services.quota_cycle_approve(cycle=proposal, actor=planning.committee, comment="ok", now=NOW)
    client.force_login(planning.admin)
    response = client.get(cycle_url(proposal, "export/?format=kueue"))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml; charset=utf-8"
    assert response["Content-Disposition"] == (
        'attachment; filename="ad-platform-20261116-kueue-clusterqueues.yaml"'
    )
    queues = [d for d in yaml.safe_load_all(response.content) if d["kind"] == "ClusterQueue"]
    assert {d["metadata"]["name"] for d in queues} == {"vision", "radar", "ad-platform-shared-pool"}
    assert QuotaEvent.objects.filter(kind=QuotaEventKind.EXPORTED, actor=planning.admin).exists()


def test_export_of_a_proposal_or_in_an_unknown_format_is_refused(client, planning, proposal):
    client.force_login(planning.committee)
    response = client.get(cycle_url(proposal, "export/?format=kueue"))
    assert response.status_code == 400
    assert "approved" in response.json()["detail"]
    response = client.get(cycle_url(proposal, "export/?format=yaml"))
    assert response.status_code == 400
    assert "format" in response.json()


def test_department_head_may_not_export(client, planning, proposal):
    services.quota_cycle_approve(cycle=proposal, actor=planning.committee, comment="ok", now=NOW)
    client.force_login(planning.head_vision)
    assert client.get(cycle_url(proposal, "export/?format=slurm")).status_code == 403


def test_backtest_run_then_read_compares_three_policies(client, planning, proposal):
    client.force_login(planning.committee)
    assert client.get(cycle_url(proposal, "backtest/")).status_code == 404
    response = client.post(cycle_url(proposal, "backtest/"))
    assert response.status_code == 201
    assert response.json()["job_count"] == 4
    body = client.get(cycle_url(proposal, "backtest/")).json()
    assert [result["key"] for result in body["results"]] == ["fixed", "current", "cycle"]
    assert body["results"][2]["jobs_waiting_at_end"] == 0


def test_backtest_is_read_by_admins_run_by_the_committee_and_hidden_from_heads(client, planning, proposal):
    services.quota_backtest_run(cycle=proposal, now=NOW)
    client.force_login(planning.admin)
    assert client.get(cycle_url(proposal, "backtest/")).status_code == 200
    assert client.post(cycle_url(proposal, "backtest/")).status_code == 403
    client.force_login(planning.head_vision)
    assert client.get(cycle_url(proposal, "backtest/")).status_code == 403


def test_propose_makes_the_next_cycle_once(client, planning):
    client.force_login(planning.committee)
    with time_machine.travel(NOW, tick=False):
        response = client.post("/api/v1/quota-cycles/propose/", {"cluster": "ad-platform"})
        assert response.status_code == 201
        body = response.json()
        assert (body["status"], body["start"]) == ("proposed", "2026-11-16T00:00:00+08:00")
        assert {q["department"] for q in body["quotas"]} == {"vision", "radar"}
        again = client.post("/api/v1/quota-cycles/propose/")
    assert again.status_code == 400
    assert "already exists" in again.json()["detail"]
    assert QuotaCycle.objects.filter(status=QuotaCycleStatus.PROPOSED).get().start == MIDNIGHT


def test_propose_for_an_unknown_cluster_names_the_field(client, planning):
    client.force_login(planning.committee)
    response = client.post("/api/v1/quota-cycles/propose/", {"cluster": "nowhere"})
    assert response.status_code == 400
    assert "cluster" in response.json()


# --- Capacity alerts and the overview -------------------------------------------------------


@pytest.fixture
def alerts(planning):
    raised = NOW - timedelta(days=2)
    CapacityAlert.objects.create(
        cluster=planning.cluster, gpu_model=H100, kind=CapacityAlertKind.POOL_EXHAUSTED,
        raised_at=raised, checked_at=NOW, gpus_needed=8, detail={"shared_pool_gpus": 0},
    )  # fmt: skip
    CapacityAlert.objects.create(
        cluster=planning.cluster, gpu_model=H100, kind=CapacityAlertKind.DEMAND_TREND,
        raised_at=raised - timedelta(days=1), checked_at=raised, resolved_at=raised,
    )  # fmt: skip


def test_capacity_alerts_are_open_ones_unless_asked_for_resolved_too(client, planning, alerts):
    client.force_login(planning.committee)
    [alert] = client.get("/api/v1/capacity-alerts/").json()["results"]
    assert (alert["cluster"], alert["kind"], alert["gpus_needed"], alert["resolved_at"]) == (
        "ad-platform",
        "pool_exhausted",
        8,
        None,
    )
    everything = client.get("/api/v1/capacity-alerts/?open=false").json()["results"]
    assert [a["kind"] for a in everything] == ["pool_exhausted", "demand_trend"]


def test_department_head_gets_no_capacity_alerts(client, planning, alerts):
    client.force_login(planning.head_vision)
    response = client.get("/api/v1/capacity-alerts/?open=false")
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_overview_shows_use_of_the_quotas_in_force(client, planning, proposal):
    services.quota_cycle_approve(cycle=proposal, actor=planning.committee, comment="ok", now=NOW)
    client.force_login(planning.committee)
    with time_machine.travel(NOW, tick=False):
        body = client.get("/api/v1/quota-overview/").json()
    assert (body["cluster"], body["cycle"], body["next_cycle"]) == ("ad-platform", proposal.pk, None)
    assert body["shared_pool"] == {H100: 8}
    uses = {row["department"]: row for row in body["uses"]}
    # Vision's two running 8-GPU jobs held 16 GPUs in each of the 12 hours since midnight.
    assert (uses["vision"]["hours"], uses["vision"]["mean_used_gpus"], uses["vision"]["guaranteed_gpus"]) == (
        12,
        16.0,
        20,
    )
    assert uses["vision"]["mean_borrowed_gpus"] == 0.0
    assert uses["radar"]["mean_used_gpus"] == 0.0


def test_overview_shows_a_head_only_their_departments_use(client, planning, proposal):
    services.quota_cycle_approve(cycle=proposal, actor=planning.committee, comment="ok", now=NOW)
    client.force_login(planning.head_radar)
    with time_machine.travel(NOW, tick=False):
        body = client.get("/api/v1/quota-overview/?cluster=ad-platform").json()
    assert [row["department"] for row in body["uses"]] == ["radar"]


def test_users_without_a_role_are_refused(client, planning, proposal):
    client.force_login(UserFactory(username="nobody"))
    for path in ["/api/v1/quota-cycles/", cycle_url(proposal), "/api/v1/quota-overview/"]:
        assert client.get(path).status_code == 403


def test_session_writes_need_the_csrf_token(planning, proposal):
    client = Client(enforce_csrf_checks=True)
    client.force_login(planning.committee)
    response = client.post(cycle_url(proposal, "approve/"), {}, content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    proposal.refresh_from_db()
    assert proposal.status == QuotaCycleStatus.PROPOSED
