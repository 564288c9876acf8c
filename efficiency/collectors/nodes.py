"""Nodes as a source sees them: the typed record inventory discovery consumes (no Django imports).

Three kinds of source describe nodes: a scheduler's node list (``scontrol show nodes``,
``kubectl get nodes -o json``), which lists the whole inventory at once; GPU readings
(dcgm-exporter or Prometheus labels ``Hostname``, ``gpu``, ``UUID``, ``modelName``,
``pci_bus_id``), which show only the nodes and GPUs that reported; and an admin's CSV
(``manage.py import_nodes``). Each becomes ``ObservedNode`` records; ``observed_node_problem``
is the one check they all pass before the inventory is touched.
"""

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from efficiency.collectors.records import GpuReading, ParseOutcome

# No server holds more GPUs than this; a larger count is a typo or hostile input, and would
# otherwise create that many GPU rows.
MAX_GPUS_PER_NODE = 256
HOSTNAME_MAX_CHARS = 255  # efficiency.models.Node.hostname
GPU_MODEL_MAX_CHARS = 100  # efficiency.models.Node.gpu_model, Gpu.model
UUID_MAX_CHARS = 64  # efficiency.models.Gpu.uuid
PCI_BUS_ID_MAX_CHARS = 32  # efficiency.models.Gpu.pci_bus_id
LABEL_MAX_CHARS = 300
FAULT_DOMAIN_MAX_CHARS = 100  # efficiency.models.Node.fault_domain
FORMULA_PREFIXES = ("=", "+", "-", "@")  # what makes a spreadsheet cell a formula
MAX_LABELS = 100


@dataclass(frozen=True, slots=True)
class ObservedGpu:
    """One GPU of an observed node; empty text means the source did not say."""

    index: int
    uuid: str = ""
    model: str = ""
    pci_bus_id: str = ""
    memory_mib: int | None = None


@dataclass(frozen=True, slots=True)
class ObservedNode:
    """A node as one source reported it.

    ``gpu_count_exact`` is False when the count is only a lower bound: readings show the GPUs
    that reported, not the ones that stayed silent. ``state`` and ``reason`` are the source's
    words (Slurm ``MIXED+DRAIN``, Kubernetes ``NotReady``), kept beside the portal's own state,
    never mapped onto it. ``fault_domain`` is a suggestion used only when the node is created.
    """

    hostname: str
    gpu_model: str = ""
    gpu_count: int = 0
    gpus: tuple[ObservedGpu, ...] = ()
    gpu_count_exact: bool = True
    state: str = ""
    reason: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    fault_domain: str = ""
    seen_at: datetime | None = None  # readings: the latest one's time; None: the moment of listing
    first_seen_at: datetime | None = None  # readings: the earliest one's time; None: as seen_at


def observed_node_problem(node: ObservedNode) -> str:
    """Why the inventory cannot take this observation, or "" when it can."""
    hostname = node.hostname
    if not hostname or not hostname.strip():
        return "empty hostname"
    if len(hostname) > HOSTNAME_MAX_CHARS:
        return f"hostname longer than {HOSTNAME_MAX_CHARS} characters"
    if hostname != hostname.strip() or any(ch.isspace() or not ch.isprintable() for ch in hostname):
        return f"hostname {hostname!r} holds spaces or control characters"
    if hostname.startswith(FORMULA_PREFIXES):
        # No host name starts so; a spreadsheet opening an export would run it as a formula.
        return f"hostname {hostname!r} starts with {hostname[0]!r}"
    if not 0 <= node.gpu_count <= MAX_GPUS_PER_NODE:
        return f"{node.gpu_count} GPUs on {hostname}: at most {MAX_GPUS_PER_NODE} per node"
    for gpu in node.gpus:
        if not 0 <= gpu.index < MAX_GPUS_PER_NODE:
            return f"GPU index {gpu.index} on {hostname}: at most {MAX_GPUS_PER_NODE} GPUs per node"
    return ""


def observed_nodes_from_readings(readings: Iterable[GpuReading]) -> list[ObservedNode]:
    """The nodes and GPUs a batch of readings shows, one per hostname, in the order first seen.

    The GPU count is the highest ``gpu`` index plus one, a lower bound (``gpu_count_exact`` is
    False); the model is the most common ``modelName`` of the node's GPUs; ``seen_at`` the time
    of the node's latest reading, ``first_seen_at`` of its earliest.
    """
    gpus: dict[str, dict[int, ObservedGpu]] = {}
    latest_ms: dict[str, int] = {}
    earliest_ms: dict[str, int] = {}
    for reading in readings:
        node = gpus.setdefault(reading.hostname, {})
        latest_ms[reading.hostname] = max(
            latest_ms.get(reading.hostname, reading.timestamp_ms), reading.timestamp_ms
        )
        earliest_ms[reading.hostname] = min(
            earliest_ms.get(reading.hostname, reading.timestamp_ms), reading.timestamp_ms
        )
        known = node.get(reading.gpu_index)
        if known is None or (not known.uuid and reading.uuid):
            node[reading.gpu_index] = ObservedGpu(
                index=reading.gpu_index,
                uuid=reading.uuid[:UUID_MAX_CHARS],
                model=reading.model[:GPU_MODEL_MAX_CHARS],
                pci_bus_id=reading.pci_bus_id[:PCI_BUS_ID_MAX_CHARS],
            )
    observed = []
    for hostname, by_index in gpus.items():
        models = [gpu.model for gpu in by_index.values() if gpu.model]
        observed.append(
            ObservedNode(
                hostname=hostname,
                gpu_model=max(set(models), key=models.count) if models else "",
                gpu_count=max(by_index) + 1,
                gpus=tuple(by_index[index] for index in sorted(by_index)),
                gpu_count_exact=False,
                seen_at=_moment(latest_ms[hostname]),
                first_seen_at=_moment(earliest_ms[hostname]),
            )
        )
    return observed


def _moment(timestamp_ms: int) -> datetime | None:
    try:
        return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None  # an absurd instant: ingest rejects the reading, discovery uses "now"


def clip_labels(labels: Mapping[str, object]) -> dict[str, str]:
    """At most ``MAX_LABELS`` labels, keys and values cut to ``LABEL_MAX_CHARS``: a source's
    labels are shown, never trusted to be small."""
    clipped = {}
    for key, value in list(labels.items())[:MAX_LABELS]:
        clipped[str(key)[:LABEL_MAX_CHARS]] = str(value)[:LABEL_MAX_CHARS]
    return clipped


# --- The admin's CSV (manage.py import_nodes) ----------------------------------------------------

NODE_CSV_COLUMNS = (
    "hostname",
    "gpu_model",
    "gpu_count",
    "fault_domain",
    "owner_department",
    "rdma_capable",
    "state",
)
_TRUE = frozenset({"1", "true", "yes", "y"})
_FALSE = frozenset({"0", "false", "no", "n"})


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One row of a node CSV; ``None`` means the column is absent or the cell empty: keep as is."""

    line_no: int
    hostname: str
    gpu_model: str | None = None
    gpu_count: int | None = None
    fault_domain: str | None = None
    owner_department: str | None = None  # a department code
    rdma_capable: bool | None = None
    state: str | None = None  # a value of efficiency.choices.NodeState, checked by the service


def parse_nodes_csv(lines: Iterable[str]) -> ParseOutcome[NodeRow]:
    """Read a node CSV: a header naming some of ``NODE_CSV_COLUMNS`` (``hostname`` required),
    then one node a row. A bad row is rejected with its line number and reason; the others are
    kept. Cells that would be spreadsheet formulas (``=cmd``, ``+1``, ``@x``) are refused.
    """
    outcome = ParseOutcome[NodeRow]()
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        return outcome
    names = [name.strip().lstrip("\ufeff").lower() for name in header]
    unknown = [name for name in names if name and name not in NODE_CSV_COLUMNS]
    if "hostname" not in names or unknown:
        why = f"unknown column(s) {', '.join(unknown)}" if unknown else "no hostname column"
        outcome.reject(f"header: {why}; columns are {', '.join(NODE_CSV_COLUMNS)}", ",".join(header), 1)
        return outcome
    last_line = reader.line_num
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as error:  # an unclosed quote, a field past the csv module's limit
            outcome.reject(f"not CSV: {error}", "", reader.line_num)
            if reader.line_num == last_line:
                break  # the reader cannot move past it
            last_line = reader.line_num
            continue
        last_line = reader.line_num
        line_no = reader.line_num
        if "\x00" in "".join(cells):
            outcome.reject("row contains a NUL character", ",".join(cells), line_no)
            continue
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) > len(names):
            outcome.reject(f"{len(cells)} cells, the header names {len(names)}", ",".join(cells), line_no)
            continue
        row = {name: cell.strip() for name, cell in zip(names, cells, strict=False) if name}
        try:
            outcome.records.append(_node_row(row, line_no))
        except ValueError as error:
            outcome.reject(str(error), ",".join(cells), line_no)
    return outcome


def _node_row(row: Mapping[str, str], line_no: int) -> NodeRow:
    for name, text in row.items():
        if text.startswith(FORMULA_PREFIXES) and not (name == "gpu_count" and text.lstrip("+-").isdigit()):
            raise ValueError(f"{name} {text!r} starts with {text[0]!r} (a spreadsheet formula?)")
    count_text = row.get("gpu_count", "")
    count = None
    if count_text:
        if not count_text.isdigit():
            raise ValueError(f"gpu_count {count_text!r} is not a whole number")
        count = int(count_text)
    rdma_text = row.get("rdma_capable", "").lower()
    if rdma_text and rdma_text not in _TRUE | _FALSE:
        raise ValueError(f"rdma_capable {row['rdma_capable']!r}: write true or false")
    node = NodeRow(
        line_no=line_no,
        hostname=row.get("hostname", ""),
        gpu_model=row.get("gpu_model") or None,
        gpu_count=count,
        fault_domain=row.get("fault_domain") or None,
        owner_department=row.get("owner_department") or None,
        rdma_capable=(rdma_text in _TRUE) if rdma_text else None,
        state=row.get("state", "").lower() or None,
    )
    problem = observed_node_problem(ObservedNode(hostname=node.hostname, gpu_count=count or 0))
    if problem:
        raise ValueError(problem)
    if node.gpu_model is not None and len(node.gpu_model) > GPU_MODEL_MAX_CHARS:
        raise ValueError(f"gpu_model longer than {GPU_MODEL_MAX_CHARS} characters")
    if node.fault_domain is not None and len(node.fault_domain) > FAULT_DOMAIN_MAX_CHARS:
        raise ValueError(f"fault_domain longer than {FAULT_DOMAIN_MAX_CHARS} characters")
    return node
