"""The API's OpenAPI description: what drf-spectacular infers, plus what it cannot see.

* Query parameters an endpoint reads through a form or a query serializer it declares
  (``KnownQueryParams.query_params`` / ``action_query_params``: the time range, ``min_hours`` …).
* The error answers every endpoint can give: 400 (a parameter or body field is invalid: the
  reasons by field name), 401, 403 and 404 (``{"detail": …}``).
"""

from django import forms
from django.utils.translation import gettext_lazy as _
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, inline_serializer
from rest_framework import serializers

ErrorSerializer = inline_serializer("Error", {"detail": serializers.CharField()})
ValidationErrorSerializer = inline_serializer(
    "ValidationError",
    {"field_name": serializers.ListField(child=serializers.CharField(), required=False)},
)
ERROR_RESPONSES = {
    400: OpenApiResponse(
        ValidationErrorSerializer,
        description=_(
            "Invalid parameters or body: a list of reasons under each field's name "
            "(non_field_errors for the whole request, detail for a malformed body)."
        ),
    ),
    401: OpenApiResponse(ErrorSerializer, description=_("Not signed in: no token, or a wrong one.")),
    403: OpenApiResponse(ErrorSerializer, description=_("Your role may not do this.")),
    404: OpenApiResponse(ErrorSerializer, description=_("No such object in your scope, or no such page.")),
}

_FORM_TYPES = {
    forms.DateField: OpenApiTypes.DATE,
    forms.DateTimeField: OpenApiTypes.DATETIME,
    forms.IntegerField: OpenApiTypes.INT,
    forms.BooleanField: OpenApiTypes.BOOL,
}


def _form_parameters(form_class: type[forms.BaseForm]) -> list[OpenApiParameter]:
    parameters = []
    for name, field in form_class.base_fields.items():
        kind = next((t for cls, t in _FORM_TYPES.items() if isinstance(field, cls)), OpenApiTypes.STR)
        choices = (
            [str(key) for key, _label in field.choices if key != ""] if hasattr(field, "choices") else None
        )
        parameters.append(
            OpenApiParameter(
                name,
                kind,
                OpenApiParameter.QUERY,
                required=False,
                description=str(field.label or ""),
                enum=choices,
            )
        )
    return parameters


class PortalAutoSchema(AutoSchema):
    def get_override_parameters(self):
        parameters = list(super().get_override_parameters())
        declared = [
            *getattr(self.view, "query_params", ()),
            *getattr(self.view, "action_query_params", {}).get(getattr(self.view, "action", None), ()),
        ]
        known = {p.name for p in parameters if isinstance(p, OpenApiParameter)}
        for item in declared:
            if isinstance(item, str):
                found = [OpenApiParameter(item, OpenApiTypes.STR, OpenApiParameter.QUERY, required=False)]
            elif issubclass(item, forms.BaseForm):
                found = _form_parameters(item)
            elif issubclass(item, serializers.BaseSerializer):
                found = [item]  # drf-spectacular expands a serializer into its fields
            else:
                found = []
            for parameter in found:
                name = getattr(parameter, "name", None)
                if name is None or name not in known:
                    parameters.append(parameter)
                    known.add(name)
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code, response in ERROR_RESPONSES.items():
            key = str(code)
            if key not in responses:
                responses[key] = self._get_response_for_code(response, key)
        return responses
