import csv
import io
import json

import pytest
import yaml

from efficiency.models import Quota, QuotaEvent
from efficiency.services import quotas as services
from tests.quota_fixtures import NOW, SETTINGS, WINDOW_START, make_planning, past_cycles_make


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
    # Every step with its number: radar wants 0, the bound holds it at 18, the share takes 6.
    assert "Percentile: P75 of hourly demand over 336 h is 0 GPUs" in body
    assert "i.e. 18 to 30: held at 18." in body
    assert "this one keeps the 0 it needs plus at most 12: 12." in body
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
        f"q{vision.pk}-guaranteed_gpus": "20",
        f"q{vision.pk}-borrowing_limit_gpus": "",
        f"q{radar.pk}-guaranteed_gpus": "-3",
        f"q{radar.pk}-borrowing_limit_gpus": "",
        "comment": "Radar retires a project.",
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
    Quota.objects.filter(pk=quota_of(cycle, "radar").pk).update(guaranteed_gpus=40)  # an admin's edit
    client.force_login(planning.committee)
    response = client.post(f"/quotas/cycles/{cycle.pk}/approve/", {"approve-comment": "ok"})
    assert response.status_code == 400
    assert "60 GPUs guaranteed but only 40 in the cluster" in response.content.decode()
    cycle.refresh_from_db()
    assert cycle.is_proposed


def test_an_edit_beyond_capacity_is_refused_on_the_field_with_the_numbers(client, proposal):
    planning, cycle = proposal
    vision, radar = quota_of(cycle, "vision"), quota_of(cycle, "radar")
    client.force_login(planning.committee)
    data = {
        f"q{vision.pk}-guaranteed_gpus": "20",
        f"q{vision.pk}-borrowing_limit_gpus": "",
        f"q{radar.pk}-guaranteed_gpus": "500",
        f"q{radar.pk}-borrowing_limit_gpus": "",
        "comment": "More for radar.",
    }
    response = client.post(f"/quotas/cycles/{cycle.pk}/edit/", data)
    assert response.status_code == 400
    body = response.content.decode()
    row = body[body.index('data-department="radar"') :]
    row = row[: row.index("</tr>")]
    # 20 + 500 of 40 GPUs: the error sits on radar's field, with the numbers.
    assert (
        '<small class="field-error">NVIDIA H100 80GB HBM3: 520 GPUs guaranteed but only 40 in the cluster.'
        in row
    )
    assert 'value="500"' in row  # what was typed stays, to be corrected
    # Nothing changed and the shared pool shown is the saved one, never negative.
    assert quota_of(cycle, "radar").guaranteed_gpus == 12
    assert 'class="figure shared-pool">8 ' in body
    assert not QuotaEvent.objects.filter(kind="edited").exists()


def test_edits_and_approval_need_a_comment(client, proposal):
    planning, cycle = proposal
    vision, radar = quota_of(cycle, "vision"), quota_of(cycle, "radar")
    client.force_login(planning.committee)
    data = {
        f"q{vision.pk}-guaranteed_gpus": "20",
        f"q{vision.pk}-borrowing_limit_gpus": "",
        f"q{radar.pk}-guaranteed_gpus": "10",
        f"q{radar.pk}-borrowing_limit_gpus": "",
        "comment": "",
    }
    response = client.post(f"/quotas/cycles/{cycle.pk}/edit/", data)
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
    assert quota_of(cycle, "radar").guaranteed_gpus == 12
    response = client.post(f"/quotas/cycles/{cycle.pk}/approve/", {"approve-comment": "  "})
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
    cycle.refresh_from_db()
    assert cycle.is_proposed


def test_approve_form_asks_for_confirmation(client, proposal):
    planning, cycle = proposal
    client.force_login(planning.committee)
    body = client.get(f"/quotas/cycles/{cycle.pk}/").content.decode()
    form = body[body.index('id="approve-form"') - 200 :]
    form = form[form.index("<form") : form.index(">", form.index("<form"))]
    assert 'data-confirm="Approve these quotas? They come into force' in form


def test_explanations_are_rendered_in_the_readers_language(client, proposal):
    planning, cycle = proposal
    client.force_login(planning.head_radar)
    client.cookies["django_language"] = "zh-hans"
    body = client.get(f"/quotas/cycles/{cycle.pk}/").content.decode()
    row = body[body.index('data-department="radar"') :]
    row = row[: row.index("</tr>")]
    assert "P75" in row
    assert "336" in row
    for english in ("hourly demand", "Bound", "Floor", "Share", "Rounding", "keeps", "stays"):
        assert english not in row


def test_cycle_csv_lists_the_visible_quotas_with_their_explanation(client, proposal):
    planning, cycle = proposal
    client.force_login(planning.head_vision)
    response = client.get(f"/quotas/cycles/{cycle.pk}/?export=csv")
    rows = list(csv.DictReader(io.StringIO(response.getvalue().decode("utf-8-sig"))))
    assert [(row["Code"], row["Guaranteed GPUs"]) for row in rows] == [("vision", "20")]
    assert rows[0]["Explanation"].startswith("Percentile: P75 of hourly demand over 336 h is 32 GPUs")
    assert "Rounding:" in rows[0]["Explanation"]


def test_export_downloads_an_approved_cycle_and_refuses_a_proposal(client, proposal):
    planning, cycle = proposal
    client.force_login(planning.admin)
    response = client.get(f"/quotas/cycles/{cycle.pk}/export/volcano/", follow=True)
    assert "Only approved quotas can be exported." in response.content.decode()
    services.quota_cycle_approve(cycle=cycle, actor=planning.committee, comment="ok")
    response = client.get(f"/quotas/cycles/{cycle.pk}/export/volcano/")
    assert (
        response["Content-Disposition"] == 'attachment; filename="ad-platform-20261116-volcano-queues.yaml"'
    )
    queues = {d["metadata"]["name"]: d["spec"] for d in yaml.safe_load_all(response.content)}
    assert queues["vision"]["guarantee"]["resource"]["nvidia.com/gpu"] == 20
    assert client.get(f"/quotas/cycles/{cycle.pk}/export/helm/").status_code == 302


def test_overview_shows_guaranteed_used_and_borrowed_for_the_cycle_in_force(client, proposal):
    planning, cycle = proposal
    services.quota_cycle_approve(cycle=cycle, actor=planning.committee, comment="ok")
    client.force_login(planning.committee)
    body = client.get("/quotas/").content.decode()
    assert "Cycle in force" in body
    assert "quota-use-chart" in body
    # Vision runs 16 GPUs the whole time against a guarantee of 20: none borrowed.
    response = client.get("/quotas/?export=csv")
    rows = {r["Department"]: r for r in csv.DictReader(io.StringIO(response.getvalue().decode("utf-8-sig")))}
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
    rows = list(csv.DictReader(io.StringIO(response.getvalue().decode("utf-8-sig"))))
    fixed = {row["Department"]: row for row in rows if row["Policy"] == "Fixed partition"}
    assert set(fixed) == {"Whole cluster", "Vehicle vision", "Radar perception"}
    assert float(fixed["Vehicle vision"]["Unmet demand (GPU-hours waited)"]) == 2 * 8 * 336
    assert fixed["Vehicle vision"]["Cancelled by their users while waiting"] == "0"
    assert {row["Policy"] for row in rows} == {"Fixed partition", "Quotas in force", "This cycle's quotas"}


def test_history_shows_recorded_facts_in_the_readers_language(client, proposal):
    planning, cycle = proposal
    services.quota_update(
        quota=quota_of(cycle, "radar"),
        actor=planning.committee,
        guaranteed_gpus=12,
        borrowing_limit_gpus=4,
        comment="Cap radar's borrowing.",
    )
    client.force_login(planning.committee)
    history = client.get(f"/quotas/cycles/{cycle.pk}/").content.decode().split('id="event-list"')[1]
    assert "Borrowing limit: no limit → 4." in history
    assert "Cap radar&#x27;s borrowing." in history
    initial = cycle.cluster.quota_cycles.get(origin="fixed_partition")
    assert "Fixed partition: owned GPUs." in client.get(f"/quotas/cycles/{initial.pk}/").content.decode()
    client.cookies["django_language"] = "zh-hans"
    history = client.get(f"/quotas/cycles/{cycle.pk}/").content.decode().split('id="event-list"')[1]
    assert "Borrowing limit" not in history
    assert "→ 4" in history


def test_old_comments_give_their_facts_to_the_detail(db):
    from importlib import import_module

    from django.apps import apps

    from efficiency.services.quotas import quota_cycle_initial_create

    planning = make_planning()
    cycle = quota_cycle_initial_create(cluster=planning.cluster, start=WINDOW_START, now=NOW)
    created = cycle.events.get()
    QuotaEvent.objects.filter(pk=created.pk).update(comment="Fixed partition: owned GPUs.")
    edited = QuotaEvent.objects.create(
        cycle=cycle, kind="edited", at=NOW, comment="Borrowing limit: 4. Radar asked for it."
    )
    migration = import_module("efficiency.migrations.0013_quotas_event_detail")
    migration.move_facts_out_of_comments(apps, None)
    created.refresh_from_db()
    edited.refresh_from_db()
    assert created.comment == ""
    assert (edited.comment, edited.detail) == ("Radar asked for it.", {"borrowing_limit_to_gpus": 4})


def test_a_department_has_the_same_colour_in_every_users_cycles_chart(client, proposal):
    planning, _ = proposal

    def colours(user):
        client.force_login(user)
        body = client.get("/quotas/cycles/").content.decode()
        data = body.split('id="quota-history-chart-data" type="application/json">')[1].split("</script>")[0]
        return {trace["name"]: trace["marker"]["color"] for trace in json.loads(data)["data"]}

    everyone = colours(planning.committee)
    # Vision comes after radar for the committee, first (and alone) for its head.
    mine = colours(planning.head_vision)
    assert list(mine) == ["Vehicle vision", "Shared pool"]
    assert mine["Vehicle vision"] == everyone["Vehicle vision"]
    assert everyone["Radar perception"] != everyone["Vehicle vision"]


def test_an_explanation_stored_before_the_steps_still_reads_in_either_language(client, proposal):
    planning, cycle = proposal
    quota = quota_of(cycle, "radar")
    quota.explanation = {
        "percentile": 75.0, "hours": 336, "mean_gpus": 0.0, "p50_gpus": 0.0, "percentile_gpus": 0.0,
        "peak_gpus": 0.0, "target_gpus": 0, "current_gpus": 24, "bound": "capacity", "lower_gpus": 18,
        "upper_gpus": 30, "capacity_factor": 0.8421,
    }  # fmt: skip
    quota.save(update_fields=["explanation"])
    client.force_login(planning.head_radar)
    body = client.get(f"/quotas/cycles/{cycle.pk}/").content.decode()
    assert "P75 of hourly demand over 336 h: 0.0 GPUs" in body
    assert "so every one was scaled by 0.84." in body
    client.cookies["django_language"] = "zh-hans"
    body = client.get(f"/quotas/cycles/{cycle.pk}/").content.decode()
    assert "因此每项都按 0.84 缩放" in body


def test_chart_rows_name_the_gpu_model_briefly_when_there_are_several():
    from efficiency.views.quotas import row_labels

    h100, a100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
    assert row_labels([("BEV", h100), ("BEV", a100)]) == ["BEV · H100", "BEV · A100"]
    assert row_labels([("BEV", h100)]) == ["BEV"]
    # Two models that would read the same keep their full names.
    a100_40 = "NVIDIA A100-SXM4-40GB"
    assert row_labels([("BEV", a100), ("BEV", a100_40)]) == [f"BEV · {a100}", f"BEV · {a100_40}"]


@pytest.mark.parametrize("role", ["head_vision", "committee"])
def test_cycle_list_page_query_count_does_not_grow_with_cycles(
    client, proposal, role, django_assert_max_num_queries
):
    planning, _cycle = proposal
    past_cycles_make(planning, 6)
    client.force_login(getattr(planning, role))
    # session, user, groups (a head's departments), cluster, the cycles, every quota behind their
    # shared pools, the visible quotas and the departments of the history chart.
    # If this fails, something reads the database once per cycle: prefetch it in the selector.
    with django_assert_max_num_queries(9):
        response = client.get("/quotas/cycles/")
    assert response.status_code == 200
    assert len(response.context["cycles"]) == 8
