"""The review pack as files (PDF, ZIP of CSV tables) and the showback's rate cards.

Committee members and platform admins download the whole pack; a department head downloads
their copy (the cover and their departments). Files are rendered from the sealed content only;
the PDF's bytes are cached by pack, content hash, language and copy.
"""

import hashlib

from django.contrib import messages
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from efficiency.choices import Role
from efficiency.forms import RateCardForm
from efficiency.permissions import has_role
from efficiency.services.committee import export, rate_cards
from efficiency.views.helpers import role_required

PACK_READERS = (Role.COMMITTEE, Role.PLATFORM_ADMIN, Role.DEPARTMENT_HEAD)
RATE_CARD_READERS = (Role.COMMITTEE, Role.PLATFORM_ADMIN)
RATE_CARD_EDITORS = (Role.COMMITTEE, Role.PLATFORM_ADMIN)
PDF_CACHE_SECONDS = 24 * 3600


def _pack_or_404(request: HttpRequest, pk: int):
    try:
        return export.pack_for_export(user=request.user, pk=pk)
    except export.PackNotFound:
        raise Http404(_("No such review pack.")) from None


def _cache_key(kind: str, pack, language: str, codes) -> str:
    copy = "all" if codes is None else ",".join(codes)
    digest = hashlib.sha256(f"{pack.pk}|{pack.content_hash}|{language}|{copy}".encode()).hexdigest()
    return f"committee-export:{kind}:{digest}"


def _download(data: bytes, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(data, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
@role_required(*PACK_READERS)
def pack_pdf_view(request: HttpRequest, pk: int) -> HttpResponse:
    pack, codes = _pack_or_404(request, pk)
    language = get_language()
    key = _cache_key("pdf", pack, language, codes)
    data = cache.get(key)
    if data is None:
        try:
            data = export.pack_pdf(pack, language=language, department_codes=codes)
        except export.ExportUnavailable as error:
            return HttpResponse(
                _("The PDF cannot be made on this server: %(reason)s. Download the CSV tables instead.")
                % {"reason": error},
                status=503,
                content_type="text/plain; charset=utf-8",
            )
        cache.set(key, data, PDF_CACHE_SECONDS)
    filename = export.export_filename(pack, language=language, extension="pdf", department_codes=codes)
    return _download(data, "application/pdf", filename)


@require_GET
@role_required(*PACK_READERS)
def pack_csv_view(request: HttpRequest, pk: int) -> HttpResponse:
    pack, codes = _pack_or_404(request, pk)
    language = get_language()
    data = export.pack_csv_bundle(pack, language=language, department_codes=codes)
    filename = export.export_filename(pack, language=language, extension="zip", department_codes=codes)
    return _download(data, "application/zip", filename)


@require_http_methods(["GET", "POST"])
@role_required(*RATE_CARD_READERS)
def rate_card_list_view(request: HttpRequest) -> HttpResponse:
    """Every rate card version; committee and platform admins add the next one."""
    can_edit = has_role(request.user, RATE_CARD_EDITORS)
    status = 200
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied
        form = RateCardForm(request.POST)
        if form.is_valid():
            try:
                card = rate_cards.rate_card_create(actor=request.user, **form.cleaned_data)
            except rate_cards.RateCardError as error:
                form.add_error(None, str(error))
            else:
                messages.success(
                    request, _("Rate card version %(version)s saved.") % {"version": card.version}
                )
                return redirect("efficiency:rate-card-list")
        status = 400
    else:
        form = RateCardForm()
    return render(
        request,
        "efficiency/committee/rate_cards.html",
        {"cards": rate_cards.rate_card_list(), "form": form if can_edit else None},
        status=status,
    )
