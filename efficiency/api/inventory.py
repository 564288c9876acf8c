"""Inventory API: departments, nodes and jobs, read-only, scoped by the selectors."""

from rest_framework import viewsets

from efficiency.api import serializers
from efficiency.api.params import KnownQueryParams
from efficiency.filters import DepartmentFilter, JobFilter, NodeFilter
from efficiency.selectors.inventory import department_list, node_list
from efficiency.selectors.jobs import job_list


class DepartmentViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.DepartmentSerializer
    filterset_class = DepartmentFilter
    lookup_field = "code"
    ordering_fields = ["code", "name", "gpu_count", "running_gpu_count"]
    ordering = ["name"]

    def get_queryset(self):
        return department_list(user=self.request.user)


class NodeViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
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


class JobViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
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
