"""Simulated users are patient only so long: they cancel jobs that wait too long and submit less
while their queue is long, so a hot department's demand stays within a few times its GPUs."""

import csv
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from efficiency.analysis.quotas import GpuInterval, hourly_mean_gpus, resolve_gpu_model
from efficiency.analysis.stats import percentile
from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes

START = datetime(2026, 11, 1, tzinfo=UTC)
UNTIL = START + timedelta(days=21)
TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "jobs" / "alibaba_2023_pods.csv"


@pytest.fixture(scope="module")
def three_weeks():
    sim = ClusterSimulator(reference_nodes(), seed=7, start=START)
    sim.advance_to(UNTIL)
    return sim


def trace_cancelled_before_start_share() -> float:
    """Alibaba's 2023 GPU trace: the share of pods deleted while still pending (tests/fixtures)."""
    with TRACE.open(newline="") as handle:
        phases = [row["pod_phase"] for row in csv.DictReader(handle)]
    return phases.count("Pending") / len(phases)


def test_hot_departments_demand_stays_within_a_few_times_their_gpus(three_weeks):
    sim = three_weeks
    hot = {sim.nodes[i].owner for i, name in enumerate(sim._classes) if name == "hot"}
    owned: dict[tuple[str, str], int] = defaultdict(int)
    for spec in sim.nodes:
        if spec.owner in hot:
            owned[(spec.owner, spec.gpu_model)] += spec.gpu_count
    models = sorted({spec.gpu_model for spec in sim.nodes})
    until_s = UNTIL.timestamp()
    intervals = []
    for job in sim.sim_jobs(START, UNTIL):
        _, _, end_s = job.state_at(until_s)
        key = (job.department, resolve_gpu_model(job.gpu_model, models, ""))
        if key in owned:
            intervals.append(GpuInterval(key, job.gpu_count, job.submit_s, end_s or until_s))
    demand = hourly_mean_gpus(intervals, start_s=START.timestamp(), end_s=until_s)
    assert set(demand) == set(owned)
    for key, gpus in owned.items():
        # GPUs held plus GPUs waited for, hour by hour: above the department's own GPUs (it is
        # short of them) but not the thousands of a queue nobody ever leaves.
        assert gpus < percentile(demand[key], 75) <= 3 * gpus, key
        assert max(demand[key]) <= 5 * gpus, key


def test_the_share_of_jobs_cancelled_before_they_start_is_the_traces(three_weeks):
    start_s = START.timestamp()
    submitted = [job for job in three_weeks.sim_jobs(START, UNTIL) if job.submit_s >= start_s]
    gave_up = [job for job in submitted if job.start_s is None and job.end_s is not None]
    share = len(gave_up) / len(submitted)
    assert trace_cancelled_before_start_share() == pytest.approx(0.110, abs=0.001)
    assert share == pytest.approx(trace_cancelled_before_start_share(), abs=0.025)


def test_a_job_its_user_gave_up_on_never_ran_and_left_after_its_patience(three_weeks):
    until_s = UNTIL.timestamp()
    gave_up = [
        job
        for job in three_weeks.sim_jobs(START, UNTIL)
        if job.start_s is None and job.end_s is not None and job.end_s <= until_s
    ]
    assert gave_up
    for job in gave_up:
        assert job.allocation == ()
        assert job.end_s == pytest.approx(job.submit_s + job.patience_s)
        assert job.state_at(until_s) == ("CANCELLED", None, job.end_s)
        assert job.state_at(job.end_s - 1) == ("PENDING", None, None)
    # Whoever started did so within its user's patience.
    for job in three_weeks.sim_jobs(START, UNTIL):
        if job.start_s is not None and job.resubmit_of is None:
            assert job.start_s - job.submit_s <= job.patience_s
