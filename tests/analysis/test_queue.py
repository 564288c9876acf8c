"""Why a pending job waits, and the queue summed up: hand-checked cases and invariants."""

from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.queue import (
    CAPACITY,
    DEPENDENCY,
    HELD,
    PRIORITY,
    QUEUED,
    QUOTA,
    SCHEDULER,
    WAIT_REASONS,
    PendingJob,
    QueueLimits,
    WaitingJob,
    classify_queue,
    classify_wait,
    scheduler_wait_reason,
    summarize_queue,
)

# Vision holds 40 of its 32 guaranteed + 16 borrowable H100s; 24 H100s are free in the cluster.
VISION = QueueLimits(used_gpus=40, limit_gpus=48, free_gpus=24)


def test_a_job_that_would_take_the_department_past_guarantee_plus_borrowing_waits_for_quota():
    # 40 held + 16 asked = 56 > 48: the quota stops it although 24 GPUs are free.
    assert classify_wait(gpus=16, limits=VISION) == QUOTA


def test_a_department_at_its_limit_waits_for_quota_even_for_one_gpu():
    assert classify_wait(gpus=1, limits=QueueLimits(used_gpus=48, limit_gpus=48, free_gpus=100)) == QUOTA


def test_a_job_within_quota_waits_for_capacity_when_too_few_gpus_are_free():
    # 40 + 8 = 48 is within the limit, but only 4 H100s are free.
    assert classify_wait(gpus=8, limits=QueueLimits(used_gpus=40, limit_gpus=48, free_gpus=4)) == CAPACITY


def test_without_a_borrowing_limit_only_capacity_can_hold_a_job_back():
    unlimited = QueueLimits(used_gpus=500, limit_gpus=None, free_gpus=0)
    assert classify_wait(gpus=8, limits=unlimited) == CAPACITY


def test_within_quota_with_gpus_free_the_job_is_just_queued():
    assert classify_wait(gpus=8, limits=VISION) == QUEUED


def test_the_schedulers_own_reason_comes_first():
    # Slurm says Priority although the portal's numbers would say quota.
    assert classify_wait(gpus=16, limits=VISION, scheduler_reason="Priority") == PRIORITY
    assert classify_wait(gpus=8, limits=VISION, scheduler_reason="QOSMaxGRESPerAccount") == QUOTA
    assert classify_wait(gpus=8, limits=VISION, scheduler_reason="Resources") == CAPACITY


def test_slurm_reason_none_means_the_scheduler_gave_no_reason():
    assert scheduler_wait_reason("None") is None
    assert scheduler_wait_reason("") is None
    assert classify_wait(gpus=16, limits=VISION, scheduler_reason="None") == QUOTA


def test_slurm_reason_codes_are_grouped_by_what_holds_the_job_back():
    expected = {
        "QOSMaxGRESPerAccount": QUOTA,
        "QOSGrpGRES": QUOTA,
        "AssocGrpGRES": QUOTA,
        "AssocMaxJobsLimit": QUOTA,
        "MaxGRESPerAccount": QUOTA,
        "AccountingPolicy": QUOTA,
        "Resources": CAPACITY,
        "ReqNodeNotAvail, UnavailableNodes:gpu-[001-002]": CAPACITY,
        "Priority": PRIORITY,
        "Dependency": DEPENDENCY,
        "DependencyNeverSatisfied": DEPENDENCY,
        "JobHeldUser": HELD,
        "JobHeldAdmin": HELD,
        "BeginTime": HELD,
        "PartitionDown": SCHEDULER,
        "BadConstraints": SCHEDULER,
    }
    assert {code: scheduler_wait_reason(code) for code in expected} == expected


def test_queue_summary_counts_jobs_and_gpus_per_reason_and_the_longest_wait():
    totals = summarize_queue(
        [
            WaitingJob(gpus=8, wait_s=3600, reason=QUOTA),
            WaitingJob(gpus=16, wait_s=600, reason=QUOTA),
            WaitingJob(gpus=4, wait_s=7200, reason=CAPACITY),
        ]
    )
    assert (totals.jobs, totals.gpus, totals.longest_wait_s) == (3, 28, 7200)
    assert totals.by_reason == {QUOTA: (2, 24), CAPACITY: (1, 4)}


def test_an_empty_queue_has_no_longest_wait():
    totals = summarize_queue([])
    assert (totals.jobs, totals.gpus, totals.longest_wait_s, totals.by_reason) == (0, 0, None, {})


gpus = st.integers(min_value=0, max_value=512)
limits = st.builds(
    QueueLimits,
    used_gpus=st.integers(min_value=0, max_value=1024),
    limit_gpus=st.none() | st.integers(min_value=0, max_value=1024),
    free_gpus=st.integers(min_value=0, max_value=1024),
)


@given(gpus, limits)
def test_without_a_scheduler_reason_quota_is_exactly_going_past_the_limit(asked, limit):
    reason = classify_wait(gpus=asked, limits=limit)
    past_limit = limit.limit_gpus is not None and limit.used_gpus + asked > limit.limit_gpus
    assert (reason == QUOTA) == past_limit
    if not past_limit:
        assert reason == (CAPACITY if limit.free_gpus < asked else QUEUED)


@given(gpus, limits, st.integers(min_value=0, max_value=512))
def test_holding_more_gpus_never_frees_a_job_from_its_quota(asked, limit, more):
    before = classify_wait(gpus=asked, limits=limit)
    after = classify_wait(
        gpus=asked, limits=QueueLimits(limit.used_gpus + more, limit.limit_gpus, limit.free_gpus)
    )
    if before == QUOTA:
        assert after == QUOTA


@given(
    st.lists(st.builds(WaitingJob, gpus=gpus, wait_s=st.floats(0, 1e7), reason=st.sampled_from(WAIT_REASONS)))
)
def test_the_reasons_add_up_to_the_whole_queue(jobs):
    totals = summarize_queue(jobs)
    assert sum(count for count, _ in totals.by_reason.values()) == totals.jobs == len(jobs)
    assert sum(held for _, held in totals.by_reason.values()) == totals.gpus
    assert totals.longest_wait_s == (max(job.wait_s for job in jobs) if jobs else None)


def test_each_job_is_judged_as_if_the_jobs_ahead_of_it_in_its_queue_had_started():
    vision = ("vision", "H100")
    jobs = [PendingJob(vision, 4), PendingJob(vision, 4), PendingJob(vision, 8)]
    # 40 + 4 = 44 and 44 + 4 = 48 fit the limit of 48; the third would make 56.
    waits = classify_queue(jobs, {vision: VISION})
    assert [w.reason for w in waits] == [QUEUED, QUEUED, QUOTA]
    assert [w.ahead_gpus for w in waits] == [0, 4, 8]


def test_jobs_ahead_use_up_the_free_gpus_first():
    pool = ("radar", "H100")
    jobs = [PendingJob(pool, 8), PendingJob(pool, 8)]
    waits = classify_queue(jobs, {pool: QueueLimits(used_gpus=100, limit_gpus=None, free_gpus=10)})
    assert [w.reason for w in waits] == [QUEUED, CAPACITY]  # 10 - 8 = 2 left for the second


def test_held_jobs_and_other_queues_do_not_stand_ahead():
    vision, radar = ("vision", "H100"), ("radar", "H100")
    jobs = [
        PendingJob(vision, 8, scheduler_reason="JobHeldUser"),
        PendingJob(radar, 8),
        PendingJob(vision, 8),
    ]
    limits = {vision: QueueLimits(0, None, 8), radar: QueueLimits(0, None, 8)}
    assert [w.reason for w in classify_queue(jobs, limits)] == [HELD, QUEUED, QUEUED]


def test_a_queue_without_limits_known_has_nothing_free():
    (wait,) = classify_queue([PendingJob(("unknown", ""), 1)], {})
    assert wait.reason == CAPACITY


@given(st.lists(gpus, max_size=20), limits)
def test_in_one_queue_once_a_job_waits_for_quota_every_later_one_does(asked, limit):
    queue = ("vision", "H100")
    reasons = [w.reason for w in classify_queue([PendingJob(queue, g) for g in asked], {queue: limit})]
    if QUOTA in reasons:
        assert set(reasons[reasons.index(QUOTA) :]) == {QUOTA}
    # The first job in the queue is judged against the limits alone.
    if asked:
        assert reasons[0] == classify_wait(gpus=asked[0], limits=limit)
