"""The reference scenario's node classes come back out of the portal's own pipeline.

The simulator paints ~20% idle, ~20% hot, ~30% fluctuating and ~30% steady nodes. Here a week of
its dcgm-exporter pages, scraped every 20 minutes, goes the production way: the real collector
parses each page, ``gpu_readings_ingest`` stores the samples (a day's scrapes at a time),
``rollups_refresh`` computes the node-hours and ``node_classes_refresh`` classifies the nodes with
the default thresholds; the designed classes must be found again. The week is ingested once for
the module.
"""

from collections import Counter
from datetime import timedelta

import pytest
from django.db import transaction

from efficiency.analysis.node_classes import NODE_CLASSES, UNKNOWN
from efficiency.collectors.dcgm import gpu_readings_from_exposition
from efficiency.models import NodeClassification
from efficiency.services.classification import node_classes_refresh
from efficiency.services.ingest import gpu_readings_ingest
from efficiency.services.rollups import rollups_refresh
from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes
from tests.factories import ClusterFactory, NodeFactory
from tests.simulator.conftest import START, WEEK_END

# The tests read what the module fixture stored (pytest-django creates the test database only for
# tests that ask for it).
pytestmark = pytest.mark.django_db

SCRAPE_EVERY = timedelta(minutes=20)  # three samples per hour, as a slow Prometheus would keep


@pytest.fixture(scope="module")
def found_classes(sim: ClusterSimulator, django_db_setup, django_db_blocker) -> dict[str, str]:
    """hostname → class stored by the classification service after a week of scrapes."""
    with django_db_blocker.unblock(), transaction.atomic():
        cluster = ClusterFactory(slug="reference")
        for spec in reference_nodes():
            NodeFactory(
                cluster=cluster, hostname=spec.hostname, gpu_model=spec.gpu_model,
                gpu_count=spec.gpu_count, owner_department=None,
            )  # fmt: skip
        for day in range(7):
            # One day of scrapes per ingest call, as a Prometheus backfill delivers them.
            readings, at = [], START + timedelta(days=day)
            while at < START + timedelta(days=day + 1):
                scrape_ms = int(at.timestamp() * 1000)
                page = gpu_readings_from_exposition(sim.exposition(at), scrape_time_ms=scrape_ms)
                assert not page.rejected, page.rejected[:3]
                readings += page.records
                at += SCRAPE_EVERY
            result = gpu_readings_ingest(
                cluster=cluster, readings=readings, interval_s=int(SCRAPE_EVERY.total_seconds()), now=at
            )
            assert (result.stored, result.rejected) == (len(readings), [])
        rollups_refresh(now=WEEK_END, max_hours=1_000_000)
        assert node_classes_refresh(cluster=cluster, now=WEEK_END, cycle_days=7) == len(sim.hostnames())
        found = dict(
            NodeClassification.objects.filter(node__cluster=cluster).values_list(
                "node__hostname", "node_class"
            )
        )
        yield found
        transaction.set_rollback(True)


@pytest.fixture(scope="module")
def confusion(sim: ClusterSimulator, found_classes: dict[str, str]) -> Counter[tuple[str, str]]:
    """(designed class, found class) → number of nodes."""
    return Counter((sim.node_class(hostname), found) for hostname, found in found_classes.items())


def test_every_node_has_enough_covered_hours(sim, found_classes):
    assert sorted(found_classes) == sorted(sim.hostnames())
    assert [host for host, found in found_classes.items() if found == UNKNOWN] == []


def test_found_shares_are_within_five_points_of_the_designed_shares(sim, found_classes, confusion):
    designed = sim.designed_shares()
    counts = Counter(found_classes.values())
    for name in NODE_CLASSES:
        found = counts[name] / len(found_classes)
        assert found == pytest.approx(designed[name], abs=0.05), (name, counts, designed, confusion)


def test_nine_in_ten_nodes_get_their_designed_class(found_classes, confusion):
    agreeing = sum(count for (designed, found), count in confusion.items() if designed == found)
    assert agreeing >= 0.9 * len(found_classes), sorted(confusion.items())
