"""Usage API: utilization and allocation over a range, and idle allocations."""

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from efficiency.analysis.usage import UsageTotals
from efficiency.api import serializers
from efficiency.api.common import range_or_400
from efficiency.api.params import KnownQueryParams
from efficiency.forms import ClusterForm, RangeForm
from efficiency.selectors import usage


def _usage_payload(totals: UsageTotals) -> dict:
    return {
        "available_gpu_hours": round(totals.available_gpu_hours, 3),
        "allocated_gpu_hours": round(totals.allocated_gpu_hours, 3),
        "busy_gpu_hours": round(totals.busy_gpu_hours, 3),
        "sampled_gpu_hours": round(totals.sampled_gpu_hours, 3),
        "allocation_rate": totals.allocation_rate,
        "utilization": totals.utilization,
        "coverage": totals.coverage,
    }


def cluster_from_request(params):
    """``?cluster=<slug>`` as the overview page reads it: (cluster or None for all, error or None)."""
    form = ClusterForm(params)
    slug = form.cleaned_data["cluster"] if form.is_valid() else None
    if form.is_valid() and not slug:
        return None, None
    cluster = usage.cluster_by_slug(slug) if slug else None
    if cluster is None:
        known = ", ".join(key for key, _name in usage.cluster_choices())
        message = _("There is no cluster “%(slug)s”; the clusters are: %(known)s.")
        return None, message % {"slug": params.get("cluster", ""), "known": known}
    return cluster, None


class UsageSummaryView(KnownQueryParams, APIView):
    """Utilization and allocation over a range (``?range=7d`` or ``?range=custom&start=&end=``):
    the total over what the caller may see, per department, the shared pool (nodes no
    department owns; null for a department head), and the series per hour or day. Of one
    cluster with ``?cluster=<slug>`` (an unknown slug is a 400), else of every cluster summed.

    Ratios are 0-1; ``utilization`` is null where nothing was sampled (unknown, not zero).
    """

    query_params = (RangeForm, ClusterForm)

    @extend_schema(responses=dict)
    def get(self, request):
        time_range = range_or_400(request.query_params)
        cluster, error = cluster_from_request(request.query_params)
        if error:
            raise ValidationError({"cluster": [error]})
        user = request.user
        shared_pool = usage.shared_pool_usage(user=user, time_range=time_range, cluster=cluster)
        return Response(
            {
                "start": time_range.start,
                "end": time_range.end,
                "bucket": time_range.bucket,
                "cluster": cluster.slug if cluster else None,
                "total": _usage_payload(
                    usage.cluster_usage(user=user, time_range=time_range, cluster=cluster)
                ),
                "departments": [
                    {"code": row.department.code, "name": row.department.name, **_usage_payload(row.totals)}
                    for row in usage.department_usage_list(user=user, time_range=time_range, cluster=cluster)
                ],
                "shared_pool": None if shared_pool is None else _usage_payload(shared_pool),
                "series": [
                    {
                        "time": point.time,
                        "gpus_allocated": point.gpus_allocated,
                        **_usage_payload(point.totals),
                    }
                    for point in usage.cluster_usage_series(user=user, time_range=time_range, cluster=cluster)
                ],
            }
        )


class IdleAllocationView(KnownQueryParams, APIView):
    """Jobs that held GPUs below 1% busy for ``min_hours`` (default 2) hours in a row."""

    query_params = (RangeForm, "min_hours")

    @extend_schema(responses=serializers.IdleAllocationSerializer(many=True))
    def get(self, request):
        time_range = range_or_400(request.query_params)
        try:
            min_hours = max(1, int(request.query_params.get("min_hours", 2)))
        except ValueError:
            raise ValidationError({"min_hours": ["Enter a whole number."]}) from None
        rows = usage.idle_allocation_list(user=request.user, time_range=time_range, min_hours=min_hours)
        return Response(
            [
                {
                    "job": row.job.pk,
                    "external_id": row.job.external_id,
                    "department": row.job.department.code if row.job.department else None,
                    "start": row.start,
                    "end": row.end,
                    "idle_hours": row.idle_hours,
                    "wasted_gpu_hours": round(row.wasted_gpu_hours, 3),
                }
                for row in rows
            ]
        )
