"""Recommendations API: the tuning recommendations with their evidence and decisions, and the
review actions (accept, reject, snooze, comment), through the services the pages call."""

from django.utils.translation import gettext_lazy as _
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.settings import api_settings

from efficiency.api import serializers
from efficiency.api.common import HasPortalRole, body_of
from efficiency.api.params import KnownQueryParams
from efficiency.api.schema import ErrorSerializer
from efficiency.filters import RecommendationFilter
from efficiency.permissions import (
    RECOMMENDATION_COMMENTERS,
    RECOMMENDATION_READERS,
    RECOMMENDATION_REVIEWERS,
)
from efficiency.recommendation_messages import RULES
from efficiency.selectors import recommendations as selectors
from efficiency.selectors.inventory import department_list
from efficiency.services import recommendations as services


class RecommendationDecisionConflict(APIException):
    """A decision that does not apply in the recommendation's state (409, with the reason)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = _("This decision does not apply to the recommendation now.")
    default_code = "recommendation_decision_refused"


def _decision_responses():
    return {
        200: serializers.RecommendationDetailSerializer,
        409: OpenApiResponse(
            ErrorSerializer, description=_("The decision does not apply in the recommendation's state.")
        ),
    }


class RecommendationViewSet(KnownQueryParams, viewsets.ReadOnlyModelViewSet):
    """Tuning recommendations, scoped like the pages: a head sees those of their departments,
    those assigned to them and those about the nodes their departments own.

    ``?rule=``, ``?department=<code>``, ``?state=``, ``?confidence=``, ``?min_gain=<GPU-h/week>``,
    ``?sort=gain|-gain|gain_pct|-gain_pct|last_seen|-last_seen`` (default: most GPU-hours to gain
    first). Platform admins accept, reject and snooze; admins, committee members and the heads of
    the recommendation's department comment. A decision that does not apply in the state (see
    ``actions``) is a 409 with the reason; bad input is a 400 naming the field, and nothing is
    written either way. Bodies are JSON.
    """

    roles = RECOMMENDATION_READERS
    action_roles = {
        **dict.fromkeys(["accept", "reject", "snooze"], RECOMMENDATION_REVIEWERS),
        "comment": RECOMMENDATION_COMMENTERS,
    }
    permission_classes = [IsAuthenticated, HasPortalRole]
    parser_classes = [JSONParser]
    # ``?sort=`` of the FilterSet orders the list (as on the page); there is no ``?ordering=``.
    filter_backends = [DjangoFilterBackend]
    filterset_class = RecommendationFilter

    def get_queryset(self):
        if self.action == "list":
            return selectors.recommendation_list(user=self.request.user)
        return selectors.recommendation_detail_list(user=self.request.user)

    def get_serializer_class(self):
        if self.action == "list":
            return serializers.RecommendationSerializer
        return serializers.RecommendationDetailSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "department", OpenApiTypes.STR, description=_("Department code (one you may see).")
            ),
            OpenApiParameter("rule", OpenApiTypes.STR, enum=sorted(RULES)),
        ]
    )
    def list(self, request, *args, **kwargs):
        """Recommendations you may see, most GPU-hours to gain first (or as ``?sort=`` says)."""
        return super().list(request, *args, **kwargs)

    def _decide(self, recommendation, decision: str, **kwargs) -> Response:
        try:
            services.recommendation_decide(recommendation, user=self.request.user, action=decision, **kwargs)
        except services.RecommendationDecisionRefused as refused:
            # The body was checked above, so a refusal is the state (perhaps changed meanwhile);
            # whatever else the service refuses is bad input.
            current = self.get_queryset().get(pk=recommendation.pk)
            if decision not in services.recommendation_actions(current, self.request.user):
                raise RecommendationDecisionConflict(str(refused)) from None
            raise ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [str(refused)]}) from None
        recommendation = self.get_queryset().get(pk=recommendation.pk)
        return Response(self.get_serializer(recommendation).data)

    @extend_schema(request=serializers.RecommendationAcceptSerializer, responses=_decision_responses())
    @action(detail=True, methods=["post"])
    def accept(self, request, pk=None):
        """Accept (platform admins): the department (``department``, else the recommendation's)
        makes the change; ``note`` is kept with the decision."""
        recommendation = self.get_object()
        body = body_of(
            serializers.RecommendationAcceptSerializer,
            request,
            departments=department_list(user=request.user).filter(is_active=True),
        )
        department = body.get("department")
        if department is None and recommendation.department_id is None:
            raise ValidationError({"department": [_("Choose the department that will make the change.")]})
        return self._decide(
            recommendation, services.ACCEPT, text=body.get("note", ""), assignee_department=department
        )

    @extend_schema(request=serializers.RecommendationRejectSerializer, responses=_decision_responses())
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        """Reject (platform admins), with a reason: not proposed again unless the evidence changes."""
        recommendation = self.get_object()
        body = body_of(serializers.RecommendationRejectSerializer, request)
        return self._decide(recommendation, services.REJECT, text=body["reason"])

    @extend_schema(request=serializers.RecommendationSnoozeSerializer, responses=_decision_responses())
    @action(detail=True, methods=["post"])
    def snooze(self, request, pk=None):
        """Snooze until a date (platform admins): it returns to the review queue that day."""
        recommendation = self.get_object()
        body = body_of(serializers.RecommendationSnoozeSerializer, request)
        return self._decide(recommendation, services.SNOOZE, text=body.get("note", ""), until=body["until"])

    @extend_schema(request=serializers.RecommendationCommentSerializer, responses=_decision_responses())
    @action(detail=True, methods=["post"])
    def comment(self, request, pk=None):
        """Comment (admins, committee members, and the heads of the recommendation's department or
        of the department it is assigned to)."""
        recommendation = self.get_object()
        if not services.may_comment(recommendation, request.user):
            raise PermissionDenied(
                _(
                    "Only the heads of the recommendation's department, or of the department it is "
                    "assigned to, may comment on it."
                )
            )
        body = body_of(serializers.RecommendationCommentSerializer, request)
        return self._decide(recommendation, services.COMMENT, text=body["text"])
