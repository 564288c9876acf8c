"""Tickets API: remediation tickets, scoped like the pages, created by hand or from an accepted
recommendation or an incident, edited, moved along the workflow and commented on, through the
services the pages call. A refusal of the services is answered with its status: 400 naming the
field (bad input, a move the state does not allow), 403 (the role may not), 404 (not yours to see);
nothing is written then."""

import django_filters
from django import forms
from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.settings import api_settings

from efficiency.api import serializers
from efficiency.api.common import HasPortalRole, body_of
from efficiency.api.params import KnownQueryParams
from efficiency.choices import RecommendationState, TicketOrigin, TicketSeverity, TicketState
from efficiency.filters import ModelChoiceFilter
from efficiency.permissions import TICKET_CREATORS, TICKET_READERS
from efficiency.selectors import tickets_api as selectors
from efficiency.selectors.inventory import department_list
from efficiency.services import tickets as services

# --- Filters --------------------------------------------------------------------------------------


class KnownChoiceField(forms.ChoiceField):
    """A choice whose refusal lists the valid values."""

    def validate(self, value):
        try:
            super().validate(value)
        except DjangoValidationError:
            known = ", ".join(str(key) for key, _label in self.choices if key != "")
            raise DjangoValidationError(
                _("Unknown value %(value)s; choose one of: %(known)s."),
                code="invalid_choice",
                params={"value": value, "known": known},
            ) from None


class KnownChoiceFilter(django_filters.ChoiceFilter):
    field_class = KnownChoiceField


def _yes_no(label, method: str) -> django_filters.TypedChoiceFilter:
    return django_filters.TypedChoiceFilter(
        label=label,
        choices=[("true", _("Yes")), ("false", _("No"))],
        coerce=lambda value: value == "true",
        method=method,
    )


def _visible_departments(request):
    if request is None:
        return selectors.ticket_departments().none()
    return department_list(user=request.user)


class TicketFilter(django_filters.FilterSet):
    """``?state=``, ``?department=<code>``, ``?assignee=<username>``, ``?severity=``,
    ``?origin=``, ``?overdue=true|false``, ``?due_soon=true|false``."""

    state = KnownChoiceFilter(label=_("State"), choices=TicketState.choices)
    department = ModelChoiceFilter(label=_("Department"), queryset=_visible_departments, to_field_name="code")
    assignee = django_filters.CharFilter(label=_("Assignee"), field_name="assignee__username")
    severity = KnownChoiceFilter(label=_("Severity"), choices=TicketSeverity.choices)
    origin = KnownChoiceFilter(label=_("Origin"), choices=TicketOrigin.choices)
    overdue = _yes_no(_("Overdue"), "filter_overdue")
    due_soon = _yes_no(_("Due soon"), "filter_due_soon")

    def _now(self):
        return getattr(self.request, "ticket_now", None) or timezone.now()

    def filter_overdue(self, queryset, name, value: bool):
        overdue = selectors.overdue_q(self._now())
        return queryset.filter(overdue) if value else queryset.exclude(overdue)

    def filter_due_soon(self, queryset, name, value: bool):
        now = self._now()
        ids = [
            ticket.pk
            for ticket in selectors.ticket_active_list(queryset)
            if services.sla_status(ticket, now) == services.DUE_SOON
        ]
        return queryset.filter(pk__in=ids) if value else queryset.exclude(pk__in=ids)


# --- Refusals -------------------------------------------------------------------------------------


def refusal(refused: services.TicketRefused) -> Exception:
    """A service's refusal as the API's answer: 400 naming the field, 403, or 404."""
    if refused.status == status.HTTP_404_NOT_FOUND:
        return NotFound(refused.message)
    if refused.status == status.HTTP_403_FORBIDDEN:
        return PermissionDenied(refused.message)
    return ValidationError({refused.field or api_settings.NON_FIELD_ERRORS_KEY: [refused.message]})


def _detail_responses(ok: int = 200):
    return {ok: serializers.TicketDetailSerializer}


# --- The endpoint ---------------------------------------------------------------------------------


class TicketViewSet(
    KnownQueryParams, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Remediation tickets, scoped like the pages: a head sees their departments' tickets (another
    department's is a 404) and never the internal notes.

    The list puts overdue tickets first, then the rest by due date. ``actions`` lists the moves the
    caller may make now: ``POST …/{id}/transition/ {"action": "start", "reason": ""}``. Committee
    members and platform admins create tickets for any department and PATCH every editable field;
    a head creates them for a department they head and may only reassign. A refusal is 400 naming
    the field (bad input, or a move the ticket's state does not allow, with the allowed ones), 403
    (the role may not) or 404; nothing is written then. Bodies are JSON.
    """

    roles = TICKET_READERS
    action_roles = {"create": TICKET_CREATORS}
    permission_classes = [IsAuthenticated, HasPortalRole]
    parser_classes = [JSONParser]
    filter_backends = [DjangoFilterBackend]
    filterset_class = TicketFilter
    lookup_value_regex = r"\d+"
    http_method_names = ["get", "post", "patch", "head", "options"]

    def initial(self, request, *args, **kwargs):
        # One moment for the whole answer: the order, the filters and each row's SLA agree.
        request.ticket_now = self.now = timezone.now()
        super().initial(request, *args, **kwargs)

    def _now(self):
        return getattr(self, "now", None) or timezone.now()

    def get_queryset(self):
        if self.action == "list":
            return selectors.ticket_list(user=self.request.user, now=self._now())
        return selectors.ticket_detail_list(user=self.request.user, now=self._now())

    def get_serializer_class(self):
        if self.action == "list":
            return serializers.TicketSerializer
        return serializers.TicketDetailSerializer

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "now": self._now()}

    def _detail(self, ticket, code: int = status.HTTP_200_OK) -> Response:
        ticket = self.get_queryset().get(pk=ticket.pk)
        return Response(
            serializers.TicketDetailSerializer(ticket, context=self.get_serializer_context()).data, code
        )

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "department", OpenApiTypes.STR, description=_("Department code (one you may see).")
            ),
            OpenApiParameter("assignee", OpenApiTypes.STR, description=_("Username of the assignee.")),
        ]
    )
    def list(self, request, *args, **kwargs):
        """Tickets you may see: overdue first, then by due date."""
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=serializers.TicketCreateSerializer,
        responses={
            201: serializers.TicketDetailSerializer,
            200: OpenApiResponse(
                serializers.TicketDetailSerializer,
                description=_("The recommendation already has an open ticket: that one."),
            ),
        },
    )
    def create(self, request, *args, **kwargs):
        """Open a ticket: by hand, or ``{"recommendation": id}`` (accepted ones only) or
        ``{"incident": id}``."""
        body = body_of(
            serializers.TicketCreateSerializer,
            request,
            departments=selectors.ticket_departments(),
            users=selectors.ticket_users(),
        )
        now = timezone.now()
        user = request.user
        try:
            if "recommendation" in body:
                ticket = self._from_recommendation(body, now)
            elif "incident" in body:
                try:
                    incident = selectors.ticket_incident_get(user=user, pk=body.pop("incident"))
                except ObjectDoesNotExist:
                    raise ValidationError(
                        {"incident": [_("No incident with this id that you may see.")]}
                    ) from None
                ticket = services.ticket_from_incident(incident, user=user, now=now, **body)
            else:
                body.setdefault("title", "")
                body.setdefault("department", None)
                ticket = services.ticket_create(user=user, now=now, **body)
        except services.TicketRefused as refused:
            raise refusal(refused) from None
        created = ticket.created_at == now
        return self._detail(ticket, status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def _from_recommendation(self, body: dict, now):
        user = self.request.user
        try:
            recommendation = selectors.ticket_recommendation_get(user=user, pk=body["recommendation"])
        except ObjectDoesNotExist:
            raise ValidationError(
                {"recommendation": [_("No recommendation with this id that you may see.")]}
            ) from None
        if recommendation.state != RecommendationState.ACCEPTED:
            raise ValidationError(
                {
                    "recommendation": [
                        _("Only an accepted recommendation becomes a ticket; this one is %(state)s.")
                        % {"state": recommendation.get_state_display().lower()}
                    ]
                }
            )
        department = body.get("department") or recommendation.assignee_department or recommendation.department
        if department is None:
            raise ValidationError({"department": [_("Choose the department that owns the ticket.")]})
        if not services.creatable_departments(user).filter(pk=department.pk).exists():
            raise PermissionDenied(_("You open tickets only for a department you head."))
        return services.ticket_from_recommendation(recommendation, user=user, department=department, now=now)

    @extend_schema(request=serializers.TicketUpdateSerializer, responses=_detail_responses())
    def partial_update(self, request, *args, **kwargs):
        """Change editable fields (a head: only ``assignee``, within the department)."""
        ticket = self.get_object()
        body = body_of(serializers.TicketUpdateSerializer, request, users=selectors.ticket_users())
        try:
            ticket = services.ticket_update(ticket, user=request.user, **body)
        except services.TicketRefused as refused:
            raise refusal(refused) from None
        return self._detail(ticket)

    @extend_schema(request=serializers.TicketTransitionSerializer, responses=_detail_responses())
    @action(detail=True, methods=["post"], filter_backends=[])
    def transition(self, request, pk=None):
        """Move the ticket by one of its ``actions``; reopening and declining need a ``reason``."""
        ticket = self.get_object()
        body = body_of(serializers.TicketTransitionSerializer, request)
        try:
            ticket = services.ticket_transition(
                ticket, body["action"], user=request.user, reason=body.get("reason", "")
            )
        except services.TicketRefused as refused:
            raise refusal(refused) from None
        return self._detail(ticket)

    @extend_schema(methods=["GET"], request=None, responses=serializers.TicketCommentSerializer(many=True))
    @extend_schema(
        methods=["POST"],
        request=serializers.TicketCommentCreateSerializer,
        responses={201: serializers.TicketCommentSerializer},
    )
    @action(detail=True, methods=["get", "post"], pagination_class=None, filter_backends=[])
    def comments(self, request, pk=None):
        """The comments you may read, oldest first (internal notes: the committee and platform
        admins only); POST adds one (``internal`` notes: the committee and platform admins)."""
        ticket = self.get_object()
        if request.method == "GET":
            comments = services.visible_comments(ticket, request.user)
            return Response(serializers.TicketCommentSerializer(comments, many=True).data)
        body = body_of(serializers.TicketCommentCreateSerializer, request)
        try:
            comment = services.ticket_comment(
                ticket, user=request.user, text=body["text"], internal=body["internal"]
            )
        except services.TicketRefused as refused:
            raise refusal(refused) from None
        return Response(serializers.TicketCommentSerializer(comment).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=serializers.TicketHistorySerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def history(self, request, pk=None):
        """Every saved change, oldest first: who, when, each field from → to, and the reason."""
        ticket = self.get_object()
        rows = selectors.ticket_history(ticket=ticket)
        return Response(serializers.TicketHistorySerializer(rows, many=True).data)
