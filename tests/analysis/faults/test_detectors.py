"""Fault detectors: hand-checked series, the AntMan mini-batch trace and the simulator's logs.

The trace (tests/fixtures/minibatch/, see its README) has per-worker mini-batch times of four real
jobs: job 1 gets a straggler (worker 6) mid-run, job 2's workers differ in speed but stay stable,
jobs 3 and 4 have several stragglers, job 4's fluctuating.
"""

import csv
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import pytest

from efficiency.analysis.faults.detectors import (
    INF,
    NAN,
    SPIKE,
    FlatGpus,
    Hang,
    LossAnomaly,
    Slowdown,
    StragglerRun,
    WorkerIteration,
    detect_flat_gpus,
    detect_hang,
    detect_loss_anomalies,
    detect_slowdown,
    detect_stragglers,
    straggler_by_activity,
)
from efficiency.analysis.faults.progress import parse_progress
from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes

MINIBATCH = Path(__file__).resolve().parents[2] / "fixtures" / "minibatch"
START = datetime(2024, 5, 6, tzinfo=UTC)
DAY = timedelta(days=1)
T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)


@cache
def trace(job: int) -> tuple[WorkerIteration, ...]:
    """One job of the AntMan trace: (worker, iteration index, normalised mini-batch time)."""
    with (MINIBATCH / f"job_{job}_norm.csv").open(newline="") as handle:
        return tuple(
            WorkerIteration(int(row["worker"]), int(row["time"]), float(row["batch_time_norm"]))
            for row in csv.DictReader(handle)
        )


def worker_series(job: int, worker: int) -> list[tuple[int, float]]:
    return [(item.step, item.duration) for item in trace(job) if item.worker == worker]


def grid(times: dict[str, Sequence[float]]) -> list[WorkerIteration]:
    """``grid({"a": [1, 1], "b": [1, 2]})``: worker a took 1 s at steps 1 and 2, b 1 s then 2 s."""
    return [
        WorkerIteration(worker, step, duration)
        for worker, durations in times.items()
        for step, duration in enumerate(durations, start=1)
    ]


@pytest.fixture(scope="module")
def sim() -> ClusterSimulator:
    """Six faults a day, so a straggler, a NaN loss and an NCCL hang all occur within four days."""
    return ClusterSimulator(reference_nodes(), seed=7, start=START, fault_rate_per_day=6.0)


def _progress(sim: ClusterSimulator, job_id: str | int, rank: int) -> list:
    lines = sim.job_log_lines(job_id, rank, START - 3 * DAY, START + 8 * DAY)
    return [p for p in map(parse_progress, lines) if p is not None]


# ------------------------------------------------------------------------------------------------
# Stragglers: hand-checked


def test_a_worker_that_becomes_twice_as_slow_is_a_straggler_from_that_step():
    runs = detect_stragglers(
        grid({"a": [1.0] * 10, "b": [1.0] * 10, "c": [1.0] * 4 + [2.0] * 6, "d": [1.0] * 10}),
        min_run=3,
        baseline_steps=4,
    )
    # steps 5-10: c takes 2.0 against its peers' median 1.0 -> slowness 2.0, still slow at the end
    assert runs == [
        StragglerRun(
            worker="c",
            start_step=5,
            end_step=10,
            slow_steps=6,
            median_ratio=2.0,
            peak_ratio=2.0,
            peak_step=5,  # the first step at the peak
            baseline_ratio=1.0,
            ongoing=True,
        )
    ]


def test_a_worker_steadily_twenty_percent_slower_counts_only_once_it_slows_down_further():
    times = {"a": [1.0] * 10, "b": [1.0] * 10, "c": [1.0] * 10, "d": [1.2] * 5 + [1.8] * 5}
    runs = detect_stragglers(grid(times), min_run=3, baseline_steps=5)
    # d's own offset is 1.2 / 1.0 = 1.2 (within max_offset 1.25): its 1.2 s is its normal speed.
    # From step 6 it takes 1.8 s = 1.8 / 1.2 = 1.5 x its normal, while its peers stay at 1.0.
    assert [(r.worker, r.start_step, r.end_step, r.median_ratio) for r in runs] == [("d", 6, 10, 1.5)]
    assert runs[0].baseline_ratio == pytest.approx(1.2)


def test_stable_speed_differences_alone_are_not_stragglers():
    # 0.85 .. 1.2 x the others, every step: heterogeneous workers, nobody slowing down
    times = {"a": [1.0] * 30, "b": [0.85] * 30, "c": [1.1] * 30, "d": [1.2] * 30, "e": [1.0] * 30}
    assert detect_stragglers(grid(times)) == []


def test_a_worker_far_slower_from_the_first_step_is_a_straggler_from_the_first_step():
    times = {"a": [1.0] * 8, "b": [1.0] * 8, "c": [2.0] * 8, "d": [1.0] * 8, "e": [1.0] * 8}
    runs = detect_stragglers(grid(times), min_run=3)
    # c's measured offset 2.0 is capped at max_offset 1.25: slowness 2.0 / 1.25 = 1.6 against its
    # peers' 1.0 (their own offsets are 1.0: each one's peers' median is 1.0)
    assert [(r.worker, r.start_step, r.end_step) for r in runs] == [("c", 1, 8)]
    assert runs[0].median_ratio == pytest.approx(1.6)
    assert runs[0].baseline_ratio == pytest.approx(2.0)


def test_up_to_max_gap_normal_steps_do_not_split_a_run_but_more_do():
    slow, fast = 2.0, 1.0
    c = [fast] * 3 + [slow] * 3 + [fast] * 2 + [slow] * 3 + [fast] * 3 + [slow] * 3
    times = {"a": [1.0] * len(c), "b": [1.0] * len(c), "c": c}
    runs = detect_stragglers(grid(times), min_run=3, max_gap=2, baseline_steps=3)
    # steps 4-6 slow, 7-8 fast (2 <= max_gap: bridged), 9-11 slow, 12-14 fast (3: split), 15-17 slow
    assert [(r.start_step, r.end_step, r.slow_steps, r.ongoing) for r in runs] == [
        (4, 11, 6, False),
        (15, 17, 3, True),
    ]


def test_a_burst_shorter_than_min_run_is_not_a_straggler():
    c = [1.0] * 5 + [3.0] * 4 + [1.0] * 5
    times = {"a": [1.0] * 14, "b": [1.0] * 14, "c": c}
    assert detect_stragglers(grid(times), min_run=5, baseline_steps=5) == []
    assert len(detect_stragglers(grid(times), min_run=4, baseline_steps=5)) == 1


def test_steps_with_too_few_peers_are_not_judged():
    # two workers: each has one peer, fewer than min_peers=2
    assert detect_stragglers(grid({"a": [1.0] * 10, "b": [3.0] * 10}), min_run=1) == []


# ------------------------------------------------------------------------------------------------
# Stragglers: the AntMan trace


def test_trace_job_1_flags_worker_6_from_step_1811():
    runs = detect_stragglers(trace(1))
    assert [run.worker for run in runs] == [6]
    run = runs[0]
    # worker 6 takes 424 at step 1801 (peers 414-465) and 745 at 1811; it is back to normal by 1951
    assert run.start_step == 1811
    assert 1871 <= run.end_step <= 1951
    assert not run.ongoing
    assert run.median_ratio > 1.5
    assert run.peak_ratio > 2.0  # 1000 at step 1861 against peers around 420


def test_trace_job_2_stable_but_heterogeneous_workers_are_not_stragglers():
    # workers 0-2 run at ~0.83x and worker 5 at ~1.1x their peers for the whole job
    assert detect_stragglers(trace(2)) == []


def test_trace_job_3_flags_workers_6_to_9_until_the_end():
    runs = detect_stragglers(trace(3))
    starts = {run.worker: run.start_step for run in runs}
    assert sorted(starts) == [6, 7, 8, 9]
    assert all(run.ongoing for run in runs)
    # 6 and 7 slow down first (~2191), 8 and 9 follow (~2281); workers 0 and 1, steadily ~10%
    # slower than the rest from the start, are not flagged
    assert 2141 <= starts[6] <= 2211
    assert 2141 <= starts[7] <= 2211
    assert 2201 <= starts[8] <= 2301
    assert 2201 <= starts[9] <= 2301
    assert all(1.2 < run.median_ratio < 1.4 for run in runs)


def test_trace_job_4_flags_the_slow_half_and_the_late_escalation_of_workers_5_and_6():
    runs = detect_stragglers(trace(4))
    flagged = {run.worker for run in runs}
    # workers 0, 5, 6, 7, 8 take 3-4x as long as 1, 2, 3, 4, 9 throughout
    assert flagged == {0, 5, 6, 7, 8}
    by_worker = {w: [run for run in runs if run.worker == w] for w in flagged}
    # from ~18,800 workers 5 and 6 jump to ~950 (another 4x): their peaks are there
    for worker in (5, 6):
        peak = max(by_worker[worker], key=lambda run: run.peak_ratio)
        assert peak.peak_ratio > 8
        assert peak.peak_step >= 18_000
        assert peak.ongoing
    assert all(run.peak_ratio < 5 for w in (0, 7, 8) for run in by_worker[w])
    # worker 0 fluctuates between ~60 and ~300: many separate runs
    assert len(by_worker[0]) >= 5


# ------------------------------------------------------------------------------------------------
# Slowdowns


def test_a_sustained_slowdown_against_the_first_steps_is_reported():
    samples = list(enumerate([10.0] * 5 + [13.0, 14.0, 13.0] + [10.0] * 5, start=1))
    # baseline = median of the first 5 = 10.0; limit 10 x 1.25 = 12.5; steps 6-8 are above it
    assert detect_slowdown(samples, baseline_steps=5, threshold_pct=25, sustained_steps=3) == [
        Slowdown(
            start_step=6,
            end_step=8,
            slow_steps=3,
            baseline_s=10.0,
            median_s=13.0,
            peak_s=14.0,
            ratio=1.3,
            ongoing=False,
        )
    ]


def test_a_time_exactly_at_the_threshold_counts_as_slow():
    samples = list(enumerate([10.0] * 5 + [12.5] * 3, start=1))
    (slowdown,) = detect_slowdown(samples, baseline_steps=5, threshold_pct=25, sustained_steps=3)
    assert (slowdown.start_step, slowdown.end_step, slowdown.ongoing) == (6, 8, True)


def test_a_short_burst_is_not_a_slowdown():
    samples = list(enumerate([10.0] * 5 + [20.0, 20.0] + [10.0] * 5, start=1))
    assert detect_slowdown(samples, baseline_steps=5, threshold_pct=25, sustained_steps=3) == []


def test_a_slowdown_that_lasts_stays_reported_against_the_fixed_baseline():
    samples = list(enumerate([10.0] * 5 + [15.0] * 200, start=1))
    (slowdown,) = detect_slowdown(samples, baseline_steps=5, threshold_pct=25, sustained_steps=3)
    assert (slowdown.start_step, slowdown.end_step, slowdown.slow_steps) == (6, 205, 200)
    assert slowdown.ongoing
    assert slowdown.ratio == 1.5


def test_samples_are_judged_in_step_order_and_fewer_than_the_baseline_give_nothing():
    samples = [(3, 10.0), (1, 10.0), (2, 10.0), (5, 30.0), (4, 30.0), (6, 30.0)]
    (slowdown,) = detect_slowdown(samples, baseline_steps=3, threshold_pct=50, sustained_steps=3)
    assert (slowdown.start_step, slowdown.end_step) == (4, 6)
    assert detect_slowdown(samples[:2], baseline_steps=3, threshold_pct=50, sustained_steps=1) == []


def test_trace_job_1_worker_6_slows_down_from_step_1811():
    (slowdown,) = detect_slowdown(worker_series(1, 6), baseline_steps=20, threshold_pct=30, sustained_steps=5)
    assert (slowdown.start_step, slowdown.end_step) == (1811, 1881)
    assert slowdown.baseline_s == 481.5  # median of its first 20 samples
    assert slowdown.ratio > 1.5


def test_trace_job_3_worker_6_is_still_slow_at_the_end():
    (slowdown,) = detect_slowdown(worker_series(3, 6), baseline_steps=20, threshold_pct=20, sustained_steps=5)
    assert 2141 <= slowdown.start_step <= 2211
    assert slowdown.ongoing
    assert slowdown.ratio == pytest.approx(1.32, abs=0.02)


def test_trace_job_4_worker_5_quadruples_near_step_18700():
    (slowdown,) = detect_slowdown(worker_series(4, 5), baseline_steps=20, threshold_pct=50, sustained_steps=5)
    assert 18_500 <= slowdown.start_step <= 18_900
    assert slowdown.ongoing
    assert slowdown.ratio > 3.5


def test_trace_job_2_workers_never_slow_down():
    for worker in range(10):
        assert (
            detect_slowdown(worker_series(2, worker), baseline_steps=20, threshold_pct=20, sustained_steps=5)
            == []
        )


def test_simulator_straggler_shows_as_a_slowdown_from_the_first_line_after_the_fault(sim):
    fault = next(f for f in sim.faults(START, START + 4 * DAY) if f.kind == "straggler")
    job = sim.sim_job(fault.job_external_id)
    progress = _progress(sim, job.job_id, job.gpu_count - 1)
    samples = [(p.iteration, p.iteration_time_s) for p in progress]
    (slowdown,) = detect_slowdown(samples, baseline_steps=20, threshold_pct=30, sustained_steps=3)
    first_after = min(p.iteration for p in progress if p.timestamp > fault.occurred_at)
    assert slowdown.start_step == first_after
    assert slowdown.ratio == pytest.approx(job.straggler_factor, rel=0.05)


# ------------------------------------------------------------------------------------------------
# Hangs


def test_all_ranks_silent_for_ten_iterations_is_a_hang_and_the_earliest_rank_is_the_suspect():
    last = {0: T0, 1: T0, 2: T0 - timedelta(seconds=60), 3: T0}
    hang = detect_hang(last, now=T0 + timedelta(seconds=600), median_iteration_s=60)
    # threshold max(10 x 60, 300) = 600 s; rank 2 stopped one iteration before the others
    assert hang == Hang(
        since=T0,
        silent_s=600.0,
        threshold_s=600.0,
        first_stopped_ranks=(2,),
        first_stopped_at=T0 - timedelta(seconds=60),
        lead_s=60.0,
        ranks=4,
    )


def test_silence_shorter_than_the_threshold_is_not_a_hang():
    last = {0: T0, 1: T0 - timedelta(seconds=60)}
    assert detect_hang(last, now=T0 + timedelta(seconds=599), median_iteration_s=60) is None


def test_min_silence_keeps_a_checkpoint_pause_of_a_fast_job_from_reading_as_a_hang():
    last = {0: T0, 1: T0}
    # 10 x 2 s = 20 s, but a checkpoint save pauses progress for minutes: min_silence_s=300 rules
    assert detect_hang(last, now=T0 + timedelta(seconds=200), median_iteration_s=2) is None
    hang = detect_hang(last, now=T0 + timedelta(seconds=300), median_iteration_s=2)
    assert hang is not None
    assert hang.threshold_s == 300.0


def test_ranks_that_stopped_together_are_all_suspects_with_no_lead():
    # within half an iteration (5 s of 10 s) of the earliest: they stopped together
    last = {0: T0, 1: T0 + timedelta(seconds=3), 2: T0 + timedelta(seconds=5)}
    hang = detect_hang(last, now=T0 + timedelta(hours=1), median_iteration_s=10)
    assert hang is not None
    assert hang.first_stopped_ranks == (0, 1, 2)
    assert hang.lead_s == 0.0
    assert hang.since == T0 + timedelta(seconds=5)


def test_no_ranks_is_no_hang_and_a_non_positive_iteration_time_is_an_error():
    assert detect_hang({}, now=T0, median_iteration_s=10) is None
    with pytest.raises(ValueError, match="median_iteration_s"):
        detect_hang({0: T0}, now=T0, median_iteration_s=0)


# ------------------------------------------------------------------------------------------------
# Flat GPUs


def minutely(values: Sequence[float], start: datetime = T0) -> list[tuple[datetime, float]]:
    return [(start + timedelta(minutes=i), value) for i, value in enumerate(values)]


def test_all_gpus_flat_for_the_window_is_reported_from_when_the_last_one_went_flat():
    activity = {
        "gpu-001/0": minutely([90, 85, 88, 0.2, 0.1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),  # flat from 08:03
        "gpu-001/1": minutely([92, 91, 90, 89, 88, 0.4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),  # flat from 08:05
    }
    now = T0 + timedelta(minutes=16)
    # window 10 min: from 08:06, both were flat before that
    assert detect_flat_gpus(activity, now=now, window_s=600) == FlatGpus(
        since=T0 + timedelta(minutes=5),
        flat_s=660.0,
        gpus=("gpu-001/0", "gpu-001/1"),
        peak_pct=0.4,
    )


def test_one_busy_gpu_means_the_job_is_not_flat():
    activity = {"a": minutely([0] * 20), "b": minutely([0] * 18 + [35, 0])}
    assert detect_flat_gpus(activity, now=T0 + timedelta(minutes=20), window_s=600) is None


def test_flat_for_less_than_the_window_is_not_reported():
    activity = {"a": minutely([80] * 12 + [0] * 8)}  # flat from 08:12, now 08:20: 8 minutes
    assert detect_flat_gpus(activity, now=T0 + timedelta(minutes=20), window_s=600) is None
    assert detect_flat_gpus(activity, now=T0 + timedelta(minutes=20), window_s=480) is not None


def test_stale_samples_are_never_flat():
    activity = {"a": minutely([0] * 10)}  # the last sample is at 08:09
    assert detect_flat_gpus(activity, now=T0 + timedelta(minutes=30), window_s=600) is None
    assert detect_flat_gpus({}, now=T0, window_s=600) is None


def test_simulator_nccl_hang_is_flat_in_sm_active_but_not_in_gr_engine_active(sim):
    fault = next(f for f in sim.faults(START, START + 4 * DAY) if f.kind == "nccl_timeout")
    job = sim.sim_job(fault.job_external_id)
    gpus = [(sim.nodes[node].hostname, gpu) for node, node_gpus in job.allocation for gpu in node_gpus]
    times = [fault.occurred_at + timedelta(minutes=1 + i) for i in range(10)]  # the hang lasts >= 10 min
    samples = {(host, gpu): [sim.sample(host, gpu, at) for at in times] for host, gpu in gpus}
    now = times[-1]
    sm_active = {
        key: [(at, s.sm_active * 100) for at, s in zip(times, got, strict=True)]
        for key, got in samples.items()
    }
    gr_active = {
        key: [(at, s.gr_active * 100) for at, s in zip(times, got, strict=True)]
        for key, got in samples.items()
    }
    flat = detect_flat_gpus(sm_active, now=now, window_s=480, flat_below_pct=5)
    assert flat is not None
    assert flat.gpus == tuple(samples)
    # the waiting ranks spin in NCCL: GR_ENGINE_ACTIVE ~97-100% on all but the stuck GPU
    assert detect_flat_gpus(gr_active, now=now, window_s=480, flat_below_pct=5) is None


# ------------------------------------------------------------------------------------------------
# Loss anomalies


def test_a_loss_far_above_the_rolling_median_is_a_spike():
    points = [*enumerate([2.0, 2.1] * 5, start=1), (11, 2.4), (12, 2.6), (13, 2.05)]
    # step 11, history 2.0, 2.1 x 5: median 2.05, MAD 0.05 -> sigma 0.05 x 1.4826 = 0.0741;
    #   limit 2.05 + 6 x 0.0741 = 2.495: 2.4 is normal and joins the history (dropping the first 2.0)
    # step 12, history 2.0 x 4, 2.1 x 5, 2.4: median 2.1, deviations 0 x 5, 0.1 x 4, 0.3 -> MAD 0.05;
    #   limit 2.1 + 6 x 0.0741 = 2.545: 2.6 is a spike
    # step 13: 2.05 is normal again
    (spike,) = detect_loss_anomalies(points, window=10)
    assert spike.kind == SPIKE
    assert (spike.first_step, spike.last_step, spike.points, spike.peak_loss) == (12, 12, 1, 2.6)
    assert spike.median == pytest.approx(2.1)
    assert spike.threshold == pytest.approx(2.1 + 6 * 0.05 * 1.4826)


def test_nan_and_inf_are_reported_once_per_run_with_their_first_step():
    points = [(step, 2.0) for step in range(1, 6)] + [(6, math.nan), (7, math.nan), (8, math.inf), (9, 2.0)]
    anomalies = detect_loss_anomalies(points)
    assert [(a.kind, a.first_step, a.last_step, a.points) for a in anomalies] == [
        (NAN, 6, 7, 2),
        (INF, 8, 8, 1),
    ]
    assert anomalies[0].median is None  # too little history for a limit, but NaN needs none


def test_a_loss_that_stays_up_is_one_growing_spike_run():
    points = list(enumerate([3.0 + 0.01 * (i % 3) for i in range(20)] + [6.0, 6.5, 7.0, 6.8], start=1))
    assert detect_loss_anomalies(points) == [
        LossAnomaly(
            kind=SPIKE,
            first_step=21,
            last_step=24,
            points=4,
            peak_loss=7.0,
            median=3.01,  # 3.00, 3.01, 3.02 repeating
            threshold=pytest.approx(3.01 + 6 * 0.01 * 1.4826),
        )
    ]


def test_a_perfectly_flat_loss_does_not_flag_rounding_noise():
    points = list(enumerate([2.0] * 20 + [2.001, 2.02], start=1))
    # MAD 0 -> spread floored at 0.1% of 2.0 = 0.002: limit 2.0 + 6 x 0.002 = 2.012
    assert [(a.first_step, a.peak_loss) for a in detect_loss_anomalies(points)] == [(22, 2.02)]


def test_the_first_points_are_not_judged_before_min_history():
    points = list(enumerate([2.0] * 5 + [9.0] + [2.0] * 10, start=1))
    assert detect_loss_anomalies(points) == []
    assert len(detect_loss_anomalies(points, min_history=5)) == 1


def test_the_steep_early_decrease_of_healthy_training_is_not_flagged():
    # the simulator's loss curve: 10.5 at step 0 falling to ~2.5, with +-0.025 of noise
    points = [
        (step, 1.7 + 8.8 * (1 + step / 300) ** -0.45 + 0.05 * ((step * 7919) % 100 / 100 - 0.5))
        for step in range(0, 20_000, 10)
    ]
    assert detect_loss_anomalies(points) == []


def test_simulator_nan_loss_is_found_at_the_first_line_after_the_fault(sim):
    fault = next(f for f in sim.faults(START, START + 4 * DAY) if f.kind == "loss_nan")
    job = sim.sim_job(fault.job_external_id)
    progress = _progress(sim, job.job_id, job.gpu_count - 1)
    anomalies = detect_loss_anomalies([(p.iteration, p.loss) for p in progress])
    first_after = min(p.iteration for p in progress if p.timestamp > fault.occurred_at)
    # no false spike during the early decrease; one NaN run to the last line
    assert [(a.kind, a.first_step, a.last_step) for a in anomalies] == [
        (NAN, first_after, progress[-1].iteration)
    ]


def activity(levels: dict[str, tuple[float, float]], *, minutes=40, since_minute=30):
    """SM activity per node, one sample a minute: (before, after) ``since_minute``."""
    return {
        node: [(T0 + timedelta(minutes=m), before if m < since_minute else after) for m in range(minutes)]
        for node, (before, after) in levels.items()
    }


def test_the_node_still_busy_while_its_peers_wait_is_the_straggler():
    # From minute 30 the healthy nodes wait in NCCL at 0.6x their activity; n4 computes on.
    samples = activity({"n1": (60, 36), "n2": (60, 36), "n3": (60, 36), "n4": (60, 60)})
    assert straggler_by_activity(samples, since=T0 + timedelta(minutes=30)) == "n4"


def test_a_node_that_was_always_a_little_busier_is_no_straggler():
    samples = activity({"n1": (50, 50), "n2": (50, 50), "n3": (50, 50), "n4": (60, 60)})
    assert straggler_by_activity(samples, since=T0 + timedelta(minutes=30)) is None


def test_a_straggler_needs_two_peers_and_a_run_under_way_since_the_slowdown():
    two = activity({"n1": (60, 36), "n2": (60, 60)})
    assert straggler_by_activity(two, since=T0 + timedelta(minutes=30)) is None
    # n4 straggled from minute 30 to 39 and was fine again: not the cause of a slowdown at 45.
    earlier = {
        node: [(at, pct) for at, pct in series] + [(T0 + timedelta(minutes=m), 60) for m in range(40, 50)]
        for node, series in activity({"n1": (60, 36), "n2": (60, 36), "n3": (60, 36), "n4": (60, 60)}).items()
    }
    assert straggler_by_activity(earlier, since=T0 + timedelta(minutes=45)) is None
    assert straggler_by_activity(earlier, since=T0 + timedelta(minutes=30)) == "n4"
