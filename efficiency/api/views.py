"""Read-only API viewsets; querysets come from the selectors, so scoping is the pages' own."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from efficiency.api import serializers
from efficiency.choices import Role, SourceKind
from efficiency.filters import DepartmentFilter, JobFilter, NodeFilter
from efficiency.models import DataSource
from efficiency.scoping import user_role
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
