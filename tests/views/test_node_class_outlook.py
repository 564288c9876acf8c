"""A node without a class says why and when it will get one; the page explains its two
utilization figures."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from efficiency.models import NodeHour
from tests.factories import NodeClassificationFactory, NodeFactory, NodeHourFactory

# 16:30 in Shanghai (TIME_ZONE). The nightly run at 00:20 UTC classifies the cycle that ended at
# the last Shanghai midnight (16:00 UTC).
NOW = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)


@pytest.fixture
def fresh(org):
    """A node connected 11 hours ago (22:00 - 08:00 UTC covered)."""
    node = NodeFactory(hostname="gpu-new", cluster=org.cluster, owner_department=org.dept_a)
    NodeHour.objects.bulk_create(
        NodeHourFactory.build(node=node, hour=datetime(2026, 11, 19, 22, tzinfo=UTC) + timedelta(hours=n))
        for n in range(11)
    )
    org.fresh = node
    with time_machine.travel(NOW, tick=False):
        yield org


def outlook(client, node) -> str:
    body = client.get(f"/nodes/{node.pk}/").content.decode()
    if 'id="class-outlook"' not in body:
        return ""
    start = body.index('id="class-outlook"')
    return body[start : body.index("</p>", start)]


def test_a_fresh_node_says_what_it_lacks_and_the_day_it_will_be_classified(client, fresh):
    client.force_login(fresh.head_a)
    # 11 hours so far (the one under way among them) + 7 until Shanghai midnight = 18 < 24: not
    # tonight's cycle; the next
    # one (ending 22 Nov 00:00 in Shanghai) holds 42, and the run on 22 November classifies it.
    text = outlook(client, fresh.fresh)
    assert "Not classified yet: needs 24 covered hours (hours with samples) within whole days" in text
    assert "11 so far" in text
    assert "First classification expected on 2026-11-22" in text


def test_a_node_left_unknown_by_the_last_run_says_so_too(client, fresh):
    NodeClassificationFactory(node=fresh.fresh, node_class="unknown", covered_hours=0, reason="too_few_hours")
    client.force_login(fresh.admin)
    assert "First classification expected on 2026-11-22" in outlook(client, fresh.fresh)


def test_a_classified_node_has_no_outlook_and_its_figures_are_explained(client, fresh):
    NodeClassificationFactory(node=fresh.fresh, node_class="steady")
    client.force_login(fresh.admin)
    assert outlook(client, fresh.fresh) == ""
    body = client.get(f"/nodes/{fresh.fresh.pk}/").content.decode()
    assert "steady around 55.0%" in body
    assert "the plain mean of the node's hourly utilization over the covered hours of its cycle" in body


def test_a_lower_threshold_from_the_settings_moves_the_day(client, fresh, settings):
    settings.PORTAL_NODE_CLASS_THRESHOLDS = {**settings.PORTAL_NODE_CLASS_THRESHOLDS, "min_covered_hours": 12}
    client.force_login(fresh.admin)
    # 18 covered hours by Shanghai midnight: tonight's run (21 November) classifies it.
    assert "First classification expected on 2026-11-21" in outlook(client, fresh.fresh)


def test_a_retired_node_has_no_outlook(client, fresh):
    fresh.fresh.state = "retired"
    fresh.fresh.save()
    client.force_login(fresh.admin)
    assert outlook(client, fresh.fresh) == ""
