from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _

from efficiency.choices import JobState
from efficiency.filters import JobFilter
from efficiency.selectors.jobs import job_get, job_list
from efficiency.views.faults import job_faults_context
from efficiency.views.helpers import choice_label, get_or_404, render_filtered_list
from efficiency.views.usage import job_usage_context

JOB_CSV_COLUMNS = [
    (_("Job"), lambda job: job.external_id),
    (_("Name"), lambda job: job.name),
    (_("Department"), lambda job: job.department.code if job.department else ""),
    (_("User"), lambda job: job.user_name),
    (_("State"), lambda job: choice_label(JobState, job.state)),
    (_("GPUs"), lambda job: job.gpus_text),
    (_("GPU-hours"), lambda job: None if job.gpu_hours is None else round(job.gpu_hours, 2)),
    (_("Submitted"), lambda job: job.submitted_at),
    (_("Started"), lambda job: job.started_at),
    (_("Ended"), lambda job: job.ended_at),
    (_("Wait (s)"), lambda job: job.wait_s),
    (_("Duration (s)"), lambda job: job.duration_s),
]


def job_list_view(request: HttpRequest) -> HttpResponse:
    return render_filtered_list(
        request,
        template="efficiency/jobs/job_list.html",
        filterset_class=JobFilter,
        queryset=job_list(user=request.user),
        csv_columns=JOB_CSV_COLUMNS,
        csv_name="jobs",
    )


def job_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_or_404(job_get, user=request.user, pk=pk)
    context = {
        "job": job,
        "nodes": job.nodes.all(),
        **job_usage_context(job),
        **job_faults_context(request, job),
    }
    return render(request, "efficiency/jobs/job_detail.html", context)
