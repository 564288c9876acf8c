"""Query parameters of the API: an unknown one is a 400 that names it, never silently ignored.

A misspelt filter (``?search=`` for ``?q=``, ``?departmnet=``) used to return every row as if it
had matched. Each endpoint now knows its parameters from what it runs — the FilterSet, the
ordering filter, the paginator, the renderer override — plus what it declares for itself.
"""

from collections.abc import Iterable, Sequence

from django import forms
from django.utils.translation import gettext_lazy as _
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter, SearchFilter
from rest_framework.settings import api_settings

# A name, or a class whose fields are names: a query serializer, a form, a FilterSet.
QueryParams = Sequence[str | type]


def _names(declared: Iterable[str | type]) -> set[str]:
    names: set[str] = set()
    for item in declared:
        if isinstance(item, str):
            names.add(item)
        elif issubclass(item, serializers.BaseSerializer):
            names |= set(item().fields)
        elif issubclass(item, forms.BaseForm):
            names |= set(item.base_fields)
        else:
            names |= _filterset_params(item)
    return names


def _filterset_params(filterset_class) -> set[str]:
    names = set()
    for name, filter_ in filterset_class.base_filters.items():
        # Range-like filters read several parameters (``<name>_min``, ``<name>_after`` …).
        suffixes = getattr(getattr(filter_.field_class, "widget", None), "suffixes", None)
        names |= {f"{name}_{suffix}" if suffix else name for suffix in suffixes} if suffixes else {name}
    return names


class KnownQueryParams:
    """Mixin for every API view: answer 400 to a query parameter the endpoint does not know.

    Known are ``?format=``, the parameters of the view's filter backends (its ``filterset_class``,
    ``ordering``, ``search``), ``page`` and ``page_size`` on a paginated list, and what the view
    declares: ``query_params`` for every action, ``action_query_params`` per action (names,
    query serializers, forms or FilterSets). Checked after authentication and permissions, so
    an anonymous caller still gets 401.
    """

    query_params: QueryParams = ()
    action_query_params: dict[str, QueryParams] = {}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        unknown = sorted(set(request.query_params) - self.known_query_params())
        if unknown:
            raise ValidationError({name: [_("Unknown query parameter.")] for name in unknown})

    def known_query_params(self) -> set[str]:
        action = getattr(self, "action", None)
        known = _names(self.query_params) | _names(self.action_query_params.get(action, ()))
        if api_settings.URL_FORMAT_OVERRIDE:
            known.add(api_settings.URL_FORMAT_OVERRIDE)
        listing = action == "list"
        for backend in getattr(self, "filter_backends", ()):
            # Filters narrow a detail lookup too (DRF's get_object filters first); an order or
            # a page only mean something on a list.
            if issubclass(backend, DjangoFilterBackend) and getattr(self, "filterset_class", None):
                known |= _filterset_params(self.filterset_class)
            elif issubclass(backend, OrderingFilter) and listing:
                known.add(backend.ordering_param)
            elif issubclass(backend, SearchFilter) and getattr(self, "search_fields", None):
                known.add(backend.search_param)
        paginator = getattr(self, "paginator", None) if listing else None
        if paginator is not None:
            known |= {
                name
                for name in (
                    getattr(paginator, "page_query_param", None),
                    getattr(paginator, "page_size_query_param", None),
                )
                if name
            }
        return known


class StrictOrderingFilter(OrderingFilter):
    """``?ordering=`` with a field the endpoint cannot order by is a 400, not the default order."""

    def remove_invalid_fields(self, queryset, fields, view, request):
        valid = super().remove_invalid_fields(queryset, fields, view, request)
        invalid = [field for field in fields if field not in valid]
        if invalid:
            allowed = sorted(
                name for name, _label in self.get_valid_fields(queryset, view, {"request": request})
            )
            raise ValidationError(
                {
                    self.ordering_param: [
                        _("Cannot order by %(fields)s; order by one of: %(allowed)s.")
                        % {"fields": ", ".join(invalid), "allowed": ", ".join(allowed)}
                    ]
                }
            )
        return valid
