"""The queue selector: waits so far, why jobs wait under the quotas in force, waits of started jobs."""

from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.analysis.queue import CAPACITY, PRIORITY, QUEUED, QUOTA
from efficiency.analysis.stats import percentile
from efficiency.choices import JobState, NodeState
from efficiency.forms import TimeRange
from efficiency.models import Job, Node
from efficiency.selectors.queue import queue_summary, started_wait_stats
from tests.factories import (
    DepartmentFactory,
    JobFactory,
    NodeFactory,
    QuotaCycleFactory,
    QuotaFactory,
    UserFactory,
)

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def cluster_now(org):
    """Vision owns 16 H100s (node A + one more), radar 8 (node B), the shared pool 8: 32 in all.

    Vision runs 16 GPUs; radar runs 16 (8 own + 8 borrowed), so the shared pool is used up.
    The org's own running jobs (8 GPUs each) are ended first so the numbers stay hand-checked.
    """
    now = timezone.now().replace(microsecond=0)
    org.job_a.state, org.job_a.ended_at = JobState.COMPLETED, now - timedelta(hours=1)
    org.job_a.save()
    org.job_b.state, org.job_b.ended_at = JobState.COMPLETED, now - timedelta(hours=1)
    org.job_b.save()
    NodeFactory(hostname="gpu-a02", owner_department=org.dept_a, cluster=org.cluster)
    NodeFactory(hostname="gpu-pool1", owner_department=None, cluster=org.cluster)
    JobFactory(department=org.dept_a, cluster=org.cluster, gpu_count=16)
    JobFactory(department=org.dept_b, cluster=org.cluster, gpu_count=16, gpu_model="")  # radar's model
    return org, now


def pending(org, now, *, waited_h: float, gpus: int = 8, department=None, **fields):
    return JobFactory(
        department=department or org.dept_a,
        cluster=org.cluster,
        state=JobState.PENDING,
        gpu_count=gpus,
        submitted_at=now - timedelta(hours=waited_h),
        started_at=None,
        **fields,
    )


def approve_cycle(org, now, guarantees):
    cycle = QuotaCycleFactory(
        cluster=org.cluster, start=now - timedelta(days=2), capacity={H100: 32}, created_at=now
    )
    for department, (gpus, borrowing) in guarantees.items():
        QuotaFactory(
            cycle=cycle,
            department=department,
            gpu_model=H100,
            guaranteed_gpus=gpus,
            borrowing_limit_gpus=borrowing,
        )
    return cycle


def test_under_the_fixed_partition_a_full_department_waits_for_the_shared_pool(cluster_now):
    org, now = cluster_now
    job = pending(org, now, waited_h=2)
    queue = queue_summary(user=org.head_a, now=now)
    (queued,) = queue.jobs
    # Vision holds all 16 it owns and the pool's 8 are borrowed by radar: capacity.
    assert queued.job == job
    assert queued.reason == CAPACITY
    assert (queued.limits.used_gpus, queued.limits.limit_gpus, queued.limits.free_gpus) == (16, None, 0)
    assert queued.wait_s == 2 * 3600


def test_a_borrowing_limit_in_force_makes_it_a_quota_wait(cluster_now):
    org, now = cluster_now
    approve_cycle(org, now, {org.dept_a: (16, 0), org.dept_b: (8, None)})
    pending(org, now, waited_h=1)
    (queued,) = queue_summary(user=org.head_a, now=now).jobs
    # 16 held + 8 asked > 16 guaranteed + 0 borrowable.
    assert (queued.reason, queued.limits.limit_gpus) == (QUOTA, 16)


def test_within_quota_with_gpus_free_the_job_is_just_queued(cluster_now):
    org, now = cluster_now
    approve_cycle(org, now, {org.dept_a: (20, None), org.dept_b: (4, None)})
    Job.objects.filter(department=org.dept_b, state=JobState.RUNNING).update(gpu_count=12, gpu_milli=12_000)
    # Pool = 32 - 24 = 8, all borrowed by radar (12 - 4); vision still has 20 - 16 = 4 of its
    # own guarantee, and 32 - 28 = 4 GPUs are unheld: a 4-GPU job fits, an 8-GPU one does not.
    small = pending(org, now, waited_h=3, gpus=4)
    big = pending(org, now, waited_h=1, gpus=8)
    reasons = {q.job: q.reason for q in queue_summary(user=org.head_a, now=now).jobs}
    assert reasons == {small: QUEUED, big: CAPACITY}


def test_a_guarantee_free_on_paper_is_not_free_when_every_gpu_is_held(cluster_now):
    org, now = cluster_now
    approve_cycle(org, now, {org.dept_a: (20, None), org.dept_b: (4, None)})
    # Radar holds 16 (12 borrowed from a pool of 8): all 32 GPUs are held, vision's 4 included.
    pending(org, now, waited_h=1, gpus=4)
    (queued,) = queue_summary(user=org.head_a, now=now).jobs
    assert (queued.reason, queued.limits.free_gpus) == (CAPACITY, 0)


def test_the_schedulers_reason_wins_and_is_shown_as_written(cluster_now):
    org, now = cluster_now
    pending(org, now, waited_h=1, config={"pending_reason": "Priority"})
    (queued,) = queue_summary(user=org.head_a, now=now).jobs
    assert (queued.reason, queued.scheduler_reason) == (PRIORITY, "Priority")


def test_totals_longest_wait_and_per_department_counts_stay_in_scope(cluster_now):
    org, now = cluster_now
    pending(org, now, waited_h=5, gpus=8)
    pending(org, now, waited_h=1, gpus=16)
    pending(org, now, waited_h=9, gpus=8, department=org.dept_b)  # radar's: not for head A
    queue = queue_summary(user=org.head_a, now=now)
    assert (queue.totals.jobs, queue.totals.gpus, queue.totals.longest_wait_s) == (2, 24, 5 * 3600)
    assert set(queue.by_department) == {org.dept_a.pk}
    assert [q.wait_s for q in queue.jobs] == [5 * 3600, 3600]  # longest first
    both = UserFactory(username="head-both", role=("department_head", "vision", "radar"))
    assert queue_summary(user=both, now=now).totals.jobs == 3
    assert queue_summary(user=org.head_a, now=now, department=org.dept_a).totals.jobs == 2


def test_no_pending_jobs_is_an_empty_queue(org):
    queue = queue_summary(user=org.head_a, now=timezone.now())
    assert (queue.totals.jobs, queue.totals.longest_wait_s, queue.jobs) == (0, None, [])


def test_the_queue_costs_the_same_queries_for_many_jobs(cluster_now, django_assert_max_num_queries):
    org, now = cluster_now
    for hours in range(30):
        pending(org, now, waited_h=hours + 1)
        JobFactory(department=org.dept_b, cluster=org.cluster, gpu_count=1)
    other = DepartmentFactory(code="bev")
    NodeFactory(owner_department=other, cluster=org.cluster)
    with django_assert_max_num_queries(9):
        queue = queue_summary(user=org.head_a, now=now)
    assert queue.totals.jobs == 30


def test_wait_percentiles_are_over_jobs_started_in_the_range(org):
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    time_range = TimeRange("24h", now - timedelta(hours=24), now)
    started = now - timedelta(hours=2)
    for minutes in (10, 20, 60):
        submitted = started - timedelta(minutes=minutes)
        JobFactory(department=org.dept_a, cluster=org.cluster, submitted_at=submitted, started_at=started)
    # Started before the range: not counted, however long it waited.
    early = now - timedelta(days=2)
    JobFactory(
        department=org.dept_a, cluster=org.cluster, submitted_at=early - timedelta(days=1), started_at=early
    )
    stats = started_wait_stats(user=org.head_a, time_range=time_range, department=org.dept_a)
    # The org's job A started 2 h 50 min ago after 10 min: waits 10, 10, 20, 60 min.
    # P50 = 15 min; P95 at rank 2.85 = 20 + 0.85 x 40 = 54 min.
    assert stats.jobs == 4
    assert stats.p50_s == 15 * 60
    assert stats.p95_s == pytest.approx(54 * 60)
    assert started_wait_stats(user=org.head_b, time_range=time_range, department=org.dept_a).jobs == 0


def test_gpus_on_isolated_nodes_are_not_free(cluster_now):
    org, now = cluster_now
    # Radar gives back what it borrowed: the shared pool node is free on paper, but isolated.
    Job.objects.filter(department=org.dept_b, state=JobState.RUNNING).update(gpu_count=8, gpu_milli=8_000)
    Node.objects.filter(hostname="gpu-pool1").update(state=NodeState.ISOLATED)
    pending(org, now, waited_h=1)
    (queued,) = queue_summary(user=org.head_a, now=now).jobs
    assert (queued.reason, queued.limits.free_gpus) == (CAPACITY, 0)
    Node.objects.filter(hostname="gpu-pool1").update(state=NodeState.ACTIVE)
    (queued,) = queue_summary(user=org.head_a, now=now).jobs
    assert (queued.reason, queued.limits.free_gpus) == (QUEUED, 8)


def test_shared_gpus_count_by_their_share_in_the_queue(cluster_now):
    org, now = cluster_now
    approve_cycle(org, now, {org.dept_a: (16, None), org.dept_b: (8, None)})
    # Radar runs 15.5 GPUs instead of 16: 15 whole and one pod on half of a shared GPU, so
    # 32 - 16 - 15.5 = 0.5 GPU is unheld. A pending pod asking for 0.46 of a GPU fits it; counted
    # as a whole GPU it would wait for capacity.
    Job.objects.filter(department=org.dept_b, state=JobState.RUNNING).update(gpu_count=15, gpu_milli=15_000)
    JobFactory(department=org.dept_b, cluster=org.cluster, gpu_count=1, gpu_milli=500, gpu_model="")
    shared = pending(org, now, waited_h=2, gpus=1, gpu_milli=460)
    whole = pending(org, now, waited_h=1, gpus=1)
    jobs = {q.job: q for q in queue_summary(user=org.head_a, now=now).jobs}
    assert (jobs[shared].reason, jobs[shared].limits.free_gpus) == (QUEUED, 0.5)
    # behind it 0.5 - 0.46 = 0.04 GPU is left: the whole GPU waits for capacity
    assert (jobs[whole].reason, jobs[whole].ahead_gpus) == (CAPACITY, pytest.approx(0.46))


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    waits_us=st.lists(
        st.integers(min_value=-3_600_000_000, max_value=40 * 86_400_000_000), min_size=1, max_size=12
    )
)
def test_wait_percentiles_are_those_of_the_jobs_own_waits(org, waits_us):
    """On PostgreSQL the waits come out of the database as seconds: the same numbers, to the
    microsecond, as subtracting the two moments (a start before the submission waits 0)."""
    Job.objects.all().delete()
    now = timezone.now()
    started = now - timedelta(hours=1, microseconds=123_457)
    for wait in waits_us:
        JobFactory(
            department=org.dept_a,
            cluster=org.cluster,
            submitted_at=started - timedelta(microseconds=wait),
            started_at=started,
        )
    time_range = TimeRange("custom", now - timedelta(days=1), now)
    stats = started_wait_stats(user=org.committee, time_range=time_range, department=org.dept_a)
    expected = [max(0.0, timedelta(microseconds=wait).total_seconds()) for wait in waits_us]
    assert (stats.jobs, stats.p50_s, stats.p95_s) == (
        len(expected),
        percentile(expected, 50),
        percentile(expected, 95),
    )
