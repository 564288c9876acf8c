"""The engine on hand-built rows: metrics measured from the rollups and the raw samples become the
allocation findings with hand-checked figures, and incremental runs look only at recent families."""

from datetime import timedelta

import pytest
from django.utils import timezone

from efficiency.models import Recommendation
from efficiency.services.recommendations import recommendations_refresh
from tests.factories import GpuSampleFactory, JobFactory, JobHourFactory, NodeFactory


@pytest.fixture
def now():
    return timezone.now().replace(minute=30, second=0, microsecond=0)


def _hours(job, now, count, *, busy_share, sm_share=None):
    for back in range(1, count + 1):
        allocated = job.gpu_count * 3600.0
        JobHourFactory(
            job=job,
            hour=(now - timedelta(hours=back)).replace(minute=0),
            allocated_gpu_s=allocated,
            busy_gpu_s=busy_share * allocated,
            sm_active_busy_gpu_s=(sm_share if sm_share is not None else busy_share) * allocated,
        )


def test_eight_gpus_held_one_used_is_overrequested(org, now):
    node = NodeFactory(hostname="gpu-x01", owner_department=org.dept_a, cluster=org.cluster)
    job = JobFactory(
        cluster=org.cluster, department=org.dept_a, user_name="ann", name="probe-7", gpu_count=8,
        started_at=now - timedelta(hours=4), submitted_at=now - timedelta(hours=5),
    )  # fmt: skip
    job.nodes.add(node)
    _hours(job, now, 3, busy_share=0.11)
    # Raw samples: GPU 0 at 90%, the other seven at 0-2%, every 10 minutes for 3 hours.
    for minutes in range(0, 180, 10):
        at = now - timedelta(minutes=minutes + 5)
        for gpu in range(8):
            value = 90.0 if gpu == 0 else float(gpu % 3)
            GpuSampleFactory(node=node, gpu_index=gpu, ts=at, gr_engine_active_pct=value, util_pct=value)
    recommendations_refresh(now=now, full=True)
    rec = Recommendation.objects.get(rule="allocation.overrequested")
    assert rec.observed == "1 of 8 GPUs active"
    assert rec.change == "--gres=gpu:1"
    # 24 GPU-hours held in the window (8 GPUs x 3 h), 7/8 of them unused, over 14 days → per week.
    assert rec.gain_gpu_h_week == pytest.approx(24 * 7 / 8 / 2, rel=1e-3)
    assert rec.gain_pct == pytest.approx(87.5)


def test_gpus_idle_for_two_hours_propose_release(org, now):
    job = JobFactory(
        cluster=org.cluster, department=org.dept_a, user_name="bo", name="notebook", gpu_count=2,
        started_at=now - timedelta(hours=5), submitted_at=now - timedelta(hours=5),
    )  # fmt: skip
    job.nodes.add(org.node_a)
    _hours(job, now, 2, busy_share=0.001)  # the last two whole hours at 0.1%
    for back in (3, 4):  # busy before
        JobHourFactory(job=job, hour=(now - timedelta(hours=back)).replace(minute=0), allocated_gpu_s=7200.0,
                       busy_gpu_s=5000.0, sm_active_busy_gpu_s=4000.0)  # fmt: skip
    recommendations_refresh(now=now, full=True)
    rec = Recommendation.objects.get(rule="allocation.idle-held")
    assert rec.params["level"] == "release"
    assert rec.params["minutes"] == 120
    assert rec.observed.startswith("120 min")


def test_incremental_run_skips_families_that_did_not_run_recently(org, now):
    old = JobFactory(
        cluster=org.cluster, department=org.dept_b, user_name="cy", name="bench-1", gpu_count=8,
        submitted_at=now - timedelta(days=3), started_at=now - timedelta(days=3),
        ended_at=now - timedelta(days=2),
        config={"image": "pytorch/pytorch:2.3.1"},
    )  # fmt: skip
    _hours(old, now - timedelta(days=2), 3, busy_share=0.5)
    assert recommendations_refresh(now=now).created == 0  # incremental: nothing ran in the last hours
    assert recommendations_refresh(now=now, full=True).created == 1


def test_a_guarantee_far_above_demand_links_to_the_quota_proposal(org, now):
    from efficiency.models import Quota, QuotaCycle

    cycle = QuotaCycle.objects.create(
        cluster=org.cluster, start=now + timedelta(days=1), end=now + timedelta(days=15), status="proposed",
        origin="proposal", created_at=now, capacity={"h100": 64},
    )  # fmt: skip
    # 48 GPUs guaranteed, hourly demand 10–20 GPUs (P90 = 19): far above; proposed 36.
    Quota.objects.create(
        cycle=cycle, department=org.dept_a, gpu_model="h100", guaranteed_gpus=36, previous_gpus=48,
        proposed_gpus=36, demand_gpus=[10 + i % 11 for i in range(100)],
    )  # fmt: skip
    Quota.objects.create(
        cycle=cycle, department=org.dept_b, gpu_model="h100", guaranteed_gpus=16, previous_gpus=16,
        proposed_gpus=16, demand_gpus=[12.0] * 100,
    )  # fmt: skip
    recommendations_refresh(now=now, full=True)
    (rec,) = Recommendation.objects.filter(rule="capacity.guarantee-mismatch")
    assert rec.department == org.dept_a
    assert rec.params["cycle"] == cycle.pk
    assert rec.observed == "guaranteed 48 GPUs, demand p90 19"
    assert rec.gain_gpu_h_week == pytest.approx((48 - 19) * 24 * 7)
    # The next proposal meets demand: the recommendation closes by itself.
    Quota.objects.filter(department=org.dept_a).update(previous_gpus=20)
    recommendations_refresh(now=now, full=True)
    rec.refresh_from_db()
    assert rec.state == "closed"
