"""The node page compares its range with the period of the same length just before."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from efficiency.models import NodeHour

NOW = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
RANGE_END = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)  # range=24h ends after the current hour


def node_hour(node, hour, *, busy_share: float, allocated_share: float) -> NodeHour:
    gpu_s = node.gpu_count * 3600.0
    return NodeHour(
        node=node, hour=hour, cluster=node.cluster, owner_department=node.owner_department,
        gpu_count=node.gpu_count, available_gpu_s=gpu_s, allocated_gpu_s=gpu_s * allocated_share,
        sampled_gpu_s=gpu_s, busy_gpu_s=gpu_s * busy_share, gpu_util_busy_gpu_s=gpu_s * busy_share,
        sm_active_busy_gpu_s=gpu_s * busy_share, sample_count=60,
    )  # fmt: skip


@pytest.fixture
def two_days(org):
    """Node A: 30% busy and 50% allocated over the day before the range, 50% and 75% within it."""
    rows = []
    for index in range(48):
        hour = RANGE_END - timedelta(hours=48 - index)
        in_range = index >= 24
        rows.append(
            node_hour(
                org.node_a,
                hour,
                busy_share=0.5 if in_range else 0.3,
                allocated_share=0.75 if in_range else 0.5,
            )
        )
    NodeHour.objects.bulk_create(rows)
    with time_machine.travel(NOW, tick=False):
        yield org


def test_node_page_shows_the_change_against_the_previous_period(client, two_days):
    client.force_login(two_days.head_a)
    body = client.get(f"/nodes/{two_days.node_a.pk}/?range=24h").content.decode()
    assert "no previous period to compare" not in body
    utilization = body[body.index('id="card-utilization"') : body.index('id="card-allocation"')]
    allocation = body[body.index('id="card-allocation"') : body.index('id="card-gpu-hours"')]
    assert "50.0%" in utilization
    assert "+20.0 pp vs previous period" in utilization
    assert "75.0%" in allocation
    assert "+25.0 pp vs previous period" in allocation


def test_node_page_says_when_there_is_no_previous_period(client, two_days):
    NodeHour.objects.filter(hour__lt=RANGE_END - timedelta(hours=24)).delete()
    client.force_login(two_days.head_a)
    body = client.get(f"/nodes/{two_days.node_a.pk}/?range=24h").content.decode()
    assert "no previous period to compare" in body
