"""Inventory discovery: nodes and GPUs from what the sources already report.

``nodes_discover`` takes the nodes one source observed in a cluster and brings the inventory in
line, by these rules:

- An unknown node with GPUs is created ``discovered`` (an admin confirms it), or ``active`` with
  ``PORTAL_DISCOVERY_AUTO_ACCEPT``, in service from when it was first seen (its earliest
  reading, or the moment a node list named it); a start of service once set is never moved.
  A discovered node's readings are stored and shown, but it counts in no capacity, ownership
  or quota until confirmed (``NodeQuerySet.in_service``).
- A known node gets ``last_seen_at``, the source's own state, reason and labels, and its GPUs'
  UUIDs and PCI bus IDs. What an admin decides is never changed: owner department, fault domain,
  RDMA, the portal state (isolated, draining). A confirmed node's GPU count and model are kept
  too (Slurm calls an H100 ``h100``, dcgm-exporter ``NVIDIA H100 80GB HBM3``); a differing count
  is reported in the run's notes instead.
- A source that lists the whole inventory (a scheduler's node list: ``complete=True``) claims
  the nodes it names (``Node.listed_by``) and retires the nodes it claimed and no longer lists:
  state ``retired``, ``in_service_until`` the moment the node was last seen, ``missing_since``
  set. A node it never listed is not its to retire: nodes the readings found, and the nodes of
  a second node list in the same cluster, stay as they are. Nothing is deleted: readings, jobs and incidents
  stay. A node retired that way comes back when listed again (its state before retirement,
  ``in_service_until`` cleared). A node an admin retired by hand stays retired. An empty list
  retires nothing: a scheduler with no nodes is more likely a broken command than a cluster
  taken down.
- Readings (dcgm-exporter, Prometheus) are not a complete list: a node that stops reporting may
  just have lost its exporter. They create and update nodes, never retire or return them.

Every change of state is a ``NodeStateChange`` row, as for fault actions. ``last_seen_at`` is
written with ``update()``, to the nearest ``LAST_SEEN_RESOLUTION``: it is bookkeeping of every
collection, not a change of the node.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from efficiency.choices import NodeState
from efficiency.collectors.nodes import (
    GPU_MODEL_MAX_CHARS,
    LABEL_MAX_CHARS,
    NodeRow,
    ObservedNode,
    clip_labels,
    observed_node_problem,
)
from efficiency.collectors.records import Rejected, excerpt
from efficiency.models import Cluster, DataSource, Department, Gpu, Node, NodeStateChange

MAX_NOTES = 20
LAST_SEEN_RESOLUTION = timedelta(minutes=5)


@dataclass
class DiscoveryResult:
    """What one discovery run did, by hostname, for the run's record and the command's output."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # listed without GPUs: not a GPU server
    rejected: list[Rejected] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)

    def summary(self) -> str:
        """One line: ``2 created, 1 updated, 0 retired, 0 returned``; notes follow when any."""
        counts = (
            f"{len(self.created)} created, {len(self.updated)} updated, "
            f"{len(self.retired)} retired, {len(self.returned)} returned"
        )
        return "; ".join([counts, *self.notes[:3]])


def nodes_discover(
    *,
    cluster: Cluster,
    observed: Iterable[ObservedNode],
    source: DataSource | None = None,
    complete: bool = False,
    now: datetime | None = None,
) -> DiscoveryResult:
    """Bring ``cluster``'s inventory in line with the nodes one source observed (rules above).

    ``complete``: the source lists every node of the cluster, so a node it listed before and
    leaves out now is gone. Retiring needs the ``source`` (whose claim it is); without one a
    complete list retires nothing.
    Idempotent: the same observation applied twice changes nothing the second time but
    ``last_seen_at``. Bad observations (empty or malformed hostname, GPU counts past
    ``MAX_GPUS_PER_NODE``, a hostname listed twice) are rejected one by one with the reason.
    """
    now = now or timezone.now()
    result = DiscoveryResult()
    listed: dict[str, ObservedNode] = {}
    named: set[str] = set()  # every hostname the source gave, refused or not: none of them is gone
    for node in observed:
        named.add(node.hostname)
        problem = observed_node_problem(node)
        if not problem and node.hostname in listed:
            problem = f"{node.hostname} listed twice; the first kept"
        if problem:
            result.rejected.append(Rejected(reason=problem, excerpt=excerpt(node.hostname)))
            continue
        listed[node.hostname] = node
    with transaction.atomic():
        known = {node.hostname: node for node in Node.objects.select_for_update().filter(cluster=cluster)}
        gpus = defaultdict(dict)
        for gpu in Gpu.objects.filter(node__cluster=cluster):
            gpus[gpu.node_id][gpu.index] = gpu
        seen: dict[int, datetime] = {}
        for hostname, node in listed.items():
            current = known.get(hostname)
            if current is None:
                if node.gpu_count == 0:
                    result.ignored.append(hostname)
                    continue
                current, created = _node_create(cluster, node, source, complete, now)
                if created:
                    _gpus_fill(current, node, {}, result)
                    result.created.append(hostname)
                    continue
                # Another worker created it a moment ago: update it like a known node.
            seen[current.pk] = _seen_at(node, now)
            changed = _node_update(current, node, complete, now, result)
            node_gpus = gpus[current.pk] if current.pk in gpus else {g.index: g for g in current.gpus.all()}
            changed = _gpus_fill(current, node, node_gpus, result) or changed
            (result.updated if changed else result.unchanged).append(hostname)
        nodes_seen_mark(node_last_seen=seen)
        claimed = complete and source is not None
        if claimed:  # the list's claim: it alone retires these nodes once it stops naming them
            Node.objects.filter(pk__in=seen).exclude(listed_by=source).update(listed_by=source)
        if claimed and named:
            for hostname, current in known.items():
                if (
                    hostname not in named
                    and current.listed_by_id == source.pk
                    and current.state != NodeState.RETIRED
                ):
                    _node_retire(current, source, now)
                    result.retired.append(hostname)
        elif complete and not named:
            result.note("the source listed no nodes: nothing retired")
    return result


def nodes_seen_mark(*, node_last_seen: dict[int, datetime]) -> None:
    """Move ``last_seen_at`` forward for nodes that were seen (never backwards).

    Readings of one scrape share one instant, so nodes are updated a group per instant. Only a
    move of more than ``LAST_SEEN_RESOLUTION`` is written: every scrape rewriting every node's
    row cost a measurable share of the ingest, and "last seen" needs minutes, not seconds.
    """
    by_moment: dict[datetime, list[int]] = defaultdict(list)
    for node_id, moment in node_last_seen.items():
        by_moment[moment].append(node_id)
    for moment, node_ids in by_moment.items():
        Node.objects.filter(
            Q(last_seen_at__lt=moment - LAST_SEEN_RESOLUTION) | Q(last_seen_at__isnull=True), pk__in=node_ids
        ).update(last_seen_at=moment)


def nodes_confirm(*, nodes: Iterable[Node], actor=None, now: datetime | None = None) -> int:
    """Confirm discovered nodes: they become active and count in capacity. Returns how many."""
    now = now or timezone.now()
    confirmed = 0
    with transaction.atomic():
        for node in nodes:
            if node.state != NodeState.DISCOVERED:
                continue
            _state_set(node, NodeState.ACTIVE, actor=actor, now=now)
            node.save(update_fields=["state", "state_reason", "updated_at"])
            confirmed += 1
    return confirmed


def _node_create(
    cluster: Cluster, node: ObservedNode, source: DataSource | None, complete: bool, now: datetime
) -> tuple[Node, bool]:
    auto = settings.PORTAL_DISCOVERY_AUTO_ACCEPT
    # get_or_create: two sources may discover the same node at the same moment.
    return Node.objects.get_or_create(
        cluster=cluster,
        hostname=node.hostname,
        defaults={
            "gpu_model": node.gpu_model[:GPU_MODEL_MAX_CHARS],
            "gpu_count": node.gpu_count,
            "fault_domain": node.fault_domain[:100],
            "state": NodeState.ACTIVE if auto else NodeState.DISCOVERED,
            "discovered_by": source,
            "listed_by": source if complete else None,
            "last_seen_at": _seen_at(node, now),
            # Its start of service: without one it would count as available since before any data.
            "in_service_from": _first_seen_at(node, now),
            "reported_state": node.state[:100],
            "reported_reason": node.reason[:LABEL_MAX_CHARS],
            "source_labels": clip_labels(node.labels),
        },
    )


def _seen_at(node: ObservedNode, now: datetime) -> datetime:
    # A reading's time, not the run's: a backfill of last week must not make a node seen today.
    return min(node.seen_at, now) if node.seen_at is not None else now


def _first_seen_at(node: ObservedNode, now: datetime) -> datetime:
    # Readings: the earliest of the batch (a backfill starts the node when its data starts);
    # a node list: the moment of listing.
    first = node.first_seen_at or node.seen_at
    return min(first, now) if first is not None else now


def _node_update(current: Node, node: ObservedNode, complete: bool, now: datetime, result) -> bool:
    """Update what the source knows better than the inventory; True when something changed."""
    changed: list[str] = []
    if complete and current.state == NodeState.RETIRED and current.missing_since is not None:
        _node_return(current, now)  # first: the rules below depend on the state it returns to
        result.returned.append(current.hostname)
        changed += ["state", "in_service_until", "missing_since", "state_reason"]
    reported = {
        "reported_state": node.state[:100],
        "reported_reason": node.reason[:LABEL_MAX_CHARS],
        "source_labels": clip_labels(node.labels),
    }
    for name, value in reported.items():
        if getattr(current, name) != value:
            setattr(current, name, value)
            changed.append(name)
    if current.state == NodeState.DISCOVERED:
        # Unconfirmed: the sources are all the portal knows, so their latest word counts.
        count = node.gpu_count if node.gpu_count_exact else max(node.gpu_count, current.gpu_count)
        if count and count != current.gpu_count:
            current.gpu_count = count
            changed.append("gpu_count")
        if node.gpu_model and not current.gpu_model:
            current.gpu_model = node.gpu_model[:GPU_MODEL_MAX_CHARS]
            changed.append("gpu_model")
    elif node.gpu_count_exact and node.gpu_count and node.gpu_count != current.gpu_count:
        result.note(
            f"{current.hostname}: the source lists {node.gpu_count} GPUs, the inventory "
            f"{current.gpu_count} (kept; edit the node if the source is right)"
        )
    if changed:
        # Only these fields: an admin editing the node meanwhile keeps the rest of their edit.
        current.save(update_fields=[*changed, "updated_at"])
    return bool(changed)


def _gpus_fill(current: Node, node: ObservedNode, known: dict[int, Gpu], result) -> bool:
    """Create the observed GPUs the node lacks and fill in UUIDs, PCI bus IDs, model and memory."""
    changed = False
    for observed in node.gpus:
        gpu = known.get(observed.index)
        if gpu is None:
            taken = _uuid_taken(observed.uuid, None, current, result)
            Gpu.objects.create(
                node=current,
                index=observed.index,
                uuid="" if taken else observed.uuid,
                model=observed.model or current.gpu_model,
                pci_bus_id=observed.pci_bus_id,
                memory_mib=observed.memory_mib,
            )
            changed = True
            continue
        fields = []
        if (
            observed.uuid
            and observed.uuid != gpu.uuid
            and not _uuid_taken(observed.uuid, gpu, current, result)
        ):
            gpu.uuid = observed.uuid  # a new UUID at the same index: the GPU was replaced
            fields.append("uuid")
        for name in ("pci_bus_id", "memory_mib"):
            value = getattr(observed, name)
            if value and value != getattr(gpu, name):
                setattr(gpu, name, value)
                fields.append(name)
        # NVML's model name wins over a scheduler's short name (h100) once an exporter says it.
        if observed.model and observed.uuid and observed.model != gpu.model:
            gpu.model = observed.model
            fields.append("model")
        if fields:
            gpu.save(update_fields=fields)
            changed = True
    return changed


def _uuid_taken(uuid: str, gpu: Gpu | None, node: Node, result: DiscoveryResult) -> bool:
    if not uuid:
        return False
    other = Gpu.objects.filter(uuid=uuid).exclude(pk=gpu.pk if gpu else None).select_related("node").first()
    if other is None:
        return False
    result.note(f"{node.hostname}: GPU UUID {uuid} already belongs to {other}; not moved")
    return True


def _node_retire(current: Node, source: DataSource | None, now: datetime) -> None:
    by = f" by {source.name}" if source is not None else ""
    _state_set(current, NodeState.RETIRED, now=now, reason=f"no longer listed{by}")
    current.in_service_until = current.last_seen_at or now
    current.missing_since = now
    current.save()


def _node_return(current: Node, now: datetime) -> None:
    retirement = current.state_changes.filter(state=NodeState.RETIRED).first()
    before = retirement.previous_state if retirement is not None else NodeState.ACTIVE
    _state_set(current, before if before != NodeState.RETIRED else NodeState.ACTIVE, now=now)
    current.in_service_until = None
    current.missing_since = None


def _state_set(node: Node, state: str, *, now: datetime, actor=None, reason: str = "") -> None:
    """Move ``node`` to ``state`` with its history row; the reason goes with the state, so a
    change that gives none clears the old one (an active node is not "no longer listed")."""
    NodeStateChange.objects.create(node=node, at=now, state=state, previous_state=node.state, actor=actor)
    node.state = state
    node.state_reason = reason[:300]


# --- The admin's CSV -----------------------------------------------------------------------------


@dataclass
class NodeImportResult:
    """What ``nodes_import`` did, by hostname; rejected rows keep their line number."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)

    def reject(self, row: NodeRow, reason: str) -> None:
        self.rejected.append(Rejected(reason=reason, excerpt=excerpt(row.hostname), line_no=row.line_no))


def nodes_import(
    *, cluster: Cluster, rows: Iterable[NodeRow], actor=None, now: datetime | None = None
) -> NodeImportResult:
    """Create or update ``cluster``'s nodes from an admin's CSV rows (``parse_nodes_csv``).

    The CSV is the admin's hand: it sets what discovery never touches (owner department, fault
    domain, RDMA, state). An empty cell keeps the node's value. A new node needs gpu_model and
    gpu_count and starts active unless the row says otherwise. Rows are checked one by one (an
    unknown department code or state, a hostname twice in the file) and a bad row is rejected
    with its line number; the others are stored. Importing the same file again changes nothing.
    """
    now = now or timezone.now()
    result = NodeImportResult()
    departments = dict(Department.objects.values_list("code", "pk"))
    states = {choice.value for choice in NodeState}
    seen: set[str] = set()
    with transaction.atomic():
        known = {node.hostname: node for node in Node.objects.select_for_update().filter(cluster=cluster)}
        for row in rows:
            if row.hostname in seen:
                result.reject(row, f"{row.hostname} appears twice in the file; the first row kept")
                continue
            seen.add(row.hostname)
            if row.owner_department is not None and row.owner_department not in departments:
                result.reject(row, f"no department with code {row.owner_department!r}")
                continue
            if row.state is not None and row.state not in states:
                result.reject(row, f"state {row.state!r}: one of {', '.join(sorted(states))}")
                continue
            node = known.get(row.hostname)
            if node is None:
                if row.gpu_model is None or not row.gpu_count:
                    result.reject(row, "a new node needs gpu_model and a gpu_count of at least 1")
                    continue
                node = Node(cluster=cluster, hostname=row.hostname, state=NodeState.ACTIVE)
                _row_apply(node, row, departments, actor, now, new=True)
                node.save()
                result.created.append(row.hostname)
                continue
            if _row_apply(node, row, departments, actor, now, new=False):
                node.save()
                result.updated.append(row.hostname)
            else:
                result.unchanged.append(row.hostname)
    return result


def _row_apply(
    node: Node, row: NodeRow, departments: dict[str, int], actor, now: datetime, *, new: bool
) -> bool:
    values = {
        "gpu_model": row.gpu_model,
        "gpu_count": row.gpu_count,
        "fault_domain": row.fault_domain,
        "owner_department_id": departments[row.owner_department] if row.owner_department else None,
        "rdma_capable": row.rdma_capable,
    }
    changed = False
    for name, value in values.items():
        if value is not None and getattr(node, name) != value:
            setattr(node, name, value)
            changed = True
    if row.state is not None and row.state != node.state:
        if new:
            node.state = row.state
        else:
            _state_set(node, row.state, actor=actor, now=now)  # the CSV gives no reason: cleared
        if row.state == NodeState.RETIRED and node.in_service_until is None:
            node.in_service_until = now
        elif row.state != NodeState.RETIRED:
            node.in_service_until, node.missing_since = None, None
        changed = True
    return changed
