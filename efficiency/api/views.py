"""Read-only API viewsets; querysets come from the selectors, so scoping is the pages' own."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from efficiency.analysis.usage import UsageTotals
from efficiency.api import serializers
from efficiency.choices import Role, SourceKind
from efficiency.filters import DepartmentFilter, JobFilter, NodeFilter
from efficiency.forms import TimeRange, time_range_from_request
from efficiency.models import DataSource
from efficiency.scoping import user_role
from efficiency.selectors import usage
from efficiency.selectors.inventory import department_list, node_list
from efficiency.selectors.jobs import job_list
from efficiency.services.sources import log_push_receive


class DepartmentViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.DepartmentSerializer
    filterset_class = DepartmentFilter
    lookup_field = "code"
    ordering_fields = ["code", "name", "gpu_count", "running_gpu_count"]
    ordering = ["name"]

    def get_queryset(self):
        return department_list(user=self.request.user)


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    filterset_class = NodeFilter
    ordering_fields = ["hostname", "gpu_count", "state"]
    ordering = ["hostname"]

    def get_queryset(self):
        queryset = node_list(user=self.request.user)
        return queryset.prefetch_related("gpus") if self.action == "retrieve" else queryset

    def get_serializer_class(self):
        if self.action == "retrieve":
            return serializers.NodeDetailSerializer
        return serializers.NodeSerializer


class JobViewSet(viewsets.ReadOnlyModelViewSet):
    filterset_class = JobFilter
    ordering_fields = ["submitted_at", "started_at", "ended_at", "gpu_count"]
    ordering = ["-submitted_at"]

    def get_queryset(self):
        queryset = job_list(user=self.request.user)
        return queryset.prefetch_related("nodes") if self.action == "retrieve" else queryset

    def get_serializer_class(self):
        if self.action == "retrieve":
            return serializers.JobDetailSerializer
        return serializers.JobSerializer


class CanPushLogs(BasePermission):
    """Platform admins, or a log shipper's service account with the ``add_logchunk`` permission."""

    def has_permission(self, request, view) -> bool:
        return user_role(request.user) == Role.PLATFORM_ADMIN or request.user.has_perm(
            "efficiency.add_logchunk"
        )


class LogPushView(APIView):
    """``POST`` NDJSON log lines (one JSON object a line) into a *Log push* source.

    Each line: ``{"stream": "...", "offset": 123, "line": "...", "job": "...", "rank": 0}``.
    Lines already received (same stream and offset) are counted as duplicates, bad lines are
    rejected one by one and listed in the answer; the good ones are stored.
    """

    permission_classes = [IsAuthenticated, CanPushLogs]
    parser_classes: list = []  # the body is read raw: NDJSON is not one JSON document

    @extend_schema(request={"application/x-ndjson": str}, responses=serializers.LogPushResultSerializer)
    def post(self, request, pk: int):
        source = get_object_or_404(DataSource, pk=pk, kind=SourceKind.LOG_PUSH, enabled=True)
        run = log_push_receive(source=source, body=request.body)
        return Response(serializers.LogPushResultSerializer(run).data)


def _range_or_400(request) -> TimeRange:
    form, time_range = time_range_from_request(request.query_params)
    if time_range is None:
        raise ValidationError(form.errors)
    return time_range


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


class UsageSummaryView(APIView):
    """Utilization and allocation over a range (``?range=7d`` or ``?range=custom&start=&end=``):
    the total over what the caller may see, per department, and the series per hour or day.

    Ratios are 0-1; ``utilization`` is null where nothing was sampled (unknown, not zero).
    """

    @extend_schema(responses=dict)
    def get(self, request):
        time_range = _range_or_400(request)
        user = request.user
        return Response(
            {
                "start": time_range.start,
                "end": time_range.end,
                "bucket": time_range.bucket,
                "total": _usage_payload(usage.cluster_usage(user=user, time_range=time_range)),
                "departments": [
                    {"code": row.department.code, "name": row.department.name, **_usage_payload(row.totals)}
                    for row in usage.department_usage_list(user=user, time_range=time_range)
                ],
                "series": [
                    {
                        "time": point.time,
                        "gpus_allocated": point.gpus_allocated,
                        **_usage_payload(point.totals),
                    }
                    for point in usage.cluster_usage_series(user=user, time_range=time_range)
                ],
            }
        )


class IdleAllocationView(APIView):
    """Jobs that held GPUs below 1% busy for ``min_hours`` (default 2) hours in a row."""

    @extend_schema(responses=dict)
    def get(self, request):
        time_range = _range_or_400(request)
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
