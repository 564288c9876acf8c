"""A small cluster with a known demand history, for the quota planning tests.

Vision (hot) owns 2 nodes (16 GPUs) and radar (idle) owns 3 (24 GPUs): capacity 40 H100.
Since a day before the demand window, vision runs two 8-GPU jobs and has two more 8-GPU jobs
waiting that never start: its demand is 32 GPUs every hour, its use 16. Radar runs nothing.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from efficiency.analysis.quotas import ProposalSettings
from efficiency.choices import JobState, QuotaCycleStatus, Role
from efficiency.models import Cluster, Department, Quota, QuotaCycle
from tests.factories import ClusterFactory, DepartmentFactory, JobFactory, NodeFactory, UserFactory

H100 = "NVIDIA H100 80GB HBM3"
# 12:00 in Asia/Shanghai; the cycle boundary is local midnight, 2026-11-15 16:00 UTC.
NOW = datetime(2026, 11, 16, 4, 0, tzinfo=UTC)
MIDNIGHT = datetime(2026, 11, 15, 16, 0, tzinfo=UTC)
WINDOW_START = MIDNIGHT - timedelta(days=14)
SETTINGS = ProposalSettings(percentile=75, max_change_pct=25, floor_gpus=0, guaranteed_share=0.8)


@dataclass
class Planning:
    cluster: Cluster
    vision: Department
    radar: Department
    committee: object
    admin: object
    head_vision: object
    head_radar: object


def make_planning() -> Planning:
    cluster = ClusterFactory(slug="ad-platform", name="AD platform")
    vision = DepartmentFactory(code="vision", name="Vehicle vision")
    radar = DepartmentFactory(code="radar", name="Radar perception")
    for index in range(2):
        NodeFactory(cluster=cluster, hostname=f"gpu-v{index}", owner_department=vision)
    for index in range(3):
        NodeFactory(cluster=cluster, hostname=f"gpu-r{index}", owner_department=radar)
    since = WINDOW_START - timedelta(days=1)
    for _ in range(2):
        JobFactory(
            cluster=cluster, department=vision, gpu_model="h100", gpu_count=8,
            submitted_at=since, started_at=since, state=JobState.RUNNING,
        )  # fmt: skip
        JobFactory(
            cluster=cluster, department=vision, gpu_model="h100", gpu_count=8,
            submitted_at=since, started_at=None, state=JobState.PENDING,
        )  # fmt: skip
    return Planning(
        cluster=cluster,
        vision=vision,
        radar=radar,
        committee=UserFactory(username="chair", role=Role.COMMITTEE),
        admin=UserFactory(username="ops", role=Role.PLATFORM_ADMIN),
        head_vision=UserFactory(username="head-vision", role=(Role.DEPARTMENT_HEAD, "vision")),
        head_radar=UserFactory(username="head-radar", role=(Role.DEPARTMENT_HEAD, "radar")),
    )


def past_cycles_make(
    planning: Planning, count: int, *, approved_by=None, extra_departments=()
) -> list[QuotaCycle]:
    """``count`` approved 14-day cycles before the demand window, newest first: vision guaranteed
    16 H100, radar 20, and each of ``extra_departments`` 1 (so a list has rows to repeat over)."""
    cycles = []
    for n in range(1, count + 1):
        start = WINDOW_START - timedelta(days=14 * n)
        cycle = QuotaCycle.objects.create(
            cluster=planning.cluster, start=start, end=start + timedelta(days=14),
            status=QuotaCycleStatus.APPROVED, capacity={H100: 40}, created_at=start,
            approved_by=approved_by,
        )  # fmt: skip
        Quota.objects.create(cycle=cycle, department=planning.vision, gpu_model=H100, guaranteed_gpus=16)
        Quota.objects.create(cycle=cycle, department=planning.radar, gpu_model=H100, guaranteed_gpus=20)
        for department in extra_departments:
            Quota.objects.create(cycle=cycle, department=department, gpu_model=H100, guaranteed_gpus=1)
        cycles.append(cycle)
    return cycles
