"""The demo's history replay, as a fresh ``make run`` does it: faults are stamped when the live
portal would have seen them, one fault is one incident, and dry-run actuators leave the
inventory alone."""

from datetime import UTC, datetime, timedelta
from itertools import pairwise

from efficiency.analysis.stats import percentile
from efficiency.choices import NodeState
from efficiency.models import Cluster, Incident, Node
from efficiency.services.demo import demo_history_backfill, demo_simulator
from efficiency.services.organisation import DEMO_CLUSTER_SLUG, demo_organisation_create

PHASES = ["occurred_at", "detected_at", "located_at", "restart_requested_at", "recovered_at"]
HARDWARE = {"hardware_gpu", "hardware_memory_ecc", "nvlink"}


def test_a_replayed_demo_history_is_detected_within_a_minute_in_order_with_no_node_isolated(
    db, settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    demo_organisation_create(password="pw")
    until = datetime(2026, 11, 3, 18, 0, tzinfo=UTC)  # 42 hours of history, all with logs
    sim = demo_simulator(days=1, now=until)
    cluster = Cluster.objects.get(slug=DEMO_CLUSTER_SLUG)
    demo_history_backfill(sim=sim, cluster=cluster, until=until, step=timedelta(minutes=30))
    incidents = list(Incident.objects.select_related("node"))
    assert any(incident.category in HARDWARE for incident in incidents)

    # Detected when the live portal would have seen it, not at the end of the replay.
    detect_s = [(i.detected_at - i.occurred_at).total_seconds() for i in incidents]
    assert percentile(detect_s, 50) <= 60
    assert max(detect_s) < 3600

    # Time only moves forward in every incident.
    for incident in incidents:
        stamped = [getattr(incident, phase) for phase in PHASES if getattr(incident, phase) is not None]
        assert stamped == sorted(stamped), incident.pk

    # The kernel's line and the exporter's count of one Xid are one incident.
    by_node: dict[str, list] = {}
    for incident in incidents:
        if incident.node and incident.category in HARDWARE:
            by_node.setdefault(incident.node.hostname, []).append(incident.occurred_at)
    for hostname, times in by_node.items():
        assert all(b - a > timedelta(minutes=10) for a, b in pairwise(sorted(times))), hostname

    # The demo's actuators are in dry run: no node leaves service, the log says what would run.
    assert set(Node.objects.values_list("state", flat=True)) == {NodeState.ACTIVE}
    drains = [a for i in incidents for a in i.actions.filter(kind="isolate_node")]
    assert drains
    assert all(a.dry_run and a.summary.startswith("Would run: scontrol update") for a in drains)
