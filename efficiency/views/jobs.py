from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from efficiency.filters import JobFilter
from efficiency.selectors.jobs import job_get, job_list
from efficiency.views.helpers import get_or_404, render_filtered_list
from efficiency.views.usage import job_usage_context


def job_list_view(request: HttpRequest) -> HttpResponse:
    return render_filtered_list(
        request,
        template="efficiency/jobs/job_list.html",
        filterset_class=JobFilter,
        queryset=job_list(user=request.user),
    )


def job_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_or_404(job_get, user=request.user, pk=pk)
    context = {"job": job, "nodes": job.nodes.all(), **job_usage_context(job)}
    return render(request, "efficiency/jobs/job_detail.html", context)
