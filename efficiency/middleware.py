from django.contrib.auth.middleware import LoginRequiredMiddleware


class PortalLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Every page needs a signed-in user, except views marked ``login_not_required``.

    The API is left to Django REST framework, which also accepts tokens and answers an
    anonymous caller with 401 instead of a redirect to the login page.
    """

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
