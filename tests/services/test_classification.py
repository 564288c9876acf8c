"""Node classes over a cycle of whole portal days, stored with the zone that cut them."""

from datetime import UTC, datetime, timedelta

import pytest

from efficiency.models import NodeClassification, NodeHour
from efficiency.services.classification import node_classes_refresh
from tests.factories import ClusterFactory, NodeFactory

# 09:00 UTC on 30 November is 17:00 in Shanghai: its last midnight was 16:00 UTC on the 29th.
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
SHANGHAI_MIDNIGHT = datetime(2026, 11, 29, 16, 0, tzinfo=UTC)


@pytest.fixture
def node(db):
    return NodeFactory(cluster=ClusterFactory(slug="c1"), hostname="gpu-001", gpu_count=8)


def busy_hours(node, start, count, util_pct):
    NodeHour.objects.bulk_create(
        NodeHour(
            node=node, hour=start + timedelta(hours=i), cluster=node.cluster, gpu_count=8,
            available_gpu_s=28_800, allocated_gpu_s=0, sampled_gpu_s=28_800,
            busy_gpu_s=28_800 * util_pct / 100, gpu_util_busy_gpu_s=0, sm_active_busy_gpu_s=0,
            sample_count=480,
        )
        for i in range(count)
    )  # fmt: skip


def test_cycle_ends_at_the_last_midnight_of_the_portal_zone(node, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    busy_hours(node, SHANGHAI_MIDNIGHT - timedelta(hours=30), 30, util_pct=90)  # in the cycle
    busy_hours(node, SHANGHAI_MIDNIGHT, 10, util_pct=0)  # today in Shanghai: not yet
    node_classes_refresh(cluster=node.cluster, now=NOW, cycle_days=14)
    (row,) = NodeClassification.objects.all()
    assert (row.cycle_start, row.cycle_end) == (SHANGHAI_MIDNIGHT - timedelta(days=14), SHANGHAI_MIDNIGHT)
    assert (row.day_zone, row.node_class, row.covered_hours) == ("Asia/Shanghai", "hot", 30)


def test_a_cycle_over_a_daylight_saving_change_is_whole_local_days(node, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    busy_hours(node, datetime(2026, 3, 25, tzinfo=UTC), 30, util_pct=90)
    node_classes_refresh(cluster=node.cluster, now=datetime(2026, 4, 2, 9, 0, tzinfo=UTC), cycle_days=14)
    (row,) = NodeClassification.objects.all()
    assert row.cycle_end - row.cycle_start == timedelta(days=14, hours=-1)  # 29 March had 23 hours
    assert row.cycle_start == datetime(2026, 3, 18, 23, 0, tzinfo=UTC)  # midnight, +01:00


def test_rerun_after_the_zone_changed_replaces_the_overlapping_cycle_of_the_old_zone(node, settings):
    busy_hours(node, datetime(2026, 11, 1, tzinfo=UTC), 30, util_pct=90)
    busy_hours(node, SHANGHAI_MIDNIGHT - timedelta(hours=30), 30, util_pct=90)
    settings.TIME_ZONE = "UTC"
    node_classes_refresh(cluster=node.cluster, now=NOW - timedelta(days=20), cycle_days=14)  # history
    node_classes_refresh(cluster=node.cluster, now=NOW, cycle_days=14)
    settings.TIME_ZONE = "Asia/Shanghai"
    node_classes_refresh(cluster=node.cluster, now=NOW, cycle_days=14)

    rows = list(NodeClassification.objects.order_by("cycle_end").values_list("day_zone", "cycle_end"))
    # The UTC cycle up to 30 November overlapped the new one: gone; the older one is history.
    assert rows == [("UTC", datetime(2026, 11, 10, tzinfo=UTC)), ("Asia/Shanghai", SHANGHAI_MIDNIGHT)]
