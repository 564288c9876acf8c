"""Inventory API: departments, nodes and jobs, scoped by the selectors; platform admins edit
what the sources cannot tell about a node (PATCH)."""

from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers as drf
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from efficiency.api import serializers
from efficiency.api.common import HasPortalRole, range_or_400
from efficiency.api.params import KnownQueryParams
from efficiency.filters import DepartmentFilter, JobFilter, NodeFilter
from efficiency.forms import RangeForm
from efficiency.permissions import NODE_EDITORS
from efficiency.selectors.inventory import NODE_SORTS, department_list, node_list, node_usage_list
from efficiency.selectors.jobs import job_list
from efficiency.services.node_edits import EDITABLE_NODE_FIELDS, node_attributes_update


class DepartmentViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
    serializer_class = serializers.DepartmentSerializer
    filterset_class = DepartmentFilter
    lookup_field = "code"
    ordering_fields = ["code", "name", "gpu_count", "running_gpu_count"]
    ordering = ["name"]

    def get_queryset(self):
        return department_list(user=self.request.user)


class NodeUsageSerializer(serializers.NodeSerializer):
    """A node in the list, with its latest class and its figures over the requested range."""

    node_class = drf.CharField(read_only=True, allow_null=True)
    util_pct = drf.FloatField(read_only=True, allow_null=True)
    coverage_pct = drf.FloatField(read_only=True, allow_null=True)

    class Meta(serializers.NodeSerializer.Meta):
        fields = [*serializers.NodeSerializer.Meta.fields, "node_class", "util_pct", "coverage_pct"]


@extend_schema_field(OpenApiTypes.STR)
class DepartmentCodeField(drf.SlugRelatedField):
    """A department by code, among those the caller may see."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="code", **kwargs)

    def get_queryset(self):
        return department_list(user=self.context["request"].user)


class NodeEditSerializer(drf.Serializer):
    """The fields a platform admin may set on a node; every one optional, nothing else allowed."""

    fault_domain = drf.CharField(max_length=100, allow_blank=True, required=False)
    owner_department = DepartmentCodeField(allow_null=True, required=False)
    rdma_capable = drf.BooleanField(required=False)
    state_reason = drf.CharField(max_length=300, allow_blank=True, required=False)

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(EDITABLE_NODE_FIELDS))
        if unknown:
            raise ValidationError(
                {
                    name: [
                        _("Cannot be changed here; editable: %(fields)s.")
                        % {"fields": ", ".join(EDITABLE_NODE_FIELDS)}
                    ]
                    for name in unknown
                }
            )
        if not attrs:
            raise ValidationError(
                _("Send at least one of: %(fields)s.") % {"fields": ", ".join(EDITABLE_NODE_FIELDS)}
            )
        return attrs


class NodeViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
    """Nodes the caller may see. The list gives each node's latest class (``node_class``, null
    when never classified) and its ``util_pct`` (busy / sampled GPU time, null without samples)
    and ``coverage_pct`` over ``?range=`` (default 7d, or ``range=custom&start=&end=``);
    ``?sort=`` orders by one of ``NODE_SORTS`` ("-" descends, nodes without a value last).

    ``PATCH`` (platform admins): ``fault_domain``, ``owner_department`` (a code, or null for the
    shared pool), ``rdma_capable``, ``state_reason``; recorded in the audit trail.
    """

    roles = NODE_EDITORS  # for the edit; reading is scoped by the selectors, as for every list
    filterset_class = NodeFilter
    ordering_fields = ["hostname", "gpu_count", "state"]
    action_query_params = {"list": (RangeForm, "sort")}

    def get_queryset(self):
        if self.action == "list":
            time_range = range_or_400(self.request.query_params)
            sort = self.request.query_params.get("sort") or "hostname"
            if sort.removeprefix("-") not in NODE_SORTS:
                message = _("Cannot sort by %(sort)s; sort by one of: %(allowed)s (a leading - descends).")
                raise ValidationError({"sort": [message % {"sort": sort, "allowed": ", ".join(NODE_SORTS)}]})
            return node_usage_list(user=self.request.user, time_range=time_range, sort=sort)
        queryset = node_list(user=self.request.user)
        return queryset.prefetch_related("gpus") if self.action == "retrieve" else queryset

    def get_permissions(self):
        if self.action == "partial_update":
            return [IsAuthenticated(), HasPortalRole()]
        return super().get_permissions()

    def get_serializer_class(self):
        if self.action == "list":
            return NodeUsageSerializer
        if self.action == "retrieve":
            return serializers.NodeDetailSerializer
        return serializers.NodeSerializer

    @extend_schema(request=NodeEditSerializer, responses=serializers.NodeSerializer)
    def partial_update(self, request, *args, **kwargs):
        node = self.get_object()
        body = NodeEditSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        node_attributes_update(node=node, changes=body.validated_data, reason="API edit")
        return Response(serializers.NodeSerializer(node).data)


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
