"""The reference scenario's node classes come back out of its dcgm-exporter pages.

The simulator paints ~20% idle, ~20% hot, ~30% fluctuating and ~30% steady nodes. Here a week of
its ``/metrics`` pages, scraped every 20 minutes, goes through the real collector; each node-hour's
utilization is computed as the portal's rollups define it (busy / sampled, busy from
GR_ENGINE_ACTIVE where reported, else GPU_UTIL, over the node's GPUs and the hour's samples), and
the default thresholds must find the designed classes again.
"""

from collections import Counter, defaultdict
from datetime import timedelta

import pytest

from efficiency.analysis.node_classes import (
    NODE_CLASSES,
    UNKNOWN,
    NodeClassResult,
    NodeHourUtil,
    class_shares,
    classify_nodes,
)
from efficiency.collectors.dcgm import gpu_readings_from_exposition
from efficiency.simulator.model import ClusterSimulator
from tests.simulator.conftest import START, WEEK_END

SCRAPE_EVERY = timedelta(minutes=20)  # three samples per hour, as a slow Prometheus would keep
HOUR_MS = 3_600_000


def _node_hours(sim: ClusterSimulator) -> list[NodeHourUtil]:
    """One row per (node, hour) of the week, from scraped and parsed exposition text."""
    node_ids = {hostname: index for index, hostname in enumerate(sim.hostnames())}
    busy_pct: dict[tuple[int, int], float] = defaultdict(float)
    sampled: dict[tuple[int, int], int] = defaultdict(int)
    at = START
    while at < WEEK_END:
        scrape_ms = int(at.timestamp() * 1000)
        outcome = gpu_readings_from_exposition(sim.exposition(at), scrape_time_ms=scrape_ms)
        assert not outcome.rejected, outcome.rejected[:3]
        for reading in outcome.records:
            activity = reading.gr_engine_active_pct
            if activity is None:
                activity = reading.util_pct
            if activity is None:
                continue  # a GPU that fell off the bus reports DCGM blanks: not sampled
            key = (node_ids[reading.hostname], reading.timestamp_ms // HOUR_MS)
            # Equal scrape intervals, so busy / sampled GPU-seconds is the mean of the samples.
            busy_pct[key] += activity
            sampled[key] += 1
        at += SCRAPE_EVERY

    first_hour = int(START.timestamp() * 1000) // HOUR_MS
    hour_count = int((WEEK_END - START) / timedelta(hours=1))
    rows = []
    for node_id in node_ids.values():
        for hour_index in range(first_hour, first_hour + hour_count):
            key = (node_id, hour_index)
            util_pct = busy_pct[key] / sampled[key] if sampled[key] else None
            hour = START + timedelta(hours=hour_index - first_hour)
            rows.append(NodeHourUtil(node_id=node_id, hour=hour, util_pct=util_pct))
    return rows


@pytest.fixture(scope="module")
def classified(sim: ClusterSimulator) -> list[NodeClassResult]:
    return classify_nodes(_node_hours(sim))


@pytest.fixture(scope="module")
def confusion(sim: ClusterSimulator, classified: list[NodeClassResult]) -> Counter[tuple[str, str]]:
    """(designed class, found class) → number of nodes."""
    hostnames = sim.hostnames()
    return Counter((sim.node_class(hostnames[r.node_id]), r.node_class) for r in classified)


def test_every_node_has_enough_covered_hours(sim, classified):
    assert len(classified) == len(sim.hostnames())
    assert [r for r in classified if r.node_class == UNKNOWN] == []


def test_found_shares_are_within_five_points_of_the_designed_shares(sim, classified, confusion):
    designed = sim.designed_shares()
    found = class_shares(classified)
    for name in NODE_CLASSES:
        assert found[name] == pytest.approx(designed[name], abs=0.05), (found, designed, confusion)


def test_nine_in_ten_nodes_get_their_designed_class(classified, confusion):
    agreeing = sum(count for (designed, found), count in confusion.items() if designed == found)
    assert agreeing >= 0.9 * len(classified), sorted(confusion.items())
