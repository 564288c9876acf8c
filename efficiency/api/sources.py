"""Data sources API: log shippers push NDJSON lines into a *Log push* source."""

import io
from typing import BinaryIO

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from efficiency import dispatch
from efficiency.api import serializers
from efficiency.api.common import get_or_404
from efficiency.api.params import KnownQueryParams
from efficiency.collectors.logpush import PushRefused
from efficiency.permissions import SOURCE_ADMINS, has_role
from efficiency.selectors.sources import log_push_source_get
from efficiency.services.sources import log_push_receive


class CanPushLogs(BasePermission):
    """The source's own push token; or platform admins, or a log shipper's service account
    with the ``add_logchunk`` permission (any source)."""

    def has_permission(self, request, view) -> bool:
        token = request.auth  # an ApiToken, or None for a session
        if getattr(token, "source_id", None) is not None:
            self.message = _("This push token belongs to the source %(source)s, not to this one.") % {
                "source": token.source
            }
            return str(token.source_id) == str(view.kwargs.get("pk"))
        return has_role(request.user, SOURCE_ADMINS) or request.user.has_perm("efficiency.add_logchunk")


class LogPushView(KnownQueryParams, APIView):
    """``POST`` NDJSON log lines (one JSON object a line) into a *Log push* source.

    Each line: ``{"stream": "...", "offset": 123, "line": "...", "job": "...", "rank": 0}``. The
    body may be chunked (no Content-Length) and gzip or deflate encoded. Every loss has a status
    a shipper acts on: 200 when every line was stored or already known, 200 ``partial`` with the
    rejected lines when only some lines were bad (retrying cannot mend them), 400 with the
    reasons when no line was good, 413 when the body is too large (bytes, inflated bytes or
    lines: split the batch), 415 for an encoding we do not inflate; a refused body stores nothing.
    """

    permission_classes = [IsAuthenticated, CanPushLogs]
    accepts_push_tokens = True
    parser_classes: list = []  # the body is read raw: NDJSON is not one JSON document

    @extend_schema(
        request={"application/x-ndjson": str},
        responses={
            200: serializers.LogPushResultSerializer,
            400: OpenApiResponse(serializers.LogPushResultSerializer, description="no line was good"),
            411: OpenApiResponse(description="chunked body on a server that cannot decode it"),
            413: OpenApiResponse(description="body too large: bytes, inflated bytes or lines"),
            415: OpenApiResponse(description="Content-Encoding other than gzip, deflate or none"),
        },
    )
    def post(self, request, pk: int):
        source = get_or_404(log_push_source_get, pk=pk)
        try:
            body, content_length = _push_body(request._request)
            run = log_push_receive(
                source=source,
                body=body,
                content_length=content_length,
                content_encoding=request.headers.get("Content-Encoding", ""),
                max_bytes=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
            )
        except PushRefused as refused:
            return Response({"status": "refused", "detail": refused.reason}, status=refused.status)
        if run.stored:
            dispatch.fault_scan_source(source.pk)
        nothing_good = run.rejected and not (run.stored or run.duplicates)
        return Response(
            serializers.LogPushResultSerializer(run).data,
            status=status.HTTP_400_BAD_REQUEST if nothing_good else status.HTTP_200_OK,
        )


def _push_body(request) -> tuple[BinaryIO, int | None]:
    """The request's body stream and announced length (``None`` for a chunked body).

    Django reads a body without Content-Length as empty; a chunked body is read from the WSGI
    input itself, which only a server that decodes the chunks (gunicorn says so with
    ``wsgi.input_terminated``) can give. Elsewhere (``runserver``) it is refused with 411.
    """
    length = request.META.get("CONTENT_LENGTH", "")
    if length:
        try:
            return request, int(length)
        except ValueError:
            raise PushRefused(400, f"Content-Length {length[:40]!r} is not a number") from None
    if "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        if not request.META.get("wsgi.input_terminated"):
            raise PushRefused(411, "this server cannot read a chunked body: send a Content-Length")
        return request.META["wsgi.input"], None
    return io.BytesIO(), 0
