"""``/api/v1/nodes/``: class, utilization and coverage over a range, sorted, scoped, in a fixed
number of queries; platform admins edit rack, owner, RDMA and state reason (audited)."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.models import NodeHour
from efficiency.selectors.inventory import NODE_SORTS
from tests.factories import NodeClassificationFactory, NodeFactory, NodeHourFactory

NOW = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
RANGE_END = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def hours(node, count: int, *, busy: float, sampled: float = 1.0) -> None:
    NodeHour.objects.bulk_create(
        NodeHourFactory.build(
            node=node,
            hour=RANGE_END - timedelta(hours=n + 1),
            sampled_gpu_s=sampled * 8 * 3600,
            busy_gpu_s=busy * sampled * 8 * 3600,
        )
        for n in range(count)
    )


@pytest.fixture
def fleet(org):
    org.shared = NodeFactory(hostname="gpu-s01", cluster=org.cluster, owner_department=None)
    hours(org.node_a, 48, busy=0.6)
    hours(org.node_b, 48, busy=0.05)
    hours(org.shared, 48, busy=0.3, sampled=0.5)
    NodeClassificationFactory(node=org.node_b, node_class="idle", reason="idle_hours")
    with time_machine.travel(NOW, tick=False):
        yield org


def listing(client, query: str = "") -> list[dict]:
    response = client.get(f"/api/v1/nodes/?{query}")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_the_list_gives_class_utilization_and_coverage(client, fleet):
    client.force_login(fleet.committee)
    by_host = {row["hostname"]: row for row in listing(client, "range=24h")}
    assert (by_host["gpu-b01"]["node_class"], by_host["gpu-b01"]["util_pct"]) == ("idle", pytest.approx(5.0))
    assert by_host["gpu-s01"]["coverage_pct"] == pytest.approx(50.0)
    assert by_host["gpu-a01"]["node_class"] is None  # never classified


def test_sort_orders_by_utilization_either_way(client, fleet):
    client.force_login(fleet.admin)
    assert [row["hostname"] for row in listing(client, "sort=utilization")] == [
        "gpu-b01",
        "gpu-s01",
        "gpu-a01",
    ]
    assert [row["hostname"] for row in listing(client, "sort=-utilization")] == [
        "gpu-a01",
        "gpu-s01",
        "gpu-b01",
    ]


# Read-only: the client and the fleet may be shared by every example.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from(sorted(NODE_SORTS)), descending=st.booleans(), owner=st.sampled_from(["", "vision"])
)
def test_every_sort_answers_every_visible_node_once_in_order(client, fleet, key, descending, owner):
    client.force_login(fleet.admin)
    query = f"sort={'-' if descending else ''}{key}" + (f"&owner={owner}" if owner else "")
    rows = listing(client, query)
    assert sorted(row["hostname"] for row in rows) == (
        ["gpu-a01"] if owner else ["gpu-a01", "gpu-b01", "gpu-s01"]
    )
    if key in ("utilization", "coverage"):
        field = {"utilization": "util_pct", "coverage": "coverage_pct"}[key]
        values = [row[field] for row in rows if row[field] is not None]
        assert values == sorted(values, reverse=descending)


def test_an_unknown_sort_or_range_is_a_400_naming_it(client, fleet):
    client.force_login(fleet.admin)
    response = client.get("/api/v1/nodes/?sort=-speed")
    assert response.status_code == 400
    assert "Cannot sort by -speed; sort by one of: hostname" in response.json()["sort"][0]
    assert "range" in client.get("/api/v1/nodes/?range=1y").json()


def test_a_head_lists_their_own_nodes(client, fleet):
    client.force_login(fleet.head_b)
    assert [row["hostname"] for row in listing(client, "sort=-coverage")] == ["gpu-b01"]


def test_the_list_costs_the_same_queries_for_more_nodes(client, fleet, django_assert_max_num_queries):
    client.force_login(fleet.admin)
    with django_assert_max_num_queries(10) as few:
        listing(client, "sort=class")
    for n in range(10):
        hours(NodeFactory(hostname=f"gpu-m{n}", cluster=fleet.cluster), 2, busy=0.1)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert len(listing(client, "sort=class")) == 13


# --- PATCH -----------------------------------------------------------------------------------


def test_an_admin_sets_rack_owner_rdma_and_reason_and_the_trail_records_who(client, org):
    client.force_login(org.admin)
    node = org.node_a
    response = client.patch(
        f"/api/v1/nodes/{node.pk}/",
        {
            "fault_domain": "rack-07",
            "owner_department": "radar",
            "rdma_capable": False,
            "state_reason": "moved",
        },
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["owner_department"] == "radar"  # was vision
    node.refresh_from_db()
    assert (node.fault_domain, node.owner_department, node.rdma_capable, node.state_reason) == (
        "rack-07", org.dept_b, False, "moved",
    )  # fmt: skip
    record = node.history.latest()
    assert record.history_user == org.admin
    delta = record.diff_against(record.prev_record)
    assert {change.field for change in delta.changes} == {
        "fault_domain", "owner_department", "rdma_capable", "state_reason",
    }  # fmt: skip


def test_null_owner_returns_a_node_to_the_shared_pool(client, org):
    client.force_login(org.admin)
    response = client.patch(
        f"/api/v1/nodes/{org.node_a.pk}/", {"owner_department": None}, content_type="application/json"
    )
    assert response.status_code == 200
    org.node_a.refresh_from_db()
    assert org.node_a.owner_department is None


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"owner_department": "nope"}, "owner_department", "Object with code=nope does not exist."),
        ({"fault_domain": "r" * 101}, "fault_domain", "Ensure this field has no more than 100 characters."),
        ({"rdma_capable": "perhaps"}, "rdma_capable", "Must be a valid boolean."),
        (
            {"hostname": "evil"},
            "hostname",
            "Cannot be changed here; editable: fault_domain, owner_department",
        ),
        ({}, "non_field_errors", "Send at least one of: fault_domain, owner_department"),
    ],
)
def test_bad_edits_are_400s_that_say_what_is_wrong_and_change_nothing(client, org, body, field, message):
    client.force_login(org.admin)
    before = org.node_a.history.count()
    response = client.patch(f"/api/v1/nodes/{org.node_a.pk}/", body, content_type="application/json")
    assert response.status_code == 400
    assert message in response.json()[field][0]
    org.node_a.refresh_from_db()
    assert (org.node_a.hostname, org.node_a.fault_domain) == ("gpu-a01", "rack-01")
    assert org.node_a.history.count() == before


@pytest.mark.parametrize("role", ["head_a", "committee"])
def test_other_roles_may_not_edit(client, org, role):
    client.force_login(getattr(org, role))
    response = client.patch(
        f"/api/v1/nodes/{org.node_a.pk}/", {"fault_domain": "rack-09"}, content_type="application/json"
    )
    assert response.status_code == 403
    org.node_a.refresh_from_db()
    assert org.node_a.fault_domain == "rack-01"


def test_put_is_not_offered(client, org):
    client.force_login(org.admin)
    response = client.put(f"/api/v1/nodes/{org.node_a.pk}/", {}, content_type="application/json")
    assert response.status_code == 405
