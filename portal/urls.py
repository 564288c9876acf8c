from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from django.views.i18n import set_language

from efficiency.views.health import healthz

urlpatterns = [
    path("", include("efficiency.urls")),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The login page has the language switch too, so it must work before signing in.
    path("i18n/setlang/", login_not_required(set_language), name="set_language"),
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include("efficiency.api.urls")),
    path("admin/", admin.site.urls),
]
