"""Small helpers shared by the HTML views."""

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

PAGE_SIZE = 50


def get_or_404(selector: Callable[..., Any], **kwargs: Any) -> Any:
    """Call a ``*_get`` selector; a missing or out-of-scope object is a 404 either way."""
    try:
        return selector(**kwargs)
    except (ObjectDoesNotExist, ValueError) as error:
        raise Http404(str(error)) from None


def render_filtered_list(
    request: HttpRequest,
    *,
    template: str,
    filterset_class: type,
    queryset: QuerySet,
    context: dict | None = None,
) -> HttpResponse:
    """Filter with the same FilterSet as the API, paginate, render; bad filters are a 400."""
    filterset = filterset_class(request.GET, queryset=queryset, request=request)
    valid = filterset.is_valid()
    rows = filterset.qs if valid else queryset.none()
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        template,
        {"filterset": filterset, "page": page, **(context or {})},
        status=200 if valid else 400,
    )
