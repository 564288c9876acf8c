import csv
import io

import pytest
import yaml

from efficiency.models import QuotaEvent
from efficiency.services import quotas as services
from tests.quota_fixtures import NOW, SETTINGS, make_planning


@pytest.fixture
def proposal(db):
    planning = make_planning()
    cycle = services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    return planning, cycle


def quota_of(cycle, code):
    return cycle.quotas.get(department__code=code)


def test_head_sees_only_their_department_and_why_but_no_edit_form(client, proposal):
    planning, cycle = proposal
    client.force_login(planning.head_radar)
    body = client.get(f"/quotas/cycles/{cycle.pk}/").content.decode()
    assert "Radar perception" in body
    assert "Vehicle vision" not in body
    assert "so every one was scaled by 0.84" in body
    assert "quota-edit-form" not in body
    assert "approve-form" not in body
    assert "objection-form" in body
    # The shared pool is the whole cluster's, not computed from radar's quota alone.
    assert 'class="figure shared-pool">8 ' in body


def test_committee_edits_all_numbers_in_one_post_and_bad_numbers_are_a_400(client, proposal):
    planning, cycle = proposal
    vision, radar = quota_of(cycle, "vision"), quota_of(cycle, "radar")
    client.force_login(planning.committee)
    data = {
        f"q{vision.pk}-guaranteed_gpus": "17",
        f"q{vision.pk}-borrowing_limit_gpus": "",
        f"q{radar.pk}-guaranteed_gpus": "-3",
        f"q{radar.pk}-borrowing_limit_gpus": "",
        "comment": "",
    }
    response = client.post(f"/quotas/cycles/{cycle.pk}/edit/", data)
    assert response.status_code == 400
    assert "greater than or equal to 0" in response.content.decode()
    assert not QuotaEvent.objects.filter(kind="edited").exists()
    data[f"q{radar.pk}-guaranteed_gpus"] = "14"
    data[f"q{vision.pk}-borrowing_limit_gpus"] = "4"
    response = client.post(f"/quotas/cycles/{cycle.pk}/edit/", data, follow=True)
    assert "2 quotas changed." in response.content.decode()
    radar.refresh_from_db()
    vision.refresh_from_db()
    assert (radar.guaranteed_gpus, vision.borrowing_limit_gpus) == (14, 4)


def test_approving_more_than_capacity_is_refused_with_the_reason(client, proposal):
    planning, cycle = proposal
    services.quota_update(
        quota=quota_of(cycle, "radar"),
        actor=planning.committee,
        guaranteed_gpus=40,
        borrowing_limit_gpus=None,
    )
    client.force_login(planning.committee)
    response = client.post(f"/quotas/cycles/{cycle.pk}/approve/", {"approve-comment": "ok"})
    assert response.status_code == 400
    assert "57 GPUs guaranteed but only 40 in the cluster" in response.content.decode()
    cycle.refresh_from_db()
    assert cycle.is_proposed


def test_cycle_csv_lists_the_visible_quotas_with_their_explanation(client, proposal):
    planning, cycle = proposal
    client.force_login(planning.head_vision)
    response = client.get(f"/quotas/cycles/{cycle.pk}/?export=csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert [(row["Code"], row["Guaranteed GPUs"]) for row in rows] == [("vision", "17")]
    assert rows[0]["Explanation"].startswith("P75 of hourly demand over 336 h: 32.0 GPUs")


def test_export_downloads_an_approved_cycle_and_refuses_a_proposal(client, proposal):
    planning, cycle = proposal
    client.force_login(planning.admin)
    response = client.get(f"/quotas/cycles/{cycle.pk}/export/volcano/", follow=True)
    assert "Only approved quotas can be exported." in response.content.decode()
    services.quota_cycle_approve(cycle=cycle, actor=planning.committee)
    response = client.get(f"/quotas/cycles/{cycle.pk}/export/volcano/")
    assert (
        response["Content-Disposition"] == 'attachment; filename="ad-platform-20261116-volcano-queues.yaml"'
    )
    queues = {d["metadata"]["name"]: d["spec"] for d in yaml.safe_load_all(response.content)}
    assert queues["vision"]["guarantee"]["resource"]["nvidia.com/gpu"] == 17
    assert client.get(f"/quotas/cycles/{cycle.pk}/export/helm/").status_code == 302


def test_overview_shows_guaranteed_used_and_borrowed_for_the_cycle_in_force(client, proposal):
    planning, cycle = proposal
    services.quota_cycle_approve(cycle=cycle, actor=planning.committee)
    client.force_login(planning.committee)
    body = client.get("/quotas/").content.decode()
    assert "Cycle in force" in body
    assert "quota-use-chart" in body
    # Vision runs 16 GPUs the whole time against a guarantee of 17: none borrowed.
    response = client.get("/quotas/?export=csv")
    rows = {r["Department"]: r for r in csv.DictReader(io.StringIO(response.content.decode("utf-8-sig")))}
    assert rows["Vehicle vision"]["Mean GPUs used"] == "16.0"
    assert rows["Vehicle vision"]["Mean GPUs borrowed"] == "0.0"
    assert rows["Radar perception"]["Mean GPUs used"] == "0.0"


def test_head_files_an_objection_only_for_a_department_they_head(client, proposal):
    planning, cycle = proposal
    client.force_login(planning.head_radar)
    response = client.post(
        f"/quotas/cycles/{cycle.pk}/objections/",
        {"department": planning.vision.pk, "text": "Give vision less"},
    )
    assert response.status_code == 400
    response = client.post(
        f"/quotas/cycles/{cycle.pk}/objections/", {"department": planning.radar.pk, "text": "We need more."}
    )
    assert response.status_code == 302
    assert cycle.objections.get().department == planning.radar


def test_open_capacity_alerts_show_on_the_cluster_overview_and_quota_page(client, proposal):
    from efficiency.models import CapacityAlert

    planning, _ = proposal
    CapacityAlert.objects.create(
        cluster=planning.cluster,
        gpu_model="NVIDIA H100 80GB HBM3",
        kind="pool_exhausted",
        raised_at=NOW,
        checked_at=NOW,
        gpus_needed=16,
        detail={"shared_pool_gpus": 0},
    )
    client.force_login(planning.committee)
    for path in ("/usage/", "/quotas/"):
        body = client.get(path).content.decode()
        assert "Shared pool exhausted · NVIDIA H100 80GB HBM3" in body
        assert "About 16 more GPUs are needed." in body
    client.force_login(planning.head_vision)
    assert "Shared pool exhausted" not in client.get("/quotas/").content.decode()


def test_backtest_csv_has_a_cluster_row_and_a_row_per_department_for_each_policy(client, proposal):
    planning, cycle = proposal
    services.quota_backtest_run(cycle=cycle, now=NOW)
    client.force_login(planning.admin)
    response = client.get(f"/quotas/cycles/{cycle.pk}/backtest/?export=csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))
    fixed = {row["Department"]: row for row in rows if row["Policy"] == "Fixed partition"}
    assert set(fixed) == {"Whole cluster", "Vehicle vision", "Radar perception"}
    assert float(fixed["Vehicle vision"]["Unmet demand (GPU-hours waited)"]) == 2 * 8 * 336
    assert {row["Policy"] for row in rows} == {"Fixed partition", "Quotas in force", "This cycle's quotas"}
