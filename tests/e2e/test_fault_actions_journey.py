"""A platform admin acts on an incident in a real browser, and a department head finds the
incident on their own node: only the actions that apply are offered, each asks first."""

from datetime import timedelta

import pytest

from efficiency.choices import NodeState
from efficiency.models import Cluster, Incident, Node
from efficiency.services import faults
from efficiency.services.organisation import DEMO_CLUSTER_SLUG, demo_organisation_create
from tests.e2e.conftest import log_in
from tests.fault_helpers import T0, xid_count_event

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def idle_node_fault(transactional_db):
    """An Xid 79 counted by the exporter on an idle node of Vehicle vision: no job, no log line."""
    demo_organisation_create(password="e2e-password")
    faults.fault_policies_ensure()
    cluster = Cluster.objects.get(slug=DEMO_CLUSTER_SLUG)
    node = Node.objects.filter(cluster=cluster, owner_department__code="vision").order_by("hostname").first()
    faults.xid_count_signals_record(
        cluster=cluster, events=[xid_count_event(node, 5, 79, T0)], now=T0 + timedelta(seconds=20)
    )
    faults.incidents_group(cluster=cluster, now=T0 + timedelta(seconds=25))
    return node, Incident.objects.get()


def _buttons(page) -> set[str]:
    ids = {"isolate-button": "isolate", "restart-button": "restart", "return-button": "return",
           "close-button": "close"}  # fmt: skip
    return {name for button, name in ids.items() if page.locator(f"#{button}").count()}


def _chinese(page):
    page.context.add_cookies(
        [
            {
                "name": "django_language",
                "value": "zh-hans",
                "url": page.url.split("/faults")[0].split("/nodes")[0],
            }
        ]
    )


def test_admin_isolates_the_node_then_returns_it_to_service_each_after_confirming(
    page, idle_node_fault, screenshot
):
    node, incident = idle_node_fault
    log_in(page, "admin", "e2e-password")
    page.goto(f"/faults/incidents/{incident.pk}/")
    assert _buttons(page) == {"isolate", "close"}  # no job to restart, the node is in service
    screenshot("incident-actions-offered")

    questions = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    page.locator("#isolate-button").click()
    page.wait_for_url(f"**/faults/incidents/{incident.pk}/")
    assert questions == [f"Isolate {node.hostname}? No new jobs will be scheduled on it."]
    assert "Node isolated." in page.locator("body").inner_text()
    node.refresh_from_db()
    assert node.state == NodeState.ISOLATED
    assert _buttons(page) == {"return", "close"}
    assert "recorded as isolated by hand" in page.locator("#actions").inner_text()
    screenshot("incident-node-isolated")

    # A dismissed confirmation does nothing.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.locator("#return-button").click()
    node.refresh_from_db()
    assert node.state == NodeState.ISOLATED

    page.goto(f"/nodes/{node.pk}/")
    assert page.locator("#isolating-incident").inner_text() == f"incident {incident.pk}"
    screenshot("node-isolated")
    _chinese(page)
    page.reload()
    assert "恢复服务" in page.locator("#node-return-button").inner_text()
    screenshot("node-isolated-zh")
    questions.clear()
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    page.locator("#node-return-button").click()
    page.wait_for_url(f"**/nodes/{node.pk}/")
    assert questions == [f"让 {node.hostname} 恢复服务？之后会再次向它调度作业。"]
    assert "节点已恢复服务。" in page.locator("body").inner_text()
    node.refresh_from_db()
    assert node.state == NodeState.ACTIVE
    assert page.locator("#node-history tbody tr").count() == 2
    screenshot("node-back-in-service-zh")

    page.goto(f"/faults/incidents/{incident.pk}/")
    assert _buttons(page) == {"isolate", "close"}
    assert "进程序号（rank）" in page.locator("#incident-facts").inner_text()
    screenshot("incident-after-return-zh")


def test_admin_closes_an_incident_with_a_reason_and_it_is_not_recovered(page, idle_node_fault, screenshot):
    _node, incident = idle_node_fault
    log_in(page, "admin", "e2e-password")
    page.goto(f"/faults/incidents/{incident.pk}/")
    page.locator("#close-reason").fill("GPU reseated; passed diagnostics")
    page.locator("#close-button").click()
    page.wait_for_url(f"**/faults/incidents/{incident.pk}/")
    assert "admin: GPU reseated; passed diagnostics" in page.locator("#closed").inner_text()
    assert page.locator("#recovered").inner_text() == "—"
    assert page.locator("#incident-status").inner_text() == "Closed without recovery"
    assert _buttons(page) == set()
    screenshot("incident-closed")
    _chinese(page)
    page.reload()
    assert page.locator("#incident-status").inner_text() == "未恢复即关闭"
    screenshot("incident-closed-zh")


def test_a_head_opens_the_incident_on_their_idle_node_from_the_node_page(page, idle_node_fault, screenshot):
    node, incident = idle_node_fault
    log_in(page, "head-vision", "e2e-password")
    page.goto(f"/nodes/{node.pk}/")
    page.locator(f"#node-incidents a[href='/faults/incidents/{incident.pk}/']").click()
    page.wait_for_url(f"**/faults/incidents/{incident.pk}/")
    assert node.hostname in page.locator("#suspected-node").inner_text()
    assert _buttons(page) == set()  # heads read, admins act
    assert "GPU 5" in page.locator("#evidence").inner_text()
    screenshot("head-incident-on-own-node")
    _chinese(page)
    page.reload()
    assert "GPU 5 上 DCGM_EXP_XID_ERRORS_COUNT" in page.locator("#evidence").inner_text()
    screenshot("head-incident-on-own-node-zh")


def test_a_head_of_another_department_cannot_open_it(page, idle_node_fault):
    _node, incident = idle_node_fault
    log_in(page, "head-radar", "e2e-password")
    assert page.goto(f"/faults/incidents/{incident.pk}/").status == 404
