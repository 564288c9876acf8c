"""Migration 0023_node_listed_by: nodes a node list (Slurm, Kubernetes) discovered are listed by it,
so it still retires them when it stops naming them; nodes readings discovered, or typed by hand,
are nobody's until a node list names them."""

from tests.migrations import around, migrate


def test_nodes_a_node_list_discovered_are_listed_by_it(transactional_db):
    before, latest = around("_node_listed_by")
    apps = migrate(before)
    Cluster = apps.get_model("efficiency", "Cluster")
    DataSource = apps.get_model("efficiency", "DataSource")
    Node = apps.get_model("efficiency", "Node")
    cluster = Cluster.objects.create(slug="old", name="old")
    sources = {
        kind: DataSource.objects.create(cluster=cluster, kind=kind, name=kind)
        for kind in ("slurm", "kubernetes", "prometheus")
    }
    for hostname, kind in (("s1", "slurm"), ("k1", "kubernetes"), ("p1", "prometheus"), ("h1", None)):
        Node.objects.create(
            cluster=cluster, hostname=hostname, gpu_model="h100", gpu_count=8, discovered_by=sources.get(kind)
        )
    apps = migrate(latest)
    listed_by = dict(apps.get_model("efficiency", "Node").objects.values_list("hostname", "listed_by__name"))
    assert listed_by == {"s1": "slurm", "k1": "kubernetes", "p1": None, "h1": None}
