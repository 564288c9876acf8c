from datetime import UTC, datetime, timedelta

import pytest
import yaml
from django.core.exceptions import ValidationError

from efficiency.analysis.quotas import Bound
from efficiency.choices import CapacityAlertKind, JobState, MappingKind, QuotaCycleStatus, QuotaEventKind
from efficiency.models import CapacityAlert, DepartmentMapping, Quota, QuotaCycle, QuotaEvent
from efficiency.services import quotas as services
from tests.factories import JobFactory
from tests.quota_fixtures import H100, MIDNIGHT, NOW, SETTINGS, WINDOW_START, make_planning


@pytest.fixture
def planning(db, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    settings.PORTAL_CYCLE_DAYS = 14
    return make_planning()


def propose(planning):
    return services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )


def by_department(cycle):
    return {q.department.code: q for q in cycle.quotas.select_related("department")}


def test_first_proposal_starts_from_the_fixed_partition(planning):
    cycle = propose(planning)
    initial = QuotaCycle.objects.get(origin="fixed_partition")
    assert initial.status == QuotaCycleStatus.APPROVED
    assert {q.department.code: q.guaranteed_gpus for q in initial.quotas.all()} == {"vision": 16, "radar": 24}
    assert (initial.start, initial.end) == (WINDOW_START, MIDNIGHT)
    # The next cycle begins where the fixed one ends, planned from the 14 days before it.
    assert (cycle.start, cycle.status) == (MIDNIGHT, QuotaCycleStatus.PROPOSED)
    assert (cycle.demand_start, cycle.demand_end) == (WINDOW_START, MIDNIGHT)
    assert cycle.capacity == {H100: 40}


def test_proposal_numbers_are_hand_checked(planning):
    # Vision demands 32 GPUs every hour (16 running + 16 waiting): P75 = 32, but it may grow
    # 25% from 16, to 20. Radar demands nothing: it may shrink 25% from 24, to 18.
    # 20 + 18 = 38 > 40 x 0.8 = 32: 6 to take, first from who keeps more than it needs:
    # radar (needs 0) gives 6, 18 -> 12. Vision keeps its 20. Shared pool 40 - 32 = 8.
    quotas = by_department(propose(planning))
    vision, radar = quotas["vision"], quotas["radar"]
    assert (vision.guaranteed_gpus, vision.previous_gpus, vision.proposed_gpus) == (20, 16, 20)
    assert (radar.guaranteed_gpus, radar.previous_gpus) == (12, 24)
    assert vision.explanation["percentile_gpus"] == 32
    assert vision.explanation["target_gpus"] == 32
    assert vision.explanation["upper_gpus"] == 20
    assert vision.explanation["bound"] == Bound.MAX_INCREASE
    assert radar.explanation["lower_gpus"] == 18
    assert radar.explanation["bound"] == Bound.CAPACITY
    steps = {step["step"]: step for step in radar.explanation["steps"]}
    assert list(steps) == ["percentile", "bound", "floor", "share", "rounding"]
    assert (steps["share"]["stage"], steps["share"]["keep_gpus"], steps["share"]["allowed_gpus"]) == (
        "surplus",
        0,
        12,
    )
    assert (steps["share"]["budget_gpus"], steps["share"]["asked_gpus"]) == (32, 38)
    assert len(vision.demand_gpus) == 14 * 24
    assert set(vision.demand_gpus) == {32}


def test_a_second_proposal_for_the_same_cycle_is_refused(planning):
    propose(planning)
    with pytest.raises(services.QuotaError, match="already exists"):
        propose(planning)


def test_committee_edit_is_recorded_with_who_from_to_and_why(planning):
    quota = by_department(propose(planning))["radar"]
    changed = services.quota_update(
        quota=quota, actor=planning.committee, guaranteed_gpus=14, borrowing_limit_gpus=4,
        comment="Radar retires two projects", now=NOW,
    )  # fmt: skip
    assert changed
    quota.refresh_from_db()
    assert (quota.guaranteed_gpus, quota.proposed_gpus, quota.borrowing_limit_gpus) == (14, 12, 4)
    event = QuotaEvent.objects.get(kind=QuotaEventKind.EDITED)
    assert (event.actor, event.department, event.from_gpus, event.to_gpus) == (
        planning.committee,
        planning.radar,
        12,
        14,
    )
    # The comment is the committee member's own words; the borrowing limit is a fact beside it,
    # rendered in the reader's language.
    assert event.comment == "Radar retires two projects"
    assert event.detail == {"borrowing_limit_from_gpus": None, "borrowing_limit_to_gpus": 4}
    # The same numbers again change nothing and record nothing.
    assert not services.quota_update(
        quota=quota, actor=planning.committee, guaranteed_gpus=14, borrowing_limit_gpus=4,
        comment="again", now=NOW,
    )  # fmt: skip
    assert QuotaEvent.objects.filter(kind=QuotaEventKind.EDITED).count() == 1


def test_an_edit_beyond_capacity_is_refused_naming_the_field_and_the_numbers(planning):
    cycle = propose(planning)
    radar = by_department(cycle)["radar"]
    with pytest.raises(ValidationError) as refused:
        services.quota_update(
            quota=radar, actor=planning.committee, guaranteed_gpus=500, borrowing_limit_gpus=None,
            comment="typo",
        )  # fmt: skip
    # 20 (vision) + 500 = 520 of 40: the shared pool would be -480.
    assert refused.value.message_dict == {
        "guaranteed_gpus": ["NVIDIA H100 80GB HBM3: 520 GPUs guaranteed but only 40 in the cluster."]
    }
    assert by_department(cycle)["radar"].guaranteed_gpus == 12
    assert not QuotaEvent.objects.filter(kind=QuotaEventKind.EDITED).exists()


def test_edits_of_one_cycle_are_checked_together(planning):
    # Moving 10 GPUs from radar to vision: vision 30 first would make 30 + 12 = 42 > 40 on its
    # own, but with radar at 2 the cycle guarantees 32, within the 40 GPUs.
    cycle = propose(planning)
    quotas = by_department(cycle)
    changed = services.quota_cycle_edit(
        cycle=cycle,
        actor=planning.committee,
        numbers={quotas["vision"].pk: (30, None), quotas["radar"].pk: (2, None)},
        comment="Radar lends vision its nodes for December.",
    )
    assert changed == 2
    assert {code: q.guaranteed_gpus for code, q in by_department(cycle).items()} == {"vision": 30, "radar": 2}


def test_edits_and_approval_need_a_comment(planning):
    cycle = propose(planning)
    radar = by_department(cycle)["radar"]
    with pytest.raises(ValidationError) as refused:
        services.quota_update(
            quota=radar, actor=planning.committee, guaranteed_gpus=10, borrowing_limit_gpus=None, comment="  "
        )
    assert list(refused.value.message_dict) == ["comment"]
    with pytest.raises(ValidationError) as refused:
        services.quota_cycle_approve(cycle=cycle, actor=planning.committee, comment="")
    assert list(refused.value.message_dict) == ["comment"]
    cycle.refresh_from_db()
    assert cycle.is_proposed
    assert by_department(cycle)["radar"].guaranteed_gpus == 12


def test_approval_refuses_guarantees_beyond_capacity_and_then_locks_the_cycle(planning):
    cycle = propose(planning)
    radar = by_department(cycle)["radar"]
    # Edits cannot get there; an admin's change in the database can.
    Quota.objects.filter(pk=radar.pk).update(guaranteed_gpus=27)
    with pytest.raises(ValidationError, match="47 GPUs guaranteed but only 40"):
        services.quota_cycle_approve(cycle=cycle, actor=planning.committee, comment="ok")
    services.quota_update(
        quota=radar, actor=planning.committee, guaranteed_gpus=12, borrowing_limit_gpus=None, comment="back"
    )
    services.quota_cycle_approve(
        cycle=cycle, actor=planning.committee, comment="Agreed in the review", now=NOW
    )
    cycle.refresh_from_db()
    assert (cycle.status, cycle.approved_by, cycle.approval_comment) == (
        QuotaCycleStatus.APPROVED, planning.committee, "Agreed in the review",
    )  # fmt: skip
    with pytest.raises(services.QuotaError, match="approved"):
        services.quota_update(
            quota=radar, actor=planning.committee, guaranteed_gpus=1, borrowing_limit_gpus=None, comment="x"
        )
    with pytest.raises(services.QuotaError, match="approved"):
        services.quota_cycle_approve(cycle=cycle, actor=planning.committee, comment="again")


def test_objection_is_filed_answered_and_recorded(planning):
    cycle = propose(planning)
    with pytest.raises(services.QuotaError):
        services.quota_objection_file(
            cycle=cycle, department=planning.radar, author=planning.head_radar, text="  "
        )
    objection = services.quota_objection_file(
        cycle=cycle,
        department=planning.radar,
        author=planning.head_radar,
        text="We start a new project in December.",
    )
    services.quota_objection_answer(
        objection=objection, actor=planning.committee, response="Borrow from the pool."
    )
    kinds = list(QuotaEvent.objects.filter(cycle=cycle).order_by("id").values_list("kind", flat=True))
    assert kinds == [QuotaEventKind.PROPOSED, QuotaEventKind.OBJECTION, QuotaEventKind.ANSWERED]
    objection.refresh_from_db()
    assert objection.responded_by == planning.committee


def test_backtest_compares_fixed_partition_with_the_proposal(planning):
    cycle = propose(planning)
    backtest = services.quota_backtest_run(cycle=cycle, now=NOW)
    results = {r["key"]: r for r in backtest.results}
    assert list(results) == ["fixed", "current", "cycle"]
    assert backtest.job_count == 4
    # Fixed partition: vision's two waiting jobs (8 GPUs each) wait the whole 336 hours.
    assert results["fixed"]["queues"]["vision"]["unmet_gpu_hours"] == pytest.approx(2 * 8 * 336)
    assert results["fixed"]["jobs_waiting_at_end"] == 2
    # Proposal: 4 guaranteed GPUs left + 4 borrowed from the pool of 8 start the first at once;
    # it runs the fallback hour (no finished job to take a median from), then the second starts.
    assert results["cycle"]["jobs_waiting_at_end"] == 0
    assert results["cycle"]["queues"]["vision"]["unmet_gpu_hours"] == pytest.approx(8)
    assert results["cycle"]["allocation_rate"] > results["fixed"]["allocation_rate"]
    assert results["cycle"]["allocation_rate"] == pytest.approx((16 * 336 + 2 * 8) / (40 * 336), abs=1e-5)


def test_backtest_replays_a_job_whose_user_gave_up_with_the_same_patience(planning):
    # A day into the window vision submits one more 8-GPU job; its user cancelled it after 2 h of
    # waiting. Under the fixed partition it waits behind the two that never start and leaves
    # again after 2 h. Under the proposal (20 guaranteed + a pool of 8) the queue is empty by
    # then, so it starts at once: demand that patience hid is served.
    submitted = WINDOW_START + timedelta(days=1)
    JobFactory(
        cluster=planning.cluster, department=planning.vision, gpu_model="h100", gpu_count=8,
        submitted_at=submitted, started_at=None, ended_at=submitted + timedelta(hours=2),
        state=JobState.CANCELLED,
    )  # fmt: skip
    backtest = services.quota_backtest_run(cycle=propose(planning), now=NOW)
    results = {r["key"]: r for r in backtest.results}
    assert backtest.job_count == 5
    assert (results["fixed"]["jobs_cancelled"], results["fixed"]["queues"]["vision"]["cancelled"]) == (1, 1)
    assert results["cycle"]["jobs_cancelled"] == 0
    assert results["cycle"]["jobs_started"] == 3


def test_export_needs_approval_and_carries_the_mappings(planning):
    cycle = propose(planning)
    with pytest.raises(services.QuotaError, match="approved"):
        services.quota_export(cycle=cycle, fmt="kueue")
    DepartmentMapping.objects.create(
        kind=MappingKind.K8S_NAMESPACE, value="vision-train", department=planning.vision
    )
    DepartmentMapping.objects.create(
        kind=MappingKind.SLURM_ACCOUNT, value="vision", department=planning.vision
    )
    cycle = services.quota_cycle_approve(cycle=cycle, actor=planning.committee, comment="ok")
    name, _, text = services.quota_export(cycle=cycle, fmt="kueue", actor=planning.admin)
    assert name == "ad-platform-20261116-kueue-clusterqueues.yaml"
    documents = list(yaml.safe_load_all(text))
    local = [d for d in documents if d["kind"] == "LocalQueue"]
    assert [(d["metadata"]["namespace"], d["spec"]["clusterQueue"]) for d in local] == [
        ("vision-train", "vision")
    ]
    nominal = {
        d["metadata"]["name"]: d["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
        for d in documents
        if d["kind"] == "ClusterQueue"
    }
    assert nominal == {"vision": 20, "radar": 12, "ad-platform-shared-pool": 8}
    _, _, script = services.quota_export(cycle=cycle, fmt="slurm")
    assert "GrpTRES=gres/gpu=28" in script  # vision: 20 guaranteed + the whole pool of 8
    assert QuotaEvent.objects.filter(kind=QuotaEventKind.EXPORTED).count() == 2
    with pytest.raises(services.QuotaError, match="Unknown export format"):
        services.quota_export(cycle=cycle, fmt="yaml")


def test_roll_creates_the_first_cycle_then_proposes_a_few_days_before_the_end(planning, settings):
    settings.PORTAL_QUOTA_PROPOSE_DAYS_AHEAD = 3
    assert services.quota_cycles_roll(now=NOW) == {"created": 1, "proposed": 0}
    first = QuotaCycle.objects.get()
    assert first.start == MIDNIGHT  # today, local midnight
    assert services.quota_cycles_roll(now=NOW + timedelta(days=10)) == {"created": 0, "proposed": 0}
    assert services.quota_cycles_roll(now=NOW + timedelta(days=11)) == {"created": 0, "proposed": 1}
    proposal = QuotaCycle.objects.get(status=QuotaCycleStatus.PROPOSED)
    assert proposal.start == first.end
    # Already proposed: nothing more.
    assert services.quota_cycles_roll(now=NOW + timedelta(days=12)) == {"created": 0, "proposed": 0}


def test_capacity_alert_raised_with_gpus_needed_then_resolved(planning, settings):
    settings.PORTAL_CAPACITY_SUSTAINED_HOURS = 6
    settings.PORTAL_CAPACITY_WAIT_THRESHOLD_S = 3600
    settings.PORTAL_CAPACITY_WAIT_TARGET_S = 3600
    services.quota_cycle_initial_create(cluster=planning.cluster, start=WINDOW_START, now=NOW)
    # Fixed partition, no shared pool, and vision's jobs have waited for days: exhausted.
    [alert] = services.capacity_check(cluster=planning.cluster, now=NOW)
    assert (alert.kind, alert.gpu_model) == (CapacityAlertKind.POOL_EXHAUSTED, H100)
    # One node (8 GPUs) in the pool lets the two waiting 8-GPU jobs run one after the other:
    # waits 0 and 1 h, P95 0.95 h, under the 1 h target.
    assert alert.gpus_needed == 8
    assert alert.detail["shared_pool_gpus"] == 0
    # Demand is flat: no trend alert.
    assert not CapacityAlert.objects.filter(kind=CapacityAlertKind.DEMAND_TREND).exists()
    # Checked again: the same alert, refreshed, not a second one.
    services.capacity_check(cluster=planning.cluster, now=NOW + timedelta(hours=1))
    assert CapacityAlert.objects.filter(resolved_at__isnull=True).count() == 1
    # With the proposal in force the pool (8) has room: resolved.
    cycle = propose(planning)
    services.quota_cycle_approve(cycle=cycle, actor=planning.committee, comment="ok")
    assert services.capacity_check(cluster=planning.cluster, now=NOW + timedelta(hours=2)) == []
    alert.refresh_from_db()
    assert alert.resolved_at == NOW + timedelta(hours=2)


def test_a_cycle_is_whole_portal_days_across_a_daylight_saving_change(settings):
    # Berlin moves its clocks forward on 2026-03-29: 14 days from a Berlin midnight are 335 hours,
    # and the cycle still ends at a Berlin midnight (22:00 UTC in summer time).
    from efficiency.services.quotas.cycles import cycle_end, local_midnight

    settings.TIME_ZONE = "Europe/Berlin"
    settings.PORTAL_CYCLE_DAYS = 14
    start = local_midnight(datetime(2026, 3, 23, 9, 30, tzinfo=UTC))
    assert start == datetime(2026, 3, 22, 23, 0, tzinfo=UTC)
    end = cycle_end(start)
    assert end == datetime(2026, 4, 5, 22, 0, tzinfo=UTC)
    assert end - start == timedelta(hours=14 * 24 - 1)
