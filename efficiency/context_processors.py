from django.http import HttpRequest

from efficiency.scoping import user_role
from efficiency.services.demo_status import history_status


def portal(request: HttpRequest) -> dict:
    """The signed-in user's role (a ``Role`` or None), for the navigation, and the demo's
    history fill while it is still running (every page says so)."""
    status = history_status()
    return {
        "portal_role": user_role(request.user) if hasattr(request, "user") else None,
        "demo_history": status if status is not None and status.preparing else None,
    }
