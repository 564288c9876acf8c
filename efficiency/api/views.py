"""API viewsets; querysets come from the selectors, so scoping is the pages' own, and actions
call the services the pages call, under the same role rules."""

import io
from typing import BinaryIO

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import Prefetch
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from efficiency.analysis.usage import UsageTotals
from efficiency.api import serializers
from efficiency.api.params import KnownQueryParams
from efficiency.choices import Role, SourceKind
from efficiency.collectors.logpush import PushRefused
from efficiency.filters import DepartmentFilter, FaultSignalFilter, IncidentFilter, JobFilter, NodeFilter
from efficiency.forms import RangeForm, TimeRange, time_range_from_request
from efficiency.models import ApiToken, DataSource, Department, FaultSignal, Quota, QuotaCycle, QuotaObjection
from efficiency.scoping import scope_queryset, sees_all_departments, user_role
from efficiency.selectors import faults as fault_selectors
from efficiency.selectors import quotas as quota_selectors
from efficiency.selectors import usage
from efficiency.selectors.inventory import department_list, node_list
from efficiency.selectors.jobs import job_list
from efficiency.services import faults as fault_services
from efficiency.services import quotas as quota_services
from efficiency.services.sources import log_push_receive
from efficiency.views.faults import OPERATORS as FAULT_OPERATORS
from efficiency.views.faults import VIEWERS as FAULT_VIEWERS
from efficiency.views.quotas import EXPORTERS, PLANNERS, VIEWERS


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


class CanPushLogs(BasePermission):
    """The source's own push token; or platform admins, or a log shipper's service account
    with the ``add_logchunk`` permission (any source)."""

    def has_permission(self, request, view) -> bool:
        token = request.auth
        if isinstance(token, ApiToken) and token.source_id is not None:
            self.message = _("This push token belongs to the source %(source)s, not to this one.") % {
                "source": token.source
            }
            return str(token.source_id) == str(view.kwargs.get("pk"))
        return user_role(request.user) == Role.PLATFORM_ADMIN or request.user.has_perm(
            "efficiency.add_logchunk"
        )


class LogPushView(KnownQueryParams, APIView):
    """``POST`` NDJSON log lines (one JSON object a line) into a *Log push* source.

    Each line: ``{"stream": "...", "offset": 123, "line": "...", "job": "...", "rank": 0}``. The
    body may be chunked (no Content-Length) and gzip or deflate encoded. Every loss has a status
    a shipper acts on: 200 when every line was stored or already known, 200 ``partial`` with the
    rejected lines when only some lines were bad (retrying cannot mend them), 400 with the
    reasons when no line was good, 413 when the body is too large (bytes, inflated bytes or
    lines: split the batch), 415 for an encoding we do not inflate; a refused body stores nothing.
    """

    permission_classes = [IsAuthenticated, CanPushLogs]
    accepts_push_tokens = True
    parser_classes: list = []  # the body is read raw: NDJSON is not one JSON document

    @extend_schema(
        request={"application/x-ndjson": str},
        responses={
            200: serializers.LogPushResultSerializer,
            400: OpenApiResponse(serializers.LogPushResultSerializer, description="no line was good"),
            411: OpenApiResponse(description="chunked body on a server that cannot decode it"),
            413: OpenApiResponse(description="body too large: bytes, inflated bytes or lines"),
            415: OpenApiResponse(description="Content-Encoding other than gzip, deflate or none"),
        },
    )
    def post(self, request, pk: int):
        source = get_object_or_404(DataSource, pk=pk, kind=SourceKind.LOG_PUSH, enabled=True)
        try:
            body, content_length = _push_body(request._request)
            run = log_push_receive(
                source=source,
                body=body,
                content_length=content_length,
                content_encoding=request.headers.get("Content-Encoding", ""),
                max_bytes=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
            )
        except PushRefused as refused:
            return Response({"status": "refused", "detail": refused.reason}, status=refused.status)
        if run.stored:
            from efficiency.tasks import fault_scan_source_task

            transaction.on_commit(lambda: fault_scan_source_task.delay(source.pk))
        nothing_good = run.rejected and not (run.stored or run.duplicates)
        return Response(
            serializers.LogPushResultSerializer(run).data,
            status=status.HTTP_400_BAD_REQUEST if nothing_good else status.HTTP_200_OK,
        )


def _push_body(request) -> tuple[BinaryIO, int | None]:
    """The request's body stream and announced length (``None`` for a chunked body).

    Django reads a body without Content-Length as empty; a chunked body is read from the WSGI
    input itself, which only a server that decodes the chunks (gunicorn says so with
    ``wsgi.input_terminated``) can give. Elsewhere (``runserver``) it is refused with 411.
    """
    length = request.META.get("CONTENT_LENGTH", "")
    if length:
        try:
            return request, int(length)
        except ValueError:
            raise PushRefused(400, f"Content-Length {length[:40]!r} is not a number") from None
    if "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        if not request.META.get("wsgi.input_terminated"):
            raise PushRefused(411, "this server cannot read a chunked body: send a Content-Length")
        return request.META["wsgi.input"], None
    return io.BytesIO(), 0


def _range_or_400_params(params) -> TimeRange:
    form, time_range = time_range_from_request(params)
    if time_range is None:
        raise ValidationError(form.errors)
    return time_range


def _range_or_400(request) -> TimeRange:
    return _range_or_400_params(request.query_params)


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


class UsageSummaryView(KnownQueryParams, APIView):
    """Utilization and allocation over a range (``?range=7d`` or ``?range=custom&start=&end=``):
    the total over what the caller may see, per department, and the series per hour or day.

    Ratios are 0-1; ``utilization`` is null where nothing was sampled (unknown, not zero).
    """

    query_params = (RangeForm,)

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


class IdleAllocationView(KnownQueryParams, APIView):
    """Jobs that held GPUs below 1% busy for ``min_hours`` (default 2) hours in a row."""

    query_params = (RangeForm, "min_hours")

    @extend_schema(responses=serializers.IdleAllocationSerializer(many=True))
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


# --- Quota planning ---------------------------------------------------------------------------


class HasPortalRole(BasePermission):
    """The caller's portal role is one the view allows for this action.

    ``view.action_roles`` maps an action (a viewset method name) to its roles; every other
    action needs one of ``view.roles``. The role sets are the quota pages' own.
    """

    def has_permission(self, request, view) -> bool:
        roles = getattr(view, "action_roles", {}).get(getattr(view, "action", None), view.roles)
        return user_role(request.user) in roles


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


def _get_or_404(selector, **kwargs):
    try:
        return selector(**kwargs)
    except ObjectDoesNotExist:
        raise NotFound from None


def _query(serializer_class, request) -> dict:
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return query.validated_data


def _validation_error(error: DjangoValidationError) -> ValidationError:
    """A service's ValidationError as DRF's 400: by field when it names fields."""
    if hasattr(error, "error_dict"):
        return ValidationError(error.message_dict)
    return ValidationError({api_settings.NON_FIELD_ERRORS_KEY: error.messages})


def _body(serializer_class, request, **kwargs) -> dict:
    body = serializer_class(data=request.data, **kwargs)
    body.is_valid(raise_exception=True)
    return body.validated_data


QUOTA_REFUSED = OpenApiResponse(description=_("Invalid input, or the planning service refused the action."))


class QuotaCycleViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
    """Quota cycles of a cluster: their quotas, objections and history, and the planning actions.

    Department heads see every cycle but only their departments' quotas, objections and
    events, and no shared pool; committee members plan; platform admins read and export.
    """

    permission_classes = [IsAuthenticated, HasPortalRole]
    roles = VIEWERS
    action_roles = {
        "approve": PLANNERS,
        "backtest": EXPORTERS,
        "backtest_run": PLANNERS,
        "export": EXPORTERS,
        "objection_create": (Role.DEPARTMENT_HEAD,),
        "propose": PLANNERS,
    }
    filter_backends: list = []  # ``cluster`` and ``status`` go to the selector
    action_query_params = {
        "list": (serializers.QuotaCycleQuerySerializer,),
        "export": (serializers.QuotaExportQuerySerializer,),
    }
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return QuotaCycle.objects.none()
        query = _query(serializers.QuotaCycleQuerySerializer, self.request)
        cluster = query.get("cluster") or quota_selectors.default_cluster()
        if cluster is None:
            return QuotaCycle.objects.none()
        cycles = (
            quota_selectors.quota_cycle_list(user=self.request.user, cluster=cluster)
            .select_related("cluster")
            .order_by("-start")  # an aggregating query drops Meta.ordering
        )
        if "status" in query:
            cycles = cycles.filter(status=query["status"])
        if sees_all_departments(self.request.user):
            # The shared pool is what every department's guarantees leave (see the serializer).
            cycles = cycles.prefetch_related(
                Prefetch("quotas", queryset=Quota.objects.select_related("department"), to_attr="every_quota")
            )
        return cycles

    def get_object(self) -> QuotaCycle:
        return _get_or_404(quota_selectors.quota_cycle_get, user=self.request.user, pk=self.kwargs["pk"])

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
        body = _body(serializers.QuotaApproveSerializer, request)
        try:
            quota_services.quota_cycle_approve(cycle=cycle, actor=request.user, comment=body["comment"])
        except DjangoValidationError as error:
            raise _validation_error(error) from None
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
        query = _query(serializers.QuotaExportQuerySerializer, request)
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
        departments = Department.objects.filter(heads=request.user, quotas__cycle=cycle).distinct()
        body = _body(serializers.QuotaObjectionCreateSerializer, request, departments=departments)
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
        body = _body(serializers.QuotaProposeSerializer, request)
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
    roles = VIEWERS
    action_roles = {"partial_update": PLANNERS}
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        return Quota.objects.none()  # rows come one at a time from ``quota_get``

    def get_object(self) -> Quota:
        return _get_or_404(quota_selectors.quota_get, user=self.request.user, pk=self.kwargs["pk"])

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
        body = _body(serializers.QuotaUpdateSerializer, request)
        try:
            quota_services.quota_update(
                quota=quota,
                actor=request.user,
                guaranteed_gpus=body.get("guaranteed_gpus", quota.guaranteed_gpus),
                borrowing_limit_gpus=body.get("borrowing_limit_gpus", quota.borrowing_limit_gpus),
                comment=body["comment"],
            )
        except DjangoValidationError as error:
            raise _validation_error(error) from None
        except quota_services.QuotaError as error:
            raise QuotaRefused(str(error)) from None
        quota.refresh_from_db()
        return Response(serializers.QuotaSerializer(quota).data)


class QuotaObjectionViewSet(KnownQueryParams, viewsets.GenericViewSet):
    """Objections of department heads; the committee answers them."""

    serializer_class = serializers.QuotaObjectionSerializer
    permission_classes = [IsAuthenticated, HasPortalRole]
    roles = PLANNERS
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        return QuotaObjection.objects.none()  # rows come one at a time from ``quota_objection_get``

    def get_object(self):
        return _get_or_404(quota_selectors.quota_objection_get, user=self.request.user, pk=self.kwargs["pk"])

    @extend_schema(
        request=serializers.QuotaObjectionAnswerSerializer,
        responses={200: serializers.QuotaObjectionSerializer, 400: QUOTA_REFUSED},
    )
    @action(detail=True, methods=["post"])
    def answer(self, request, pk=None):
        """Answer an objection (committee)."""
        objection = self.get_object()
        body = _body(serializers.QuotaObjectionAnswerSerializer, request)
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
    roles = VIEWERS
    filter_backends: list = []  # ``open`` goes to the selector
    action_query_params = {"list": (serializers.CapacityAlertQuerySerializer,)}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return quota_selectors.capacity_alert_list(user=self.request.user).none()
        query = _query(serializers.CapacityAlertQuerySerializer, self.request)
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
    roles = VIEWERS
    query_params = (serializers.ClusterQuerySerializer,)

    @extend_schema(
        parameters=[serializers.ClusterQuerySerializer], responses=serializers.QuotaOverviewSerializer
    )
    def get(self, request):
        query = _query(serializers.ClusterQuerySerializer, request)
        cluster = query.get("cluster") or quota_selectors.default_cluster()
        if cluster is None:
            overview = quota_selectors.QuotaOverview(None, [], {}, {}, None, None, None, [])
        else:
            overview = quota_selectors.quota_overview(user=request.user, cluster=cluster, now=timezone.now())
        return Response(serializers.QuotaOverviewSerializer({"cluster": cluster, **vars(overview)}).data)


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

    roles = FAULT_VIEWERS
    action_roles = dict.fromkeys(["isolate", "restart", "return_to_service", "close"], FAULT_OPERATORS)
    permission_classes = [IsAuthenticated, HasPortalRole]
    filterset_class = IncidentFilter
    ordering_fields = ["occurred_at", "gpu_hours_lost"]
    ordering = ["-occurred_at"]

    def get_queryset(self):
        incidents = fault_selectors.incident_list(user=self.request.user).select_related("closed_by")
        if self.action != "list":
            incidents = incidents.prefetch_related(
                Prefetch(
                    "signals",
                    queryset=scope_queryset(
                        FaultSignal.objects.select_related("node", "job"), self.request.user
                    ),
                ),
                "actions__actor",
            )
        return incidents

    def get_serializer_class(self):
        if self.action == "list":
            return serializers.IncidentSerializer
        return serializers.IncidentDetailSerializer

    def _act(self, run):
        incident = self.get_object()
        try:
            run(incident)
        except fault_services.IncidentActionRefused as refused:
            raise IncidentActionConflict(refused.reason) from None
        incident = self.get_queryset().get(pk=incident.pk)
        return Response(serializers.IncidentDetailSerializer(incident).data)

    @extend_schema(request=None, responses=serializers.IncidentDetailSerializer)
    @action(detail=True, methods=["post"])
    def isolate(self, request, pk=None):
        return self._act(lambda incident: fault_services.node_isolate(incident=incident, actor=request.user))

    @extend_schema(request=None, responses=serializers.IncidentDetailSerializer)
    @action(detail=True, methods=["post"])
    def restart(self, request, pk=None):
        return self._act(
            lambda incident: fault_services.job_restart_request(incident=incident, actor=request.user)
        )

    @extend_schema(request=None, responses=serializers.IncidentDetailSerializer)
    @action(detail=True, methods=["post"], url_path="return-to-service")
    def return_to_service(self, request, pk=None):
        return self._act(
            lambda incident: fault_services.node_return_to_service(
                node=incident.node, incident=incident, actor=request.user
            )
        )

    @extend_schema(
        request=serializers.IncidentCloseSerializer, responses=serializers.IncidentDetailSerializer
    )
    @action(detail=True, methods=["post"])
    def close(self, request, pk=None):
        body = serializers.IncidentCloseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        reason = body.validated_data["reason"]
        return self._act(
            lambda incident: fault_services.incident_close(
                incident=incident, reason=reason, actor=request.user
            )
        )


class FaultSignalViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
    """Fault evidence (scoped); ``?range=7d`` (default 24 h), ``?category=``, ``?node=<hostname>``."""

    roles = FAULT_VIEWERS
    permission_classes = [IsAuthenticated, HasPortalRole]
    serializer_class = serializers.FaultSignalSerializer
    filterset_class = FaultSignalFilter
    query_params = (RangeForm,)

    def get_queryset(self):
        params = self.request.query_params
        if "range" not in params and "start" not in params:
            params = params.copy()
            params["range"] = "24h"
        return fault_selectors.fault_signal_list(
            user=self.request.user, time_range=_range_or_400_params(params)
        )
