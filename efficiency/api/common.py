"""What every area's API views share: the role check, and turning query parameters, bodies and
service refusals into DRF's answers (a 400 that names the field, a 404)."""

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import BasePermission
from rest_framework.settings import api_settings

from efficiency.forms import time_range_from_request
from efficiency.permissions import has_role
from efficiency.timeranges import TimeRange


class HasPortalRole(BasePermission):
    """The caller's portal role is one the view allows for this action.

    ``view.action_roles`` maps an action (a viewset method name) to its roles; every other
    action needs one of ``view.roles``: role sets of efficiency.permissions, the ones the pages check.
    """

    def has_permission(self, request, view) -> bool:
        roles = getattr(view, "action_roles", {}).get(getattr(view, "action", None), view.roles)
        return has_role(request.user, roles)


def get_or_404(selector, **kwargs):
    """What a ``<noun>_get`` selector returns, or a 404 (out of the caller's scope, or no such row)."""
    try:
        return selector(**kwargs)
    except ObjectDoesNotExist:
        raise NotFound from None


def query_of(serializer_class, request) -> dict:
    """The query parameters validated by a query serializer; a 400 naming each bad one."""
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return query.validated_data


def validation_error(error: DjangoValidationError) -> ValidationError:
    """A service's ValidationError as DRF's 400: by field when it names fields."""
    if hasattr(error, "error_dict"):
        return ValidationError(error.message_dict)
    return ValidationError({api_settings.NON_FIELD_ERRORS_KEY: error.messages})


def body_of(serializer_class, request, **kwargs) -> dict:
    """The request body validated by a serializer; a 400 naming each bad field."""
    body = serializer_class(data=request.data, **kwargs)
    body.is_valid(raise_exception=True)
    return body.validated_data


def range_or_400(params) -> TimeRange:
    """The time range of ``?range=`` (or ``?range=custom&start=&end=``); a 400 naming the field."""
    form, time_range = time_range_from_request(params)
    if time_range is None:
        raise ValidationError(form.errors)
    return time_range
