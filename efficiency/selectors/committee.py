"""The committee's review packs as pages read them, and the figures the pack builder reads.

Packs are read by the committee and platform admins in full, and by department heads as their
department's copy (``pack_content_for``: ``efficiency.analysis.committee.copy``); a user with no
role sees none. The builder's readers (``pack_*`` below the line) read the whole cluster: a pack
is the committee's material, built by a worker with every department in view
(``committee_system_user``).
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Max, QuerySet, Sum

from efficiency.analysis.committee.copy import department_copy
from efficiency.analysis.committee.states import DownInterval, merge_intervals
from efficiency.choices import ActionStatus, QuotaCycleStatus, Role
from efficiency.models import (
    Action,
    Cluster,
    DataSource,
    Decision,
    Department,
    DepartmentHour,
    Incident,
    Node,
    NodeClassification,
    NodeHour,
    Quota,
    QuotaCycle,
    QuotaEvent,
    RateCard,
    ReviewPack,
    ScopeHour,
)
from efficiency.scoping import User, sees_all_departments, user_role, visible_department_ids

HOUR = timedelta(hours=1)


def committee_system_user() -> User:
    """An unsaved superuser: the portal itself, seeing every department (scoping treats a
    superuser as a platform admin). Used by the worker that builds packs; never logs in."""
    return get_user_model()(username="portal-committee-pack", is_superuser=True, is_active=True)


# --- Packs as pages read them --------------------------------------------------------------------


def pack_list(*, user: User, cluster: Cluster | None = None) -> QuerySet[ReviewPack]:
    """Every pack the user may open (all versions), newest period first, latest version first."""
    if user_role(user) is None:
        return ReviewPack.objects.none()
    packs = ReviewPack.objects.select_related("cluster", "supersedes", "rate_card")
    if cluster is not None:
        packs = packs.filter(cluster=cluster)
    return packs.order_by("-period_start", "cluster__slug", "-version")


def pack_list_current(*, user: User, cluster: Cluster | None = None) -> QuerySet[ReviewPack]:
    """The current version of each pack (no later version corrects it)."""
    return pack_list(user=user, cluster=cluster).filter(superseded_by__isnull=True)


def pack_versions(*, user: User, pack: ReviewPack) -> QuerySet[ReviewPack]:
    """Every version of ``pack``'s period, latest first (the current one included)."""
    return pack_list(user=user, cluster=pack.cluster).filter(period_start=pack.period_start)


def pack_get(*, user: User, pk: int) -> ReviewPack:
    """One pack the user may open; ``ReviewPack.DoesNotExist`` (a 404) otherwise."""
    return pack_list(user=user).get(pk=pk)


def pack_department_codes(*, user: User) -> list[str] | None:
    """The departments of a user's copy: None for the whole pack (committee, admins)."""
    if sees_all_departments(user):
        return None
    ids = visible_department_ids(user) or []
    return sorted(Department.objects.filter(pk__in=ids).values_list("code", flat=True))


def pack_content_for(*, user: User, pack: ReviewPack) -> dict:
    """The pack's content as the user may read it: all of it, or their departments' copy."""
    codes = pack_department_codes(user=user)
    return pack.content if codes is None else department_copy(pack.content, codes)


def pack_latest_for_period(*, cluster: Cluster, period_start: datetime) -> ReviewPack | None:
    return (
        ReviewPack.objects.filter(cluster=cluster, period_start=period_start, superseded_by__isnull=True)
        .order_by("-version")
        .first()
    )


def pack_next_version(*, cluster: Cluster, period_start: datetime) -> int:
    found = ReviewPack.objects.filter(cluster=cluster, period_start=period_start).aggregate(v=Max("version"))
    return (found["v"] or 0) + 1


def pack_previous(*, cluster: Cluster, before: datetime) -> ReviewPack | None:
    """The current pack of the latest period that began before ``before``."""
    return (
        ReviewPack.objects.filter(cluster=cluster, period_start__lt=before, superseded_by__isnull=True)
        .order_by("-period_start", "-version")
        .first()
    )


def latest_ended_quota_cycle(*, cluster: Cluster, now: datetime) -> QuotaCycle | None:
    return QuotaCycle.objects.filter(cluster=cluster, end__lte=now).order_by("-end").first()


def rate_card_in_force(*, at: datetime) -> RateCard | None:
    return RateCard.objects.filter(effective_from__lte=at).order_by("-effective_from", "-version").first()


def committee_members() -> list:
    return list(
        get_user_model()
        .objects.filter(is_active=True, groups__name=Role.COMMITTEE)
        .distinct()
        .order_by("username")
    )


# --- What the builder reads ------------------------------------------------------------------------


def period_hours(start: datetime, end: datetime) -> list[datetime]:
    hours, cursor = [], start
    while cursor < end:
        hours.append(cursor)
        cursor += HOUR
    return hours


@dataclass(frozen=True)
class HourlyTotals:
    """Cluster-wide GPU-hours per hour (lists aligned on ``hours``)."""

    available: list[float]
    allocated: list[float]
    sampled: list[float]
    busy: list[float]


def pack_cluster_hours(*, cluster: Cluster, hours: list[datetime]) -> HourlyTotals:
    """The cluster's whole-scope rollup (ScopeHour without department) per hour, in GPU-hours."""
    index = {hour: position for position, hour in enumerate(hours)}
    totals = HourlyTotals(*([0.0] * len(hours) for _ in range(4)))
    if not hours:
        return totals
    rows = ScopeHour.objects.filter(
        cluster=cluster, department__isnull=True, hour__gte=hours[0], hour__lt=hours[-1] + HOUR
    ).values_list("hour", "available_gpu_s", "allocated_gpu_s", "sampled_gpu_s", "busy_gpu_s")
    for hour, available, allocated, sampled, busy in rows:
        position = index.get(hour)
        if position is None:
            continue
        totals.available[position] += available / 3600
        totals.allocated[position] += allocated / 3600
        totals.sampled[position] += sampled / 3600
        totals.busy[position] += busy / 3600
    return totals


def pack_capacity_by_model(*, cluster: Cluster, hours: list[datetime]) -> dict[str, list[float]]:
    """Available GPU-hours per hour by GPU model (from NodeHour)."""
    index = {hour: position for position, hour in enumerate(hours)}
    out: dict[str, list[float]] = {}
    if not hours:
        return out
    rows = (
        NodeHour.objects.filter(cluster=cluster, hour__gte=hours[0], hour__lt=hours[-1] + HOUR)
        .values("hour", "node__gpu_model")
        .annotate(available=Sum("available_gpu_s"))
        .order_by()
    )
    for row in rows:
        position = index.get(row["hour"])
        if position is None:
            continue
        series = out.setdefault(row["node__gpu_model"], [0.0] * len(hours))
        series[position] += (row["available"] or 0.0) / 3600
    return out


def pack_allocated_by_department_model(
    *, cluster: Cluster, hours: list[datetime]
) -> dict[tuple[str, str], list[float]]:
    """GPU-hours each department's jobs held per hour, by GPU model (from DepartmentHour)."""
    index = {hour: position for position, hour in enumerate(hours)}
    out: dict[tuple[str, str], list[float]] = {}
    if not hours:
        return out
    rows = (
        DepartmentHour.objects.filter(node__cluster=cluster, hour__gte=hours[0], hour__lt=hours[-1] + HOUR)
        .values("hour", "department__code", "node__gpu_model")
        .annotate(allocated=Sum("allocated_gpu_s"))
        .order_by()
    )
    for row in rows:
        position = index.get(row["hour"])
        if position is None:
            continue
        key = (row["department__code"], row["node__gpu_model"])
        series = out.setdefault(key, [0.0] * len(hours))
        series[position] += (row["allocated"] or 0.0) / 3600
    return out


def pack_guarantees(*, cluster: Cluster, hours: list[datetime]) -> dict[tuple[str, str], list[float]]:
    """GPUs guaranteed per hour by (department, model): the quotas of the cycle in force at
    each hour (the latest approved cycle begun by then, as ``quota_cycle_in_force``)."""
    out: dict[tuple[str, str], list[float]] = {}
    if not hours:
        return out
    cycles = list(
        QuotaCycle.objects.approved().filter(cluster=cluster, start__lt=hours[-1] + HOUR).order_by("start")
    )
    if not cycles:
        return out
    quotas: dict[int, dict[tuple[str, str], int]] = defaultdict(dict)
    for cycle_id, code, model, gpus in Quota.objects.filter(cycle__in=cycles).values_list(
        "cycle_id", "department__code", "gpu_model", "guaranteed_gpus"
    ):
        quotas[cycle_id][(code, model)] = quotas[cycle_id].get((code, model), 0) + gpus
    position = -1
    for hour_index, hour in enumerate(hours):
        while position + 1 < len(cycles) and cycles[position + 1].start <= hour:
            position += 1
        if position < 0:
            continue
        for key, gpus in quotas[cycles[position].pk].items():
            out.setdefault(key, [0.0] * len(hours))[hour_index] = float(gpus)
    return out


def pack_guarantee_cycles(*, cluster: Cluster, start: datetime, end: datetime) -> list[QuotaCycle]:
    return list(QuotaCycle.objects.approved().filter(cluster=cluster, start__lt=end).order_by("start"))


def pack_down_intervals(*, cluster: Cluster, start: datetime, end: datetime) -> list[DownInterval]:
    """Nodes out of service during [start, end): each incident's node from the fault until it
    recovered (or was closed, or the period ended), one node's incidents merged."""
    rows = (
        Incident.objects.filter(cluster=cluster, node__isnull=False, occurred_at__lt=end)
        .exclude(recovered_at__lte=start)
        .exclude(recovered_at__isnull=True, closed_at__lte=start)
        .values_list("node_id", "node__gpu_count", "occurred_at", "recovered_at", "closed_at")
    )
    by_node: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    gpus: dict[int, int] = {}
    for node_id, gpu_count, occurred, recovered, closed in rows:
        until = recovered or closed or end
        if until > occurred:
            by_node[node_id].append((max(occurred, start), min(until, end)))
            gpus[node_id] = gpu_count
    return [
        DownInterval(gpus[node_id], begin, finish)
        for node_id, spans in by_node.items()
        for begin, finish in merge_intervals(spans)
        if finish > begin
    ]


@dataclass(frozen=True)
class PackHeatmap:
    rows: list[str]
    columns: list[datetime]
    values: list[list[float | None]]
    row_block: int
    column_hours: int


def pack_heatmap(
    *, cluster: Cluster, start: datetime, end: datetime, max_rows: int = 200, max_columns: int = 168
) -> PackHeatmap:
    """Node × hour utilization, bounded: nodes (by hostname) grouped in blocks of ``row_block``
    so at most ``max_rows`` rows, hours in blocks of ``column_hours`` so at most ``max_columns``.
    Summed in the database per node and column block, then per row block here."""
    hours = int((end - start).total_seconds() // 3600)
    column_hours = max(1, -(-hours // max_columns))
    columns = [start + HOUR * column_hours * i for i in range(-(-hours // column_hours))] if hours else []
    nodes = list(Node.objects.filter(cluster=cluster).order_by("hostname").values_list("pk", "hostname"))
    row_block = max(1, -(-len(nodes) // max_rows))
    row_of = {pk: position // row_block for position, (pk, _) in enumerate(nodes)}
    labels = []
    for first in range(0, len(nodes), row_block):
        group = nodes[first : first + row_block]
        labels.append(group[0][1] if len(group) == 1 else f"{group[0][1]} – {group[-1][1]}")
    sums = [[[0.0, 0.0] for _ in columns] for _ in labels]
    queryset = NodeHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end).values(
        "node_id", "hour", "sampled_gpu_s", "busy_gpu_s"
    )
    try:
        inner_sql, params = queryset.query.sql_with_params()
    except EmptyResultSet:
        inner_sql = None
    if inner_sql and labels and columns:
        if connection.vendor == "postgresql":
            block = "FLOOR((EXTRACT(EPOCH FROM hour) - %s) / %s)"
        else:
            block = "((CAST(strftime('%%s', hour) AS INTEGER) - %s) / %s)"
        sql = (
            f"SELECT node_id, {block} AS block, SUM(sampled_gpu_s), SUM(busy_gpu_s) "  # noqa: S608
            f"FROM ({inner_sql}) node_hours GROUP BY node_id, block"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [int(start.timestamp()), 3600 * column_hours, *params])
            for node_id, column, sampled, busy in cursor.fetchall():
                row = row_of.get(node_id)
                column = int(column)
                if row is None or not 0 <= column < len(columns):
                    continue
                sums[row][column][0] += sampled or 0.0
                sums[row][column][1] += busy or 0.0
    values = [
        [round(min(busy / sampled, 1.0), 4) if sampled > 0 else None for sampled, busy in row] for row in sums
    ]
    return PackHeatmap(labels, columns, values, row_block, column_hours)


def pack_node_gpus(*, cluster: Cluster) -> dict[str, int]:
    """GPUs per hostname (for node class GPU counts)."""
    return dict(Node.objects.filter(cluster=cluster).values_list("hostname", "gpu_count"))


def pack_sources(*, cluster: Cluster) -> list[DataSource]:
    return list(DataSource.objects.filter(cluster=cluster).order_by("kind", "name"))


def pack_decisions_between(*, cluster: Cluster, start: datetime, end: datetime) -> list[Decision]:
    return list(
        Decision.objects.filter(meeting__cluster=cluster, decided_at__gte=start, decided_at__lt=end)
        .select_related("meeting")
        .order_by("decided_at", "pk")
    )


def pack_open_actions(*, cluster: Cluster) -> list[Action]:
    return list(
        Action.objects.filter(meeting__cluster=cluster, status=ActionStatus.OPEN)
        .select_related("owner")
        .order_by("due_on", "pk")
    )


def pack_quota_events(*, cluster: Cluster, start: datetime, end: datetime) -> list[QuotaEvent]:
    return list(
        QuotaEvent.objects.filter(cycle__cluster=cluster, at__gte=start, at__lt=end, department__isnull=False)
        .select_related("department")
        .order_by("at", "pk")
    )


def pack_proposed_cycle(*, cluster: Cluster, after: datetime) -> QuotaCycle | None:
    """The next cycle for the committee to decide: the earliest beginning at or after ``after``
    (proposed ones first), else the latest still proposed."""
    upcoming = QuotaCycle.objects.filter(cluster=cluster, start__gte=after).order_by("start").first()
    if upcoming is not None:
        return upcoming
    return (
        QuotaCycle.objects.filter(cluster=cluster, status=QuotaCycleStatus.PROPOSED)
        .order_by("-start")
        .first()
    )


def pack_node_class_gpus(*, cluster: Cluster) -> dict[str, int]:
    """GPUs per node class in the cluster's latest classification cycle."""
    rows = NodeClassification.objects.filter(node__cluster=cluster)
    latest = rows.order_by("-cycle_end").values_list("cycle_end", flat=True).first()
    if latest is None:
        return {}
    out: dict[str, int] = defaultdict(int)
    for node_class, gpus in rows.filter(cycle_end=latest).values_list("node_class", "node__gpu_count"):
        out[node_class] += gpus
    return dict(out)


def pack_clusters() -> list[Cluster]:
    return list(Cluster.objects.order_by("slug"))


def pack_has_data(*, cluster: Cluster, start: datetime, end: datetime) -> bool:
    """Whether the cluster has any hourly rollup in [start, end) (no pack for an empty period)."""
    return ScopeHour.objects.filter(cluster=cluster, hour__gte=start, hour__lt=end).exists()
