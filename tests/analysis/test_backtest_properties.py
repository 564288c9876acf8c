"""Quota scheduling backtest: invariants every replay keeps, on generated cycles.

The scenarios (small pools, bunched arrivals, jobs running at window start, users giving up) come
from test_backtest. Times there are whole half hours, so GPU-second sums are exact.
"""

import dataclasses
import itertools
import math

import pytest
from hypothesis import given, settings

from efficiency.analysis.backtest import run_backtest
from tests.analysis.test_backtest import START, scenarios

H = 3600.0


def replay(scenario, **kwargs):
    jobs, pol, end_s = scenario
    return run_backtest(jobs, pol, start_s=START, end_s=end_s, record_starts=True, **kwargs)


def held(jobs, result, end_s):
    """(job, first, last second) each job holds its GPUs inside the window."""
    return [
        (job, max(begin, START), min(begin + job.duration_s, end_s))
        for job, begin in zip(jobs, result.starts, strict=True)
        if begin is not None and min(begin + job.duration_s, end_s) > max(begin, START)
    ]


def in_use(holds, t, *, model=None, lane=None):
    return sum(
        job.gpus
        for job, begin, end in holds
        if begin <= t < end
        and (model is None or job.gpu_model == model)
        and (lane is None or (job.queue, job.gpu_model) == lane)
    )


def nothing_ran_before_the_window(scenario):
    """The scenario with every job queued instead, so no job may hold GPUs beyond its quota."""
    jobs, pol, end_s = scenario
    return [dataclasses.replace(job, started_s=None) for job in jobs], pol, end_s


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_no_job_starts_before_it_was_submitted_nor_after_its_user_gave_up(scenario):
    jobs, _, end_s = scenario
    result = replay(scenario)
    for job, begin in zip(jobs, result.starts, strict=True):
        if begin is None:
            continue
        if job.started_s is not None and job.started_s < START:
            assert begin == job.started_s  # already running: kept as it was
            continue
        assert max(job.submit_s, START) <= begin < end_s
        if job.patience_s is not None:
            # Give-ups at an instant are handled before that instant's starts.
            assert begin < job.submit_s + job.patience_s


@settings(max_examples=300, deadline=None)
@given(scenarios(min_duration=1))
def test_allocated_gpus_never_exceed_the_capacity_in_any_hour(scenario):
    scenario = nothing_ran_before_the_window(scenario)
    jobs, pol, end_s = scenario
    result = replay(scenario)
    holds = held(jobs, result, end_s)
    for t in sorted({begin for _, begin, _ in holds}):
        for model, capacity in pol.capacity.items():
            assert in_use(holds, t, model=model) <= capacity
    for gpus in result.hourly_allocated_gpus:
        assert gpus <= sum(pol.capacity.values()) + 1e-9


@settings(max_examples=300, deadline=None)
@given(scenarios(min_duration=1))
def test_a_department_never_borrows_beyond_its_limit_and_reports_what_it_held_above_its_guarantee(
    scenario,
):
    scenario = nothing_ran_before_the_window(scenario)
    jobs, pol, end_s = scenario
    result = replay(scenario)
    holds = held(jobs, result, end_s)
    instants = sorted({START, end_s} | {t for _, begin, end in holds for t in (begin, end)})
    borrowed_s = {}
    for lane in {(job.queue, job.gpu_model) for job, _, _ in holds}:
        quota = pol.quotas.get(lane)
        guaranteed = quota.guaranteed_gpus if quota else 0
        limit = quota.borrowing_limit_gpus if quota and quota.borrowing_limit_gpus is not None else math.inf
        for t, following in itertools.pairwise(instants):
            borrowed = max(0, in_use(holds, t, lane=lane) - guaranteed)
            assert borrowed <= (limit if pol.borrowing else 0)
            borrowed_s[lane[0]] = borrowed_s.get(lane[0], 0.0) + borrowed * (following - t)
    for queue, figures in result.queues.items():
        assert figures.borrowed_gpu_hours == pytest.approx(borrowed_s.get(queue, 0.0) / H)


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_gpu_hours_served_are_the_gpu_hours_of_the_jobs_that_ran_in_the_window(scenario):
    jobs, _, end_s = scenario
    result = replay(scenario, default_busy_fraction=0.5)
    holds = held(jobs, result, end_s)
    served_s = sum(job.gpus * (end - begin) for job, begin, end in holds)
    busy_s = sum(
        job.gpus * (end - begin) * (0.5 if job.busy_fraction is None else job.busy_fraction)
        for job, begin, end in holds
    )
    assert result.allocated_gpu_s == served_s
    assert result.busy_gpu_s == busy_s
    assert sum(q.allocated_gpu_hours for q in result.queues.values()) == pytest.approx(served_s / H)
    # The hourly series holds the same GPU-time: each hour's mean times its length.
    lengths = [min(H, end_s - START - hour * H) for hour in range(len(result.hourly_allocated_gpus))]
    hourly_s = sum(gpus * length for gpus, length in zip(result.hourly_allocated_gpus, lengths, strict=True))
    assert hourly_s == pytest.approx(served_s)
    assert result.utilization <= result.allocation_rate


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_every_job_is_counted_once_in_the_totals_and_in_its_department(scenario):
    jobs, _, _ = scenario
    result = replay(scenario)
    assert result.jobs_total + result.skipped_jobs + result.jobs_outside_window == len(jobs)
    assert result.jobs_total == (
        result.jobs_running_at_start
        + result.jobs_started
        + result.jobs_waiting_at_end
        + result.jobs_cancelled
    )
    queues = result.queues.values()
    assert sum(q.jobs for q in queues) == result.jobs_total
    assert sum(q.started for q in queues) == result.jobs_started
    assert sum(q.waiting_at_end for q in queues) == result.jobs_waiting_at_end
    assert sum(q.cancelled for q in queues) == result.jobs_cancelled
    assert sum(q.running_at_start for q in queues) == result.jobs_running_at_start
    for q in queues:
        assert q.jobs == q.running_at_start + q.started + q.waiting_at_end + q.cancelled
    started = sum(begin is not None for begin in result.starts)
    assert started == result.jobs_started + result.jobs_running_at_start
