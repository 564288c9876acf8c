"""How callers prove who they are: API tokens for REST framework, and the answer to a caller
that django-axes has locked out after too many wrong passwords."""

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_client_username, get_cool_off
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied

from efficiency.services.tokens import TokenError, api_token_check


class LoginThrottleBackend(AxesStandaloneBackend):
    """django-axes' lockout check for every sign-in that comes with a request (the login
    page, the admin's). Without one (a management command, the test client's ``login``) there
    is no caller address to throttle, so it stands aside instead of refusing the sign-in."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


class ApiTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>`` against the hashed, expiring ``ApiToken``.

    A push token (bound to a *Log push* source) is refused on every view but those that say
    ``accepts_push_tokens``; which source it may push to is the push permission's business.
    """

    def authenticate(self, request):
        result = super().authenticate(request)
        if result is None:
            return None
        token = result[1]
        view = (request.parser_context or {}).get("view")
        if token.source_id is not None and not getattr(view, "accepts_push_tokens", False):
            raise PermissionDenied(
                _("This is a push token of the source %(source)s: it can only push log lines there.")
                % {"source": token.source}
            )
        return result

    def authenticate_credentials(self, key):
        try:
            token = api_token_check(key=key)
        except TokenError as error:
            raise AuthenticationFailed(str(error)) from error
        return token.user, token


def lockout_message(minutes: int) -> str:
    return ngettext(
        "Too many failed sign-ins for this username from your address. Try again in %(minutes)d minute.",
        "Too many failed sign-ins for this username from your address. Try again in %(minutes)d minutes.",
        minutes,
    ) % {"minutes": minutes}


def lockout_response(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """What a locked-out caller gets (``AXES_LOCKOUT_CALLABLE``): 429 with the wait, as JSON for
    API and JSON clients, else the login page with the message and the username kept."""
    cool_off = get_cool_off(request)
    wait_s = int(cool_off.total_seconds()) if cool_off else 0
    message = lockout_message(max(1, -(-wait_s // 60)))
    wants_json = request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", "")
    if wants_json:
        response = JsonResponse({"detail": message, "retry_after_s": wait_s}, status=429)
    else:
        form = AuthenticationForm(request, initial={"username": get_client_username(request, credentials)})
        context = {"form": form, "lockout_message": message, "next": request.POST.get("next", "")}
        response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = str(wait_s)
    return response
