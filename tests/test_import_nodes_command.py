"""manage.py import_nodes: the rest of the inventory (owner, rack, RDMA, state) from a CSV."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from efficiency.choices import NodeState, SourceKind
from efficiency.collectors.nodes import ObservedNode
from efficiency.models import DataSource, Node, NodeStateChange
from efficiency.services.discovery import nodes_discover
from tests.factories import ClusterFactory, DepartmentFactory, NodeFactory

pytestmark = pytest.mark.django_db

HEADER = "hostname,gpu_model,gpu_count,fault_domain,owner_department,rdma_capable,state\n"


def run(path, *args) -> str:
    out = StringIO()
    call_command("import_nodes", str(path), *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def cluster():
    DepartmentFactory(code="vision")
    return ClusterFactory(slug="hq")


def test_good_rows_are_stored_bad_ones_reported_by_line_and_a_second_import_changes_nothing(
    cluster, tmp_path
):
    NodeFactory(
        cluster=cluster, hostname="gpu-02", fault_domain="", owner_department=None, rdma_capable=False
    )
    csv_file = tmp_path / "nodes.csv"
    csv_file.write_text(
        HEADER
        + "gpu-01,NVIDIA H100 80GB HBM3,8,rack-01,vision,true,\n"
        + "gpu-02,,,rack-02,vision,yes,draining\n"
        + "gpu-03,NVIDIA H100 80GB HBM3,8,rack-01,radar,true,\n"
        + '"=HYPERLINK(""http://x"")",H100,8,,,,\n'
        + "gpu-04,,,,,,\n"
        + "gpu-01,NVIDIA H100 80GB HBM3,4,,,,\n"
        + "gpu-05,NVIDIA H100 80GB HBM3,8,,,,broken\n"
        + "gpu-06,NVIDIA H100 80GB HBM3,99999,,,,\n",
        encoding="utf-8",
    )
    output = run(csv_file, "--cluster", "hq")
    assert output.splitlines() == [
        "hq: 1 created, 1 updated, 0 unchanged, 6 rejected",
        "  line 4: no department with code 'radar'",
        "  line 5: hostname '=HYPERLINK(\"http://x\")' starts with '=' (a spreadsheet formula?)",
        "  line 6: a new node needs gpu_model and a gpu_count of at least 1",
        "  line 7: gpu-01 appears twice in the file; the first row kept",
        "  line 8: state 'broken': one of active, discovered, draining, isolated, retired",
        "  line 9: 99999 GPUs on gpu-06: at most 256 per node",
    ]
    gpu01 = Node.objects.get(hostname="gpu-01")
    assert (
        gpu01.gpu_count,
        gpu01.fault_domain,
        gpu01.owner_department.code,
        gpu01.rdma_capable,
        gpu01.state,
    ) == (
        8,
        "rack-01",
        "vision",
        True,
        NodeState.ACTIVE,
    )
    gpu02 = Node.objects.get(hostname="gpu-02")
    assert (gpu02.fault_domain, gpu02.owner_department.code, gpu02.rdma_capable, gpu02.state) == (
        "rack-02",
        "vision",
        True,
        NodeState.DRAINING,
    )
    assert NodeStateChange.objects.filter(node=gpu02, state=NodeState.DRAINING).count() == 1
    again = run(csv_file, "--cluster", "hq")
    assert again.splitlines()[0] == "hq: 0 created, 0 updated, 2 unchanged, 6 rejected"
    assert NodeStateChange.objects.count() == 1


def test_retiring_by_csv_sets_the_end_of_service_and_keeps_the_node(cluster, tmp_path):
    NodeFactory(cluster=cluster, hostname="gpu-09")
    csv_file = tmp_path / "nodes.csv"
    csv_file.write_text("hostname,state\ngpu-09,retired\n")
    assert run(csv_file).startswith("hq: 0 created, 1 updated")
    node = Node.objects.get(hostname="gpu-09")
    assert node.state == NodeState.RETIRED
    assert node.in_service_until is not None


def test_the_cluster_must_be_named_when_there_are_several(cluster, tmp_path):
    ClusterFactory(slug="edge")
    csv_file = tmp_path / "nodes.csv"
    csv_file.write_text(HEADER)
    with pytest.raises(CommandError, match="name the cluster with --cluster SLUG"):
        run(csv_file)
    with pytest.raises(CommandError, match="no cluster with slug 'nope'"):
        run(csv_file, "--cluster", "nope")


def test_a_file_that_is_not_utf8_is_refused_before_anything_is_stored(cluster, tmp_path):
    csv_file = tmp_path / "nodes.csv"
    csv_file.write_bytes((HEADER + "节点-01,H100,8,,,,\n").encode("gb18030"))
    with pytest.raises(CommandError, match="not UTF-8"):
        run(csv_file, "--cluster", "hq")
    assert not Node.objects.exists()


def test_an_admin_confirms_discovered_nodes_from_the_node_list(client, org):
    found = NodeFactory(cluster=org.cluster, hostname="gpu-new", state=NodeState.DISCOVERED)
    client.force_login(org.admin)
    url = reverse("admin:efficiency_node_changelist")
    listed = client.get(url, {"state__exact": NodeState.DISCOVERED}).content.decode()
    assert "gpu-new" in listed
    assert org.node_a.hostname not in listed
    response = client.post(
        url, {"action": "confirm_discovered", "_selected_action": [found.pk, org.node_a.pk]}
    )
    assert response.status_code == 302
    found.refresh_from_db()
    assert found.state == NodeState.ACTIVE
    change = NodeStateChange.objects.get(node=found)
    assert (change.previous_state, change.actor) == (NodeState.DISCOVERED, org.admin)
    page = client.get(response.url).content.decode()
    assert "Confirmed: 1 node(s), now counted in capacity and quotas." in page


def test_a_node_set_back_to_active_loses_the_reason_it_was_retired_for(client, org, tmp_path):
    slurm = DataSource.objects.create(cluster=org.cluster, kind=SourceKind.SLURM, name="slurm")
    gone = NodeFactory(cluster=org.cluster, hostname="gpu-gone", listed_by=slurm)
    nodes_discover(
        cluster=org.cluster,
        observed=[ObservedNode(hostname="other", gpu_count=1)],
        source=slurm,
        complete=True,
    )
    gone.refresh_from_db()
    assert (gone.state, gone.state_reason) == (NodeState.RETIRED, "no longer listed by slurm")
    csv_file = tmp_path / "nodes.csv"
    csv_file.write_text("hostname,state\ngpu-gone,active\n")
    run(csv_file, "--cluster", org.cluster.slug)
    gone.refresh_from_db()
    assert (gone.state, gone.state_reason, gone.in_service_until) == (NodeState.ACTIVE, "", None)
    client.force_login(org.admin)
    page = client.get(reverse("efficiency:node-detail", args=[gone.pk])).content.decode()
    assert "no longer listed" not in page


def test_an_admin_who_changes_the_state_without_a_reason_clears_the_old_reason(client, org):
    node = NodeFactory(
        cluster=org.cluster, hostname="gpu-x", state=NodeState.DRAINING, state_reason="fan replaced"
    )
    other = NodeFactory(cluster=org.cluster, hostname="gpu-y", state=NodeState.ACTIVE, state_reason="")
    client.force_login(org.admin)
    for target, state, reason, expected in (
        (node, NodeState.ACTIVE, "fan replaced", ""),
        (other, NodeState.DRAINING, "PSU swap on Friday", "PSU swap on Friday"),
    ):
        url = reverse("admin:efficiency_node_change", args=[target.pk])
        form = client.get(url).context["adminform"].form
        data = {name: value for name, value in form.initial.items() if value is not None}
        data.update(
            {
                "cluster": target.cluster_id,
                "state": state,
                "state_reason": reason,
                "rdma_capable": "on" if target.rdma_capable else "",
                "gpus-TOTAL_FORMS": "0",
                "gpus-INITIAL_FORMS": "0",
            }
        )
        data.pop("source_labels", None)
        if not target.rdma_capable:
            data.pop("rdma_capable")
        response = client.post(url, data)
        assert response.status_code == 302, response.context["adminform"].form.errors
        target.refresh_from_db()
        assert (target.state, target.state_reason) == (state, expected)
