"""Small helpers shared by the HTML views."""

import csv
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from functools import wraps
from typing import Any

from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.core.paginator import Paginator
from django.db import models
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils.functional import Promise
from django.utils.translation import gettext as _

from efficiency.choices import Role
from efficiency.scoping import user_role
from efficiency.spreadsheet import csv_cell_text
from efficiency.timeranges import TimeRange
from efficiency.times import display_time, portal_day_text, portal_day_zone

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
            csv_filename(csv_name),
            [header for header, _accessor in csv_columns],
            ([accessor(row) for _header, accessor in csv_columns] for row in rows.iterator(chunk_size=2000)),
        )
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        template,
        {"filterset": filterset, "page": page, **(context or {})},
        status=200 if valid else 400,
    )


def choice_label(choices: type[models.TextChoices], value: str):
    """The (lazy) label of ``value``, or ``value`` itself when it is not one of the choices.

    For CSV rows: ``get_FOO_display()`` hashes every choice's lazy label on each call, which
    cost a million-job export a third of its time.
    """
    try:
        return choices(value).label
    except ValueError:
        return value


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


def csv_filename(stem: str, *parts: "str | datetime | TimeRange") -> str:
    """``<stem>-<part>-….csv``; a time is its day and a range its first and last day, as the page
    shows them: in the display time zone (a range's end is exclusive, so its last day is the
    day of the moment before it)."""
    words = [stem]
    for part in parts:
        if isinstance(part, TimeRange):
            words += [_local_day(part.start), _local_day(part.end - timedelta(microseconds=1))]
        elif isinstance(part, datetime):
            words.append(_local_day(part))
        else:
            words.append(str(part))
    return "-".join(words) + ".csv"


def _local_day(moment: datetime) -> str:
    return portal_day_text(moment, "%Y%m%d")


CSV_BATCH_ROWS = 1000


class _Echo:
    """A file-like object whose ``write`` hands back the text: ``csv.writer`` formats, we yield."""

    def write(self, text: str) -> str:
        return text


def csv_response(filename: str, header: list[str], rows: Iterable[list]) -> StreamingHttpResponse:
    """A CSV download (UTF-8 with BOM so that spreadsheet programs read Chinese names right).

    Streamed: rows are read (pass a generator over ``queryset.iterator()``) and sent in batches,
    so a million-job export runs in constant memory and the worker starts answering at once
    instead of building the whole file before gunicorn's timeout.

    CSVs are for people, in the reader's language and time zone like the page: times in the
    display time zone, yes/no translated (pass choice fields' labels, not their codes). Scripts
    read the API, whose values are stable codes and UTC times.
    """
    writer = csv.writer(_Echo())

    def lines() -> Iterator[str]:
        yield "\ufeff" + writer.writerow([str(title) for title in header])
        batch: list[str] = []
        for row in rows:
            batch.append(writer.writerow([_csv_cell(value) for value in row]))
            if len(batch) == CSV_BATCH_ROWS:
                yield "".join(batch)
                batch.clear()
        if batch:
            yield "".join(batch)

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(_("Yes") if value else _("No"))
    if isinstance(value, datetime):
        # One zone for every export, the portal day's, each cell labelled with its UTC offset
        # (unambiguous in the repeated hour when clocks go back); UTC where the zone cannot hold it.
        return display_time(value, portal_day_zone()).isoformat()
    if isinstance(value, Promise):
        value = str(value)
    if isinstance(value, str):
        return csv_cell_text(value)
    return value
