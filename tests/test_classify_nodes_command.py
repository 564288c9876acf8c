"""``manage.py classify_nodes`` classifies now, through the nightly service, and says why a node
was left unknown."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import CommandError, call_command

from efficiency.models import NodeClassification, NodeHour
from tests.factories import ClusterFactory, NodeFactory, NodeHourFactory

# 16:30 in Shanghai (TIME_ZONE): the last cycle is the 14 Shanghai days 6-19 November, which run
# from 5 Nov 16:00 UTC to 19 Nov 16:00 UTC.
NOW = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
CYCLE_START = datetime(2026, 11, 5, 16, 0, tzinfo=UTC)
CYCLE_HOURS = 14 * 24


def hours(node, start: datetime, count: int, busy_share: float) -> None:
    NodeHour.objects.bulk_create(
        NodeHourFactory.build(node=node, hour=start + timedelta(hours=n), busy_gpu_s=busy_share * 8 * 3600)
        for n in range(count)
    )


def classify(*args) -> str:
    out = StringIO()
    call_command("classify_nodes", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def cluster(db):
    """An idle node, a hot one, a fresh one with 10 covered hours and one never sampled."""
    cluster = ClusterFactory(slug="ad", name="AD platform")
    hours(NodeFactory(cluster=cluster, hostname="gpu-idle"), CYCLE_START, CYCLE_HOURS, 0.002)
    hours(NodeFactory(cluster=cluster, hostname="gpu-hot"), CYCLE_START, CYCLE_HOURS, 0.95)
    hours(NodeFactory(cluster=cluster, hostname="gpu-fresh"), CYCLE_START + timedelta(hours=326), 10, 0.5)
    NodeFactory(cluster=cluster, hostname="gpu-silent")
    with time_machine.travel(NOW, tick=False):
        yield cluster


def test_prints_nodes_per_class_and_why_the_others_are_unknown(cluster):
    text = classify()
    assert "Cycle 2026-11-06 – 2026-11-19 (Asia/Shanghai days); a class needs 24 covered hours." in text
    assert "ad: 3 nodes classified: idle 1, hot 1, fluctuating 0, steady 0, unknown 1" in text
    assert "unknown gpu-fresh: only 10 of 24 covered hours" in text
    assert (
        "not classified gpu-silent: no hourly rollups in the cycle 2026-11-06 – 2026-11-19 "
        "(no samples in those days)" in text
    )
    stored = dict(NodeClassification.objects.values_list("node__hostname", "node_class"))
    assert stored == {"gpu-idle": "idle", "gpu-hot": "hot", "gpu-fresh": "unknown"}


def test_running_twice_replaces_the_cycle(cluster):
    classify()
    classify()
    assert NodeClassification.objects.count() == 3


def test_day_classifies_the_cycle_ending_with_that_day(cluster):
    # Ending 12 November: the cycle 30 Oct - 12 Nov holds only 7 days of the data (168 hours).
    text = classify("--day", "2026-11-12")
    assert "Cycle 2026-10-30 – 2026-11-12" in text
    row = NodeClassification.objects.get(node__hostname="gpu-idle")
    assert (row.cycle_end, row.covered_hours) == (datetime(2026, 11, 12, 16, 0, tzinfo=UTC), 168)
    assert "not classified gpu-fresh: no hourly rollups in the cycle" in text  # its hours came later


def test_a_day_not_over_yet_is_refused(cluster):
    with pytest.raises(CommandError, match="2026-11-20 is not over yet; the latest whole day is 2026-11-19"):
        classify("--day", "2026-11-20")


def test_cluster_limits_the_run_and_an_unknown_one_is_named(cluster):
    other = ClusterFactory(slug="lab")
    hours(NodeFactory(cluster=other, hostname="lab-1"), CYCLE_START, CYCLE_HOURS, 0.5)
    text = classify("--cluster", "lab")
    assert "lab: 1 nodes classified" in text
    assert "ad:" not in text
    with pytest.raises(CommandError, match=r"No cluster 'nope'\. Clusters: ad, lab\."):
        classify("--cluster", "nope")


def test_thresholds_come_from_the_settings(cluster, settings):
    settings.PORTAL_NODE_CLASS_THRESHOLDS = {**settings.PORTAL_NODE_CLASS_THRESHOLDS, "min_covered_hours": 8}
    text = classify()
    assert "a class needs 8 covered hours" in text
    assert NodeClassification.objects.get(node__hostname="gpu-fresh").node_class == "steady"
