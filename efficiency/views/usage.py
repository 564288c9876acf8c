"""Utilization pages: cluster overview, and the usage parts of department, node and job pages."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency.analysis.usage import UsageTotals, change_points, percent
from efficiency.charts import usage as charts
from efficiency.charts.theme import chart_json
from efficiency.choices import NodeClass
from efficiency.forms import ClusterForm, time_range_from_request
from efficiency.permissions import USAGE_OVERVIEW_READERS
from efficiency.selectors import usage
from efficiency.selectors.quotas import capacity_alert_list
from efficiency.selectors.rollup_cache import rollup_cached
from efficiency.timeranges import TimeRange
from efficiency.views.helpers import csv_filename, csv_response, role_required


def class_labels() -> dict[str, str]:
    return {node_class.value: str(node_class.label) for node_class in NodeClass}


def range_or_400(request: HttpRequest, template: str):
    """The requested time range, or a 400 page showing the form with its errors."""
    form, time_range = time_range_from_request(request.GET)
    if time_range is None:
        return form, None, render(request, template, {"range_form": form, "range_invalid": True}, status=400)
    return form, time_range, None


def local_times(times) -> list:
    """Times in the display zone: plotly.js draws the clock time as written, ignoring offsets."""
    return [timezone.localtime(t) for t in times]


def usage_cards_context(totals: UsageTotals, previous: UsageTotals) -> dict:
    """What the usage cards show (partials/usage_cards.html): the totals of the range and the
    change of utilization and allocation rate against the period of the same length before."""
    return {
        "totals": totals,
        "utilization_change": change_points(totals.utilization, previous.utilization),
        "allocation_change": change_points(totals.allocation_rate, previous.allocation_rate),
    }


def trend_figure(points: list[usage.UsagePoint]):
    """Utilization and allocation rate of a usage series, in percent."""
    return charts.utilization_trend_figure(
        local_times(p.time for p in points),
        {
            _("Utilization"): [percent(p.totals.utilization) for p in points],
            _("Allocation rate"): [percent(p.totals.allocation_rate) for p in points],
        },
        title=_("Utilization and allocation rate"),
        axis_label=_("Share of GPU time"),
    )


def water_level_figure(points: list[usage.UsagePoint]):
    """GPUs allocated under GPUs available, per bucket of a usage series."""
    return charts.water_level_figure(
        local_times(p.time for p in points),
        [round(p.gpus_allocated, 1) for p in points],
        [round(p.gpus_available, 1) for p in points],
        title=_("Water level: GPUs allocated of GPUs available"),
        allocated_label=_("GPUs allocated"),
        total_label=_("GPUs available"),
        axis_label=_("GPUs"),
    )


def cluster_from_request(params) -> tuple:
    """``?cluster=<slug>``: (the cluster, or None for every cluster; an error message or None)."""
    form = ClusterForm(params)
    if form.is_valid() and not form.cleaned_data["cluster"]:
        return None, None
    cluster = usage.cluster_by_slug(form.cleaned_data["cluster"]) if form.is_valid() else None
    if cluster is None:
        known = ", ".join(key for key, _name in usage.cluster_choices())
        message = _("There is no cluster “%(slug)s”; the clusters are: %(known)s.")
        return None, message % {"slug": params.get("cluster", ""), "known": known}
    return cluster, None


@role_required(*USAGE_OVERVIEW_READERS)
def cluster_overview_view(request: HttpRequest) -> HttpResponse:
    """Cluster-wide utilization, allocation, water level, departments and node classes; of one
    cluster (``?cluster=<slug>``) or of every cluster summed."""
    template = "efficiency/usage/overview.html"
    form, time_range, invalid = range_or_400(request, template)
    if invalid:
        return invalid
    clusters = usage.cluster_choices()
    cluster, cluster_error = cluster_from_request(request.GET)
    if cluster_error:
        context = {
            "range_form": form,
            "range_invalid": True,
            "clusters": clusters,
            "cluster_error": cluster_error,
        }
        return render(request, template, context, status=400)
    user = request.user
    numbers = overview_numbers(user, time_range, cluster)
    totals, previous, shared_pool = numbers["totals"], numbers["previous"], numbers["shared_pool"]
    departments = usage.department_usage_of(
        user=user, sums=numbers["department_sums"], unplaced=numbers["unplaced"]
    )
    if request.GET.get("export") == "csv":
        return department_usage_csv(
            departments, time_range, cluster=cluster, shared_pool=shared_pool, total=totals
        )
    class_counts, classified_until = usage.node_class_counts(user=user, cluster=cluster)
    ranked = sorted(departments, key=lambda d: d.totals.utilization or 0, reverse=True)
    context = {
        "range_form": form,
        "time_range": time_range,
        "clusters": clusters,
        "cluster": cluster,
        **usage_cards_context(totals, previous),
        "departments": departments,
        "shared_pool": shared_pool,
        "department_figure": charts.department_utilization_figure(
            [d.department.name for d in ranked],
            [percent(d.totals.utilization) for d in ranked],
            [percent(d.totals.allocation_rate) for d in ranked],
            title=_("Utilization and allocation rate per department"),
            utilization_label=_("Utilization"),
            allocation_label=_("Allocation rate"),
            axis_label=_("Share of GPU time"),
        ),
        "class_figure": charts.node_class_figure(
            class_counts, title=_("Node classes"), class_labels=class_labels(), axis_label=_("Nodes")
        ),
        "classified_until": classified_until,
        "alerts": capacity_alert_list(user=user),
        "trend_figure": numbers["trend_figure"],
        "water_level_figure": numbers["water_level_figure"],
    }
    return render(request, template, context)


def overview_numbers(user, time_range: TimeRange, cluster) -> dict:
    """What the overview reads from the rollups, with its two time charts encoded, cached until
    the rollups change (``efficiency.selectors.rollup_cache``); department names, node classes
    and alerts are read per request."""

    def build() -> dict:
        sums, unplaced = usage.department_usage_sums(user=user, time_range=time_range, cluster=cluster)
        points = usage.cluster_usage_series(user=user, time_range=time_range, cluster=cluster)
        return {
            "totals": usage.cluster_usage(user=user, time_range=time_range, cluster=cluster),
            "previous": usage.cluster_usage(user=user, time_range=time_range.previous(), cluster=cluster),
            "department_sums": sums,
            "unplaced": unplaced,
            "shared_pool": usage.shared_pool_usage(user=user, time_range=time_range, cluster=cluster),
            "trend_figure": chart_json(trend_figure(points)),
            "water_level_figure": chart_json(water_level_figure(points)),
        }

    parts = (time_range.start, time_range.end, cluster.pk if cluster else None)
    return rollup_cached("usage-overview", build, user=user, parts=parts)


def department_usage_csv(
    departments: list[usage.DepartmentUsage],
    time_range: TimeRange,
    *,
    cluster=None,
    shared_pool: UsageTotals | None = None,
    total: UsageTotals | None = None,
) -> HttpResponse:
    """The overview's department table as CSV, with the shared pool's row (nodes no department
    owns) and the total when the reader sees every department, so that a cluster whose nodes
    are all unowned still exports its figures."""

    def row(name: str, code: str, totals: UsageTotals, unplaced: float | None) -> list:
        return [
            name,
            code,
            round(totals.available_gpu_hours, 1),
            round(totals.allocated_gpu_hours, 1),
            round(totals.busy_gpu_hours, 1),
            percent(totals.allocation_rate),
            percent(totals.utilization),
            percent(totals.coverage),
            "" if unplaced is None else round(unplaced, 1),
        ]

    # Jobs whose scheduler named no node count for their department only: the shared pool is
    # nodes, so it has no such share, and the total's is the departments' sum.
    rows = [row(d.department.name, d.department.code, d.totals, d.unplaced_gpu_hours) for d in departments]
    if shared_pool is not None:
        rows.append(row(_("Shared pool (unowned nodes)"), "", shared_pool, None))
        if total is not None:
            unplaced = sum(d.unplaced_gpu_hours for d in departments)
            rows.append(row(_("Total"), "", total, unplaced))
    stem = "department-usage" if cluster is None else f"department-usage-{cluster.slug}"
    return csv_response(
        csv_filename(stem, time_range),
        [
            _("Department"),
            _("Code"),
            _("Available GPU-hours"),
            _("Allocated GPU-hours"),
            _("Busy GPU-hours"),
            _("Allocation rate (%)"),
            _("Utilization (%)"),
            _("Coverage (%)"),
            _("Allocated GPU-hours, placement unknown"),
        ],
        rows,
    )


def department_usage_context(request: HttpRequest, department, time_range: TimeRange) -> dict:
    """The usage part of the department page (its heads, the committee, admins): read from the
    rollups only, so cached until they change (``efficiency.selectors.rollup_cache``)."""
    user = request.user
    parts = (department.pk, time_range.start, time_range.end)
    return rollup_cached(
        "department-usage",
        lambda: _department_usage_context(user, department, time_range),
        user=user,
        parts=parts,
    )


def _department_usage_context(user, department, time_range: TimeRange) -> dict:
    totals = usage.department_usage(user=user, department=department, time_range=time_range)
    previous = usage.department_usage(user=user, department=department, time_range=time_range.previous())
    points = usage.department_usage_series(user=user, department=department, time_range=time_range)
    hours = time_range.bucket_seconds / 3600
    times = local_times(p.time for p in points)
    unplaced = usage.unplaced_allocation(user=user, time_range=time_range, department=department).get(
        department.pk, 0.0
    )
    return {
        **usage_cards_context(totals, previous),
        "unplaced_gpu_hours": unplaced / 3600,  # of the allocated: jobs without node placement
        "gpu_hours_figure": chart_json(
            charts.gpu_hours_figure(
                times,
                [round(p.totals.available_gpu_hours, 1) for p in points],
                [round(p.totals.allocated_gpu_hours, 1) for p in points],
                [round(p.totals.busy_gpu_hours, 1) for p in points],
                title=_("GPU-hours: owned, allocated, busy"),
                owned_label=_("Owned"),
                allocated_label=_("Allocated"),
                busy_label=_("Busy"),
                axis_label=_("GPU-hours per hour") if hours == 1 else _("GPU-hours per day"),
            )
        ),
        "trend_figure": chart_json(trend_figure(points)),
    }


def jobs_usage_csv(jobs: list[usage.JobUsage], time_range: TimeRange, code: str) -> HttpResponse:
    return csv_response(
        csv_filename("jobs", code, time_range),
        [
            _("Job"),
            _("Name"),
            _("User"),
            _("State"),
            _("GPUs"),
            _("GPU-hours"),
            _("Busy GPU-hours"),
            _("Efficiency (%)"),
        ],
        [
            [
                j.job.external_id,
                j.job.name,
                j.job.user_name,
                j.job.get_state_display(),
                j.job.gpus_text,
                round(j.gpu_hours, 2),
                round(j.totals.busy_gpu_hours, 2),
                percent(j.efficiency),
            ]
            for j in jobs
        ],
    )


def idle_allocations_csv(idle: list[usage.IdleAllocation], time_range: TimeRange, code: str) -> HttpResponse:
    return csv_response(
        csv_filename("idle-allocations", code, time_range),
        [
            _("Job"),
            _("Name"),
            _("User"),
            _("Idle from"),
            _("Idle until"),
            _("Idle hours"),
            _("GPU-hours wasted"),
        ],
        [
            [
                i.job.external_id,
                i.job.name,
                i.job.user_name,
                i.start,
                i.end,
                i.idle_hours,
                round(i.wasted_gpu_hours, 2),
            ]
            for i in idle
        ],
    )


def node_usage_context(request: HttpRequest, node, time_range: TimeRange) -> dict:
    """The usage part of a node page: totals, trend, and activity per GPU (raw samples)."""
    points = usage.node_usage_series(node=node, time_range=time_range)
    inventory = {gpu.index: gpu for gpu in node.gpus.all()}
    return {
        **usage_cards_context(
            usage.node_usage(node=node, time_range=time_range),
            usage.node_usage(node=node, time_range=time_range.previous()),
        ),
        "trend_figure": trend_figure(points),
        # One row per GPU the node has, whether or not the inventory lists its UUID yet.
        "gpu_rows": [
            (inventory.get(row.index), row)
            for row in usage.node_gpu_usage(user=request.user, node=node, time_range=time_range)
        ],
    }


def job_usage_context(job) -> dict:
    """A job's GPUs over its run, from raw samples (activity, SM active, memory, power)."""
    series = usage.job_metric_series(job=job)
    activity, sm_active, memory, power = _("Activity"), _("SM active"), _("Memory used"), _("Power")
    return {
        "job_series_points": len(series.times),
        "job_figure": charts.job_timeseries_figure(
            local_times(series.times),
            {
                activity: series.activity_pct,
                sm_active: series.sm_active_pct,
                memory: [None if mib is None else round(mib / 1024, 1) for mib in series.fb_used_mib],
                power: series.power_w,
            },
            {activity: "%", sm_active: "%", memory: "GiB", power: "W"},
            title=_("The job's GPUs over its run (mean over its nodes' GPUs)"),
            # Translators: a chart axis title, e.g. "Power (W)"; keep {name} and {unit}.
            axis_title=_("{name} ({unit})"),
        ),
    }


def department_heatmap_context(request: HttpRequest, department, time_range: TimeRange) -> dict:
    """The node x time heatmap, loaded after the page (large departments have many nodes); cached
    until the rollups change or a node is added, renamed or re-owned (the key holds
    ``nodes_fingerprint``)."""
    user = request.user
    parts = (department.pk, time_range.start, time_range.end, usage.nodes_fingerprint())
    return rollup_cached(
        "department-heatmap",
        lambda: _department_heatmap_context(user, department, time_range),
        user=user,
        parts=parts,
    )


def _department_heatmap_context(user, department, time_range: TimeRange) -> dict:
    heatmap = usage.department_heatmap(user=user, department=department, time_range=time_range)
    by_hour = time_range.bucket == "hour"
    figure = charts.heatmap_figure(
        heatmap.nodes,
        local_times(heatmap.times),
        heatmap.values_pct,
        title=(
            _("Utilization per node and day")
            if not by_hour
            else _("Utilization per node and hour")
            if heatmap.block_hours == 1
            else _("Utilization per node, %(hours)s-hour blocks") % {"hours": heatmap.block_hours}
        ),
        colorbar_label=_("Utilization"),
        missing_label=_("no samples"),
    )
    return {"heatmap_figure": chart_json(figure)}


JOBS_SHOWN = 50


def department_jobs_context(request: HttpRequest, department, time_range: TimeRange) -> dict:
    """Jobs by GPU-hours and idle allocations, loaded after the page, with how many jobs held
    GPUs in all. What the rollups give (job ids and their sums) is cached until they change;
    the jobs themselves (names, states) are read per request."""
    user = request.user

    def build() -> dict:
        return {
            "job_sums": usage.job_usage_sums(
                user=user, time_range=time_range, department=department, limit=JOBS_SHOWN
            ),
            "idle_stretches": usage.idle_stretch_rows(
                user=user, time_range=time_range, department=department, limit=JOBS_SHOWN
            ),
            "jobs_total": usage.job_usage_count(user=user, time_range=time_range, department=department),
        }

    parts = (department.pk, time_range.start, time_range.end)
    numbers = rollup_cached("department-jobs", build, user=user, parts=parts)
    return {
        "jobs_usage": usage.job_usage_of(numbers["job_sums"]),
        "idle_allocations": usage.idle_allocations_of(numbers["idle_stretches"]),
        "jobs_total": numbers["jobs_total"],
    }
