from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from efficiency.choices import NodeClass, NodeState
from efficiency.filters import DepartmentFilter, NodeFilter
from efficiency.forms import time_range_from_request
from efficiency.selectors.inventory import (
    NODE_SORTS,
    department_get,
    department_list,
    department_nodes,
    node_class_outlook,
    node_get,
    node_usage_list,
)
from efficiency.selectors.jobs import job_list
from efficiency.selectors.queue import queue_summary, started_wait_stats
from efficiency.selectors.recommendations import what_to_fix_summary
from efficiency.selectors.tickets import department_open_tickets
from efficiency.selectors.usage import (
    idle_allocation_list,
    job_usage_list,
    node_classification_history,
)
from efficiency.views.helpers import choice_label, get_or_404, render_filtered_list
from efficiency.views.usage import (
    department_heatmap_context,
    department_jobs_context,
    department_usage_context,
    idle_allocations_csv,
    jobs_usage_csv,
    node_usage_context,
)


def department_list_view(request: HttpRequest) -> HttpResponse:
    return render_filtered_list(
        request,
        template="efficiency/inventory/department_list.html",
        filterset_class=DepartmentFilter,
        queryset=department_list(user=request.user),
    )


QUEUE_SHOWN = 20


def department_detail_view(request: HttpRequest, code: str) -> HttpResponse:
    """A department's GPUs, usage over the chosen range, queue and waits, jobs and idle allocations."""
    department = get_or_404(department_get, user=request.user, code=code)
    form, time_range = time_range_from_request(request.GET)
    context = {"department": department, "range_form": form, "time_range": time_range}
    if time_range is None:
        return render(request, "efficiency/inventory/department_detail.html", context, status=400)
    export = request.GET.get("export")
    if export == "jobs":
        jobs = job_usage_list(user=request.user, time_range=time_range, department=department, limit=None)
        return jobs_usage_csv(jobs, time_range, department.code)
    if export == "idle":
        idle = idle_allocation_list(user=request.user, time_range=time_range, department=department)
        return idle_allocations_csv(idle, time_range, department.code)
    context.update(department_usage_context(request, department, time_range))
    context["queue"] = queue_summary(
        user=request.user, now=timezone.now(), department=department, limit=QUEUE_SHOWN
    )
    context["waits"] = started_wait_stats(user=request.user, time_range=time_range, department=department)
    context["nodes"] = department_nodes(user=request.user, department=department)
    context["fix_count"], context["fix_gain"] = what_to_fix_summary(
        user=request.user, department_ids=[department.pk]
    )[department.pk]
    context["open_tickets"], context["open_ticket_count"] = department_open_tickets(
        user=request.user, department_ids=[department.pk], now=timezone.now()
    )
    return render(request, "efficiency/inventory/department_detail.html", context)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


NODE_CSV_COLUMNS = [
    (_("Hostname"), lambda node: node.hostname),
    (_("Cluster"), lambda node: node.cluster.slug),
    (_("GPU model"), lambda node: node.gpu_model),
    (_("GPUs"), lambda node: node.gpu_count),
    (_("RDMA capable"), lambda node: node.rdma_capable),
    (_("Fault domain"), lambda node: node.fault_domain),
    (_("State"), lambda node: choice_label(NodeState, node.state)),
    (_("Owner"), lambda node: node.owner_department.code if node.owner_department else _("Shared pool")),
    (_("Class"), lambda node: choice_label(NodeClass, node.node_class) if node.node_class else ""),
    (_("Utilization (%)"), lambda node: _rounded(node.util_pct)),
    (_("Coverage (%)"), lambda node: _rounded(node.coverage_pct)),
]

DEFAULT_NODE_SORT = "hostname"


def node_list_view(request: HttpRequest) -> HttpResponse:
    """Nodes with their class and their utilization and coverage over a range (7 days unless
    chosen), filtered as the API filters, sorted by any column (``?sort=utilization``,
    ``?sort=-coverage``)."""
    template = "efficiency/inventory/node_list.html"
    form, time_range = time_range_from_request(request.GET)
    if time_range is None:
        return render(request, template, {"range_form": form, "range_invalid": True}, status=400)
    sort = request.GET.get("sort") or DEFAULT_NODE_SORT
    sort_error = None
    if sort.removeprefix("-") not in NODE_SORTS:
        sort_error = _("Cannot sort by “%(sort)s”; sort by one of: %(allowed)s.") % {
            "sort": sort,
            "allowed": ", ".join(NODE_SORTS),
        }
        sort = DEFAULT_NODE_SORT
    response = render_filtered_list(
        request,
        template=template,
        filterset_class=NodeFilter,
        queryset=node_usage_list(user=request.user, time_range=time_range, sort=sort),
        csv_columns=None if sort_error else NODE_CSV_COLUMNS,
        csv_name="nodes",
        context={"range_form": form, "time_range": time_range, "sort": sort, "sort_error": sort_error},
    )
    if sort_error:
        response.status_code = 400
    return response


def node_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    """A node: its GPUs, class history (or when it will first be classified), usage over the
    range, per-GPU activity, jobs."""
    node = get_or_404(node_get, user=request.user, pk=pk)
    form, time_range = time_range_from_request(request.GET)
    context = {
        "node": node,
        "range_form": form,
        "time_range": time_range,
        "jobs": job_list(user=request.user).filter(nodes=node)[:20],
        "classifications": node_classification_history(node=node),
        "class_outlook": node_class_outlook(node=node, now=timezone.now()),
    }
    if time_range is None:
        return render(request, "efficiency/inventory/node_detail.html", context, status=400)
    context.update(node_usage_context(request, node, time_range))
    return render(request, "efficiency/inventory/node_detail.html", context)


def _department_part(request: HttpRequest, code: str, template: str, build) -> HttpResponse:
    department = get_or_404(department_get, user=request.user, code=code, counts=False)
    form, time_range = time_range_from_request(request.GET)
    if time_range is None:
        return render(request, "partials/range_errors.html", {"range_form": form}, status=400)
    context = {"department": department, "time_range": time_range, **build(request, department, time_range)}
    return render(request, template, context)


def department_heatmap_view(request: HttpRequest, code: str) -> HttpResponse:
    """The department page's heatmap, fetched by htmx once the page is shown."""
    return _department_part(
        request, code, "efficiency/inventory/partials/department_heatmap.html", department_heatmap_context
    )


def department_jobs_view(request: HttpRequest, code: str) -> HttpResponse:
    """The department page's job and idle-allocation tables, fetched by htmx; the jobs table
    says how many jobs there are in all when it shows only the largest."""

    return _department_part(
        request, code, "efficiency/inventory/partials/department_jobs.html", department_jobs_context
    )
