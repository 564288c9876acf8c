from django.urls import path

from efficiency.views import home, inventory, jobs, sources, usage

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
    path("sources/", sources.source_list_view, name="source-list"),
    path("sources/<int:pk>/", sources.source_detail_view, name="source-detail"),
]
