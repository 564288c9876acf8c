from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from efficiency.api import faults, inventory, quotas, recommendations, sources, tickets, usage

app_name = "api"

router = DefaultRouter()
router.register("departments", inventory.DepartmentViewSet, basename="department")
router.register("nodes", inventory.NodeViewSet, basename="node")
router.register("jobs", inventory.JobViewSet, basename="job")
router.register("incidents", faults.IncidentViewSet, basename="incident")
router.register("fault-signals", faults.FaultSignalViewSet, basename="fault-signal")
router.register("quota-cycles", quotas.QuotaCycleViewSet, basename="quota-cycle")
router.register("quotas", quotas.QuotaViewSet, basename="quota")
router.register("quota-objections", quotas.QuotaObjectionViewSet, basename="quota-objection")
router.register("capacity-alerts", quotas.CapacityAlertViewSet, basename="capacity-alert")
router.register("recommendations", recommendations.RecommendationViewSet, basename="recommendation")
router.register("tickets", tickets.TicketViewSet, basename="ticket")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: no inline script for the CSP.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("sources/<int:pk>/logs/", sources.LogPushView.as_view(), name="log-push"),
    path("usage/", usage.UsageSummaryView.as_view(), name="usage-summary"),
    path("usage/idle-allocations/", usage.IdleAllocationView.as_view(), name="idle-allocations"),
    path("quota-overview/", quotas.QuotaOverviewView.as_view(), name="quota-overview"),
    *router.urls,
]
