"""One name per meaning: GPUs no department owns (the fixed partition's inventory) are
"Unowned"; capacity left after the guarantees (quota planning) is the "Shared pool"."""

import pytest

from efficiency.services import quotas as services
from tests.factories import NodeFactory
from tests.quota_fixtures import NOW, SETTINGS, make_planning


@pytest.fixture
def planning(db):
    planning = make_planning()
    NodeFactory(cluster=planning.cluster, hostname="gpu-spare", owner_department=None)
    services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    return planning


def test_gpus_no_department_owns_are_unowned_not_the_shared_pool(client, planning):
    client.force_login(planning.committee)
    home = client.get("/").content.decode()
    assert "Unowned" in home
    assert "Shared pool" not in home
    nodes = client.get("/nodes/").content.decode()
    row = nodes[nodes.index("gpu-spare") :]
    assert "Unowned" in row[: row.index("</tr>")]
    node = planning.cluster.nodes.get(hostname="gpu-spare")
    detail = client.get(f"/nodes/{node.pk}/").content.decode()
    assert "Unowned" in detail
    assert "Shared pool" not in detail


def test_capacity_left_after_the_guarantees_is_the_shared_pool(client, planning):
    client.force_login(planning.committee)
    cycle = planning.cluster.quota_cycles.get(status="proposed")
    page = client.get(f"/quotas/cycles/{cycle.pk}/").content.decode()
    assert "Shared pool · NVIDIA H100 80GB HBM3" in page
    assert "Unowned" not in page


def test_the_two_names_stay_apart_in_chinese(client, planning):
    client.force_login(planning.committee)
    client.cookies["django_language"] = "zh-hans"
    home = client.get("/").content.decode()
    assert "未归属部门" in home
    assert "共享资源池" not in home
    cycle = planning.cluster.quota_cycles.get(status="proposed")
    assert "共享资源池" in client.get(f"/quotas/cycles/{cycle.pk}/").content.decode()
