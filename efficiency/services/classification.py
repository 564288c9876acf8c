"""Classifying nodes over the last cycle (idle / hot / fluctuating / steady), stored with why."""

from dataclasses import fields
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from efficiency.analysis.node_classes import ClassThresholds, NodeHourUtil, classify_nodes
from efficiency.analysis.usage import UsageTotals
from efficiency.days import whole_days_before
from efficiency.models import Cluster, NodeClassification, NodeHour
from efficiency.times import portal_day_zone


def class_thresholds() -> ClassThresholds:
    """Thresholds from ``PORTAL_NODE_CLASS_THRESHOLDS`` (any subset of ClassThresholds' fields)."""
    known = {field.name for field in fields(ClassThresholds)}
    overrides = {k: v for k, v in settings.PORTAL_NODE_CLASS_THRESHOLDS.items() if k in known}
    return ClassThresholds(**overrides)


def node_classes_refresh(
    *, cluster: Cluster, now: datetime | None = None, cycle_days: int | None = None
) -> int:
    """Classify every node of ``cluster`` over the cycle of whole portal days that ended at the
    last midnight of the portal-day zone (``TIME_ZONE``), stored with that zone.

    Re-running on the same day replaces that cycle's rows. Rows cut in another zone whose cycle
    overlaps this one are replaced too, so the latest classification never mixes two zones'
    cycles; older ones stay as history. Returns how many nodes were classified.
    """
    now = now or timezone.now()
    cycle_days = cycle_days or settings.PORTAL_CYCLE_DAYS
    zone = portal_day_zone()
    cycle_start, cycle_end = whole_days_before(now, cycle_days, zone)
    hours = (
        NodeHour.objects.filter(cluster=cluster, hour__gte=cycle_start, hour__lt=cycle_end)
        .values_list("node_id", "hour", "sampled_gpu_s", "busy_gpu_s")
        .order_by("node_id", "hour")
    )
    rows = []
    for node_id, hour, sampled, busy in hours.iterator(chunk_size=10_000):
        utilization = UsageTotals(sampled_gpu_s=sampled, busy_gpu_s=busy).utilization
        rows.append(NodeHourUtil(node_id, hour, None if utilization is None else utilization * 100))
    results = classify_nodes(rows, class_thresholds())
    with transaction.atomic():
        of_cluster = NodeClassification.objects.filter(node__cluster=cluster)
        of_cluster.filter(cycle_start=cycle_start, cycle_end=cycle_end).delete()
        of_cluster.filter(cycle_start__lt=cycle_end, cycle_end__gt=cycle_start).exclude(
            day_zone=zone.key
        ).delete()
        NodeClassification.objects.bulk_create(
            NodeClassification(
                node_id=result.node_id,
                cycle_start=cycle_start,
                cycle_end=cycle_end,
                day_zone=zone.key,
                node_class=result.node_class,
                covered_hours=result.covered_hours,
                mean_util_pct=result.mean_util_pct,
                idle_hour_share=result.idle_hour_share,
                hot_hour_share=result.hot_hour_share,
                stddev_pct=result.stddev_pct,
                reason=result.reason,
                computed_at=now,
            )
            for result in results
        )
    return len(results)
