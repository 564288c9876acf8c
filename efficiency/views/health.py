from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from efficiency.services.health import health_check


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers: database and broker must answer (503 if not).

    Anonymous callers get booleans and ages only, never error texts or addresses.
    """
    report = health_check()
    return JsonResponse(report, status=200 if report["status"] != "error" else 503)
