"""Charts of GPU usage: water level, utilization trends, GPU-hours, departments, node classes, heatmaps.

Every builder takes plain data and already translated text, and returns a themed figure: the
pages' charts as plain dicts (``{"data": [...], "layout": {...}}``, what plotly.js draws; see
``theme.figure_dict``), the job chart, on one job's page, as a Plotly figure.
Times are passed to Plotly as given. Plotly.js ignores the UTC offset in a date string and shows the
wall-clock time as written, so callers convert times to the display time zone first.
"""

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cache

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from efficiency.charts.theme import GRID_COLOR, apply_theme, figure_dict, themed, update_axes
from efficiency.charts.toolkit import (
    ALLOCATED_COLOR,
    BUSY_COLOR,
    DEPARTMENT_CHROME_PX,
    DEPARTMENT_ROW_PX,
    MIN_HEIGHT_PX,
    OWNED_COLOR,
    PERCENT_RANGE,
    check_lengths,
    clamp_height,
    hover_line,
    percent_text,
)

# Node classes in the order the committee reads them: waste first, then risk, then opportunity.
NODE_CLASS_ORDER = ("idle", "hot", "fluctuating", "steady")
NODE_CLASS_COLORS = {
    "idle": "#9ca3af",
    "hot": "#d62728",
    "fluctuating": "#ff7f0e",
    "steady": "#2ca02c",
}
OTHER_NODE_CLASS_COLOR = "#9467bd"

HEATMAP_COLORSCALE = "Viridis"
# Missing cells are left empty, so this background shows through them; Viridis has no grey.
HEATMAP_MISSING_COLOR = "#d1d5db"
HEATMAP_ROW_PX = 28
HEATMAP_CHROME_PX = 140

JOB_ROW_PX = 200
JOB_CHROME_PX = 120


def water_level_figure(
    times: Sequence[datetime],
    allocated_gpus: Sequence[float | None],
    total_gpus: Sequence[float | None],
    *,
    title: str,
    allocated_label: str,
    total_label: str,
    axis_label: str,
) -> dict:
    """The water level: GPUs allocated (filled area) under the GPUs available (line), over time.

    Both series are drawn as steps, because each value holds for its whole bucket.
    """
    check_lengths("times", times, {"allocated_gpus": allocated_gpus, "total_gpus": total_gpus})
    hover = "%{y:,.1~f} " + axis_label
    figure = figure_dict(
        [
            {
                "type": "scatter",
                "name": allocated_label,
                "x": list(times),
                "y": list(allocated_gpus),
                "mode": "lines",
                "line": {"shape": "hv", "width": 0, "color": BUSY_COLOR},
                "fill": "tozeroy",
                "connectgaps": False,
                "hovertemplate": hover_line(allocated_label, hover),
            },
            {
                "type": "scatter",
                "name": total_label,
                "x": list(times),
                "y": list(total_gpus),
                "mode": "lines",
                "line": {"shape": "hv", "width": 3, "color": OWNED_COLOR},
                "connectgaps": False,
                "hovertemplate": hover_line(total_label, hover),
            },
        ],
        hovermode="x unified",
        showlegend=True,
        yaxis={"title": {"text": axis_label}},
    )
    return themed(figure, title=title)


def utilization_trend_figure(
    times: Sequence[datetime],
    series: Mapping[str, Sequence[float | None]],
    *,
    title: str,
    axis_label: str,
) -> dict:
    """One line per named series of percentages (0-100); a None value leaves a gap in its line."""
    check_lengths("times", times, series)
    figure = figure_dict(
        [
            {
                "type": "scatter",
                "name": name,
                "x": list(times),
                "y": list(values),
                "mode": "lines",
                "line": {"width": 3},
                "connectgaps": False,
                # A line at exactly 100% sits on the plot edge: let it draw in full.
                "cliponaxis": False,
                "hovertemplate": hover_line(name, "%{y:.1f}%"),
            }
            for name, values in series.items()
        ],
        hovermode="x unified",
        showlegend=True,
        yaxis={"title": {"text": axis_label}, "range": list(PERCENT_RANGE), "ticksuffix": "%"},
    )
    return themed(figure, title=title)


def gpu_hours_figure(
    times: Sequence[datetime],
    owned: Sequence[float],
    allocated: Sequence[float],
    busy: Sequence[float],
    *,
    title: str,
    owned_label: str,
    allocated_label: str,
    busy_label: str,
    axis_label: str,
) -> dict:
    """GPU-hours per bucket: owned as a line, allocated and busy as overlaid bars, busy in front."""
    check_lengths("times", times, {"owned": owned, "allocated": allocated, "busy": busy})
    hover = "%{y:,.1~f} " + axis_label
    figure = figure_dict(
        [
            {
                "type": "scatter",
                "name": owned_label,
                "x": list(times),
                "y": list(owned),
                "mode": "lines",
                "line": {"shape": "hvh", "width": 3, "color": OWNED_COLOR},
                "hovertemplate": hover_line(owned_label, hover),
            },
            # Overlaid bars are drawn in trace order, so busy (a part of allocated) comes last.
            {
                "type": "bar",
                "name": allocated_label,
                "x": list(times),
                "y": list(allocated),
                "marker": {"color": ALLOCATED_COLOR},
                "hovertemplate": hover_line(allocated_label, hover),
            },
            {
                "type": "bar",
                "name": busy_label,
                "x": list(times),
                "y": list(busy),
                "marker": {"color": BUSY_COLOR},
                "hovertemplate": hover_line(busy_label, hover),
            },
        ],
        barmode="overlay",
        bargap=0.15,
        hovermode="x unified",
        showlegend=True,
        yaxis={"title": {"text": axis_label}},
    )
    return themed(figure, title=title)


def department_utilization_figure(
    names: Sequence[str],
    utilization_pct: Sequence[float | None],
    allocation_pct: Sequence[float | None],
    *,
    title: str,
    utilization_label: str,
    allocation_label: str,
    axis_label: str,
) -> dict:
    """Horizontal grouped bars per department, first department on top, each bar labelled ("45%").

    A None value draws no bar and no label.
    """
    check_lengths("names", names, {"utilization_pct": utilization_pct, "allocation_pct": allocation_pct})
    figure = figure_dict(
        [
            {
                "type": "bar",
                "name": label,
                "y": list(names),
                "x": list(values),
                "orientation": "h",
                "text": [percent_text(value) for value in values],
                "textposition": "auto",
                "cliponaxis": False,
                "hovertemplate": "%{y}<br>" + hover_line(label, "%{x:.1f}%"),
            }
            for label, values in ((utilization_label, utilization_pct), (allocation_label, allocation_pct))
        ],
        barmode="group",
        bargap=0.25,
        bargroupgap=0.05,
        showlegend=True,
        xaxis={"title": {"text": axis_label}, "range": list(PERCENT_RANGE), "ticksuffix": "%"},
        # Categories run bottom-up by default; reverse so the list reads top-down in the given order.
        yaxis={"autorange": "reversed"},
    )
    height_px = clamp_height(DEPARTMENT_CHROME_PX + DEPARTMENT_ROW_PX * len(names))
    figure = themed(figure, title=title, height_px=height_px)
    # The theme assumes vertical values; here x carries them, so the grid moves to x.
    update_axes(figure, "x", gridcolor=GRID_COLOR, showgrid=True)
    return update_axes(figure, "y", showgrid=False)


def node_class_figure(
    counts: Mapping[str, int],
    *,
    title: str,
    class_labels: Mapping[str, str],
    axis_label: str,
) -> dict:
    """Bars of node counts per class (idle, hot, fluctuating, steady, then any other), with shares.

    When ``counts`` is not empty the four known classes are always shown, with 0 for an absent one,
    so that "no hot nodes" is visible. A class without a label in ``class_labels`` shows its key.
    """
    classes: list[str] = []
    if counts:
        classes = list(NODE_CLASS_ORDER) + [key for key in counts if key not in NODE_CLASS_ORDER]
    values = [counts.get(key, 0) for key in classes]
    total = sum(values)
    shares = [_share_text(value, total) for value in values]
    figure = figure_dict(
        [
            {
                "type": "bar",
                "name": title,
                "x": [class_labels.get(key, key) for key in classes],
                "y": values,
                "marker": {"color": [NODE_CLASS_COLORS.get(key, OTHER_NODE_CLASS_COLOR) for key in classes]},
                "text": [f"{value} · {share}" for value, share in zip(values, shares, strict=True)],
                "textposition": "outside",
                "cliponaxis": False,
                "customdata": shares,
                "hovertemplate": "%{x}<br>%{y} " + axis_label + " · %{customdata}<extra></extra>",
            }
        ],
        showlegend=False,
        yaxis={"title": {"text": axis_label}},
    )
    return themed(figure, title=title)


@cache
def _heatmap_colorscale() -> list[list]:
    """HEATMAP_COLORSCALE as the [position, colour] pairs Plotly's validator writes for it."""
    from plotly.colors import sequential

    colors = getattr(sequential, HEATMAP_COLORSCALE)
    return [[index / (len(colors) - 1), color] for index, color in enumerate(colors)]


def heatmap_figure(
    row_labels: Sequence[str],
    times: Sequence[datetime],
    values_pct: Sequence[Sequence[float | None]],
    *,
    title: str,
    colorbar_label: str,
    missing_label: str,
) -> dict:
    """Node x time utilization heatmap (0-100%), first row on top; missing cells are grey.

    ``values_pct[i][j]`` is row ``i`` at ``times[j]``. The height grows with the number of rows.
    """
    if len(values_pct) != len(row_labels):
        raise ValueError(f"values_pct has {len(values_pct)} rows, but row_labels has {len(row_labels)}")
    for index, row in enumerate(values_pct):
        if len(row) != len(times):
            raise ValueError(f"values_pct row {index} has {len(row)} values, but times has {len(times)}")
    # No per-cell hover text: a department of 200 nodes over a week is ~35k cells, and a text per
    # cell doubled the page and the time to build it. Missing cells stay grey (the plot
    # background), and a grey square in the legend says what grey means.
    figure = figure_dict(
        [
            {
                "type": "heatmap",
                "name": title,
                "x": list(times),
                "y": list(row_labels),
                "z": [list(row) for row in values_pct],
                "zmin": PERCENT_RANGE[0],
                "zmax": PERCENT_RANGE[1],
                "colorscale": _heatmap_colorscale(),
                "colorbar": {"title": {"text": colorbar_label}, "ticksuffix": "%"},
                "hoverongaps": False,
                "hovertemplate": "%{y}<br>%{x}<br>%{z:.1f}%<extra></extra>",
            },
            {
                "type": "scatter",
                "name": missing_label,
                "x": [None],
                "y": [None],
                "mode": "markers",
                "marker": {"symbol": "square", "size": 14, "color": HEATMAP_MISSING_COLOR},
                "showlegend": True,
                "hoverinfo": "skip",
            },
        ],
        showlegend=True,
        yaxis={"autorange": "reversed", "type": "category"},
    )
    height_px = clamp_height(HEATMAP_CHROME_PX + HEATMAP_ROW_PX * len(row_labels))
    figure = themed(figure, title=title, height_px=height_px)
    figure["layout"]["plot_bgcolor"] = HEATMAP_MISSING_COLOR
    return update_axes(figure, "y", showgrid=False)


def job_timeseries_figure(
    times: Sequence[datetime],
    series: Mapping[str, Sequence[float | None]],
    units: Mapping[str, str],
    *,
    title: str,
    axis_title: str = "{name} ({unit})",
) -> go.Figure:
    """A job's metrics over time: one row per series, stacked, all sharing the time axis.

    ``units`` maps a series name to its unit ("%", "GiB", "W"), shown in its axis title
    (``axis_title``, translated by the caller: "{name}（{unit}）" in Chinese) and in the hover;
    a series with unit "%" gets a 0-100 axis. A series without a unit shows bare values.
    """
    check_lengths("times", times, series)
    if not series:
        return apply_theme(go.Figure(), title=title, height_px=MIN_HEIGHT_PX)
    figure = make_subplots(
        rows=len(series),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=min(0.06, 0.3 / len(series)),
    )
    for row, (name, values) in enumerate(series.items(), start=1):
        unit = units.get(name, "")
        is_percent = unit == "%"
        value_text = "%{y:.1f}%" if is_percent else ("%{y:,.1~f} " + unit).rstrip()
        figure.add_trace(
            go.Scatter(
                name=name,
                x=list(times),
                y=list(values),
                mode="lines",
                line={"width": 2},
                connectgaps=False,
                hovertemplate=hover_line(name, value_text),
            ),
            row=row,
            col=1,
        )
        figure.update_yaxes(
            title_text=axis_title.format(name=name, unit=unit) if unit else name, row=row, col=1
        )
        if is_percent:
            figure.update_yaxes(range=PERCENT_RANGE, ticksuffix="%", row=row, col=1)
    figure.update_layout(showlegend=False, hovermode="x unified")
    height_px = clamp_height(JOB_CHROME_PX + JOB_ROW_PX * len(series))
    return apply_theme(figure, title=title, height_px=height_px)


def _share_text(count: int, total: int) -> str:
    if total == 0:
        return "0%"
    share_pct = 100 * count / total
    # A handful of nodes in a large cluster must not read as "0%".
    if 0 < share_pct < 1:
        return "<1%"
    return f"{share_pct:.0f}%"
