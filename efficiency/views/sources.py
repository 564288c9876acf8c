from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from efficiency import dispatch
from efficiency.permissions import SOURCE_ADMINS
from efficiency.selectors.sources import source_get, source_run_list, source_status_list, source_targets
from efficiency.services.sources import COLLECTED_KINDS
from efficiency.views.helpers import get_or_404, role_required


@role_required(*SOURCE_ADMINS)
def source_list_view(request: HttpRequest) -> HttpResponse:
    """Each data source's last success, lag, rows in the last hour and errors; "Collect now"."""
    return render(
        request,
        "efficiency/sources/source_list.html",
        {"statuses": source_status_list(), "collected_kinds": COLLECTED_KINDS},
    )


@require_POST
@role_required(*SOURCE_ADMINS)
def source_collect_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue one collection of a source now (the worker runs it as it runs the periodic ones)."""
    source = get_or_404(source_get, pk=pk)
    if not source.enabled:
        messages.error(
            request,
            _("%(source)s is disabled; enable it in the administration first.") % {"source": source.name},
        )
    elif source.kind not in COLLECTED_KINDS:
        messages.error(
            request,
            _("%(source)s is not collected by the portal: it receives data (push or import).")
            % {"source": source.name},
        )
    else:
        dispatch.source_collect(source.pk)
        messages.success(
            request,
            _("Collection of %(source)s queued; its run appears here when the worker has done it.")
            % {"source": source.name},
        )
    return redirect("efficiency:source-list")


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
