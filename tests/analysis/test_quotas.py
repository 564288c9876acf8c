import pytest

from efficiency.analysis.quotas import (
    Bound,
    GpuInterval,
    ProposalSettings,
    hourly_mean_gpus,
    propose_quotas,
    resolve_gpu_model,
    shared_pool_gpus,
)

H = 3600.0
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"


def test_hourly_mean_gpus_spreads_an_interval_over_the_hours_it_touches():
    # 8 GPUs from 00:30 to 03:15: hour 0 half (4), hours 1 and 2 whole (8), hour 3 a quarter (2).
    means = hourly_mean_gpus([GpuInterval(("vision", H100), 8, 0.5 * H, 3.25 * H)], start_s=0, end_s=5 * H)
    assert means[("vision", H100)] == pytest.approx([4, 8, 8, 2, 0])


def test_hourly_mean_gpus_clips_to_the_window_and_adds_up_overlapping_jobs():
    intervals = [
        GpuInterval(("radar", H100), 4, -10 * H, 1.5 * H),  # started before the window
        GpuInterval(("radar", H100), 2, 1 * H, 99 * H),  # runs past the end
        GpuInterval(("radar", H100), 16, 1.25 * H, 1.5 * H),  # a quarter of an hour
    ]
    means = hourly_mean_gpus(intervals, start_s=0, end_s=2 * H)
    # Hour 0: 4. Hour 1: 4 x 0.5 + 2 + 16 x 0.25 = 8.
    assert means[("radar", H100)] == pytest.approx([4, 8])


def test_hourly_mean_gpus_averages_a_partial_last_hour_over_its_own_length():
    means = hourly_mean_gpus([GpuInterval(("a", H100), 8, 0, 10 * H)], start_s=0, end_s=1.5 * H)
    assert means[("a", H100)] == pytest.approx([8, 8])


def hourly(values):
    return [float(v) for v in values]


def test_proposal_takes_the_percentile_of_hourly_demand_rounded_up():
    # 20 hours of demand 1..20: P75 at rank 14.25 -> 15.25 -> 16 GPUs. No current quota: no bound.
    [proposal] = propose_quotas(
        {("vision", H100): hourly(range(1, 21))}, {}, {H100: 100}, ProposalSettings(percentile=75)
    )
    assert proposal.stats.percentile_gpus == pytest.approx(15.25)
    assert (proposal.target_gpus, proposal.proposed_gpus, proposal.bound) == (16, 16, Bound.NONE)
    assert proposal.stats.peak_gpus == 20
    assert proposal.stats.mean_gpus == pytest.approx(10.5)


def test_proposal_change_is_bounded_both_ways():
    demand = {("hot", H100): hourly([60] * 10), ("idle", H100): hourly([1] * 10)}
    current = {("hot", H100): 40, ("idle", H100): 40}
    proposals = {
        p.department: p
        for p in propose_quotas(demand, current, {H100: 200}, ProposalSettings(max_change_pct=25))
    }
    # hot wants 60, may grow to 40 x 1.25 = 50; idle wants 1, may shrink to 40 x 0.75 = 30.
    assert (proposals["hot"].proposed_gpus, proposals["hot"].bound) == (50, Bound.MAX_INCREASE)
    assert (proposals["hot"].lower_gpus, proposals["hot"].upper_gpus) == (30, 50)
    assert (proposals["idle"].proposed_gpus, proposals["idle"].bound) == (30, Bound.MAX_DECREASE)


def test_floor_applies_to_queues_with_demand_or_a_quota_only():
    demand = {("small", H100): hourly([1, 2, 1]), ("none", H100): hourly([0, 0, 0])}
    proposals = {
        p.department: p for p in propose_quotas(demand, {}, {H100: 100}, ProposalSettings(floor_gpus=8))
    }
    assert (proposals["small"].proposed_gpus, proposals["small"].bound) == (8, Bound.FLOOR)
    assert (proposals["none"].proposed_gpus, proposals["none"].bound) == (0, Bound.NONE)


def test_new_queues_over_the_guaranteed_share_keep_the_floor_and_share_the_rest_by_size():
    # Capacity 100 x 0.8 = 80 guaranteed. No current guarantees, so everything above the floor
    # (8) is growth: rooms 52, 32, 12, weighted by the numbers themselves (60, 40, 20).
    # 80 - 3 x 8 = 56 to share: λ x (60 + 40 + 20) = 56 -> λ = 0.4667 (no room is smaller
    # than its allowance: 12 > 0.4667 x 20 = 9.33). a 8 + 28 = 36, b 8 + 18.67 = 26.67,
    # c 8 + 9.33 = 17.33 -> rounded down 36 + 26 + 17 = 79, the one left to the largest
    # remainder (b, .67): 36, 27, 17 = 80.
    demand = {
        ("a", H100): hourly([60] * 4),
        ("b", H100): hourly([40] * 4),
        ("c", H100): hourly([20] * 4),
    }
    settings = ProposalSettings(floor_gpus=8, guaranteed_share=0.8)
    proposals = {p.department: p for p in propose_quotas(demand, {}, {H100: 100}, settings)}
    assert {k: p.proposed_gpus for k, p in proposals.items()} == {"a": 36, "b": 27, "c": 17}
    assert all(p.bound == Bound.CAPACITY for p in proposals.values())
    share = {k: p.explanation()["steps"][3] for k, p in proposals.items()}
    assert {k: s["stage"] for k, s in share.items()} == {"a": "growth", "b": "growth", "c": "growth"}
    assert share["a"]["allowed_gpus"] == pytest.approx(28)
    assert share["b"]["gpus"] == pytest.approx(26.667, abs=1e-3)
    assert shared_pool_gpus({H100: 100}, {(k, H100): p.proposed_gpus for k, p in proposals.items()}) == {
        H100: 20
    }


def test_capacity_cap_is_per_gpu_model():
    demand = {("a", H100): hourly([90] * 2), ("a", A100): hourly([5] * 2)}
    proposals = {
        p.gpu_model: p for p in propose_quotas(demand, {}, {H100: 100, A100: 100}, ProposalSettings())
    }
    assert proposals[H100].proposed_gpus == 80
    assert (proposals[A100].proposed_gpus, proposals[A100].bound) == (5, Bound.NONE)


def test_a_current_quota_without_demand_shrinks_by_the_bound_and_unknown_models_are_left_out():
    proposals = propose_quotas(
        {("gone", "V100"): hourly([4, 4])}, {("quiet", H100): 16}, {H100: 64}, ProposalSettings()
    )
    assert [(p.department, p.proposed_gpus, p.bound) for p in proposals] == [
        ("quiet", 12, Bound.MAX_DECREASE)
    ]
    assert proposals[0].explanation()["upper_gpus"] == 20


def test_settings_reject_nonsense():
    with pytest.raises(ValueError, match="guaranteed_share"):
        ProposalSettings(guaranteed_share=1.5)
    with pytest.raises(ValueError, match="percentile"):
        ProposalSettings(percentile=0)


def test_resolve_gpu_model_maps_scheduler_short_names_to_the_inventory():
    models = [H100, A100]
    assert resolve_gpu_model("h100", models, A100) == H100
    assert resolve_gpu_model("A100-SXM4-80GB", models, H100) == A100
    assert resolve_gpu_model(H100, models, A100) == H100
    assert resolve_gpu_model("", models, A100) == A100
    assert resolve_gpu_model("v100", models, A100) == A100


def test_share_takes_surplus_then_growth_then_cuts_within_the_bound_and_rounds_to_the_budget():
    # Capacity 75 x 0.8 = 60 guaranteed; floor 4, bound 25%. a (40 now) and b (20 now) want 100,
    # c (20 now) wants nothing. Bound: a 50, b 25, c ceil(15) = 15; 90 in all, 30 to take.
    # 1. Surplus: c keeps what it needs (the floor, 4): 11 taken, 19 to go.
    # 2. Growth: a 50 -> 40, b 25 -> 20: 15 taken, 4 to go.
    # 3. Within the bound (a down to 30, b to 15), weighted by the current 40 and 20: rooms 10 and
    #    5 leave 15 - 4 = 11 = λ (40 + 20), λ = 11/60: a 30 + 7.33 = 37.33, b 15 + 3.67 = 18.67.
    # 4. Rounding: 37 + 18 + 4 = 59, the one left to the larger remainder (b, .67): 37, 19, 4.
    demand = {("a", H100): hourly([100] * 4), ("b", H100): hourly([100] * 4), ("c", H100): hourly([0] * 4)}
    current = {("a", H100): 40, ("b", H100): 20, ("c", H100): 20}
    settings = ProposalSettings(floor_gpus=4, max_change_pct=25, guaranteed_share=0.8)
    proposals = {p.department: p for p in propose_quotas(demand, current, {H100: 75}, settings)}
    assert {k: p.proposed_gpus for k, p in proposals.items()} == {"a": 37, "b": 19, "c": 4}
    share = {k: p.explanation()["steps"][3] for k, p in proposals.items()}
    rounding = {k: p.explanation()["steps"][4] for k, p in proposals.items()}
    assert [share[k]["stage"] for k in "abc"] == ["within_bound", "within_bound", "surplus"]
    assert (share["a"]["keep_gpus"], share["a"]["allowed_gpus"]) == (30, pytest.approx(22 / 3))
    assert (share["b"]["keep_gpus"], share["b"]["allowed_gpus"]) == (15, pytest.approx(11 / 3))
    assert [rounding[k]["rounded_up"] for k in "abc"] == [False, True, False]
    assert (share["a"]["asked_gpus"], share["a"]["budget_gpus"]) == (90, 60)
