from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from efficiency.api import views

app_name = "api"

router = DefaultRouter()
router.register("departments", views.DepartmentViewSet, basename="department")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("jobs", views.JobViewSet, basename="job")
router.register("incidents", views.IncidentViewSet, basename="incident")
router.register("fault-signals", views.FaultSignalViewSet, basename="fault-signal")
router.register("quota-cycles", views.QuotaCycleViewSet, basename="quota-cycle")
router.register("quotas", views.QuotaViewSet, basename="quota")
router.register("quota-objections", views.QuotaObjectionViewSet, basename="quota-objection")
router.register("capacity-alerts", views.CapacityAlertViewSet, basename="capacity-alert")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: no inline script for the CSP.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("sources/<int:pk>/logs/", views.LogPushView.as_view(), name="log-push"),
    path("usage/", views.UsageSummaryView.as_view(), name="usage-summary"),
    path("usage/idle-allocations/", views.IdleAllocationView.as_view(), name="idle-allocations"),
    path("quota-overview/", views.QuotaOverviewView.as_view(), name="quota-overview"),
    *router.urls,
]
