"""Quota planning API: cycles, their quotas, objections, backtests and exports, the quotas in
force and capacity alerts; the planning actions call the services the pages call."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpResponse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from efficiency.api import serializers
from efficiency.api.common import HasPortalRole, body_of, get_or_404, query_of, validation_error
from efficiency.api.params import KnownQueryParams
from efficiency.permissions import QUOTA_EXPORTERS, QUOTA_OBJECTORS, QUOTA_PLANNERS, QUOTA_READERS
from efficiency.selectors import quotas as quota_selectors
from efficiency.services import quotas as quota_services


class QuotaRefused(APIException):
    """A planning service refused the action (``QuotaError``); its message is the detail."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = _("This quota action cannot be done.")
    default_code = "quota_refused"


class _IgnoreFormatParameter:
    URL_FORMAT_OVERRIDE = None


class SchedulerFormatNegotiation(DefaultContentNegotiation):
    """On the export, ``?format=`` names the scheduler, not a renderer: negotiate on Accept only."""

    settings = _IgnoreFormatParameter


QUOTA_REFUSED = OpenApiResponse(description=_("Invalid input, or the planning service refused the action."))


class QuotaCycleViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
    """Quota cycles of a cluster: their quotas, objections and history, and the planning actions.

    Department heads see every cycle but only their departments' quotas, objections and
    events (and the shared pool's size, the whole cluster's); committee members plan; platform
    admins read and export.
    """

    permission_classes = [IsAuthenticated, HasPortalRole]
    roles = QUOTA_READERS
    action_roles = {
        "approve": QUOTA_PLANNERS,
        "backtest": QUOTA_EXPORTERS,
        "backtest_run": QUOTA_PLANNERS,
        "export": QUOTA_EXPORTERS,
        "objection_create": QUOTA_OBJECTORS,
        "propose": QUOTA_PLANNERS,
    }
    filter_backends: list = []  # ``cluster`` and ``status`` go to the selector
    action_query_params = {
        "list": (serializers.QuotaCycleQuerySerializer,),
        "export": (serializers.QuotaExportQuerySerializer,),
    }
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return quota_selectors.quota_cycle_list(user=self.request.user, cluster=None)
        query = query_of(serializers.QuotaCycleQuerySerializer, self.request)
        cluster = query.get("cluster") or quota_selectors.default_cluster()
        cycles = quota_selectors.quota_cycle_list(user=self.request.user, cluster=cluster)
        if "status" in query:
            cycles = cycles.filter(status=query["status"])
        return cycles

    def get_object(self):
        return get_or_404(quota_selectors.quota_cycle_get, user=self.request.user, pk=self.kwargs["pk"])

    def get_serializer_class(self):
        if self.action == "list":
            return serializers.QuotaCycleSerializer
        return serializers.QuotaCycleDetailSerializer

    def _detail(self, pk: int, *, status_code: int = status.HTTP_200_OK) -> Response:
        cycle = quota_selectors.quota_cycle_get(user=self.request.user, pk=pk)
        return Response(
            serializers.QuotaCycleDetailSerializer(cycle, context=self.get_serializer_context()).data,
            status=status_code,
        )

    @extend_schema(parameters=[serializers.QuotaCycleQuerySerializer])
    def list(self, request, *args, **kwargs):
        """Every cycle of one cluster (``?cluster=slug``, else the first with nodes), newest first."""
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=serializers.QuotaApproveSerializer,
        responses={200: serializers.QuotaCycleDetailSerializer, 400: QUOTA_REFUSED},
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approve a proposal (committee): its quotas come into force at its start.

        Needs a comment; refused with the reasons when a GPU model's guarantees exceed its capacity.
        """
        cycle = self.get_object()
        body = body_of(serializers.QuotaApproveSerializer, request)
        try:
            quota_services.quota_cycle_approve(cycle=cycle, actor=request.user, comment=body["comment"])
        except DjangoValidationError as error:
            raise validation_error(error) from None
        except quota_services.QuotaError as error:
            raise QuotaRefused(str(error)) from None
        return self._detail(cycle.pk)

    @extend_schema(responses=serializers.QuotaBacktestSerializer)
    @action(detail=True, methods=["get"])
    def backtest(self, request, pk=None):
        """The latest backtest: last cycle's jobs replayed under the fixed partition, the quotas
        in force and this cycle's (``results``: one entry per policy). 404 when none ran yet."""
        cycle = self.get_object()
        backtest = quota_selectors.quota_backtest_latest(user=request.user, cycle=cycle)
        if backtest is None:
            raise NotFound(_("This cycle has not been backtested yet."))
        return Response(serializers.QuotaBacktestSerializer(backtest).data)

    @extend_schema(request=None, responses={201: serializers.QuotaBacktestSerializer})
    @backtest.mapping.post
    def backtest_run(self, request, pk=None):
        """Run the backtest now (committee); it takes seconds to a minute on a busy cluster."""
        cycle = self.get_object()
        backtest = quota_services.quota_backtest_run(cycle=cycle)
        return Response(serializers.QuotaBacktestSerializer(backtest).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[serializers.QuotaExportQuerySerializer],
        responses={
            (200, "application/yaml"): OpenApiTypes.STR,
            (200, "text/x-shellscript"): OpenApiTypes.STR,
            400: QUOTA_REFUSED,
        },
    )
    @action(detail=True, methods=["get"], content_negotiation_class=SchedulerFormatNegotiation)
    def export(self, request, pk=None):
        """An approved cycle as Kueue, Volcano or Slurm configuration (a download)."""
        cycle = self.get_object()
        query = query_of(serializers.QuotaExportQuerySerializer, request)
        try:
            filename, content_type, text = quota_services.quota_export(
                cycle=cycle, fmt=query["format"], actor=request.user
            )
        except quota_services.QuotaError as error:
            raise QuotaRefused(str(error)) from None
        response = HttpResponse(text, content_type=f"{content_type}; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response

    @extend_schema(responses=serializers.QuotaObjectionSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def objections(self, request, pk=None):
        """The objections to this cycle the caller may see, newest first."""
        cycle = self.get_object()
        return Response(serializers.QuotaObjectionSerializer(cycle.objections.all(), many=True).data)

    @extend_schema(
        request=serializers.QuotaObjectionCreateSerializer,
        responses={201: serializers.QuotaObjectionSerializer, 400: QUOTA_REFUSED},
    )
    @objections.mapping.post
    def objection_create(self, request, pk=None):
        """Object to a proposal (department heads, for a department they head in this cycle)."""
        cycle = self.get_object()
        departments = quota_selectors.quota_objection_departments(user=request.user, cycle=cycle)
        body = body_of(serializers.QuotaObjectionCreateSerializer, request, departments=departments)
        try:
            objection = quota_services.quota_objection_file(
                cycle=cycle, department=body["department"], author=request.user, text=body["text"]
            )
        except quota_services.QuotaError as error:
            raise QuotaRefused(str(error)) from None
        return Response(serializers.QuotaObjectionSerializer(objection).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=serializers.QuotaProposeSerializer,
        responses={201: serializers.QuotaCycleDetailSerializer, 400: QUOTA_REFUSED},
    )
    @action(detail=False, methods=["post"])
    def propose(self, request):
        """Compute the next cycle's proposal now (committee; the daily task does it ahead of time)."""
        body = body_of(serializers.QuotaProposeSerializer, request)
        cluster = body.get("cluster") or quota_selectors.default_cluster()
        if cluster is None:
            raise NotFound(_("No cluster."))
        try:
            cycle = quota_services.quota_proposal_create(cluster=cluster, actor=request.user)
        except quota_services.QuotaError as error:
            raise QuotaRefused(str(error)) from None
        return self._detail(cycle.pk, status_code=status.HTTP_201_CREATED)


class QuotaViewSet(KnownQueryParams, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """One department's guarantee of one GPU model in a cycle; committee members set the
    numbers of a proposal with ``PATCH`` (each change recorded in the cycle's history)."""

    serializer_class = serializers.QuotaSerializer
    permission_classes = [IsAuthenticated, HasPortalRole]
    roles = QUOTA_READERS
    action_roles = {"partial_update": QUOTA_PLANNERS}
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        return quota_selectors.quota_list(user=self.request.user)  # for the schema: rows come from quota_get

    def get_object(self):
        return get_or_404(quota_selectors.quota_get, user=self.request.user, pk=self.kwargs["pk"])

    @extend_schema(
        request=serializers.QuotaUpdateSerializer,
        responses={200: serializers.QuotaSerializer, 400: QUOTA_REFUSED},
    )
    def partial_update(self, request, pk=None):
        """Set a proposed quota's guaranteed GPUs and borrowing limit (null: no limit), with a comment.

        A number that takes its GPU model's guarantees past the capacity (a negative shared pool)
        is a 400 on ``guaranteed_gpus`` with the numbers, the check approval makes.
        """
        quota = self.get_object()
        body = body_of(serializers.QuotaUpdateSerializer, request)
        try:
            quota_services.quota_update(
                quota=quota,
                actor=request.user,
                guaranteed_gpus=body.get("guaranteed_gpus", quota.guaranteed_gpus),
                borrowing_limit_gpus=body.get("borrowing_limit_gpus", quota.borrowing_limit_gpus),
                comment=body["comment"],
            )
        except DjangoValidationError as error:
            raise validation_error(error) from None
        except quota_services.QuotaError as error:
            raise QuotaRefused(str(error)) from None
        quota.refresh_from_db()
        return Response(serializers.QuotaSerializer(quota).data)


class QuotaObjectionViewSet(KnownQueryParams, viewsets.GenericViewSet):
    """Objections of department heads; the committee answers them."""

    serializer_class = serializers.QuotaObjectionSerializer
    permission_classes = [IsAuthenticated, HasPortalRole]
    roles = QUOTA_PLANNERS
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        # For the schema: rows come one at a time from ``quota_objection_get``.
        return quota_selectors.quota_objection_list(user=self.request.user)

    def get_object(self):
        return get_or_404(quota_selectors.quota_objection_get, user=self.request.user, pk=self.kwargs["pk"])

    @extend_schema(
        request=serializers.QuotaObjectionAnswerSerializer,
        responses={200: serializers.QuotaObjectionSerializer, 400: QUOTA_REFUSED},
    )
    @action(detail=True, methods=["post"])
    def answer(self, request, pk=None):
        """Answer an objection (committee)."""
        objection = self.get_object()
        body = body_of(serializers.QuotaObjectionAnswerSerializer, request)
        try:
            objection = quota_services.quota_objection_answer(
                objection=objection, actor=request.user, response=body["response"]
            )
        except quota_services.QuotaError as error:
            raise QuotaRefused(str(error)) from None
        return Response(serializers.QuotaObjectionSerializer(objection).data)


class CapacityAlertViewSet(KnownQueryParams, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Capacity alerts, newest first: open ones by default, ``?open=false`` for resolved ones too.

    Committee members and platform admins see them; department heads get an empty list (the
    alerts compare every department).
    """

    serializer_class = serializers.CapacityAlertSerializer
    permission_classes = [IsAuthenticated, HasPortalRole]
    roles = QUOTA_READERS
    filter_backends: list = []  # ``open`` goes to the selector
    action_query_params = {"list": (serializers.CapacityAlertQuerySerializer,)}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return quota_selectors.capacity_alert_list(user=self.request.user).none()
        query = query_of(serializers.CapacityAlertQuerySerializer, self.request)
        return quota_selectors.capacity_alert_list(user=self.request.user, open_only=query["open"])

    @extend_schema(parameters=[serializers.CapacityAlertQuerySerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


class QuotaOverviewView(KnownQueryParams, APIView):
    """The quotas in force (``?cluster=slug``, else the first cluster with nodes): guaranteed vs
    used vs borrowed per department so far this cycle, in mean GPUs over the cycle's hours.

    ``cycle`` is null when no approved cycle has begun yet.
    """

    permission_classes = [IsAuthenticated, HasPortalRole]
    roles = QUOTA_READERS
    query_params = (serializers.ClusterQuerySerializer,)

    @extend_schema(
        parameters=[serializers.ClusterQuerySerializer], responses=serializers.QuotaOverviewSerializer
    )
    def get(self, request):
        query = query_of(serializers.ClusterQuerySerializer, request)
        cluster = query.get("cluster") or quota_selectors.default_cluster()
        if cluster is None:
            overview = quota_selectors.QuotaOverview(None, [], {}, {}, None, None, None, [])
        else:
            overview = quota_selectors.quota_overview(user=request.user, cluster=cluster, now=timezone.now())
        return Response(serializers.QuotaOverviewSerializer({"cluster": cluster, **vars(overview)}).data)
