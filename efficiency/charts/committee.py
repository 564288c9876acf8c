"""Charts of the committee's review pack, drawn from the sealed pack content (a plain dict).

``pack_charts(content)`` returns one themed Plotly figure per chart the pack's data allows, under
these keys (the print/PDF charts, ``efficiency.charts.committee_print.pack_svg_charts``, use the
same keys, so a section template finds its chart under one name whatever draws it):

- ``"waterfall"``     section 3: capacity → down → unallocated → allocated idle → busy (GPU-hours)
- ``"states"``        section 3: GPU-hours by state per hour, 100% stacked area
- ``"heatmap"``       section 3: node (or node group) × hour utilization
- ``"node_classes"``  section 3: nodes and GPUs per usage class
- ``"dept:<code>"``   section 4: one per department: within / borrowed / unused guarantee, stacked,
                      with the guarantee in force each hour as a step line
- ``"scatter"``       section 4: allocation rate vs utilization per department, size = GPUs
- ``"pareto"``        section 4: idle GPU-hours by department and cause, bars + cumulative share
- ``"phases"``        section 7: incident phase durations (p50 / p90 / max per phase)
- ``"incident_pareto"`` section 7: incidents' lost GPU-hours by category, bars + cumulative share
- ``"ageing"``        section 8: open tickets per age bucket
- ``"showback"``      section 9: charged GPU-hours and cost per department

A section marked ``{"available": false}`` has no chart; nor has an empty series.
"""

from datetime import datetime
from zoneinfo import ZoneInfo

import plotly.graph_objects as go
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from efficiency.charts.theme import apply_theme, legend_aside, plain
from efficiency.charts.toolkit import ALLOCATED_COLOR, BUSY_COLOR, OWNED_COLOR, clamp_height, hover_line

DOWN_COLOR = "#d62728"
UNALLOCATED_COLOR = "#d1d5db"
BORROWED_COLOR = "#ff7f0e"
UNUSED_COLOR = "#fde68a"
CUMULATIVE_COLOR = "#d62728"
PHASES = ("detect", "locate", "restart", "recover")


def _labels() -> dict[str, str]:
    return {
        "capacity": _("Capacity"),
        "down": _("Down"),
        "unallocated": _("Unallocated"),
        "allocated_idle": _("Allocated, idle"),
        "busy": _("Busy"),
        "within": _("Used within guarantee"),
        "borrowed": _("Borrowed"),
        "unused_guarantee": _("Unused guarantee"),
        "guarantee": _("Guarantee in force"),
        "gpu_hours": _("GPU-hours"),
        "detect": _("Detect"),
        "locate": _("Locate"),
        "restart": _("Restart"),
        "recover": _("Recover"),
    }


def available(section) -> bool:
    """Whether a pack section holds data (not ``{"available": false, "reason": ...}``)."""
    return isinstance(section, (dict, list)) and not (
        isinstance(section, dict) and section.get("available") is False
    )


def local_hours(stamps: list[str], time_zone: str) -> list[datetime]:
    """The pack's ISO UTC hours in the pack's time zone (UTC when the zone is unknown)."""
    try:
        zone = ZoneInfo(time_zone)
    except (ValueError, KeyError, OSError):
        zone = ZoneInfo("UTC")
    return [datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(zone) for stamp in stamps]


def waterfall_figure(steps: list[dict]) -> go.Figure:
    """Capacity, then each state taken off it, ending at the busy GPU-hours."""
    labels = _labels()
    names, values, measures = [], [], []
    for step in steps:
        key = step["key"]
        names.append(labels.get(key, key))
        if key == "capacity":
            values.append(step["gpu_hours"])
            measures.append("absolute")
        elif key == "busy":
            values.append(step["gpu_hours"])
            measures.append("total")
        else:
            values.append(-step["gpu_hours"])
            measures.append("relative")
    figure = go.Figure(
        go.Waterfall(
            x=names,
            y=values,
            measure=measures,
            text=[f"{abs(v):,.0f}" for v in values],
            textposition="outside",
            cliponaxis=False,
            connector={"line": {"color": "#9ca3af"}},
            decreasing={"marker": {"color": "#f59e0b"}},
            increasing={"marker": {"color": OWNED_COLOR}},
            totals={"marker": {"color": BUSY_COLOR}},
            hovertemplate="%{x}: %{text} " + labels["gpu_hours"] + "<extra></extra>",
        )
    )
    figure.update_layout(showlegend=False)
    figure = apply_theme(figure, title=_("Where the capacity went (GPU-hours)"))
    top = max((abs(v) for v in values), default=0)
    figure.update_yaxes(title={"text": labels["gpu_hours"]}, range=[0, top * 1.12 or 1])
    return figure


def states_figure(states: dict, time_zone: str) -> go.Figure:
    """Each hour's GPU-hours by state as shares of capacity (100% stacked area)."""
    labels = _labels()
    hours = local_hours(states.get("hours") or [], time_zone)
    colors = {
        "busy": BUSY_COLOR,
        "allocated_idle": ALLOCATED_COLOR,
        "unallocated": UNALLOCATED_COLOR,
        "down": DOWN_COLOR,
    }
    figure = go.Figure(
        [
            go.Scatter(
                name=labels[key],
                x=hours,
                y=states.get(key) or [],
                mode="lines",
                line={"width": 0.5, "color": colors[key]},
                stackgroup="states",
                groupnorm="percent",
                hovertemplate=hover_line(labels[key], "%{y:.1f}%"),
            )
            for key in ("busy", "allocated_idle", "unallocated", "down")
        ]
    )
    figure.update_layout(hovermode="x unified", legend={"traceorder": "normal"})
    figure = apply_theme(figure, title=_("GPU-hours by state (share of capacity)"))
    figure.update_yaxes(range=[0, 100], ticksuffix="%")
    return figure


def heatmap_figure(heatmap: dict, time_zone: str) -> go.Figure:
    """Utilization per node (or node group) and time block, 0–100%; missing cells grey."""
    rows = heatmap.get("rows") or []
    values = [[None if v is None else round(v * 100, 1) for v in row] for row in heatmap.get("values") or []]
    figure = go.Figure(
        go.Heatmap(
            x=local_hours(heatmap.get("columns") or [], time_zone),
            y=list(rows),
            z=values,
            zmin=0,
            zmax=100,
            colorscale="Blues",
            colorbar={"title": {"text": _("Utilization")}, "ticksuffix": "%"},
            hoverongaps=False,
            hovertemplate="%{y}<br>%{x}<br>%{z:.1f}%<extra></extra>",
        )
    )
    figure.update_yaxes(autorange="reversed", type="category")
    figure = apply_theme(
        figure, title=_("Utilization by node and hour"), height_px=clamp_height(160 + 24 * len(rows))
    )
    figure.update_layout(plot_bgcolor="#e5e7eb")
    figure.update_yaxes(showgrid=False)
    return figure


def node_classes_figure(classes: list[dict], class_labels: dict[str, str]) -> go.Figure:
    """Nodes per usage class, with their GPUs in the hover."""
    names = [class_labels.get(row["class"], row["class"]) for row in classes]
    figure = go.Figure(
        go.Bar(
            x=names,
            y=[row["nodes"] for row in classes],
            customdata=[row["gpus"] for row in classes],
            marker={"color": BUSY_COLOR},
            text=[row["nodes"] for row in classes],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{x}: %{y} " + _("nodes") + ", %{customdata} " + _("GPUs") + "<extra></extra>",
        )
    )
    figure.update_layout(showlegend=False)
    figure = apply_theme(figure, title=_("Nodes by usage class"), height_px=340)
    top = max((row["nodes"] for row in classes), default=0)
    figure.update_yaxes(title={"text": _("nodes")}, range=[0, top * 1.15 or 1])
    return figure


def department_figure(department: dict, time_zone: str) -> go.Figure:
    """A department's GPUs each hour: within guarantee, borrowed, unused guarantee (stacked), and
    the guarantee in force as a step line."""
    labels = _labels()
    hours = local_hours(department.get("hours") or [], time_zone)
    colors = {"within": BUSY_COLOR, "borrowed": BORROWED_COLOR, "unused_guarantee": UNUSED_COLOR}
    traces = [
        go.Scatter(
            name=labels[key],
            x=hours,
            y=department.get(key) or [],
            mode="lines",
            line={"width": 0.5, "color": colors[key], "shape": "hv"},
            stackgroup="gpus",
            hovertemplate=hover_line(labels[key], "%{y:,.1f}"),
        )
        for key in ("within", "borrowed", "unused_guarantee")
    ]
    traces.append(
        go.Scatter(
            name=labels["guarantee"],
            x=hours,
            y=department.get("guarantee") or [],
            mode="lines",
            line={"color": OWNED_COLOR, "width": 2, "shape": "hv", "dash": "dash"},
            hovertemplate=hover_line(labels["guarantee"], "%{y:,.1f}"),
        )
    )
    figure = go.Figure(traces)
    figure.update_layout(hovermode="x unified")
    title = _("%(department)s: GPUs against the guarantee") % {
        "department": plain(department.get("name", ""))
    }
    figure = apply_theme(figure, title=title, height_px=360)
    figure.update_yaxes(title={"text": _("GPUs")})
    return figure


def scatter_figure(departments: list[dict]) -> go.Figure:
    """Allocation rate (x) against utilization (y) per department; marker size = mean GPUs held.
    A department with no rate (no guarantee, no GPU-hours) has no point."""
    departments = [
        d
        for d in departments
        if d["totals"].get("allocation_rate") is not None and d["totals"].get("utilization") is not None
    ]
    hours = [max(1, len(d.get("hours") or [])) for d in departments]
    gpus = [d["totals"]["allocated_gpu_hours"] / h for d, h in zip(departments, hours, strict=True)]
    biggest = max(gpus, default=1) or 1
    figure = go.Figure(
        go.Scatter(
            x=[round(d["totals"]["allocation_rate"] * 100, 1) for d in departments],
            y=[round((d["totals"]["utilization"] or 0) * 100, 1) for d in departments],
            text=[d["name"] for d in departments],
            customdata=[round(g, 1) for g in gpus],
            mode="markers+text",
            textposition="top center",
            cliponaxis=False,
            marker={
                "size": [12 + 40 * g / biggest for g in gpus],
                "color": BUSY_COLOR,
                "opacity": 0.7,
                "line": {"color": OWNED_COLOR, "width": 1},
            },
            hovertemplate="%{text}<br>"
            + _("Allocation rate")
            + ": %{x:.1f}%<br>"
            + _("Utilization")
            + ": %{y:.1f}%<br>"
            + _("Mean GPUs held")
            + ": %{customdata}<extra></extra>",
        )
    )
    figure.update_layout(showlegend=False)
    figure = apply_theme(figure, title=_("Allocation rate against utilization per department"))
    right = max([110.0] + [d["totals"]["allocation_rate"] * 100 + 20 for d in departments])
    figure.update_xaxes(
        title={"text": _("Allocation rate (share of guarantee held)")}, ticksuffix="%", range=[0, right]
    )
    figure.update_yaxes(title={"text": _("Utilization")}, ticksuffix="%", range=[0, 105])
    return figure


def pareto_figure(names: list[str], values: list[float], *, title: str, axis_label: str) -> go.Figure:
    """Bars sorted largest first and the cumulative share as a line on a second axis."""
    total = sum(values) or 1
    running, cumulative = 0.0, []
    for value in values:
        running += value
        cumulative.append(round(running / total * 100, 1))
    figure = go.Figure(
        [
            go.Bar(
                x=names,
                y=values,
                name=axis_label,
                marker={"color": BUSY_COLOR},
                hovertemplate=hover_line(axis_label, "%{y:,.1f}"),
            ),
            go.Scatter(
                x=names,
                y=cumulative,
                name=_("Cumulative share"),
                yaxis="y2",
                mode="lines+markers",
                line={"color": CUMULATIVE_COLOR},
                hovertemplate=hover_line(_("Cumulative share"), "%{y}%"),
            ),
        ]
    )
    figure.update_layout(
        yaxis2={"overlaying": "y", "side": "right", "range": [0, 105], "ticksuffix": "%", "showgrid": False}
    )
    figure = apply_theme(figure, title=title)
    figure.update_yaxes(title={"text": axis_label}, selector={"overlaying": None})
    return figure


def phases_figure(phases: dict) -> go.Figure:
    """Per incident phase, the median, the 90th percentile and the longest duration (minutes)."""
    labels = _labels()
    keys = [key for key in PHASES if key in phases]
    names = [labels[key] for key in keys]
    series = (
        ("p50", _("Median"), BUSY_COLOR),
        ("p90", _("90th percentile"), BORROWED_COLOR),
        ("max", _("Longest"), DOWN_COLOR),
    )
    figure = go.Figure(
        [
            go.Bar(
                name=label,
                x=names,
                y=[None if phases[k].get(stat) is None else round(phases[k][stat] / 60, 1) for k in keys],
                marker={"color": color},
                hovertemplate=hover_line(label, "%{y} min"),
            )
            for stat, label, color in series
        ]
    )
    figure.update_layout(barmode="group")
    figure = apply_theme(figure, title=_("Incident phase durations"), height_px=380)
    figure.update_yaxes(title={"text": pgettext("time unit", "minutes")})
    return figure


def ageing_figure(ageing: list[dict]) -> go.Figure:
    """Open tickets per age bucket."""
    figure = go.Figure(
        go.Bar(
            x=[row["bucket"] for row in ageing],
            y=[row["count"] for row in ageing],
            text=[row["count"] for row in ageing],
            textposition="outside",
            cliponaxis=False,
            marker={"color": BORROWED_COLOR},
            hovertemplate="%{x}: %{y}<extra></extra>",
        )
    )
    figure.update_layout(showlegend=False)
    figure = apply_theme(figure, title=_("Open tickets by age"), height_px=340)
    top = max((row["count"] for row in ageing), default=0)
    figure.update_yaxes(title={"text": _("tickets")}, range=[0, top * 1.15 or 1])
    return figure


def showback_figure(rows: list[dict], currency: str) -> go.Figure:
    """Per department, charged GPU-hours split into guarantee and borrowed, cost in the hover."""
    labels = _labels()
    names = [row["name"] for row in rows]
    costs = [row.get("cost") for row in rows]
    figure = go.Figure(
        [
            go.Bar(
                name=_("Guarantee"),
                y=names,
                x=[row["guaranteed_gpu_hours"] for row in rows],
                orientation="h",
                marker={"color": OWNED_COLOR},
                customdata=costs,
                hovertemplate=hover_line(_("Guarantee"), "%{x:,.0f} " + labels["gpu_hours"]),
            ),
            go.Bar(
                name=labels["borrowed"],
                y=names,
                x=[row["borrowed_gpu_hours"] for row in rows],
                orientation="h",
                marker={"color": BORROWED_COLOR},
                customdata=costs,
                hovertemplate=hover_line(
                    labels["borrowed"],
                    "%{x:,.0f} " + labels["gpu_hours"] + " · %{customdata:,.2f} " + plain(currency),
                ),
            ),
        ]
    )
    figure.update_layout(barmode="stack", legend={"traceorder": "normal"})
    figure.update_yaxes(autorange="reversed", type="category")
    figure = apply_theme(
        figure, title=_("Charged GPU-hours per department"), height_px=clamp_height(160 + 56 * len(rows))
    )
    figure.update_xaxes(title={"text": labels["gpu_hours"]})
    return figure


def pack_charts(content: dict, class_labels: dict[str, str] | None = None) -> dict[str, go.Figure]:
    """Every chart the pack content allows, by key (see the module's docstring)."""
    charts: dict[str, go.Figure] = {}
    time_zone = (content.get("period") or {}).get("time_zone") or "UTC"
    cluster = content.get("cluster_section")
    if available(cluster):
        if cluster.get("capacity_waterfall"):
            charts["waterfall"] = waterfall_figure(cluster["capacity_waterfall"])
        if (cluster.get("states") or {}).get("hours"):
            charts["states"] = states_figure(cluster["states"], time_zone)
        if (cluster.get("heatmap") or {}).get("rows"):
            charts["heatmap"] = heatmap_figure(cluster["heatmap"], time_zone)
        if cluster.get("node_classes"):
            charts["node_classes"] = node_classes_figure(cluster["node_classes"], class_labels or {})
    departments = content.get("departments")
    if available(departments) and departments:
        for department in departments:
            charts[f"dept:{department['code']}"] = department_figure(department, time_zone)
        charts["scatter"] = scatter_figure(departments)
        names = {d["code"]: d["name"] for d in departments}
        pareto = content.get("pareto_idle")
        if available(pareto) and pareto:
            labels = _labels()
            charts["pareto"] = pareto_figure(
                [
                    f"{names.get(r['department'], r['department'])} · {labels.get(r['cause'], r['cause'])}"
                    for r in pareto
                ],
                [r["gpu_hours"] for r in pareto],
                title=_("Idle GPU-hours by department and cause"),
                axis_label=_("Idle GPU-hours"),
            )
    reliability = content.get("reliability")
    if available(reliability):
        if reliability.get("phases"):
            charts["phases"] = phases_figure(reliability["phases"])
        if reliability.get("pareto"):
            rows = reliability["pareto"]
            charts["incident_pareto"] = pareto_figure(
                [r["category"] for r in rows],
                [r["lost_gpu_hours"] for r in rows],
                title=_("Lost GPU-hours by incident category"),
                axis_label=_("Lost GPU-hours"),
            )
    tickets = content.get("tickets")
    if available(tickets) and tickets.get("ageing"):
        charts["ageing"] = ageing_figure(tickets["ageing"])
    showback = content.get("showback")
    if available(showback) and showback.get("departments"):
        currency = (showback.get("rate_card") or {}).get("currency") or ""
        charts["showback"] = showback_figure(showback["departments"], currency)
    return charts


__all__ = ["available", "legend_aside", "pack_charts"]
