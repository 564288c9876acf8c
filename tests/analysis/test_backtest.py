"""Quota scheduling backtest: hand-checked scenarios and a slow reference implementation."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from efficiency.analysis.backtest import (
    BacktestJob,
    Policy,
    QueuePolicy,
    compare_policies,
    run_backtest,
)
from efficiency.analysis.stats import percentile

H = 3600.0
START = 1_793_491_200.0  # 2026-11-02 00:00 UTC


def at(hours):
    return START + hours * H


def job(queue, gpus, submit_h, duration_h, model="H100", **extra):
    return BacktestJob(queue, model, gpus, at(submit_h), duration_h * H, **extra)


def policy(guarantees, capacity=8, borrowing=True, limits=None, key="p"):
    limits = limits or {}
    return Policy(
        key=key,
        capacity={"H100": capacity},
        quotas={(q, "H100"): QueuePolicy(g, limits.get(q)) for q, g in guarantees.items()},
        borrowing=borrowing,
    )


def run(jobs, pol, hours, **kwargs):
    return run_backtest(jobs, pol, start_s=START, end_s=at(hours), record_starts=True, **kwargs)


def started_h(result):
    return [None if s is None else (s - START) / H for s in result.starts]


def test_shared_pool_raises_allocation_and_cuts_the_hot_queues_waits():
    # 8 GPUs, 4 h. "hot" submits eight 2-GPU jobs of 2 h at 0; "idle" one 1-GPU job of 1 h.
    # Fixed 4 + 4, no borrowing: hot runs 2 at a time, starts 0,0,2,2 and 4 still wait at end.
    #   Allocated 4 x 4 + 1 = 17 of 32 GPU-h. Hot waits (h) 0,0,2,2,4,4,4,4: p50 3, unmet
    #   2 GPUs x (2+2+4+4+4+4) = 40 GPU-h.
    # Guarantee 2 + 2, pool 4: hot runs 3 at a time (2 guaranteed + 4 borrowed GPUs), starts
    #   0,0,0,2,2,2 and 2 wait. Allocated 6 x 4 + 1 = 25 of 32. Hot waits 0,0,0,2,2,2,4,4: p50 2,
    #   unmet 2 x (2+2+2+4+4) = 28 GPU-h, borrowed 4 GPUs x 4 h = 16 GPU-h.
    jobs = [job("hot", 2, 0, 2) for _ in range(8)] + [job("idle", 1, 0, 1)]
    fixed, shared = compare_policies(
        jobs,
        [policy({"hot": 4, "idle": 4}, borrowing=False, key="fixed"), policy({"hot": 2, "idle": 2})],
        start_s=START,
        end_s=at(4),
        record_starts=True,
    )
    assert fixed.key == "fixed"
    assert started_h(fixed) == [0, 0, 2, 2, None, None, None, None, 0]
    assert started_h(shared) == [0, 0, 0, 2, 2, 2, None, None, 0]
    assert fixed.allocation_rate == 17 / 32
    assert shared.allocation_rate == 25 / 32
    assert (fixed.queues["hot"].wait_p50_s, shared.queues["hot"].wait_p50_s) == (3 * H, 2 * H)
    assert (fixed.queues["hot"].unmet_gpu_hours, shared.queues["hot"].unmet_gpu_hours) == (40, 28)
    assert (fixed.queues["hot"].borrowed_gpu_hours, shared.queues["hot"].borrowed_gpu_hours) == (0, 16)
    assert (fixed.jobs_waiting_at_end, shared.jobs_waiting_at_end) == (4, 2)
    assert shared.queues["idle"].wait_p50_s == 0
    assert shared.shared_pool_gpus == {"H100": 4}


def test_strict_fifo_blocks_the_queue_behind_its_head_but_not_other_queues():
    # "a" (guarantee 4) runs a1 (3 GPUs). a2 (2 GPUs) does not fit beside it and blocks a3,
    # which alone would fit (3 + 1 <= 4). "b" is not held up by a's older blocked head.
    # At 2 h a1 ends: a2 and a3 start together (2 + 1 <= 4).
    jobs = [job("a", 3, 0, 2), job("a", 2, 0.1, 1), job("a", 1, 0.2, 1), job("b", 1, 0.3, 1)]
    result = run(jobs, policy({"a": 4, "b": 4}, borrowing=False), 4)
    assert started_h(result) == pytest.approx([0, 2, 2, 0.3])


def test_a_head_that_does_not_fit_the_pool_does_not_stop_a_younger_head_of_another_queue():
    # Pool of 4 (capacity 6, a guarantees 2, b and c nothing). c1 borrows 2 from 0 to 3 h.
    # b's 4-GPU head (1 h) is older than c2 (1.5 h) but does not fit the 2 left; c2 borrows them
    # at once. b starts at 3 h, when c1 has ended and c2 (ended at 2.5 h) too.
    jobs = [job("c", 2, 0, 3), job("b", 4, 1, 1), job("c", 2, 1.5, 1)]
    result = run(jobs, policy({"a": 2}, capacity=6), 4)
    assert started_h(result) == [0, 3, 1.5]


def test_oldest_head_borrows_first_when_several_compete_even_if_a_younger_one_needs_less():
    # Pool 2, all borrowed by z until 1 h. x (0.2 h, wants 2) and y (0.5 h, wants 1) both wait;
    # at 1 h x, the older, takes both GPUs and y waits for it to end at 2 h.
    jobs = [job("z", 2, 0, 1), job("y", 1, 0.5, 1), job("x", 2, 0.2, 1)]
    result = run(jobs, policy({}, capacity=2), 4)
    assert started_h(result) == [0, 2, 1]


def test_borrowing_limit_is_respected_even_with_pool_to_spare():
    # "a": guarantee 2, may borrow 2; pool 6. Three 2-GPU jobs of 1 h: a1 guaranteed, a2 borrows 2,
    # a3 would borrow 4 and waits until 1 h although 4 pool GPUs are free. Borrowed: 2 x 1 h.
    jobs = [job("a", 2, 0, 1) for _ in range(3)]
    result = run(jobs, policy({"a": 2}, limits={"a": 2}), 3)
    assert started_h(result) == [0, 0, 1]
    assert result.queues["a"].borrowed_gpu_hours == 2


def test_guarantee_is_always_available_to_its_owner():
    # "hot" (guarantee 2) borrows the whole pool of 2 with long jobs; "idle" (guarantee 4)
    # submits 4 GPUs at 1 h and starts at once: its guarantee was never lent.
    jobs = [job("hot", 2, 0, 10) for _ in range(4)] + [job("idle", 4, 1, 1)]
    result = run(jobs, policy({"hot": 2, "idle": 4}), 3)
    assert started_h(result) == [0, 0, None, None, 1]
    assert result.queues["idle"].wait_p50_s == 0


def test_job_running_at_window_start_keeps_its_gpus_whatever_the_quota():
    # 4 GPUs, a and b guarantee 2 each, no pool. r (a, 4 GPUs) started 1 h before the window and
    # runs 3 h: it holds 4 GPUs until 2 h, 2 above a's guarantee, so the pool is overcommitted.
    # b's job still starts at 0 in its guarantee (6 GPUs in use, documented). a's 1-GPU job at
    # 0.5 h waits for r to end at 2 h. Allocated: r 4 x 2 + b 2 x 1 + a 1 x 1 = 11 of 16 GPU-h.
    # A job that ended before the window is outside it.
    running = BacktestJob("a", "H100", 4, at(-2), 3 * H, started_s=at(-1))
    finished = BacktestJob("b", "H100", 4, at(-3), 1 * H, started_s=at(-2))
    jobs = [running, job("b", 2, 0, 1), job("a", 1, 0.5, 1), finished]
    result = run(jobs, policy({"a": 2, "b": 2}, capacity=4), 4)
    assert started_h(result) == [-1, 0, 2, None]
    assert result.allocated_gpu_s / H == 11
    assert result.queues["a"].borrowed_gpu_hours == 2 * 2
    assert (result.jobs_total, result.jobs_running_at_start, result.jobs_started) == (3, 1, 2)
    assert result.jobs_outside_window == 1
    # The running job's own wait is not part of the window; a's job waited 1.5 h.
    assert result.queues["a"].wait_p50_s == 1.5 * H
    assert result.queues["a"].running_at_start == 1


def test_job_submitted_before_the_window_waits_from_its_start():
    # Both were waiting at start; the older starts first. Waits count from the window start:
    # 0 and 1 h, not 5 and 2 h.
    jobs = [job("a", 2, -1, 1), job("a", 2, -5, 1)]
    result = run(jobs, policy({"a": 2}, capacity=2), 3)
    assert started_h(result) == [1, 0]
    assert (result.wait_p50_s, result.wait_p95_s) == (0.5 * H, pytest.approx(0.95 * H))
    assert result.unmet_gpu_hours == 2


def test_job_beyond_any_capacity_waits_as_unmet_demand_and_blocks_only_its_queue():
    # a: guarantee 2 + pool 6 = at most 8 GPUs; its 9-GPU job never starts, and a's 1-GPU job
    # behind it waits too. b borrows at once. Unmet: 9 x 2 h + 1 x 1.5 h = 19.5 GPU-h.
    jobs = [job("a", 9, 0, 1), job("a", 1, 0.5, 1), job("b", 2, 0.5, 1)]
    result = run(jobs, policy({"a": 2}), 2)
    assert started_h(result) == [None, None, 0.5]
    assert result.jobs_waiting_at_end == 2
    assert result.queues["a"].unmet_gpu_hours == 19.5
    assert result.unmet_gpu_hours == 19.5
    assert result.queues["a"].wait_p95_s == pytest.approx(2 * H - 0.05 * 0.5 * H)


def test_job_running_past_the_window_end_counts_only_up_to_the_end():
    result = run([job("a", 4, 0, 10)], policy({"a": 4}, capacity=4), 2)
    assert result.allocated_gpu_s == 4 * 2 * H
    assert result.allocation_rate == 1
    assert result.queues["a"].allocated_gpu_hours == 8
    assert result.hourly_allocated_gpus == [4, 4]


def test_unknown_gpu_model_and_zero_gpus_are_skipped_and_counted():
    jobs = [job("a", 1, 0, 1, model="V100"), job("a", 0, 0, 1), job("a", 1, 0, 1), job("a", 1, 9, 1)]
    result = run(jobs, policy({"a": 1}), 2)
    assert result.skipped_jobs == 2
    assert result.jobs_outside_window == 1  # submitted after the window end
    assert result.jobs_total == 1
    assert started_h(result) == [None, None, 0, None]


def test_guarantees_above_capacity_are_rejected():
    with pytest.raises(ValueError, match="guarantees for H100 add up to 9 GPUs, more than its capacity of 8"):
        run([], policy({"a": 5, "b": 4}), 1)


def test_wait_percentiles_interpolate_between_jobs():
    # One GPU, five 1-h jobs submitted at 0: they wait 0, 1, 2, 3, 4 h.
    result = run([job("a", 1, 0, 1) for _ in range(5)], policy({"a": 1}, capacity=1), 6)
    assert result.wait_p50_s == 2 * H
    assert result.wait_p95_s == pytest.approx(3.8 * H)
    assert result.wait_p95_s == percentile([0, H, 2 * H, 3 * H, 4 * H], 95)


def test_no_jobs_no_wait_percentiles():
    result = run([], policy({"a": 1}), 1)
    assert (result.wait_p50_s, result.wait_p95_s, result.jobs_total) == (None, None, 0)
    assert result.queues["a"].wait_p50_s is None


def test_hourly_series_is_the_mean_of_each_hour_and_the_last_partial_hour_over_its_own_length():
    # 2.5 h window. 2 GPUs from 0.5 h to 2 h: hour 0 holds 1 GPU-h (mean 1), hour 1 2 GPU-h.
    # 1 GPU from 2.25 h past the end: 0.25 GPU-h in a half hour, mean 0.5.
    jobs = [job("a", 2, 0.5, 1.5), job("a", 1, 2.25, 1)]
    result = run(jobs, policy({"a": 4}, capacity=4), 2.5)
    assert result.hourly_allocated_gpus == [1, 2, 0.5]


def test_busy_is_allocated_times_the_measured_share_or_the_default():
    jobs = [job("a", 2, 0, 1, busy_fraction=0.5), job("a", 2, 0, 1)]
    result = run(jobs, policy({"a": 4}, capacity=4), 1, default_busy_fraction=0.25)
    # 2 x 1 h x 0.5 + 2 x 1 h x 0.25 = 1.5 GPU-h busy of 4.
    assert result.busy_gpu_s == 1.5 * H
    assert result.utilization == 1.5 / 4
    assert result.allocation_rate == 1


def test_a_job_whose_user_gave_up_leaves_its_queue_unless_it_starts_in_time():
    # 8 GPUs guaranteed to "a". A 4-GPU job runs 0-10 h. At 1 h an 8-GPU job arrives whose user
    # waited 1 h in reality before cancelling it (patience 1 h); at 1.5 h a 4-GPU job queues
    # behind it (strict FIFO: blocked although 4 GPUs are free).
    # Replay: the 8-GPU job cannot start before 10 h, so it leaves at 2 h (wait 1 h, unmet
    # 8 GPU-h); the 4-GPU job, now the head, starts at 2 h (wait 0.5 h, unmet 2 GPU-h).
    jobs = [
        job("a", 4, 0, 10),
        job("a", 8, 1, 3, patience_s=1 * H),
        job("a", 4, 1.5, 2),
    ]
    result = run(jobs, policy({"a": 8}), 12)
    assert started_h(result) == [0, None, 2]
    assert (result.jobs_started, result.jobs_cancelled, result.jobs_waiting_at_end) == (2, 1, 0)
    assert result.jobs_total == 3
    assert result.unmet_gpu_hours == pytest.approx(8 * 1 + 4 * 0.5)
    assert result.queues["a"].cancelled == 1
    # With 16 GPUs it starts at once, before its user would have given up.
    result = run(jobs, policy({"a": 16}, capacity=16), 12)
    assert started_h(result) == [0, 1, 1.5]
    assert result.jobs_cancelled == 0


def test_a_job_cancelled_before_the_window_is_outside_it():
    result = run([job("a", 1, -3, 1, patience_s=1 * H)], policy({"a": 0}), 2)
    assert (result.jobs_total, result.jobs_outside_window) == (0, 1)


def test_starts_are_not_recorded_unless_asked_for():
    assert run_backtest([job("a", 1, 0, 1)], policy({"a": 1}), start_s=START, end_s=at(1)).starts is None


def test_a_job_whose_user_gave_up_behind_the_head_leaves_without_unblocking_the_queue():
    # 2 GPUs guaranteed to "a". a1 holds both 0-3 h; a2 (2 GPUs, 2 h) waits at the head from 0 h.
    # a3 (1 GPU) arrives at 0.5 h behind it and its user gives up after 1 h, at 1.5 h: it leaves
    # from the middle of the queue and a4 (1 GPU, 1 h) behind it stays blocked by a2.
    # At 3 h a2 starts; a4 starts at 5 h when a2 ends. Waits: a1 0, a2 3 h, a3 1 h, a4 4 h (p50 2 h);
    # unmet 2 x 3 + 1 x 1 + 1 x 4 = 11 GPU-h.
    jobs = [
        job("a", 2, 0, 3),
        job("a", 2, 0, 2),
        job("a", 1, 0.5, 1, patience_s=1 * H),
        job("a", 1, 1, 1),
    ]
    result = run(jobs, policy({"a": 2}, capacity=2), 6)
    assert started_h(result) == [0, 3, None, 5]
    assert (result.jobs_started, result.jobs_cancelled, result.jobs_waiting_at_end) == (3, 1, 0)
    assert result.unmet_gpu_hours == 11
    assert result.queues["a"].wait_p50_s == 2 * H


# --- a slow reference implementation, written straight from the rules -------------------------


def reference_backtest(jobs, pol, start_s, end_s, default_busy_fraction=0.0):
    """At each event time: drop finished jobs, queue arrivals, then start the oldest head that fits,
    from scratch, until none does. Returns the same figures as run_backtest, computed naively."""

    def quota(lane):
        q = pol.quotas.get(lane)
        return (q.guaranteed_gpus, q.borrowing_limit_gpus) if q else (0, None)

    pool = {
        m: c - sum(q.guaranteed_gpus for (_, qm), q in pol.quotas.items() if qm == m)
        for m, c in pol.capacity.items()
    }
    starts = [None] * len(jobs)
    running = []  # (lane, gpus, end)
    holds = []  # (index, begin, end)
    queued = []
    for i, j in enumerate(jobs):
        if j.gpu_model not in pol.capacity or j.gpus <= 0:
            continue
        if j.started_s is not None and j.started_s < start_s:
            if j.started_s + j.duration_s > start_s:
                running.append(((j.queue, j.gpu_model), j.gpus, j.started_s + j.duration_s))
                holds.append((i, start_s, j.started_s + j.duration_s))
                starts[i] = j.started_s
            continue
        if j.patience_s is not None and j.submit_s + j.patience_s <= start_s:
            continue
        if j.submit_s < end_s:
            queued.append(i)
    queued.sort(key=lambda i: (jobs[i].submit_s, i))
    gave_up = {}  # index -> when its user gave up
    pending = list(queued)
    fifo = {}

    def used(lane):
        return sum(g for ln, g, _ in running if ln == lane)

    def borrowed(lane):
        return max(0, used(lane) - quota(lane)[0])

    def fits(i):
        j = jobs[i]
        lane = (j.queue, j.gpu_model)
        g_now, limit = quota(lane)
        u = used(lane)
        if u + j.gpus <= g_now:
            return True
        if not pol.borrowing:
            return False
        in_pool = sum(borrowed(ln) for ln in {r[0] for r in running} if ln[1] == j.gpu_model)
        extra = max(0, u + j.gpus - g_now) - max(0, u - g_now)
        return extra <= pool[j.gpu_model] - in_pool and (limit is None or u + j.gpus - g_now <= limit)

    borrowed_s = {}
    previous = start_s

    def give_up_s(i):
        return jobs[i].submit_s + jobs[i].patience_s if jobs[i].patience_s is not None else math.inf

    while True:
        times = [end for _, _, end in running] + [max(jobs[i].submit_s, start_s) for i in pending]
        times += [give_up_s(i) for f in fifo.values() for i in f]
        t = min(times, default=math.inf)
        segment_end = min(t, end_s)
        for lane in {r[0] for r in running}:
            borrowed_s[lane[0]] = borrowed_s.get(lane[0], 0) + borrowed(lane) * (segment_end - previous)
        previous = segment_end
        if t >= end_s:
            break
        running = [r for r in running if r[2] > t]
        while pending and max(jobs[pending[0]].submit_s, start_s) <= t:
            i = pending.pop(0)
            fifo.setdefault((jobs[i].queue, jobs[i].gpu_model), []).append(i)
        for f in fifo.values():
            for i in [i for i in f if give_up_s(i) <= t]:
                f.remove(i)
                gave_up[i] = give_up_s(i)
        while True:
            heads = sorted((f[0] for f in fifo.values() if f), key=lambda i: (jobs[i].submit_s, i))
            for i in heads:
                if fits(i):
                    j = jobs[i]
                    fifo[(j.queue, j.gpu_model)].pop(0)
                    running.append(((j.queue, j.gpu_model), j.gpus, t + j.duration_s))
                    holds.append((i, t, t + j.duration_s))
                    starts[i] = t
                    break
            else:
                break

    waits = {}
    unmet = {}
    for i in queued:  # started in the window, gave up, or still waiting at its end (censored)
        wait_end = starts[i] if starts[i] is not None else gave_up.get(i, end_s)
        wait = wait_end - max(jobs[i].submit_s, start_s)
        waits.setdefault(jobs[i].queue, []).append(wait)
        unmet[jobs[i].queue] = unmet.get(jobs[i].queue, 0) + jobs[i].gpus * wait
    allocated = {}
    busy = 0.0
    hours = math.ceil((end_s - start_s) / H)
    hourly = [0.0] * hours
    for i, begin, end in holds:
        j = jobs[i]
        begin, end = max(begin, start_s), min(end, end_s)
        if end <= begin:
            continue
        allocated[j.queue] = allocated.get(j.queue, 0) + j.gpus * (end - begin)
        fraction = j.busy_fraction if j.busy_fraction is not None else default_busy_fraction
        busy += j.gpus * (end - begin) * fraction
        for h in range(hours):
            h_start, h_end = start_s + h * H, min(start_s + (h + 1) * H, end_s)
            hourly[h] += j.gpus * max(0, min(end, h_end) - max(begin, h_start)) / (h_end - h_start)
    all_waits = [w for ws in waits.values() for w in ws]
    return {
        "starts": tuple(starts),
        "allocated": sum(allocated.values()),
        "busy": busy,
        "unmet_h": sum(unmet.values()) / H,
        "p50": percentile(all_waits, 50),
        "p95": percentile(all_waits, 95),
        "hourly": hourly,
        "queues": {
            q: (
                allocated.get(q, 0) / H,
                borrowed_s.get(q, 0) / H,
                unmet.get(q, 0) / H,
                percentile(waits.get(q, []), 50),
                percentile(waits.get(q, []), 95),
            )
            for q in set(allocated) | set(borrowed_s) | set(waits)
        },
    }


QUEUES = ["a", "b", "c", "d"]  # "d" has no quota: it lives on borrowing alone
MODELS = ["H100", "A100"]
STEP = 1800.0  # times are whole half hours, so every sum is exact and hours hold several events


@st.composite
def scenarios(draw, min_duration=0):
    # Small pools and bunched arrivals, so that heads often compete for the same few GPUs.
    quotas = {}
    capacity = {}
    for model in MODELS:
        total = 0
        for queue in QUEUES[:3]:
            if draw(st.booleans()):
                guaranteed = draw(st.integers(0, 3))
                limit = draw(st.none() | st.integers(0, 4))
                quotas[(queue, model)] = QueuePolicy(guaranteed, limit)
                total += guaranteed
        capacity[model] = total + draw(st.integers(0, 4))
    pol = Policy("p", capacity, quotas, borrowing=draw(st.integers(0, 3)) > 0)
    window = draw(st.integers(1, 12))
    job_list = draw(
        st.lists(
            st.builds(
                lambda queue, model, gpus, submit, duration, started, busy, patience: BacktestJob(
                    queue,
                    model,
                    gpus,
                    START + submit * STEP,
                    duration * STEP,
                    None if started is None else START + started * STEP,
                    busy,
                    None if patience is None or started is not None else patience * STEP,
                ),
                st.sampled_from(QUEUES),
                st.sampled_from([*MODELS[:1] * 4, *MODELS[1:], "V100"]),
                st.integers(0, 5),
                st.integers(-2, 8),
                st.integers(min_duration, 5),
                st.none() | st.none() | st.integers(-5, 2),
                st.none() | st.sampled_from([0.25, 0.5, 1.0]),
                st.none() | st.integers(0, 6),
            ),
            max_size=20,
        )
    )
    return job_list, pol, START + window * STEP


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_run_backtest_matches_the_slow_reference(scenario):
    jobs, pol, end_s = scenario
    result = run_backtest(
        jobs, pol, start_s=START, end_s=end_s, default_busy_fraction=0.5, record_starts=True
    )
    expected = reference_backtest(jobs, pol, START, end_s, default_busy_fraction=0.5)
    assert result.starts == expected["starts"]
    assert result.allocated_gpu_s == expected["allocated"]
    assert result.busy_gpu_s == expected["busy"]
    assert result.unmet_gpu_hours == pytest.approx(expected["unmet_h"])
    assert result.wait_p50_s == pytest.approx(expected["p50"])
    assert result.wait_p95_s == pytest.approx(expected["p95"])
    assert result.hourly_allocated_gpus == pytest.approx(expected["hourly"])
    assert result.jobs_total == (
        result.jobs_running_at_start
        + result.jobs_started
        + result.jobs_waiting_at_end
        + result.jobs_cancelled
    )
    for queue, (allocated_h, borrowed_h, unmet_h, p50, p95) in expected["queues"].items():
        figures = result.queues[queue]
        assert figures.allocated_gpu_hours == pytest.approx(allocated_h)
        assert figures.borrowed_gpu_hours == pytest.approx(borrowed_h)
        assert figures.unmet_gpu_hours == pytest.approx(unmet_h)
        assert (figures.wait_p50_s, figures.wait_p95_s) == (pytest.approx(p50), pytest.approx(p95))


@settings(max_examples=300, deadline=None)
@given(scenarios(min_duration=1))
def test_capacity_and_borrowing_limits_hold_at_every_instant(scenario):
    jobs, pol, end_s = scenario
    result = run_backtest(jobs, pol, start_s=START, end_s=end_s, record_starts=True)
    held = [
        (j, max(s, START), s + j.duration_s)
        for j, s in zip(jobs, result.starts, strict=True)
        if s is not None and s + j.duration_s > START
    ]
    lanes = {(j.queue, j.gpu_model) for j, _, _ in held}

    def guarantee(lane):
        q = pol.quotas.get(lane)
        return q.guaranteed_gpus if q else 0

    def usage(lane, t):
        return sum(j.gpus for j, begin, end in held if (j.queue, j.gpu_model) == lane and begin <= t < end)

    at_start = {lane: max(0, usage(lane, START) - guarantee(lane)) for lane in lanes}
    for t in sorted({begin for _, begin, _ in held}):
        for model, capacity in pol.capacity.items():
            guaranteed = sum(q.guaranteed_gpus for (_, m), q in pol.quotas.items() if m == model)
            overcommit = sum(b for lane, b in at_start.items() if lane[1] == model)
            in_use = sum(usage(lane, t) for lane in lanes if lane[1] == model)
            assert in_use <= max(capacity, guaranteed + overcommit)
        for lane in lanes:
            borrowed = max(0, usage(lane, t) - guarantee(lane))
            q = pol.quotas.get(lane)
            limit = q.borrowing_limit_gpus if q and q.borrowing_limit_gpus is not None else math.inf
            assert borrowed <= max(limit if pol.borrowing else 0, at_start[lane])


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_each_queue_starts_its_jobs_in_submit_order(scenario):
    jobs, pol, end_s = scenario
    result = run_backtest(jobs, pol, start_s=START, end_s=end_s, record_starts=True)
    for queue in QUEUES:
        for model in MODELS:
            order = sorted(
                (j.submit_s, i)
                for i, j in enumerate(jobs)
                if (j.queue, j.gpu_model) == (queue, model)
                and j.gpus > 0
                and (j.started_s is None or j.started_s >= START)
                and j.submit_s < end_s
                # A job whose user gave up (in the window, unstarted) left its queue.
                and not (
                    j.patience_s is not None
                    and result.starts[i] is None
                    and j.submit_s + j.patience_s < end_s
                )
            )
            started = [result.starts[i] for _, i in order]
            waiting = [s is None for s in started]
            assert waiting == sorted(waiting)  # once one waits, all behind it wait
            times = [s for s in started if s is not None]
            assert times == sorted(times)


def test_shared_gpu_shares_that_fill_the_pool_exactly_all_start():
    # One GPU, all of it in the shared pool. Shares of 0.449, 0.334 and 0.217 GPU (GPU-sharing
    # pods) fill it exactly: all three start at once. In floating point what is left after the
    # first two comes out below 0.217, so without rounding the last would wait 2 h for the first.
    jobs = [job("a", 0.449, 0, 2), job("a", 0.334, 0, 2), job("a", 0.217, 0, 2)]
    result = run(jobs, policy({"a": 0}, capacity=1), 4)
    assert started_h(result) == [0, 0, 0]
    # allocated: (0.449 + 0.334 + 0.217) GPU x 2 h = 2 GPU-hours, all of it borrowed from the pool
    assert result.allocated_gpu_s / H == pytest.approx(2.0)
    assert result.queues["a"].borrowed_gpu_hours == pytest.approx(2.0)
