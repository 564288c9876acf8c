from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from efficiency.choices import Role
from efficiency.scoping import user_role
from efficiency.services.health import health_check


def _sees_health_detail(user) -> bool:
    return user.is_authenticated and (user.is_staff or user_role(user) == Role.PLATFORM_ADMIN)


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers: database and broker must answer (503 if not).

    A load balancer only needs the status code and ``status``; anyone else anonymous learns
    nothing more (which broker, whether workers run). Signed-in staff and platform admins get
    the detail: database, broker and the freshest worker heartbeat.
    """
    report = health_check()
    code = 200 if report["status"] != "error" else 503
    if not _sees_health_detail(request.user):
        report = {"status": report["status"]}
    return JsonResponse(report, status=code)
