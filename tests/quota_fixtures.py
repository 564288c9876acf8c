"""A small cluster with a known demand history, for the quota planning tests.

Vision (hot) owns 2 nodes (16 GPUs) and radar (idle) owns 3 (24 GPUs): capacity 40 H100.
Since a day before the demand window, vision runs two 8-GPU jobs and has two more 8-GPU jobs
waiting that never start: its demand is 32 GPUs every hour, its use 16. Radar runs nothing.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from efficiency.analysis.quotas import ProposalSettings
from efficiency.choices import JobState, Role
from efficiency.models import Cluster, Department
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
