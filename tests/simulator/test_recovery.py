from datetime import UTC, datetime, timedelta

from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes

START = datetime(2026, 11, 1, tzinfo=UTC)
TAKEOVER = START + timedelta(days=3)


def resubmission_delays(sim, since, until):
    """(seconds to resubmit, seconds to run again) after each faulted job's end in [since, until)."""
    delays = []
    for job in sim.sim_jobs(since, until + timedelta(days=2)):
        if job.resubmit_of is None or job.start_s is None:
            continue
        parent = sim.sim_job(job.resubmit_of)
        if parent.end_s is not None and since.timestamp() <= parent.end_s < until.timestamp():
            delays.append((job.submit_s - parent.end_s, job.start_s - parent.end_s))
    return delays


def median(values):
    return sorted(values)[len(values) // 2]


def test_faulted_jobs_run_again_within_minutes_once_the_portal_restarts_them():
    sim = ClusterSimulator(reference_nodes(), seed=7, start=START, fault_rate_per_day=12.0,
                           automated_recovery_from=TAKEOVER)  # fmt: skip
    by_hand = resubmission_delays(sim, START + timedelta(hours=12), TAKEOVER)
    automated = resubmission_delays(sim, TAKEOVER, TAKEOVER + timedelta(days=3))
    assert len(by_hand) >= 10
    assert len(automated) >= 10
    # By hand: users resubmit after 1-5 h and queue again at the back. Requeued by the portal:
    # within 5-15 min, at the head of its queue; it may still wait for GPUs (its node is drained).
    assert min(resubmit for resubmit, _ in by_hand) >= 3600
    assert max(resubmit for resubmit, _ in automated) <= 15 * 60
    assert median([back for _, back in automated]) < median([back for _, back in by_hand]) / 2


def test_without_a_takeover_nothing_changes():
    plain = ClusterSimulator(reference_nodes(), seed=7, start=START)
    later = ClusterSimulator(
        reference_nodes(), seed=7, start=START, automated_recovery_from=START + timedelta(days=30)
    )
    window = (START + timedelta(days=1), START + timedelta(days=2))
    assert [j.external_id for j in plain.sim_jobs(*window)] == [
        j.external_id for j in later.sim_jobs(*window)
    ]
