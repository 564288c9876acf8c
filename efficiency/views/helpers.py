"""Small helpers shared by the HTML views."""

import csv
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from efficiency.choices import Role
from efficiency.scoping import user_role

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
    csv_columns: list[tuple[str, Callable[[Any], Any]]] | None = None,
    csv_name: str = "export",
) -> HttpResponse:
    """Filter with the same FilterSet as the API, paginate, render; bad filters are a 400.

    With ``?export=csv`` (and ``csv_columns``), every filtered row is downloaded instead.
    """
    filterset = filterset_class(request.GET, queryset=queryset, request=request)
    valid = filterset.is_valid()
    rows = filterset.qs if valid else queryset.none()
    if valid and csv_columns and request.GET.get("export") == "csv":
        return csv_response(
            f"{csv_name}.csv",
            [str(header) for header, _ in csv_columns],
            [[accessor(row) for _, accessor in csv_columns] for row in rows.iterator(chunk_size=2000)],
        )
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        template,
        {"filterset": filterset, "page": page, **(context or {})},
        status=200 if valid else 400,
    )


def role_required(*roles: Role):
    """Allow only users whose portal role is one of ``roles``; others get a 403 page."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if user_role(request.user) not in roles:
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def csv_response(filename: str, header: list[str], rows: list[list]) -> HttpResponse:
    """A CSV download (UTF-8 with BOM so that spreadsheet programs read Chinese names right)."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.write("\ufeff")
    writer = csv.writer(response)
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if value is None else _csv_safe(value) for value in row])
    return response


def _csv_safe(value):
    # A cell starting with = + - @ is run as a formula by spreadsheet programs (CSV injection).
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@"):
        return "'" + value
    return value
