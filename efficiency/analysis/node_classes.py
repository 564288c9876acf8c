"""Node classes over a cycle: idle, hot, fluctuating or steady, from each node's hourly utilization.

DESIGN.md, "Node classes": *idle* (util < 1% for most of the cycle), *hot* (util > 80% in many
hours), *fluctuating* (large hour-to-hour spread), *steady* (the rest). The input is one value per
node-hour, the node's utilization in percent as the rollups define it (busy / sampled GPU-seconds,
busy from GR_ENGINE_ACTIVE where reported, else GPU_UTIL). An hour without samples is ``None``:
missing data is not 0%, so it is left out of every statistic, and a node needs enough covered
hours to be classified at all.

The checks run in a fixed order and the first that matches wins:

1. **unknown**: fewer covered hours than ``min_covered_hours``; too little data to say anything.
2. **idle**: an idle node also has a low spread and would otherwise land in "steady"; and a node
   idle 80% of the time with a few busy bursts has a large spread but is first of all capacity
   nobody uses, which is what the idle class is there to show.
3. **hot**: a hot node with some idle hours (between two long jobs, over a weekend) has a large
   spread too, but for capacity planning it is still a node whose owners need more GPUs.
4. **fluctuating**: a large spread, the population std-dev of the covered hourly values in
   points, without being mostly idle or often saturated.
5. **steady**: the rest.

Thresholds are settings: callers pass a ``ClassThresholds``; this module reads no settings.

``reason`` is a stable, machine-readable key (see ``REASONS``), not a sentence: the UI is
translated, so it composes the sentence from the key and the numbers on the result, e.g.
``idle_hours`` with ``idle_hour_share=0.87`` and ``idle_util_pct=1.0`` becomes "87% of hours
below 1%".
"""

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

IDLE = "idle"
HOT = "hot"
FLUCTUATING = "fluctuating"
STEADY = "steady"
UNKNOWN = "unknown"
# The classes a node can be given from its data, in the order of the checks.
NODE_CLASSES = (IDLE, HOT, FLUCTUATING, STEADY)

REASON_TOO_FEW_HOURS = "too_few_hours"
REASON_IDLE_HOURS = "idle_hours"
REASON_HOT_HOURS = "hot_hours"
REASON_SPREAD = "spread"
REASON_STEADY = "steady"
REASONS = {
    UNKNOWN: REASON_TOO_FEW_HOURS,
    IDLE: REASON_IDLE_HOURS,
    HOT: REASON_HOT_HOURS,
    FLUCTUATING: REASON_SPREAD,
    STEADY: REASON_STEADY,
}


@dataclass(frozen=True)
class ClassThresholds:
    """Where the class boundaries lie; the defaults read as DESIGN.md's wording.

    Comparisons: an hour is idle strictly *below* ``idle_util_pct`` and hot strictly *above*
    ``hot_util_pct``; a node is idle, hot or fluctuating when its share or spread is *at least*
    the threshold (exactly 80% idle hours is idle). Shares are fractions of covered hours (0-1),
    utilizations and the spread are in percent (points).
    """

    idle_util_pct: float = 1.0  # an hour is "idle" below this
    idle_hour_share: float = 0.8  # idle when at least this share of covered hours is idle
    hot_util_pct: float = 80.0  # an hour is "hot" above this
    hot_hour_share: float = 0.4  # hot when at least this share of covered hours is hot
    fluctuation_pct: float = 20.0  # fluctuating when the std-dev of hourly util (points) is at least this
    min_covered_hours: int = 24  # fewer covered hours than this → class "unknown"

    def __post_init__(self) -> None:
        # Thresholds come from settings: a typo there should fail loudly, not classify everything.
        for name in ("idle_util_pct", "hot_util_pct", "fluctuation_pct"):
            value = getattr(self, name)
            if not 0.0 <= value <= 100.0:
                raise ValueError(f"{name} must be within 0-100, got {value!r}")
        for name in ("idle_hour_share", "hot_hour_share"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be a share in (0, 1], got {value!r}")
        if self.min_covered_hours < 1:
            raise ValueError(f"min_covered_hours must be at least 1, got {self.min_covered_hours!r}")


@dataclass(frozen=True)
class NodeHourUtil:
    """One node's utilization (0-100) in one hour; ``None``: no samples that hour."""

    node_id: int
    hour: datetime
    util_pct: float | None


@dataclass(frozen=True)
class NodeClassResult:
    """A node's class and the numbers behind it.

    The statistics are over covered hours only; they are ``None`` when no hour is covered, and
    are still given for an "unknown" node that has a few covered hours. ``reason`` is one of
    ``REASONS``' values: the UI turns it and these numbers into a translated sentence.
    """

    node_id: int
    node_class: str  # "idle" | "hot" | "fluctuating" | "steady" | "unknown"
    covered_hours: int
    mean_util_pct: float | None
    idle_hour_share: float | None
    hot_hour_share: float | None
    stddev_pct: float | None
    reason: str


def classify_node(
    hours: Sequence[NodeHourUtil] | Sequence[float | None],
    thresholds: ClassThresholds = ClassThresholds(),  # noqa: B008 - frozen, so sharing it is safe
) -> NodeClassResult:
    """Classify one node from its hourly utilization over a cycle (see the module docstring).

    ``hours`` is either the node's ``NodeHourUtil`` rows (all of one node, each hour once) or its
    bare hourly values in percent, in which case the result's ``node_id`` is 0. Hours with
    ``None`` are not covered and are ignored. A value that is not a number within 0-100 raises
    ``ValueError``: it is a bug upstream, and silently skipping it would skew the class.
    """
    node_id, values = _node_values(hours)
    covered = [value for value in values if value is not None]
    for value in covered:
        if not (math.isfinite(value) and 0.0 <= value <= 100.0):
            raise ValueError(f"node {node_id}: hourly utilization must be within 0-100, got {value!r}")

    count = len(covered)
    if count == 0:
        return NodeClassResult(node_id, UNKNOWN, 0, None, None, None, None, REASON_TOO_FEW_HOURS)

    mean = math.fsum(covered) / count
    # Population std-dev, two passes with fsum: exact enough, and much faster than ``statistics``
    # (which works in fractions) on a cluster's worth of node-hours.
    stddev = math.sqrt(math.fsum((value - mean) ** 2 for value in covered) / count)
    idle_share = sum(1 for value in covered if value < thresholds.idle_util_pct) / count
    hot_share = sum(1 for value in covered if value > thresholds.hot_util_pct) / count

    # Comparing ratios (not count >= share x covered): an exact 80% ratio and the setting 0.8
    # round to the same float, so the documented "at least" boundary holds exactly.
    if count < thresholds.min_covered_hours:
        node_class = UNKNOWN
    elif idle_share >= thresholds.idle_hour_share:
        node_class = IDLE
    elif hot_share >= thresholds.hot_hour_share:
        node_class = HOT
    elif stddev >= thresholds.fluctuation_pct:
        node_class = FLUCTUATING
    else:
        node_class = STEADY
    return NodeClassResult(
        node_id=node_id,
        node_class=node_class,
        covered_hours=count,
        mean_util_pct=mean,
        idle_hour_share=idle_share,
        hot_hour_share=hot_share,
        stddev_pct=stddev,
        reason=REASONS[node_class],
    )


def _node_values(hours: Sequence[NodeHourUtil] | Sequence[float | None]) -> tuple[int, list[float | None]]:
    """(node id, hourly values) from either input shape of ``classify_node``."""
    rows = [row for row in hours if isinstance(row, NodeHourUtil)]
    if not rows:
        return 0, [value for value in hours if not isinstance(value, NodeHourUtil)]
    if len(rows) != len(hours):
        raise ValueError("hours must be all NodeHourUtil rows or all bare values, not a mix")
    node_ids = {row.node_id for row in rows}
    if len(node_ids) > 1:
        raise ValueError(f"classify_node takes one node's hours, got nodes {sorted(node_ids)}")
    if len({row.hour for row in rows}) != len(rows):
        # Counting an hour twice would tilt every share; rollup rows are unique per node-hour.
        raise ValueError(f"node {rows[0].node_id}: an hour appears more than once")
    return rows[0].node_id, [row.util_pct for row in rows]


def classify_nodes(
    rows: Iterable[NodeHourUtil],
    thresholds: ClassThresholds = ClassThresholds(),  # noqa: B008 - frozen, so sharing it is safe
) -> list[NodeClassResult]:
    """Classify every node that has rows (covered or not), sorted by node id.

    A node without any row is not known here at all; callers that want it listed as "unknown"
    give it one ``None`` row per hour of the cycle.
    """
    by_node: dict[int, list[NodeHourUtil]] = defaultdict(list)
    for row in rows:
        by_node[row.node_id].append(row)
    return [classify_node(by_node[node_id], thresholds) for node_id in sorted(by_node)]


def class_shares(results: Sequence[NodeClassResult]) -> dict[str, float]:
    """Share of nodes (0-1) in each class, over the nodes that could be classified.

    "unknown" nodes are left out of the denominator and have no key: a node without enough data
    says nothing about how the cluster is used, and counting it would dilute every class (a
    freshly racked node is not 0% of anything). The four classes always appear, in check order,
    and sum to 1 unless no node was classified (then all are 0). The number of unknown nodes is a
    separate figure for the UI: ``sum(r.node_class == UNKNOWN for r in results)``.
    """
    counts = dict.fromkeys(NODE_CLASSES, 0)
    for result in results:
        if result.node_class in counts:
            counts[result.node_class] += 1
    classified = sum(counts.values())
    if classified == 0:
        return dict.fromkeys(NODE_CLASSES, 0.0)
    return {name: count / classified for name, count in counts.items()}
