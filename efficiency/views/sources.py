from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from efficiency.permissions import SOURCE_ADMINS
from efficiency.selectors.sources import source_get, source_run_list, source_status_list, source_targets
from efficiency.views.helpers import get_or_404, role_required


@role_required(*SOURCE_ADMINS)
def source_list_view(request: HttpRequest) -> HttpResponse:
    """Each data source's last success, lag, rows in the last hour and errors."""
    return render(request, "efficiency/sources/source_list.html", {"statuses": source_status_list()})


@role_required(*SOURCE_ADMINS)
def source_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    source = get_or_404(source_get, pk=pk)
    problems_only = request.GET.get("problems") == "1"
    page = Paginator(source_run_list(source=source, problems_only=problems_only), 50).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "efficiency/sources/source_detail.html",
        {"source": source, "page": page, "problems_only": problems_only, "targets": source_targets(source)},
    )
