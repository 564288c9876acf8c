"""Verification of a ticket's gain, on hand-built before/after windows of one job family.

Iteration times are log-normal around a median (the spread real Megatron logs show from step to
step) with a checkpoint save every 50 steps, ten times as long as a step.
"""

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.analysis.tickets.verification import (
    GPU_H_PER_UNIT,
    ITERATION_S,
    NO_GAIN,
    REGRESSED,
    SM_ACTIVITY,
    VERIFIED_GAIN,
    VERIFYING,
    WAIT_SHARE,
    VerificationSettings,
    Window,
    verify,
)

SETTINGS = VerificationSettings(bootstrap_rounds=500)
NCCL_SOCKET_GAIN = 0.5  # the "NCCL on sockets" rule's expected gain: 1 - 1/2


def steps(median_s: float, count: int, *, seed: int, spread: float = 0.05) -> list[float]:
    """``count`` iteration times around ``median_s``, with a checkpoint save every 50 steps."""
    rng = random.Random(seed)
    return [median_s * 10 if i % 50 == 49 else median_s * rng.lognormvariate(0, spread) for i in range(count)]


def hours(level: float, count: int, *, seed: int, spread: float = 0.03) -> list[float]:
    rng = random.Random(seed)
    return [min(1.0, max(0.0, rng.gauss(level, spread))) for _ in range(count)]


def window(iteration_s=(), sm=(), wait=(), gpu_hours=64.0, work_units=None) -> Window:
    return Window(
        iteration_s=iteration_s, sm_activity=sm, wait_share=wait, gpu_hours=gpu_hours, work_units=work_units
    )


def test_nccl_sockets_to_infiniband_halves_the_iteration_time_and_is_a_verified_gain():
    # The fintech case: 16 nodes all-reducing over TCP sockets, then over IB; each step twice as fast.
    before = window(steps(1.62, 600, seed=1), hours(0.31, 48, seed=2), hours(0.4, 48, seed=3), 768.0)
    after = window(steps(0.81, 400, seed=4), hours(0.62, 24, seed=5), hours(0.05, 24, seed=6), 256.0)

    verdict = verify(before, after, expected_gain_share=NCCL_SOCKET_GAIN, settings=SETTINGS)

    assert verdict.outcome == VERIFIED_GAIN
    assert verdict.primary == ITERATION_S
    assert verdict.measured_gain_share == pytest.approx(0.5, abs=0.02)
    assert verdict.gain_low <= verdict.measured_gain_share <= verdict.gain_high
    assert verdict.gain_low > 0.45
    assert verdict.share_of_expected == pytest.approx(1.0, abs=0.04)
    assert verdict.shortfalls == ()
    iteration = verdict.comparison(ITERATION_S)
    assert iteration.before == pytest.approx(1.62, rel=0.02)
    assert iteration.after == pytest.approx(0.81, rel=0.02)
    assert iteration.relative_change == pytest.approx(-0.5, abs=0.02)
    assert (iteration.before_n, iteration.after_n) == (600, 400)
    # The other metrics are shown beside it: activity doubled, the wait share fell.
    assert verdict.comparison(SM_ACTIVITY).gain_share == pytest.approx(0.5, abs=0.03)
    wait = verdict.comparison(WAIT_SHARE)
    assert wait.after < wait.before
    assert wait.gain_share is None


def test_an_unfixed_family_with_the_same_noisy_steps_is_no_gain():
    before = window(steps(1.62, 600, seed=1, spread=0.2))
    after = window(steps(1.62, 400, seed=2, spread=0.2))

    verdict = verify(before, after, expected_gain_share=NCCL_SOCKET_GAIN, settings=SETTINGS)

    assert verdict.outcome == NO_GAIN
    assert verdict.gain_low < 0 < verdict.gain_high
    assert abs(verdict.measured_gain_share) < 0.05


def test_a_real_but_small_gain_inside_the_noise_band_is_no_gain():
    verdict = verify(
        window(steps(1.00, 2000, seed=1, spread=0.01)),
        window(steps(0.97, 2000, seed=2, spread=0.01)),
        expected_gain_share=0.2,
        settings=SETTINGS,
    )

    assert verdict.gain_low > 0  # measurably faster …
    assert verdict.outcome == NO_GAIN  # … but by less than the 5% band


def test_slower_steps_after_the_fix_are_a_regression():
    verdict = verify(
        window(steps(1.0, 600, seed=1)),
        window(steps(1.3, 300, seed=2)),
        expected_gain_share=0.3,
        settings=SETTINGS,
    )

    assert verdict.outcome == REGRESSED
    assert verdict.measured_gain_share == pytest.approx(1 - 1.3, abs=0.02)
    assert verdict.gain_high < -0.05


def test_too_few_iterations_after_stays_verifying_and_says_how_many_are_missing():
    verdict = verify(
        window(steps(1.62, 600, seed=1)),
        window(steps(0.81, 120, seed=2), gpu_hours=64.0),
        expected_gain_share=NCCL_SOCKET_GAIN,
        settings=SETTINGS,
    )

    assert verdict.outcome == VERIFYING
    assert verdict.primary == ITERATION_S
    [shortfall] = verdict.shortfalls
    assert (shortfall.what, shortfall.have, shortfall.need, shortfall.missing) == ("iterations", 120, 200, 80)
    # The numbers so far are shown, not judged.
    assert verdict.measured_gain_share == pytest.approx(0.5, abs=0.03)


def test_too_few_gpu_hours_after_stays_verifying_even_with_lines_enough():
    verdict = verify(
        window(steps(1.62, 600, seed=1)),
        window(steps(0.81, 300, seed=2), gpu_hours=2.5),
        expected_gain_share=NCCL_SOCKET_GAIN,
        settings=SETTINGS,
    )

    assert verdict.outcome == VERIFYING
    assert [(s.what, s.have, s.need, s.missing) for s in verdict.shortfalls] == [("gpu_hours", 2.5, 8.0, 5.5)]


def test_the_minimums_are_settings():
    short = window(steps(0.81, 120, seed=2), gpu_hours=2.5)
    lenient = VerificationSettings(min_after_iterations=100, min_after_gpu_h=2.0, bootstrap_rounds=500)

    verdict = verify(window(steps(1.62, 600, seed=1)), short, expected_gain_share=0.5, settings=lenient)

    assert verdict.outcome == VERIFIED_GAIN


def test_with_only_sm_activity_the_activity_decides():
    # No iteration lines (the job logs no speed) and no work count: hourly SM activity decides.
    before = window(sm=hours(0.30, 48, seed=1, spread=0.05))
    after = window(sm=hours(0.45, 24, seed=2, spread=0.05))

    verdict = verify(before, after, expected_gain_share=0.3, settings=SETTINGS)

    assert verdict.outcome == VERIFIED_GAIN
    assert verdict.primary == SM_ACTIVITY
    activity = verdict.comparison(SM_ACTIVITY)
    assert verdict.measured_gain_share == pytest.approx(1 - activity.before / activity.after)
    assert verdict.measured_gain_share == pytest.approx(1 - 0.30 / 0.45, abs=0.07)
    assert [c.metric for c in verdict.comparisons] == [SM_ACTIVITY]


def test_with_only_sm_activity_too_few_hours_after_stays_verifying():
    verdict = verify(
        window(sm=hours(0.30, 48, seed=1)),
        window(sm=hours(0.45, 4, seed=2)),
        expected_gain_share=0.3,
        settings=SETTINGS,
    )

    assert verdict.outcome == VERIFYING
    assert [(s.what, s.have, s.need) for s in verdict.shortfalls] == [("activity_hours", 4, 6)]


def test_gpu_hours_per_unit_of_work_decides_without_iteration_lines():
    # 1.2 M samples each: 100 GPU-hours before, 60 after.
    before = window(sm=hours(0.30, 48, seed=1), gpu_hours=100.0, work_units=1.2e6)
    after = window(sm=hours(0.32, 24, seed=2), gpu_hours=60.0, work_units=1.2e6)

    verdict = verify(before, after, expected_gain_share=0.3, settings=SETTINGS)

    assert verdict.outcome == VERIFIED_GAIN
    assert verdict.primary == GPU_H_PER_UNIT
    assert verdict.measured_gain_share == pytest.approx(0.4)
    assert verdict.gain_low == verdict.gain_high == pytest.approx(0.4)
    cost = verdict.comparison(GPU_H_PER_UNIT)
    assert cost.before == pytest.approx(100 / 1.2e6)
    assert cost.relative_change == pytest.approx(-0.4)


def test_gpu_hours_per_unit_of_work_within_the_noise_band_is_no_gain():
    verdict = verify(
        window(gpu_hours=100.0, work_units=1e6),
        window(gpu_hours=97.0, work_units=1e6),
        expected_gain_share=0.3,
        settings=SETTINGS,
    )

    assert verdict.outcome == NO_GAIN


def test_nothing_comparable_before_stays_verifying_and_says_so():
    verdict = verify(window(), window(steps(0.8, 300, seed=1)), expected_gain_share=0.5, settings=SETTINGS)

    assert verdict.outcome == VERIFYING
    assert verdict.primary is None
    assert [s.what for s in verdict.shortfalls] == ["before_metric"]


def test_broken_values_are_left_out():
    clean = steps(1.0, 300, seed=1)
    noisy = [*clean, float("nan"), float("inf"), 0.0, -1.0]

    assert verify(window(clean), window(clean), expected_gain_share=None, settings=SETTINGS) == verify(
        window(noisy), window(noisy), expected_gain_share=None, settings=SETTINGS
    )


def test_the_same_input_gives_the_same_verdict():
    before = window(steps(1.0, 300, seed=1, spread=0.3), hours(0.4, 30, seed=2))
    after = window(steps(0.9, 250, seed=3, spread=0.3), hours(0.45, 30, seed=4))

    first = verify(before, after, expected_gain_share=0.2, settings=SETTINGS)
    again = verify(before, after, expected_gain_share=0.2, settings=SETTINGS)

    assert first == again
    assert first.as_json() == again.as_json()


def test_the_verdict_is_plain_json():
    verdict = verify(
        window(steps(1.62, 600, seed=1)),
        window(steps(0.81, 120, seed=2)),
        expected_gain_share=0.5,
        settings=SETTINGS,
    )

    data = json.loads(json.dumps(verdict.as_json()))
    assert data["outcome"] == VERIFYING
    assert data["shortfalls"] == [{"what": "iterations", "have": 120, "need": 200, "missing": 80}]


# --- Properties ------------------------------------------------------------------------------------

FAST = VerificationSettings(
    min_after_iterations=10, min_before_iterations=10, min_after_gpu_h=0.0, bootstrap_rounds=200
)
iteration_lists = st.lists(st.floats(min_value=0.05, max_value=50.0), min_size=10, max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(iteration_lists, st.floats(min_value=1.2, max_value=10.0))
def test_after_times_scaled_slower_never_verify_a_gain(before, factor):
    after = [v * factor for v in before]

    verdict = verify(window(before), window(after), expected_gain_share=0.5, settings=FAST)

    assert verdict.outcome != VERIFIED_GAIN


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(iteration_lists, iteration_lists, st.floats(min_value=1.2, max_value=10.0))
def test_scaling_the_after_times_up_never_raises_the_measured_gain(before, after, factor):
    plain = verify(window(before), window(after), expected_gain_share=0.5, settings=FAST)
    slower = verify(
        window(before), window([v * factor for v in after]), expected_gain_share=0.5, settings=FAST
    )

    assert slower.measured_gain_share <= plain.measured_gain_share
    assert slower.gain_low <= plain.gain_low


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(iteration_lists, iteration_lists)
def test_swapping_the_windows_turns_a_clear_gain_into_a_regression(before, after):
    forward = verify(window(before), window(after), expected_gain_share=None, settings=FAST)
    backward = verify(window(after), window(before), expected_gain_share=None, settings=FAST)

    # A clear gain one way is a loss beyond the band the other way: the medians' ratio inverts.
    # Whether the reverse interval also clears the band depends on its own resampling (ten
    # values spread over three orders of magnitude can give a wide one), so the verdict is then
    # a regression or, at worst, no gain: never a gain.
    band = FAST.min_relative_change
    for one, other in ((forward, backward), (backward, forward)):
        if one.gain_low > band + 0.1:
            assert other.measured_gain_share < -band
            assert other.outcome != VERIFIED_GAIN
            if other.gain_high < -band:
                assert other.outcome == REGRESSED


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(min_value=0, max_value=10_000),
    st.floats(min_value=0.2, max_value=0.8),
    st.integers(min_value=1, max_value=400),
)
def test_more_after_data_never_turns_a_clear_gain_back_into_verifying(seed, ratio, extra):
    strict = VerificationSettings(bootstrap_rounds=200)
    before = window(steps(1.0, 300, seed=seed), gpu_hours=64.0)
    after_steps = steps(ratio, 200, seed=seed + 1)
    gained = verify(before, window(after_steps, gpu_hours=8.0), expected_gain_share=0.5, settings=strict)
    assert gained.outcome == VERIFIED_GAIN

    more = steps(ratio, extra, seed=seed + 2)
    longer = verify(
        before,
        window([*after_steps, *more], gpu_hours=8.0 + extra / 50),
        expected_gain_share=0.5,
        settings=strict,
    )

    assert longer.outcome != VERIFYING
