"""Quota planning pages: the cycle in force, proposals and their review, backtests, history."""

from datetime import timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from efficiency.charts import quotas as charts
from efficiency.forms import AnswerForm, ClusterForm, CommentForm, ObjectionForm, QuotaEditForm
from efficiency.permissions import QUOTA_EXPORTERS as EXPORTERS
from efficiency.permissions import QUOTA_OBJECTORS, has_role
from efficiency.permissions import QUOTA_PLANNERS as PLANNERS
from efficiency.permissions import QUOTA_READERS as VIEWERS
from efficiency.quota_explanation import event_facts, explanation_steps
from efficiency.scoping import user_role
from efficiency.selectors import quotas as selectors
from efficiency.selectors.inventory import department_names
from efficiency.services import quotas as services
from efficiency.times import portal_day_text
from efficiency.views.helpers import csv_response, get_or_404, role_required
from efficiency.views.usage import local_times


def policy_labels() -> dict[str, str]:
    return {
        "fixed": _("Fixed partition"),
        "current": _("Quotas in force"),
        "cycle": _("This cycle's quotas"),
    }


def row_labels(rows: list[tuple[str, str]]) -> list[str]:
    """Chart row names: the department, and its GPU model's short name when there are several
    models (``NVIDIA A100-SXM4-80GB`` → ``A100``), so that labels leave the plot room on a phone."""
    models = sorted({model for _, model in rows})
    if len(models) < 2:
        return [name for name, _ in rows]
    short = {model: short_model_name(model) for model in models}
    if len(set(short.values())) < len(models):
        short = {model: model for model in models}  # shortening would merge two models
    return [f"{name} · {short[model]}" for name, model in rows]


def short_model_name(model: str) -> str:
    """The GPU's own name out of a product name: its first word with a digit, up to a dash."""
    for word in model.replace("NVIDIA", " ").split():
        if any(char.isdigit() for char in word):
            return word.split("-")[0]
    return model


@role_required(*VIEWERS)
def quota_overview_view(request: HttpRequest) -> HttpResponse:
    """The quotas in force: guaranteed vs used vs borrowed per department so far this cycle."""
    cluster_form = ClusterForm(request.GET)
    if not cluster_form.is_valid():
        context = {"overview": None, "cluster_form": cluster_form}
        return render(request, "efficiency/quotas/overview.html", context, status=400)
    cluster = selectors.default_cluster(cluster_form.cleaned_data["cluster"])
    if cluster is None:
        return render(request, "efficiency/quotas/overview.html", {"overview": None})
    overview = selectors.quota_overview(user=request.user, cluster=cluster, now=timezone.now())
    if request.GET.get("export") == "csv" and overview.cycle:
        return csv_response(
            f"quotas-in-force-{portal_day_text(overview.cycle.start, '%Y%m%d')}.csv",
            [
                _("Department"),
                _("GPU model"),
                _("Guaranteed GPUs"),
                _("Borrowing limit (GPUs)"),
                _("Mean GPUs used"),
                _("P95 GPUs used"),
                _("Mean GPUs borrowed"),
            ],
            [
                [
                    u.quota.department.name,
                    u.quota.gpu_model,
                    u.quota.guaranteed_gpus,
                    u.quota.borrowing_limit_gpus,
                    round(u.mean_used_gpus, 2),
                    round(u.p95_used_gpus, 2),
                    round(u.mean_borrowed_gpus, 2),
                ]
                for u in overview.uses
            ],
        )
    context = {"overview": overview, "cluster": cluster, "can_plan": has_role(request.user, PLANNERS)}
    if overview.uses:
        context["use_figure"] = charts.quota_use_figure(
            row_labels([(u.quota.department.name, u.quota.gpu_model) for u in overview.uses]),
            [u.quota.guaranteed_gpus for u in overview.uses],
            [round(u.mean_used_gpus, 1) for u in overview.uses],
            [round(u.mean_borrowed_gpus, 1) for u in overview.uses],
            title=_("Guaranteed, used and borrowed GPUs (mean this cycle)"),
            guaranteed_label=_("Guaranteed"),
            used_label=_("Used within guarantee"),
            borrowed_label=_("Borrowed from the shared pool"),
            axis_label=_("GPUs"),
        )
    return render(request, "efficiency/quotas/overview.html", context)


@role_required(*VIEWERS)
def quota_cycle_list_view(request: HttpRequest) -> HttpResponse:
    """Every cycle of the cluster with how its quotas were set, and guarantees over time."""
    cluster_form = ClusterForm(request.GET)
    if not cluster_form.is_valid():
        context = {"cycles": [], "cluster_form": cluster_form}
        return render(request, "efficiency/quotas/cycle_list.html", context, status=400)
    cluster = selectors.default_cluster(cluster_form.cleaned_data["cluster"])
    cycles = list(selectors.quota_cycle_list(user=request.user, cluster=cluster))
    context = {"cycles": cycles, "cluster": cluster, "can_plan": has_role(request.user, PLANNERS)}
    if cycles:
        history = selectors.quota_history(user=request.user, cycles=list(reversed(cycles)))
        context["history_figure"] = charts.quota_history_figure(
            [portal_day_text(c.start) for c in history.cycles],
            history.guaranteed_gpus,
            history.shared_pool_gpus,
            title=_("Guaranteed GPUs per cycle"),
            shared_pool_label=_("Shared pool"),
            axis_label=_("GPUs"),
            color_positions={name: index for index, name in enumerate(history.department_order)},
        )
    return render(request, "efficiency/quotas/cycle_list.html", context)


def _cycle_or_404(request: HttpRequest, pk: int):
    return get_or_404(selectors.quota_cycle_get, user=request.user, pk=pk)


@role_required(*VIEWERS)
def quota_cycle_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    """A cycle's quotas with their explanations; for a proposal, the review (edit, approve, object)."""
    cycle = _cycle_or_404(request, pk)
    if request.GET.get("export") == "csv":
        return cycle_csv(cycle)
    return render(request, "efficiency/quotas/cycle_detail.html", cycle_context(request, cycle))


def cycle_context(request: HttpRequest, cycle, **forms) -> dict:
    role = user_role(request.user)
    quotas = list(cycle.quotas.all())
    for quota in quotas:
        quota.cycle = cycle
        quota.why = explanation_steps(quota.explanation, cycle.proposal_settings)
        quota.change = None if quota.previous_gpus is None else quota.guaranteed_gpus - quota.previous_gpus
    can_edit = role in PLANNERS and cycle.is_proposed
    if can_edit:
        for quota in quotas:
            quota.form = forms.get("edit_forms", {}).get(quota.pk) or QuotaEditForm(
                prefix=f"q{quota.pk}",
                initial={
                    "guaranteed_gpus": quota.guaranteed_gpus,
                    "borrowing_limit_gpus": quota.borrowing_limit_gpus,
                },
            )
    head_departments = selectors.quota_objection_departments(user=request.user, cycle=cycle)
    objections = list(cycle.objections.all())
    events = list(cycle.events.all()[:200])
    for event in events:
        event.facts = event_facts(event, cycle)
    if role in PLANNERS:
        for objection in objections:
            objection.form = AnswerForm(prefix=f"o{objection.pk}")
    context = {
        "cycle": cycle,
        "quotas": quotas,
        "objections": objections,
        "events": events,
        "shared_pool": selectors.cycle_shared_pool(cycle),
        "can_edit": can_edit,
        "can_export": role in EXPORTERS and not cycle.is_proposed,
        "sees_backtest": role in EXPORTERS,
        "comment_form": forms.get("comment_form") or CommentForm(),
        "approve_form": forms.get("approve_form") or CommentForm(prefix="approve"),
        "objection_form": (
            forms.get("objection_form") or ObjectionForm(departments=head_departments)
            if cycle.is_proposed and head_departments.exists()
            else None
        ),
        "errors": forms.get("errors", []),
    }
    with_demand = [q for q in quotas if q.demand_gpus]
    if with_demand:
        labels = row_labels([(q.department.name, q.gpu_model) for q in with_demand])
        context["demand_figure"] = charts.demand_distribution_figure(
            [
                charts.DemandRow(
                    name=label,
                    hourly_gpus=q.demand_gpus,
                    percentile_gpus=q.explanation.get("percentile_gpus", 0),
                    proposed_gpus=q.guaranteed_gpus,
                    current_gpus=q.previous_gpus,
                )
                for q, label in zip(with_demand, labels, strict=True)
            ],
            title=_("Hourly demand last cycle (GPUs held or waited for)"),
            demand_label=_("Hourly demand"),
            percentile_label=_("P%(percentile)s of demand")
            % {"percentile": f"{cycle.proposal_settings.get('percentile', 0):g}"},
            proposed_label=_("Guarantee of this cycle"),
            current_label=_("Guarantee in force"),
            axis_label=_("GPUs"),
            log_axis_label=_("GPUs (log scale)"),
        )
    return context


def cycle_csv(cycle) -> HttpResponse:
    quotas = list(cycle.quotas.all())
    for quota in quotas:
        quota.cycle = cycle
    return csv_response(
        f"quotas-{portal_day_text(cycle.start, '%Y%m%d')}.csv",
        [
            _("Department"),
            _("Code"),
            _("GPU model"),
            _("Previous GPUs"),
            _("Proposed GPUs"),
            _("Guaranteed GPUs"),
            _("Borrowing limit (GPUs)"),
            _("Explanation"),
        ],
        [
            [
                q.department.name,
                q.department.code,
                q.gpu_model,
                q.previous_gpus,
                q.proposed_gpus,
                q.guaranteed_gpus,
                q.borrowing_limit_gpus,
                " ".join(explanation_steps(q.explanation, cycle.proposal_settings)),
            ]
            for q in quotas
        ],
    )


@require_POST
@role_required(*PLANNERS)
def quota_cycle_edit_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Save the committee's numbers for a proposal (every change recorded with the comment).

    Numbers that would take a GPU model's guarantees past its capacity are refused on the
    fields that changed, with the numbers, and nothing is saved.
    """
    cycle = _cycle_or_404(request, pk)
    quotas = list(cycle.quotas.all())
    edit_forms = {q.pk: QuotaEditForm(request.POST, prefix=f"q{q.pk}") for q in quotas}
    comment_form = CommentForm(request.POST)

    def refused() -> HttpResponse:
        context = cycle_context(request, cycle, edit_forms=edit_forms, comment_form=comment_form)
        return render(request, "efficiency/quotas/cycle_detail.html", context, status=400)

    if not comment_form.is_valid() or not all(form.is_valid() for form in edit_forms.values()):
        return refused()
    numbers = {
        pk: (form.cleaned_data["guaranteed_gpus"], form.cleaned_data["borrowing_limit_gpus"])
        for pk, form in edit_forms.items()
    }
    try:
        changed = services.quota_cycle_edit(
            cycle=cycle, actor=request.user, numbers=numbers, comment=comment_form.cleaned_data["comment"]
        )
    except services.QuotaOverCapacity as error:
        for quota in quotas:
            if quota.gpu_model in error.by_model and numbers[quota.pk][0] != quota.guaranteed_gpus:
                edit_forms[quota.pk].add_error("guaranteed_gpus", error.by_model[quota.gpu_model])
        return refused()
    except ValidationError as error:
        comment_form.add_error(None, error)
        return refused()
    except services.QuotaError as error:
        messages.error(request, str(error))
        return redirect("efficiency:quota-cycle-detail", pk=cycle.pk)
    messages.success(request, _("%(count)d quotas changed.") % {"count": changed})
    return redirect("efficiency:quota-cycle-detail", pk=cycle.pk)


@require_POST
@role_required(*PLANNERS)
def quota_cycle_approve_view(request: HttpRequest, pk: int) -> HttpResponse:
    cycle = _cycle_or_404(request, pk)
    form = CommentForm(request.POST, prefix="approve")
    if not form.is_valid():
        return render(
            request,
            "efficiency/quotas/cycle_detail.html",
            cycle_context(request, cycle, approve_form=form),
            status=400,
        )
    try:
        services.quota_cycle_approve(cycle=cycle, actor=request.user, comment=form.cleaned_data["comment"])
    except ValidationError as error:
        context = cycle_context(request, cycle, approve_form=form, errors=error.messages)
        return render(request, "efficiency/quotas/cycle_detail.html", context, status=400)
    except services.QuotaError as error:
        messages.error(request, str(error))
        return redirect("efficiency:quota-cycle-detail", pk=cycle.pk)
    messages.success(
        request,
        _("Quotas approved. They come into force on %(start)s.")
        % {"start": f"{timezone.localtime(cycle.start):%Y-%m-%d %H:%M}"},
    )
    return redirect("efficiency:quota-cycle-detail", pk=cycle.pk)


@require_POST
@role_required(*QUOTA_OBJECTORS)
def quota_objection_create_view(request: HttpRequest, pk: int) -> HttpResponse:
    cycle = _cycle_or_404(request, pk)
    departments = selectors.quota_objection_departments(user=request.user, cycle=cycle)
    form = ObjectionForm(request.POST, departments=departments)
    if not form.is_valid():
        return render(
            request,
            "efficiency/quotas/cycle_detail.html",
            cycle_context(request, cycle, objection_form=form),
            status=400,
        )
    try:
        services.quota_objection_file(
            cycle=cycle,
            department=form.cleaned_data["department"],
            author=request.user,
            text=form.cleaned_data["text"],
        )
    except services.QuotaError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, _("Your objection was sent to the GPU committee."))
    return redirect("efficiency:quota-cycle-detail", pk=cycle.pk)


@require_POST
@role_required(*PLANNERS)
def quota_objection_answer_view(request: HttpRequest, pk: int) -> HttpResponse:
    objection = get_or_404(selectors.quota_objection_get, user=request.user, pk=pk)
    form = AnswerForm(request.POST, prefix=f"o{objection.pk}")
    if form.is_valid():
        services.quota_objection_answer(
            objection=objection, actor=request.user, response=form.cleaned_data["response"]
        )
        messages.success(request, _("Answer saved."))
    else:
        messages.error(request, _("Write an answer."))
    return redirect("efficiency:quota-cycle-detail", pk=objection.cycle_id)


@require_POST
@role_required(*PLANNERS)
def quota_propose_view(request: HttpRequest) -> HttpResponse:
    """Compute the next cycle's proposal now (the daily task does it a few days ahead)."""
    cluster = selectors.default_cluster(request.POST.get("cluster"))
    if cluster is None:
        raise Http404(_("No cluster."))
    try:
        cycle = services.quota_proposal_create(cluster=cluster, actor=request.user)
    except services.QuotaError as error:
        messages.error(request, str(error))
        return redirect("efficiency:quota-overview")
    messages.success(request, _("Proposal computed from the last cycle's demand."))
    return redirect("efficiency:quota-cycle-detail", pk=cycle.pk)


@role_required(*EXPORTERS)
def quota_backtest_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Last cycle's jobs replayed under the fixed partition, the quotas in force and this cycle's."""
    cycle = _cycle_or_404(request, pk)
    if request.method == "POST":
        if not has_role(request.user, PLANNERS):
            raise PermissionDenied
        services.quota_backtest_run(cycle=cycle)
        messages.success(request, _("Backtest computed."))
        return redirect("efficiency:quota-backtest", pk=cycle.pk)
    backtest = selectors.quota_backtest_latest(user=request.user, cycle=cycle)
    if backtest is not None and request.GET.get("export") == "csv":
        return backtest_csv(cycle, backtest, department_names(user=request.user))
    context = {"cycle": cycle, "backtest": backtest, "can_plan": has_role(request.user, PLANNERS)}
    if backtest is not None:
        context.update(backtest_context(backtest, department_names(user=request.user)))
    return render(request, "efficiency/quotas/backtest.html", context)


def backtest_csv(cycle, backtest, names: dict[str, str]) -> HttpResponse:
    """One row per policy and department (and one for the whole cluster); ``names`` by code."""
    labels = policy_labels()
    rows = []
    for result in backtest.results:
        label = labels.get(result["key"], result["key"])
        rates = [round(result["allocation_rate"], 4), round(result["utilization"], 4)]
        waits = [result["wait_p50_s"], result["wait_p95_s"]]
        rows.append([label, _("Whole cluster"), *rates, *waits, round(result["unmet_gpu_hours"], 1),
                     result["jobs_waiting_at_end"], result.get("jobs_cancelled", 0)])  # fmt: skip
        for queue, q in sorted(result["queues"].items(), key=lambda item: names.get(item[0], item[0])):
            rows.append([label, names.get(queue, queue or _("Unmapped")), None, None, q["wait_p50_s"],
                         q["wait_p95_s"], round(q["unmet_gpu_hours"], 1), q["waiting_at_end"],
                         q.get("cancelled", 0)])  # fmt: skip
    return csv_response(
        f"backtest-{portal_day_text(cycle.start, '%Y%m%d')}.csv",
        [
            _("Policy"),
            _("Department"),
            _("Allocation rate"),
            _("Utilization"),
            _("P50 wait (s)"),
            _("P95 wait (s)"),
            _("Unmet demand (GPU-hours waited)"),
            _("Still waiting at the end"),
            _("Cancelled by their users while waiting"),
        ],
        rows,
    )


def backtest_context(backtest, names: dict[str, str]) -> dict:
    """The backtest's table and figures; ``names``: department names by code (the queues)."""
    labels = policy_labels()
    results = backtest.results
    for result in results:
        result["label"] = labels.get(result["key"], result["key"])
    queues = sorted({q for result in results for q in result["queues"]}, key=lambda q: names.get(q, q))
    rows = [
        {
            "department": names.get(queue, queue or _("Unmapped")),
            "cells": [result["queues"].get(queue) for result in results],
        }
        for queue in queues
    ]
    hours = len(results[0]["hourly_allocated_gpus"]) if results else 0
    times = local_times(backtest.window_start + timedelta(hours=h) for h in range(hours))
    window_s = max((backtest.window_end - backtest.window_start).total_seconds(), 1.0)
    capacity = results[0]["capacity_gpu_s"] / window_s if results else 0.0
    return {
        "results": results,
        "rows": rows,
        "waits_figure": charts.backtest_waits_figure(
            [row["department"] for row in rows],
            {
                result["label"]: [
                    None
                    if (q := result["queues"].get(queue)) is None or q["wait_p95_s"] is None
                    else round(q["wait_p95_s"] / 3600, 2)
                    for queue in queues
                ]
                for result in results
            },
            title=_("P95 wait per department (hours)"),
            axis_label=_("Hours"),
        ),
        "allocation_figure": charts.backtest_allocation_figure(
            times,
            {result["label"]: result["hourly_allocated_gpus"] for result in results},
            capacity,
            title=_("GPUs allocated, hour by hour, under each policy"),
            capacity_label=_("Capacity"),
            axis_label=_("GPUs"),
        ),
    }


@role_required(*EXPORTERS)
def quota_export_view(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    """An approved cycle as Kueue, Volcano or Slurm configuration (a download)."""
    cycle = _cycle_or_404(request, pk)
    try:
        filename, content_type, text = services.quota_export(cycle=cycle, fmt=fmt, actor=request.user)
    except services.QuotaError as error:
        messages.error(request, str(error))
        return redirect("efficiency:quota-cycle-detail", pk=cycle.pk)
    response = HttpResponse(text, content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
