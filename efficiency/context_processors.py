from django.http import HttpRequest

from efficiency.scoping import user_role


def portal(request: HttpRequest) -> dict:
    """The signed-in user's role (a ``Role`` or None), for the navigation."""
    return {"portal_role": user_role(request.user) if hasattr(request, "user") else None}
