"""Faults API: incidents with their evidence and actions, and the fault evidence itself; the
incident actions call the services the pages call, which refuse what does not apply now."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from efficiency.api import serializers
from efficiency.api.common import HasPortalRole, range_or_400
from efficiency.api.params import KnownQueryParams
from efficiency.filters import FaultSignalFilter, IncidentFilter
from efficiency.forms import RangeForm
from efficiency.permissions import FAULT_OPERATORS, FAULT_READERS
from efficiency.selectors import faults as fault_selectors
from efficiency.services import faults as fault_services


class IncidentActionConflict(APIException):
    """An incident action that does not apply in the incident's state (409, with the reason)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = _("This action does not apply to the incident now.")
    default_code = "incident_action_refused"


class IncidentViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
    """Incidents (scoped: a head sees their departments' jobs' and those on their departments'
    nodes); admins isolate the node, restart the job, return the node to service, close.

    ``?status=open|recovering|resolved|closed``, ``?category=<root cause>``, ``?job=<external id>``.
    An action that does not apply in the incident's state (see ``operations`` in the detail) is a
    409 with the reason; closing needs ``{"reason": …}`` (else 400).
    """

    roles = FAULT_READERS
    action_roles = dict.fromkeys(["isolate", "restart", "return_to_service", "close"], FAULT_OPERATORS)
    permission_classes = [IsAuthenticated, HasPortalRole]
    filterset_class = IncidentFilter
    ordering_fields = ["occurred_at", "gpu_hours_lost"]
    ordering = ["-occurred_at"]

    def get_queryset(self):
        if self.action == "list":
            return fault_selectors.incident_list(user=self.request.user)
        return fault_selectors.incident_detail_list(user=self.request.user)

    def get_serializer_class(self):
        if self.action == "list":
            return serializers.IncidentSerializer
        return serializers.IncidentDetailSerializer

    def _act(self, operation: str, reason: str = ""):
        incident = self.get_object()
        try:
            fault_services.incident_operation_run(
                incident=incident, operation=operation, actor=self.request.user, reason=reason
            )
        except fault_services.IncidentActionRefused as refused:
            raise IncidentActionConflict(refused.reason) from None
        incident = self.get_queryset().get(pk=incident.pk)
        return Response(serializers.IncidentDetailSerializer(incident).data)

    @extend_schema(request=None, responses=serializers.IncidentDetailSerializer)
    @action(detail=True, methods=["post"])
    def isolate(self, request, pk=None):
        return self._act(fault_services.ISOLATE)

    @extend_schema(request=None, responses=serializers.IncidentDetailSerializer)
    @action(detail=True, methods=["post"])
    def restart(self, request, pk=None):
        return self._act(fault_services.RESTART)

    @extend_schema(request=None, responses=serializers.IncidentDetailSerializer)
    @action(detail=True, methods=["post"], url_path="return-to-service")
    def return_to_service(self, request, pk=None):
        return self._act(fault_services.RETURN_TO_SERVICE)

    @extend_schema(
        request=serializers.IncidentCloseSerializer, responses=serializers.IncidentDetailSerializer
    )
    @action(detail=True, methods=["post"])
    def close(self, request, pk=None):
        body = serializers.IncidentCloseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._act(fault_services.CLOSE, reason=body.validated_data["reason"])


class FaultSignalViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
    """Fault evidence (scoped); ``?range=7d`` (default 24 h), ``?category=``, ``?node=<hostname>``."""

    roles = FAULT_READERS
    permission_classes = [IsAuthenticated, HasPortalRole]
    serializer_class = serializers.FaultSignalSerializer
    filterset_class = FaultSignalFilter
    query_params = (RangeForm,)

    def get_queryset(self):
        params = self.request.query_params
        if "range" not in params and "start" not in params:
            params = params.copy()
            params["range"] = "24h"
        return fault_selectors.fault_signal_list(user=self.request.user, time_range=range_or_400(params))
