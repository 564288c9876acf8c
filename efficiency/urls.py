from django.urls import path

from efficiency.views import (
    committee_exports,
    faults,
    home,
    inventory,
    jobs,
    quotas,
    recommendations,
    sources,
    tickets,
    usage,
)
from efficiency.views import notifications as notification_views

app_name = "efficiency"

urlpatterns = [
    path("", home.home, name="home"),
    path("usage/", usage.cluster_overview_view, name="usage-overview"),
    path("departments/", inventory.department_list_view, name="department-list"),
    path("departments/<slug:code>/", inventory.department_detail_view, name="department-detail"),
    path("departments/<slug:code>/heatmap/", inventory.department_heatmap_view, name="department-heatmap"),
    path("departments/<slug:code>/jobs/", inventory.department_jobs_view, name="department-jobs"),
    path("nodes/", inventory.node_list_view, name="node-list"),
    path("nodes/<int:pk>/", inventory.node_detail_view, name="node-detail"),
    path("jobs/", jobs.job_list_view, name="job-list"),
    path("jobs/<int:pk>/", jobs.job_detail_view, name="job-detail"),
    path("quotas/", quotas.quota_overview_view, name="quota-overview"),
    path("quotas/propose/", quotas.quota_propose_view, name="quota-propose"),
    path("quotas/cycles/", quotas.quota_cycle_list_view, name="quota-cycle-list"),
    path("quotas/cycles/<int:pk>/", quotas.quota_cycle_detail_view, name="quota-cycle-detail"),
    path("quotas/cycles/<int:pk>/edit/", quotas.quota_cycle_edit_view, name="quota-cycle-edit"),
    path("quotas/cycles/<int:pk>/approve/", quotas.quota_cycle_approve_view, name="quota-cycle-approve"),
    path(
        "quotas/cycles/<int:pk>/objections/",
        quotas.quota_objection_create_view,
        name="quota-objection-create",
    ),
    path("quotas/cycles/<int:pk>/backtest/", quotas.quota_backtest_view, name="quota-backtest"),
    path("quotas/cycles/<int:pk>/export/<slug:fmt>/", quotas.quota_export_view, name="quota-export"),
    path(
        "quotas/objections/<int:pk>/answer/",
        quotas.quota_objection_answer_view,
        name="quota-objection-answer",
    ),
    path("faults/", faults.fault_overview_view, name="fault-overview"),
    path("faults/incidents/<int:pk>/", faults.incident_detail_view, name="incident-detail"),
    path("faults/incidents/<int:pk>/report/", faults.incident_report_view, name="incident-report"),
    path("faults/incidents/<int:pk>/<slug:action>/", faults.incident_action_view, name="incident-action"),
    path("faults/nodes/<int:pk>/return-to-service/", faults.node_return_view, name="node-return-to-service"),
    path(
        "departments/<slug:code>/what-to-fix/",
        recommendations.department_what_to_fix_view,
        name="department-what-to-fix",
    ),
    path("recommendations/", recommendations.recommendation_list_view, name="recommendation-list"),
    path("recommendations/queue/", recommendations.recommendation_queue_view, name="recommendation-queue"),
    path(
        "recommendations/<int:pk>/", recommendations.recommendation_detail_view, name="recommendation-detail"
    ),
    path(
        "recommendations/<int:pk>/<slug:action>/",
        recommendations.recommendation_decide_view,
        name="recommendation-decide",
    ),
    path("sources/", sources.source_list_view, name="source-list"),
    path("sources/<int:pk>/", sources.source_detail_view, name="source-detail"),
    path("sources/<int:pk>/collect/", sources.source_collect_view, name="source-collect"),
    path("notifications/", notification_views.notification_settings_view, name="notification-settings"),
    path("tickets/", tickets.ticket_board_view, name="ticket-list"),
    path("tickets/mine/", tickets.ticket_mine_view, name="ticket-mine"),
    path("tickets/new/", tickets.ticket_create_view, name="ticket-create"),
    path("tickets/<int:pk>/", tickets.ticket_detail_view, name="ticket-detail"),
    path("tickets/<int:pk>/edit/", tickets.ticket_edit_view, name="ticket-edit"),
    path("tickets/<int:pk>/comment/", tickets.ticket_comment_view, name="ticket-comment"),
    path("tickets/<int:pk>/move/<slug:action>/", tickets.ticket_move_view, name="ticket-move"),
    path("committee/packs/<int:pk>/pdf/", committee_exports.pack_pdf_view, name="pack-pdf"),
    path("committee/packs/<int:pk>/csv/", committee_exports.pack_csv_view, name="pack-csv"),
    path("committee/rate-cards/", committee_exports.rate_card_list_view, name="rate-card-list"),
]
