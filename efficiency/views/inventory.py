from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from efficiency.filters import DepartmentFilter, NodeFilter
from efficiency.selectors.inventory import department_get, department_list, node_get, node_list
from efficiency.selectors.jobs import job_list
from efficiency.views.helpers import get_or_404, render_filtered_list


def department_list_view(request: HttpRequest) -> HttpResponse:
    return render_filtered_list(
        request,
        template="efficiency/inventory/department_list.html",
        filterset_class=DepartmentFilter,
        queryset=department_list(user=request.user),
    )


def department_detail_view(request: HttpRequest, code: str) -> HttpResponse:
    department = get_or_404(department_get, user=request.user, code=code)
    return render(
        request,
        "efficiency/inventory/department_detail.html",
        {
            "department": department,
            "nodes": node_list(user=request.user).filter(owner_department=department),
            "jobs": job_list(user=request.user).filter(department=department)[:20],
        },
    )


def node_list_view(request: HttpRequest) -> HttpResponse:
    return render_filtered_list(
        request,
        template="efficiency/inventory/node_list.html",
        filterset_class=NodeFilter,
        queryset=node_list(user=request.user),
    )


def node_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    node = get_or_404(node_get, user=request.user, pk=pk)
    return render(
        request,
        "efficiency/inventory/node_detail.html",
        {"node": node, "jobs": job_list(user=request.user).filter(nodes=node)[:20]},
    )
