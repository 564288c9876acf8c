from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency.charts.inventory import gpu_ownership_figure
from efficiency.choices import Role
from efficiency.forms import time_range_from_request
from efficiency.scoping import user_role
from efficiency.selectors.home import head_home_summary, home_summary
from efficiency.selectors.inventory import department_list, gpu_ownership_summary
from efficiency.selectors.notifications import delivery_failed_count
from efficiency.selectors.recommendations import what_to_fix_summary
from efficiency.selectors.sources import source_status_list
from efficiency.selectors.tickets import department_open_tickets, overdue_ticket_count
from efficiency.services.health import worker_heartbeat_list
from efficiency.views.usage import trend_figure

_TEMPLATES = {
    Role.DEPARTMENT_HEAD: "efficiency/home/department_head.html",
    Role.COMMITTEE: "efficiency/home/committee.html",
    Role.PLATFORM_ADMIN: "efficiency/home/platform_admin.html",
}


def home(request: HttpRequest) -> HttpResponse:
    """The landing page of each role, with the headline numbers within the user's scope."""
    role = user_role(request.user)
    if role is None:
        return render(request, "efficiency/home/no_role.html")
    if role == Role.DEPARTMENT_HEAD:
        return department_head_home(request)
    figure = gpu_ownership_figure(
        gpu_ownership_summary(user=request.user),
        title=_("GPUs by owner and model"),
        shared_pool_label=_("Unowned"),
        axis_label=_("GPUs"),
    )
    context = {
        "summary": home_summary(user=request.user),
        "departments": department_list(user=request.user),
        "ownership_figure": figure,
        "overdue_tickets": overdue_ticket_count(user=request.user, now=timezone.now()),
    }
    if role == Role.PLATFORM_ADMIN:
        context["heartbeats"] = worker_heartbeat_list()
        context["source_statuses"] = source_status_list()
        context["failed_deliveries"] = delivery_failed_count()
    return render(request, _TEMPLATES[role], context)


def department_head_home(request: HttpRequest) -> HttpResponse:
    """A head's home over the chosen range: usage against the period before, the queue, the
    guarantee vs use this cycle, open incidents and idle allocations, each linking to its page."""
    form, time_range = time_range_from_request(request.GET)
    context = {"range_form": form, "time_range": time_range}
    if time_range is None:
        return render(request, _TEMPLATES[Role.DEPARTMENT_HEAD], context, status=400)
    home = head_home_summary(user=request.user, time_range=time_range, now=timezone.now())
    context.update(
        home=home,
        totals=home.totals,
        utilization_change=home.utilization_change,
        allocation_change=home.allocation_change,
        trend_figure=trend_figure(home.series),
    )
    fixes = what_to_fix_summary(
        user=request.user, department_ids=[row.department.pk for row in home.departments]
    )
    context["what_to_fix"] = [(row.department, *fixes[row.department.pk]) for row in home.departments]
    context["open_tickets"], context["open_ticket_count"] = department_open_tickets(
        user=request.user, department_ids=[row.department.pk for row in home.departments], now=timezone.now()
    )
    return render(request, _TEMPLATES[Role.DEPARTMENT_HEAD], context)
