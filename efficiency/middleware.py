import logging
import time

from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.utils.encoding import escape_uri_path

from efficiency.logging import request_id, request_id_choose

REQUEST_ID_HEADER = "X-Request-ID"

request_logger = logging.getLogger("efficiency.request")


class RequestIdMiddleware:
    """Give each request an id, put it on every log line written meanwhile and in the response.

    A sane ``X-Request-ID`` from the proxy or client is kept, so one id follows a request
    through the load balancer, the portal and its logs; otherwise a new one is made. One INFO
    line per request records its method, path, status and duration.
    """

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        started = time.monotonic()
        request.request_id = request_id_choose(request.headers.get(REQUEST_ID_HEADER))
        token = request_id.set(request.request_id)
        try:
            response = self.get_response(request)
            response[REQUEST_ID_HEADER] = request.request_id
            # Percent-encoded, so a path cannot break the line or forge another one.
            path = escape_uri_path(request.path)
            request_logger.info(
                "%s %s %s",
                request.method,
                path,
                response.status_code,
                extra={
                    "method": request.method,
                    "path": path,
                    "status": response.status_code,
                    "duration_ms": round((time.monotonic() - started) * 1000, 1),
                },
            )
            return response
        finally:
            request_id.reset(token)


class PortalLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Every page needs a signed-in user, except views marked ``login_not_required``.

    The API is left to Django REST framework, which also accepts tokens and answers an
    anonymous caller with 401 instead of a redirect to the login page.
    """

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
