"""The review pack's charts for print: vector SVG drawn with matplotlib from the pack's content.

``pack_svg_charts(content)`` returns ``{key: "<svg …>"}`` for every section the pack has:
"waterfall", "states", "heatmap", "node_classes", "dept:<code>" (one per department), "scatter",
"pareto", "phases", "ageing", "showback". A section marked ``{"available": false}`` (or absent)
has no chart. Text stays text in the SVG (``svg.fonttype = "none"``), so a PDF made from it
carries the words in its text layer and the reader's CJK font draws them.

Drawn with ``matplotlib.figure.Figure`` and the SVG canvas directly (no pyplot: no global figure
registry to leak, safe in a threaded worker); settings through ``rc_context`` only. Titles and
labels are translated with the language the caller activated. Names from data (departments,
nodes) are drawn as themselves: a ``$`` would start matplotlib's math text, so it is escaped.
"""

import io
import math
from collections.abc import Callable, Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

import matplotlib
import matplotlib.patches
import matplotlib.ticker
from django.utils.translation import gettext as _
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

from efficiency.charts.theme import COLORWAY
from efficiency.charts.toolkit import ALLOCATED_COLOR, BUSY_COLOR, OWNED_COLOR

FONT_FAMILIES = ["Noto Sans CJK SC", "DejaVu Sans"]
RC = {
    "svg.fonttype": "none",
    # The same content draws the same bytes (ids from a fixed salt, no date in the metadata).
    "svg.hashsalt": "review-pack",
    "font.family": "sans-serif",
    "font.sans-serif": FONT_FAMILIES,
    "font.size": 8,
    "axes.titlesize": 10,
    "axes.titlelocation": "left",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#e5e7eb",
    "grid.linewidth": 0.6,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "path.simplify": True,
}
WIDE = (7.0, 2.6)
SMALL = (7.0, 1.9)
IDLE_COLOR = "#fdae6b"
UNALLOCATED_COLOR = "#d1d5db"
DOWN_COLOR = "#d62728"
STATE_COLORS = {
    "busy": BUSY_COLOR,
    "allocated_idle": IDLE_COLOR,
    "unallocated": UNALLOCATED_COLOR,
    "down": DOWN_COLOR,
}
# Bars of a ranked chart past this many are left out (the tables list every row).
TOP_ROWS = 25


def state_labels() -> dict[str, str]:
    return {
        "capacity": _("Capacity"),
        "busy": _("Busy"),
        "allocated_idle": _("Allocated, idle"),
        "unallocated": _("Unallocated"),
        "down": _("Down"),
    }


def plain(text: object) -> str:
    """A data name drawn as itself: ``$`` would open matplotlib's math text."""
    return str(text).replace("\\", "\\\\").replace("$", r"\$")


def _available(section: object) -> bool:
    if isinstance(section, dict):
        return section.get("available", True) is not False
    return isinstance(section, list)


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    FigureCanvasSVG(figure).print_svg(buffer, metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    # The XML prolog and doctype are for a file; inline in HTML they are noise.
    start = text.find("<svg")
    return text[start:] if start > 0 else text


def _figure(size=WIDE) -> tuple[Figure, object]:
    figure = Figure(figsize=size, layout="constrained")
    return figure, figure.add_subplot()


def _hour_ticks(axes, hours: Sequence[str], time_zone: str) -> None:
    """A tick at each local midnight (or every few hours for a short period), labelled "11-16"."""
    try:
        zone = ZoneInfo(time_zone)
    except Exception:
        zone = ZoneInfo("UTC")
    local = [datetime.fromisoformat(hour.replace("Z", "+00:00")).astimezone(zone) for hour in hours]
    step_days = max(1, math.ceil(len(hours) / 24 / 8))
    positions, labels = [], []
    for index, moment in enumerate(local):
        if moment.hour == 0 and (moment.toordinal() % step_days == 0):
            positions.append(index)
            labels.append(moment.strftime("%m-%d"))
    if len(positions) < 2:
        step = max(1, len(hours) // 6)
        positions = list(range(0, len(hours), step))
        labels = [local[i].strftime("%m-%d %H:%M") for i in positions]
    axes.set_xticks(positions, labels)
    axes.set_xlim(0, max(len(hours) - 1, 1))


def _waterfall(content: dict) -> str | None:
    rows = content["cluster_section"].get("capacity_waterfall") or []
    if not rows:
        return None
    labels = state_labels()
    figure, axes = _figure(SMALL)
    level = 0.0
    for index, row in enumerate(rows):
        value = float(row["gpu_hours"] or 0)
        key = row["key"]
        if key == "capacity":
            bottom, height, level = 0.0, value, value
        elif key == "busy":
            bottom, height = 0.0, value
        else:
            level -= value
            bottom, height = level, value
        axes.bar(index, height, bottom=bottom, color=STATE_COLORS.get(key, OWNED_COLOR), width=0.6)
        axes.annotate(f"{value:,.0f}", (index, bottom + height), ha="center", va="bottom", fontsize=7)
    axes.set_xticks(range(len(rows)), [labels.get(row["key"], plain(row["key"])) for row in rows])
    axes.set_ylabel(_("GPU-hours"))
    axes.set_title(_("Where the capacity went"))
    return _svg(figure)


def _states(content: dict) -> str | None:
    states = content["cluster_section"].get("states") or {}
    hours = states.get("hours") or []
    if not hours:
        return None
    keys = ["busy", "allocated_idle", "unallocated", "down"]
    series = [[float(v or 0) for v in states.get(key, [0] * len(hours))] for key in keys]
    totals = [sum(column) or 1.0 for column in zip(*series, strict=True)]
    shares = [[100 * v / t for v, t in zip(values, totals, strict=True)] for values in series]
    labels = state_labels()
    figure, axes = _figure()
    axes.stackplot(
        range(len(hours)), *shares, labels=[labels[k] for k in keys], colors=[STATE_COLORS[k] for k in keys]
    )
    axes.set_ylim(0, 100)
    axes.set_ylabel(_("Share of capacity (%)"))
    _hour_ticks(axes, hours, content.get("period", {}).get("time_zone", "UTC"))
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes.set_title(_("GPU states, hour by hour"))
    return _svg(figure)


def _heatmap(content: dict) -> str | None:
    heatmap = content["cluster_section"].get("heatmap") or {}
    rows, columns, values = (
        heatmap.get("rows") or [],
        heatmap.get("columns") or [],
        heatmap.get("values") or [],
    )
    if not rows or not columns:
        return None
    import numpy as np

    grid = np.ma.masked_invalid(
        np.array([[math.nan if v is None else 100 * float(v) for v in row] for row in values], dtype=float)
    )
    height = min(9.0, 1.2 + 0.14 * len(rows))
    figure, axes = _figure((7.0, height))
    cmap = matplotlib.colormaps["Blues"].with_extremes(bad="#f3f4f6")
    # Cells as vector quads (pcolormesh), not imshow's embedded PNG: the PDF stays vector.
    image = axes.pcolormesh(grid, cmap=cmap, vmin=0, vmax=100, edgecolors="none")
    axes.invert_yaxis()
    axes.grid(False)
    step = max(1, len(rows) // 40)
    axes.set_yticks(
        [i + 0.5 for i in range(0, len(rows), step)],
        [plain(rows[i]) for i in range(0, len(rows), step)],
        fontsize=6,
    )
    column_step = max(1, len(columns) // 8)
    axes.set_xticks(
        [i + 0.5 for i in range(0, len(columns), column_step)],
        [plain(columns[i][5:16].replace("T", " ")) for i in range(0, len(columns), column_step)],
        fontsize=6,
    )
    colorbar = figure.colorbar(image, ax=axes, label=_("Utilization (%)"), shrink=0.8)
    colorbar.solids.set_rasterized(False)
    axes.set_title(_("Utilization by node and time"))
    return _svg(figure)


def _node_classes(content: dict) -> str | None:
    rows = content["cluster_section"].get("node_classes") or []
    if not rows:
        return None
    names = {
        "idle": _("Idle"),
        "hot": _("Hot"),
        "fluctuating": _("Fluctuating"),
        "steady": _("Steady"),
        "unknown": _("Unknown"),
    }
    figure, axes = _figure(SMALL)
    labels = [names.get(row["class"], plain(row["class"])) for row in rows]
    axes.barh(labels, [row["nodes"] for row in rows], color=COLORWAY[: len(rows)] or None)
    for index, row in enumerate(rows):
        axes.annotate(
            _("%(nodes)s nodes · %(gpus)s GPUs") % {"nodes": row["nodes"], "gpus": row["gpus"]},
            (row["nodes"], index),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    axes.invert_yaxis()
    axes.set_xlabel(_("Nodes"))
    axes.set_title(_("Nodes by utilization class"))
    return _svg(figure)


class _DepartmentCharts:
    """One figure reused for every department's chart: the axes, ticks and legend are laid out
    once and only the areas, the guarantee line and the title change (a hundred departments draw
    in a few seconds rather than a quarter of a second each)."""

    def __init__(self, content: dict):
        self.content = content
        self.hours: list[str] | None = None
        self.figure = Figure(figsize=SMALL)
        self.figure.subplots_adjust(left=0.07, right=0.74, bottom=0.14, top=0.86)
        self.axes = self.figure.add_subplot()
        self.labels = [_("Used within guarantee"), _("Borrowed"), _("Unused guarantee")]
        self.colors = [BUSY_COLOR, COLORWAY[1], ALLOCATED_COLOR]
        self.line = None
        # A figure-level title: an axes title re-measures the whole axes on every draw.
        self.title = self.figure.text(0.07, 0.97, "", ha="left", va="top", fontsize=RC["axes.titlesize"])

    def _setup(self, hours: list[str]) -> None:
        axes = self.axes
        self.hours = hours
        axes.set_ylabel(_("GPUs"))
        axes.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4, integer=True))
        axes.grid(axis="x", visible=False)
        _hour_ticks(axes, hours, self.content.get("period", {}).get("time_zone", "UTC"))
        (self.line,) = axes.step([], [], where="post", color=OWNED_COLOR, linewidth=1.2, label=_("Guarantee"))
        handles = [
            matplotlib.patches.Patch(color=c, label=label)
            for c, label in zip(self.colors, self.labels, strict=True)
        ]
        axes.legend(handles=[*handles, self.line], loc="upper left", bbox_to_anchor=(1.01, 1.0))

    def draw(self, department: dict) -> str | None:
        hours = department.get("hours") or []
        if not hours:
            return None
        if self.hours is None:
            self._setup(hours)
        elif hours != self.hours:
            return _DepartmentCharts(self.content).draw(department)
        axes = self.axes
        for collection in list(axes.collections):
            collection.remove()
        x = range(len(hours))
        layers = [
            [float(v or 0) for v in department.get(key) or [0] * len(hours)]
            for key in ("within", "borrowed", "unused_guarantee")
        ]
        axes.stackplot(x, *layers, colors=self.colors)
        guarantee = [float(v or 0) for v in department.get("guarantee") or [0] * len(hours)]
        self.line.set_data(list(x), guarantee)
        top = max([sum(column) for column in zip(*layers, strict=True)] + guarantee + [1.0])
        axes.set_ylim(0, top * 1.08)
        axes.set_xlim(0, max(len(hours) - 1, 1))
        name = plain(department.get("name") or department["code"])
        self.title.set_text(_("%(department)s: guarantee and use") % {"department": name})
        return _svg(self.figure)


def _scatter(content: dict) -> str | None:
    departments = content.get("departments") or []
    points = [
        (d["totals"].get("allocation_rate"), d["totals"].get("utilization"), d)
        for d in departments
        if d.get("totals", {}).get("allocation_rate") is not None
        and d["totals"].get("utilization") is not None
    ]
    if not points:
        return None
    figure, axes = _figure((7.0, 3.2))
    sizes = [
        max(8.0, math.sqrt(float(d["totals"].get("guaranteed_gpu_hours") or 0)) * 2) for _a, _u, d in points
    ]
    axes.scatter(
        [100 * a for a, _u, _d in points],
        [100 * u for _a, u, _d in points],
        s=sizes,
        color=BUSY_COLOR,
        alpha=0.6,
    )
    # Names for the few that stand out (lowest utilization); a hundred labels would be a blot.
    for a, u, d in sorted(points, key=lambda p: p[1])[:8]:
        axes.annotate(
            plain(d["code"]), (100 * a, 100 * u), xytext=(3, 2), textcoords="offset points", fontsize=6
        )
    axes.set_xlabel(_("Allocation rate of the guarantee (%)"))
    axes.set_ylabel(_("Utilization (%)"))
    axes.set_xlim(0, 105)
    axes.set_ylim(0, 105)
    axes.set_title(_("Departments: allocation against utilization"))
    return _svg(figure)


def _pareto(content: dict) -> str | None:
    rows = content.get("pareto_idle") or []
    if not rows:
        return None
    total = sum(float(r["gpu_hours"] or 0) for r in rows) or 1.0
    top = rows[:TOP_ROWS]
    causes = {"unused_guarantee": _("Unused guarantee"), "allocated_idle": _("Allocated, idle")}
    figure, axes = _figure((7.0, 2.8))
    colors = [ALLOCATED_COLOR if r["cause"] == "unused_guarantee" else IDLE_COLOR for r in top]
    axes.bar(range(len(top)), [float(r["gpu_hours"] or 0) for r in top], color=colors)
    axes.set_xticks(
        range(len(top)), [plain(r["department"]) for r in top], rotation=60, ha="right", fontsize=6
    )
    axes.set_ylabel(_("Idle GPU-hours"))
    cumulative, running = [], 0.0
    for r in top:
        running += float(r["gpu_hours"] or 0)
        cumulative.append(100 * running / total)
    share = axes.twinx()
    share.plot(range(len(top)), cumulative, color=OWNED_COLOR, marker="o", markersize=2, linewidth=1)
    share.set_ylim(0, 105)
    share.set_ylabel(_("Cumulative share (%)"))
    share.grid(False)
    handles = [
        matplotlib.patches.Patch(color=ALLOCATED_COLOR, label=causes["unused_guarantee"]),
        matplotlib.patches.Patch(color=IDLE_COLOR, label=causes["allocated_idle"]),
    ]
    axes.legend(handles=handles, loc="upper right", bbox_to_anchor=(1.0, 0.9))
    axes.set_title(_("Who left GPUs idle, and why"))
    return _svg(figure)


def _phases(content: dict) -> str | None:
    phases = content["reliability"].get("phases") or {}
    order = [
        ("detect", _("Detect")),
        ("locate", _("Locate")),
        ("restart", _("Restart")),
        ("recover", _("Recover")),
    ]
    present = [(key, label) for key, label in order if phases.get(key) and phases[key].get("n")]
    if not present:
        return None
    figure, axes = _figure(SMALL)
    y = range(len(present))
    p50 = [float(phases[k].get("p50") or 0) / 60 for k, _l in present]
    p90 = [float(phases[k].get("p90") or 0) / 60 for k, _l in present]
    axes.barh([i + 0.2 for i in y], p50, height=0.4, color=BUSY_COLOR, label=_("Median"))
    axes.barh([i - 0.2 for i in y], p90, height=0.4, color=ALLOCATED_COLOR, label=_("90th percentile"))
    axes.set_yticks(list(y), [label for _k, label in present])
    axes.invert_yaxis()
    axes.set_xlabel(_("Minutes"))
    axes.legend(loc="lower right")
    axes.set_title(_("Time to detect, locate, restart and recover"))
    return _svg(figure)


def _ageing(content: dict) -> str | None:
    rows = content["tickets"].get("ageing") or []
    if not rows:
        return None
    figure, axes = _figure(SMALL)
    axes.bar([plain(r["bucket"]) for r in rows], [r["count"] for r in rows], color=COLORWAY[1])
    axes.set_xlabel(_("Age of open tickets"))
    axes.set_ylabel(_("Tickets"))
    axes.set_title(_("Open tickets by age"))
    return _svg(figure)


def _showback(content: dict) -> str | None:
    showback = content["showback"]
    rows = sorted(showback.get("departments") or [], key=lambda r: -float(r.get("cost") or 0))[:TOP_ROWS]
    if not rows:
        return None
    currency = (showback.get("rate_card") or {}).get("currency", "")
    labels = [plain(r.get("name") or r["code"]) for r in rows]
    central = showback.get("central") or {}
    if central.get("cost"):
        labels.append(_("Central (unallocated and down)"))
    costs = [float(r.get("cost") or 0) for r in rows] + (
        [float(central["cost"])] if central.get("cost") else []
    )
    figure, axes = _figure((7.0, min(9.0, 1.0 + 0.22 * len(labels))))
    axes.barh(
        range(len(labels)),
        costs,
        color=[BUSY_COLOR] * len(rows) + [UNALLOCATED_COLOR] * (len(labels) - len(rows)),
    )
    axes.set_yticks(range(len(labels)), labels, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel(_("Cost (%(currency)s)") % {"currency": plain(currency)})
    axes.set_title(_("Showback: cost by department"))
    return _svg(figure)


SECTION_CHARTS: list[tuple[str, str, Callable[[dict], str | None]]] = [
    ("waterfall", "cluster_section", _waterfall),
    ("states", "cluster_section", _states),
    ("heatmap", "cluster_section", _heatmap),
    ("node_classes", "cluster_section", _node_classes),
    ("scatter", "departments", _scatter),
    ("pareto", "pareto_idle", _pareto),
    ("phases", "reliability", _phases),
    ("ageing", "tickets", _ageing),
    ("showback", "showback", _showback),
]


def pack_svg_charts(content: dict) -> dict[str, str]:
    """Every chart of the pack as inline SVG, keyed as in the module docstring."""
    charts: dict[str, str] = {}
    with matplotlib.rc_context(RC):
        for key, section, draw in SECTION_CHARTS:
            if not _available(content.get(section)):
                continue
            svg = draw(content)
            if svg:
                charts[key] = svg
        if isinstance(content.get("departments"), list):
            departments = _DepartmentCharts(content)
            for department in content["departments"]:
                svg = departments.draw(department)
                if svg:
                    charts[f"dept:{department['code']}"] = svg
    return charts
