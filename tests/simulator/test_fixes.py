"""Fixing a job family's misconfiguration: runs submitted after the fix are healthy, earlier runs
and other families are untouched, and the result does not depend on when the simulator learned it."""

from datetime import timedelta

import pytest

from efficiency.simulator.model import ClusterSimulator, SimJob, family_name
from tests.simulator.conftest import START, make_simulator

FIXED_AT = START + timedelta(days=2)
UNTIL = START + timedelta(days=4)


def _pattern(job: SimJob) -> str:
    project, suffix = job.name.split("-", 1)
    return family_name(project, suffix)


def _socket_family(sim: ClusterSimulator) -> tuple[str, str, str]:
    """The socket family with the most runs on both sides of FIXED_AT."""
    counts: dict[tuple[str, str, str], list[int]] = {}
    for job in sim.sim_jobs(START, UNTIL):
        if job.misconfig == "nccl_socket":
            side = 0 if job.submit_s < FIXED_AT.timestamp() else 1
            counts.setdefault((job.department, job.user_name, _pattern(job)), [0, 0])[side] += 1
    return max(counts, key=lambda key: min(counts[key]))


def _fingerprint(sim: ClusterSimulator) -> list[tuple]:
    return [
        (
            job.job_id,
            job.name,
            job.submit_s,
            job.start_s,
            job.end_s,
            job.misconfig,
            round(job.iteration_s, 9),
            job.train_iters,
            job.framework,
            job.config["image"],
            tuple(sorted(job.config["env"].items())),
        )
        for job in sim.sim_jobs(START, UNTIL)
    ]


@pytest.fixture(scope="module")
def unfixed() -> ClusterSimulator:
    sim = make_simulator()
    sim.advance_to(UNTIL)
    return sim


def test_runs_submitted_after_the_fix_are_healthy_and_nothing_else_changes(unfixed):
    family = _socket_family(unfixed)
    fixed = make_simulator(fixes={family: FIXED_AT})
    before = {job.job_id: job for job in unfixed.sim_jobs(START, UNTIL)}
    after = {job.job_id: job for job in fixed.sim_jobs(START, UNTIL)}
    assert before.keys() == after.keys()  # the same jobs, scheduled the same way
    changed = 0
    for job_id, old in before.items():
        new = after[job_id]
        assert (new.start_s, new.end_s, new.allocation) == (old.start_s, old.end_s, old.allocation)
        in_family = (old.department, old.user_name, _pattern(old)) == family
        if in_family and old.submit_s >= FIXED_AT.timestamp():
            assert new.misconfig == ""
            assert new.slowdown == 1.0
            assert "NCCL_IB_HCA" in new.config["env"]
            if old.misconfig == "nccl_socket":
                changed += 1
                # The socket runs took 1.8–2.3× as long per iteration; the fixed ones do not.
                assert 1.8 <= old.iteration_s / new.iteration_s <= 2.3
                assert new.train_iters > old.train_iters  # more work in the same time
        else:
            assert new.misconfig == old.misconfig
            assert new.iteration_s == old.iteration_s
            assert new.config == old.config
    assert changed >= 1


def test_a_fix_learned_late_gives_the_same_jobs_as_one_known_from_the_start(unfixed):
    family = _socket_family(unfixed)
    known = make_simulator(fixes={family: FIXED_AT})
    known.advance_to(UNTIL)
    late = make_simulator()
    late.advance_to(FIXED_AT + timedelta(hours=1))  # drawn ahead of the fix already
    rewritten = late.fix_family(*family, at=FIXED_AT)
    assert rewritten >= 0
    late.advance_to(UNTIL)
    assert _fingerprint(late) == _fingerprint(known)
    assert late.fixes() == {family: FIXED_AT}
    # Fixing again later changes nothing; the logs of a fixed run show IB, not sockets.
    assert late.fix_family(*family, at=FIXED_AT + timedelta(hours=5)) == 0
    run = next(
        job
        for job in late.sim_jobs(FIXED_AT, UNTIL)
        if (job.department, job.user_name, _pattern(job)) == family
        and job.submit_s >= FIXED_AT.timestamp()
        and job.node_count >= 2
        and job.start_s is not None
    )
    rank = run.gpu_count - 1
    lines = [
        *late.job_log_lines(run.job_id, 0, START, UNTIL),
        *late.job_log_lines(run.job_id, rank, START, UNTIL),
    ]
    assert not any("via NET/Socket" in line for line in lines)
    assert any("elapsed time per iteration (ms)" in line for line in lines)
