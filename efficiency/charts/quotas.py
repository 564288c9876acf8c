"""Charts of quota planning: guarantees against use, hourly demand, backtests and quota history.

Every builder takes plain data and already translated text, and returns a themed Plotly figure.
Charts with one row per department grow with the number of departments, so that a cluster of 50
or more departments stays readable: the page scrolls rather than the labels overlapping.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import plotly.graph_objects as go

from efficiency.charts.theme import apply_theme, legend_aside
from efficiency.charts.usage import (
    BUSY_COLOR,
    DEPARTMENT_CHROME_PX,
    DEPARTMENT_ROW_PX,
    MAX_HEIGHT_PX,
    MIN_HEIGHT_PX,
    OWNED_COLOR,
)

GUARANTEED_FILL_COLOR = "#e5e7eb"
BORROWED_COLOR = "#ff7f0e"
DEMAND_BOX_FILL_COLOR = "rgba(31, 119, 180, 0.25)"
PERCENTILE_COLOR = "#ff7f0e"
PROPOSED_COLOR = "#d62728"
SHARED_POOL_COLOR = "#9ca3af"
GRID_COLOR = "#e5e7eb"

# A bar within a department's row; with two bars this gives the usage department charts' row.
BAR_PX = 22
ROW_GAP_PX = 12
# Past the usual maximum height rows shrink, but not below one line of 15 px labels with air,
# nor below a bar thick enough to hover.
READABLE_ROW_PX = 28
MIN_BAR_PX = 8
# A horizontal legend above the plot wraps into many lines past this; a vertical one scrolls.
HORIZONTAL_LEGEND_MAX_ENTRIES = 8


@dataclass(frozen=True, slots=True)
class DemandRow:
    """One row of the demand chart: a department (or department and GPU model) and its numbers.

    ``current_gpus`` is None for a queue without a guarantee this cycle.
    """

    name: str
    hourly_gpus: Sequence[float]
    percentile_gpus: float
    proposed_gpus: float
    current_gpus: float | None


def quota_use_figure(
    departments: Sequence[str],
    guaranteed: Sequence[float],
    used: Sequence[float],
    borrowed: Sequence[float],
    *,
    title: str,
    guaranteed_label: str,
    used_label: str,
    borrowed_label: str,
    axis_label: str,
) -> go.Figure:
    """Per department, two horizontal bars: the guarantee above, the mean use below.

    The guarantee is a light bar with a dark outline. The use bar is the mean GPUs used, split
    into the part within the guarantee (``used - borrowed``, named ``used_label``) and, stacked at
    its end, the mean GPUs borrowed from the shared pool. So the whole use bar ends at ``used``; a
    use bar shorter than the guarantee shows unused guarantee, an orange end shows reliance on the
    shared pool. ``used`` and ``borrowed`` are means over the same hours; ``borrowed`` is a part
    of ``used``. First department on top; the chart grows with the departments.
    """
    _check_lengths("departments", departments, {"guaranteed": guaranteed, "used": used, "borrowed": borrowed})
    # Means rounded apart can put borrowed a hair above used; a negative bar would draw leftwards.
    within = [max(0.0, total - extra) for total, extra in zip(used, borrowed, strict=True)]
    value = "%{customdata:,.1~f} " + axis_label
    figure = go.Figure(
        [
            go.Bar(
                name=guaranteed_label,
                y=list(departments),
                x=list(guaranteed),
                customdata=list(guaranteed),
                orientation="h",
                offsetgroup="guaranteed",
                marker={"color": GUARANTEED_FILL_COLOR, "line": {"color": OWNED_COLOR, "width": 1.5}},
                hovertemplate=_hover_line(guaranteed_label, value),
            ),
            go.Bar(
                name=used_label,
                y=list(departments),
                x=within,
                customdata=within,
                orientation="h",
                offsetgroup="used",
                marker={"color": BUSY_COLOR},
                hovertemplate=_hover_line(used_label, value),
            ),
            # Same offset group and an explicit base: drawn at the end of the part within the
            # guarantee, which grouped bars cannot otherwise stack.
            go.Bar(
                name=borrowed_label,
                y=list(departments),
                x=list(borrowed),
                base=within,
                customdata=list(borrowed),
                orientation="h",
                offsetgroup="used",
                marker={"color": BORROWED_COLOR},
                hovertemplate=_hover_line(borrowed_label, value),
            ),
        ]
    )
    figure.update_layout(
        barmode="group", bargap=0.25, bargroupgap=0.05, hovermode="y unified", showlegend=True
    )
    figure.update_xaxes(title_text=axis_label)
    return _rows_layout(figure, departments, title=title, bars_per_row=2)


def demand_distribution_figure(
    rows: Sequence[DemandRow],
    *,
    title: str,
    demand_label: str,
    percentile_label: str,
    proposed_label: str,
    current_label: str,
    axis_label: str,
) -> go.Figure:
    """Per row, a horizontal box of hourly demand (GPUs) with the quota numbers marked on it.

    A diamond marks the chosen percentile of demand, a thick vertical tick the proposed quota and
    a hollow circle the current quota (none for a row without one). Boxes share one legend entry,
    and each kind of marker has one. Rows run top-down in the given order; a row without hourly
    demand shows its markers only. The box hover names its statistics through Plotly's own
    words (median, q1, ...), which follow the Plotly locale of the page.
    """
    names = [row.name for row in rows]
    boxes = [
        go.Box(
            name=demand_label,
            # y0 places each box on its row, so that every box can carry the one legend name.
            y0=row.name,
            x=list(row.hourly_gpus),
            orientation="h",
            legendgroup="demand",
            showlegend=index == 0,
            boxpoints="outliers",
            marker={"color": BUSY_COLOR, "size": 4},
            line={"color": BUSY_COLOR, "width": 1.5},
            fillcolor=DEMAND_BOX_FILL_COLOR,
        )
        for index, row in enumerate(rows)
    ]
    with_current = [row for row in rows if row.current_gpus is not None]
    markers = [
        _row_markers(
            percentile_label,
            names,
            [row.percentile_gpus for row in rows],
            axis_label=axis_label,
            marker={"symbol": "diamond", "size": 13, "color": PERCENTILE_COLOR},
        ),
        _row_markers(
            proposed_label,
            names,
            [row.proposed_gpus for row in rows],
            axis_label=axis_label,
            # A line symbol has no fill: its stroke is the marker line.
            marker={"symbol": "line-ns", "size": 24, "line": {"color": PROPOSED_COLOR, "width": 4}},
        ),
        _row_markers(
            current_label,
            [row.name for row in with_current],
            [row.current_gpus for row in with_current],
            axis_label=axis_label,
            # An open symbol strokes with the marker colour.
            marker={"symbol": "circle-open", "size": 13, "color": OWNED_COLOR, "line": {"width": 2.5}},
        ),
    ]
    figure = go.Figure([*boxes, *markers])
    figure.update_layout(showlegend=True)
    figure.update_xaxes(title_text=axis_label)
    return _rows_layout(figure, names, title=title, bars_per_row=2)


def backtest_waits_figure(
    departments: Sequence[str],
    waits_hours: Mapping[str, Sequence[float | None]],
    *,
    title: str,
    axis_label: str,
) -> go.Figure:
    """Grouped horizontal bars of the P95 wait (hours) per department, one series per policy.

    ``waits_hours`` maps a policy's label to one wait per department; policies keep their order.
    A None wait (no job waited) draws no bar. First department on top; each row is tall enough
    for one bar per policy.
    """
    _check_lengths("departments", departments, waits_hours)
    figure = go.Figure(
        [
            go.Bar(
                name=policy,
                y=list(departments),
                x=list(values),
                orientation="h",
                hovertemplate=_hover_line(policy, "%{x:,.1f}"),
            )
            for policy, values in waits_hours.items()
        ]
    )
    figure.update_layout(
        barmode="group", bargap=0.25, bargroupgap=0.05, hovermode="y unified", showlegend=True
    )
    figure.update_xaxes(title_text=axis_label)
    return _rows_layout(figure, departments, title=title, bars_per_row=max(2, len(waits_hours)))


def backtest_allocation_figure(
    times: Sequence[datetime],
    allocated: Mapping[str, Sequence[float]],
    capacity_gpus: float,
    *,
    title: str,
    capacity_label: str,
    axis_label: str,
) -> go.Figure:
    """GPUs allocated each hour under each policy (steps), under a dashed capacity line.

    ``allocated`` maps a policy's label to one value per hour; policies keep their order.
    """
    _check_lengths("times", times, allocated)
    hover = "%{y:,.1~f} " + axis_label
    policies = [
        go.Scatter(
            name=policy,
            x=list(times),
            y=list(values),
            mode="lines",
            line={"shape": "hv", "width": 2.5},
            hovertemplate=_hover_line(policy, hover),
        )
        for policy, values in allocated.items()
    ]
    capacity = go.Scatter(
        name=capacity_label,
        x=list(times),
        y=[capacity_gpus] * len(times),
        mode="lines",
        line={"shape": "hv", "width": 2, "dash": "dash", "color": OWNED_COLOR},
        hovertemplate=_hover_line(capacity_label, hover),
    )
    figure = go.Figure([*policies, capacity])
    figure.update_layout(hovermode="x unified", showlegend=True)
    figure.update_yaxes(title_text=axis_label)
    return apply_theme(figure, title=title)


def quota_history_figure(
    cycles: Sequence[str],
    guaranteed: Mapping[str, Sequence[float]],
    shared_pool: Sequence[float],
    *,
    title: str,
    shared_pool_label: str,
    axis_label: str,
) -> go.Figure:
    """Stacked bars per quota cycle: each department's guarantee, and the shared pool on top.

    ``guaranteed`` maps a department's name to one value per cycle, stacked bottom-up in its
    order. The shared pool is grey and hatched, so it stays apart from any department colour.
    """
    _check_lengths("cycles", cycles, guaranteed)
    _check_lengths("cycles", cycles, {"shared_pool": shared_pool})
    value = "%{y:,.1~f} " + axis_label
    departments = [
        go.Bar(
            name=department,
            x=list(cycles),
            y=list(values),
            hovertemplate=_hover_line(department, value, prefix="%{x}<br>"),
        )
        for department, values in guaranteed.items()
    ]
    pool = go.Bar(
        name=shared_pool_label,
        x=list(cycles),
        y=list(shared_pool),
        marker={"color": SHARED_POOL_COLOR, "pattern": {"shape": "/", "fgcolor": "white"}},
        hovertemplate=_hover_line(shared_pool_label, value, prefix="%{x}<br>"),
    )
    figure = go.Figure([*departments, pool])
    figure.update_layout(barmode="stack", bargap=0.3, showlegend=True)
    # Cycle names such as "2024" would otherwise become a numeric axis.
    figure.update_xaxes(type="category")
    figure.update_yaxes(title_text=axis_label)
    figure = apply_theme(figure, title=title)
    if len(figure.data) > HORIZONTAL_LEGEND_MAX_ENTRIES:
        legend_aside(figure)
    return figure


def _row_markers(
    name: str, rows: Sequence[str], values: Sequence[float | None], *, axis_label: str, marker: dict
) -> go.Scatter:
    return go.Scatter(
        name=name,
        y=list(rows),
        x=list(values),
        mode="markers",
        marker=marker,
        cliponaxis=False,
        hovertemplate=_hover_line(name, "%{x:,.1~f} " + axis_label, prefix="%{y}<br>"),
    )


def _rows_layout(figure: go.Figure, rows: Sequence[str], *, title: str, bars_per_row: int) -> go.Figure:
    """Theme a chart with one category row per item: first item on top, height grown with rows."""
    # Categories run bottom-up by default; reverse so the list reads top-down in the given order.
    # An explicit order and type keep rows as given, even names that look like numbers.
    figure.update_yaxes(
        type="category", categoryorder="array", categoryarray=list(rows), autorange="reversed"
    )
    figure = apply_theme(figure, title=title, height_px=_rows_height_px(len(rows), bars_per_row))
    # The theme assumes vertical values; here x carries them, so the grid moves to x.
    figure.update_xaxes(gridcolor=GRID_COLOR, showgrid=True, rangemode="tozero")
    figure.update_yaxes(showgrid=False)
    return figure


def _rows_height_px(rows: int, bars_per_row: int) -> int:
    row_px = max(DEPARTMENT_ROW_PX, BAR_PX * bars_per_row + ROW_GAP_PX)
    min_row_px = max(READABLE_ROW_PX, MIN_BAR_PX * bars_per_row)
    # Up to the usual maximum, as the usage department charts; past it rows shrink to stay
    # readable, and the chart keeps growing instead of dropping labels.
    ceiling_px = max(MAX_HEIGHT_PX, DEPARTMENT_CHROME_PX + min_row_px * rows)
    return max(MIN_HEIGHT_PX, min(ceiling_px, DEPARTMENT_CHROME_PX + row_px * rows))


def _check_lengths(
    reference_name: str, reference: Sequence[object], sequences: Mapping[str, Sequence[object]]
) -> None:
    """Raise ValueError when a sequence does not have one value per item of ``reference``."""
    for name, values in sequences.items():
        if len(values) != len(reference):
            raise ValueError(f"{name!r} has {len(values)} values, but {reference_name} has {len(reference)}")


def _hover_line(name: str, value_template: str, *, prefix: str = "") -> str:
    # Unified hover shows only the template's text, so the series name goes in it explicitly.
    return f"{prefix}{name}: {value_template}<extra></extra>"
