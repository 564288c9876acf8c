"""Charts of quota planning: guarantees against use, hourly demand, backtests and quota history.

Every builder takes plain data and already translated text, and returns a themed Plotly figure.
Charts with one row per department grow with the number of departments, so that a cluster of 50
or more departments stays readable: the page scrolls rather than the labels overlapping.

They fit a projector and a phone alike: a long title is wrapped into lines a 390 px screen shows
whole and pushes the plot down (never cut off), and the legend sits below the plot, where it may
wrap, instead of beside the title.
"""

import colorsys
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import plotly.graph_objects as go

from efficiency.charts.theme import GRID_COLOR, apply_theme, plain
from efficiency.charts.toolkit import (
    BUSY_COLOR,
    DEPARTMENT_CHROME_PX,
    DEPARTMENT_ROW_PX,
    MAX_HEIGHT_PX,
    MIN_HEIGHT_PX,
    OWNED_COLOR,
    check_lengths,
    hover_line,
)

GUARANTEED_FILL_COLOR = "#e5e7eb"
BORROWED_COLOR = "#ff7f0e"
DEMAND_BOX_FILL_COLOR = "rgba(31, 119, 180, 0.25)"
PERCENTILE_COLOR = "#ff7f0e"
PROPOSED_COLOR = "#d62728"
SHARED_POOL_COLOR = "#9ca3af"

# A bar within a department's row; with two bars this gives the usage department charts' row.
BAR_PX = 22
ROW_GAP_PX = 12
# Past the usual maximum height rows shrink, but not below one line of 15 px labels with air,
# nor below a bar thick enough to hover.
READABLE_ROW_PX = 28
MIN_BAR_PX = 8
# A title line of at most this many units (a CJK character counts two) fits a phone's 390 px
# (the title's font is about 18 px).
TITLE_LINE_UNITS = 30
TITLE_LINE_PX = 26
# A row label (department · GPU model) longer than this wraps.
ROW_LABEL_UNITS = 20
# Room for the legend below the plot: a line of entries, and one more per this many entries
# (a narrow screen wraps them).
LEGEND_LINE_PX = 26
LEGEND_ENTRIES_PER_LINE = 3
# Demand boxes switch to a log scale when one row's peak passes the rows' median peak this often.
LOG_SCALE_SPREAD = 10.0
LOG_TICKS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
# One colour per department, none of them grey (the shared pool's): Tableau's 20 without its two
# greys and its two palest (a purple and a brown from ColorBrewer's Paired instead), then evenly
# spread hues for clusters with more departments.
DEPARTMENT_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
    "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#6a3d9a", "#b15928", "#f7b6d2",
    "#dbdb8d", "#9edae5",
)  # fmt: skip


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
    check_lengths("departments", departments, {"guaranteed": guaranteed, "used": used, "borrowed": borrowed})
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
                hovertemplate=hover_line(guaranteed_label, value),
            ),
            go.Bar(
                name=used_label,
                y=list(departments),
                x=within,
                customdata=within,
                orientation="h",
                offsetgroup="used",
                marker={"color": BUSY_COLOR},
                hovertemplate=hover_line(used_label, value),
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
                hovertemplate=hover_line(borrowed_label, value),
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
    log_axis_label: str | None = None,
) -> go.Figure:
    """Per row, a horizontal box of hourly demand (GPUs) with the quota numbers marked on it.

    A diamond marks the chosen percentile of demand, a thick vertical tick the proposed quota and
    a hollow circle the current quota (none for a row without one). Boxes share one legend entry,
    and each kind of marker has one. Rows run top-down in the given order; a row without hourly
    demand shows its markers only. The box hover names its statistics through Plotly's own
    words (median, q1, ...), which follow the Plotly locale of the page.

    When one row's peak is more than ``LOG_SCALE_SPREAD`` times the rows' median peak, a linear
    axis would flatten every other box against zero: the axis then shows log10(1 + GPUs), which
    keeps zero at zero and each box's order statistics, with ticks and marker hovers in GPUs and
    ``log_axis_label`` as its title (the boxes' own hover, in logarithms, is turned off).
    """
    names = [row.name for row in rows]
    log_scale = _needs_log_scale(rows)
    scale = _log1p if log_scale else float
    boxes = [
        go.Box(
            name=demand_label,
            # y0 places each box on its row, so that every box can carry the one legend name.
            y0=row.name,
            x=[scale(value) for value in row.hourly_gpus],
            orientation="h",
            legendgroup="demand",
            showlegend=index == 0,
            boxpoints="outliers",
            marker={"color": BUSY_COLOR, "size": 4},
            line={"color": BUSY_COLOR, "width": 1.5},
            fillcolor=DEMAND_BOX_FILL_COLOR,
            hoverinfo="skip" if log_scale else None,
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
            log_scale=log_scale,
        ),
        _row_markers(
            proposed_label,
            names,
            [row.proposed_gpus for row in rows],
            axis_label=axis_label,
            # A line symbol has no fill: its stroke is the marker line.
            marker={"symbol": "line-ns", "size": 24, "line": {"color": PROPOSED_COLOR, "width": 4}},
            log_scale=log_scale,
        ),
        _row_markers(
            current_label,
            [row.name for row in with_current],
            [row.current_gpus for row in with_current],
            axis_label=axis_label,
            # An open symbol strokes with the marker colour.
            marker={"symbol": "circle-open", "size": 13, "color": OWNED_COLOR, "line": {"width": 2.5}},
            log_scale=log_scale,
        ),
    ]
    figure = go.Figure([*boxes, *markers])
    figure.update_layout(showlegend=True)
    figure.update_xaxes(title_text=axis_label)
    figure = _rows_layout(figure, names, title=title, bars_per_row=2, legend_entries=4)
    if log_scale:
        peak = max(max([*row.hourly_gpus, row.percentile_gpus, row.proposed_gpus, row.current_gpus or 0])
                   for row in rows)  # fmt: skip
        ticks = [tick for tick in LOG_TICKS if tick <= peak * 1.5] or [0]
        if _log1p(peak) > 2.5:
            # Past a few hundred GPUs, decades alone: 1-2-5 steps would crowd a phone's axis.
            ticks = [tick for tick in ticks if tick == 0 or math.log10(tick).is_integer()]
        figure.update_xaxes(
            title_text=log_axis_label or axis_label,
            tickvals=[_log1p(tick) for tick in ticks],
            ticktext=[f"{tick:,}" for tick in ticks],
            range=[0, _log1p(peak) * 1.03],
        )
    return figure


def _log1p(gpus: float) -> float:
    return math.log10(1 + max(gpus, 0.0))


def _needs_log_scale(rows: Sequence[DemandRow]) -> bool:
    peaks = [max([*row.hourly_gpus, row.percentile_gpus]) for row in rows]
    positive = [peak for peak in peaks if peak > 0]
    return len(positive) >= 2 and max(positive) > LOG_SCALE_SPREAD * statistics.median(positive)


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
    check_lengths("departments", departments, waits_hours)
    figure = go.Figure(
        [
            go.Bar(
                name=policy,
                y=list(departments),
                x=list(values),
                orientation="h",
                hovertemplate=hover_line(policy, "%{x:,.1f}"),
            )
            for policy, values in waits_hours.items()
        ]
    )
    figure.update_layout(
        barmode="group", bargap=0.25, bargroupgap=0.05, hovermode="y unified", showlegend=True
    )
    figure.update_xaxes(title_text=axis_label)
    return _rows_layout(
        figure,
        departments,
        title=title,
        bars_per_row=max(2, len(waits_hours)),
        legend_entries=len(waits_hours),
    )


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
    check_lengths("times", times, allocated)
    hover = "%{y:,.1~f} " + axis_label
    policies = [
        go.Scatter(
            name=policy,
            x=list(times),
            y=list(values),
            mode="lines",
            line={"shape": "hv", "width": 2.5},
            hovertemplate=hover_line(policy, hover),
        )
        for policy, values in allocated.items()
    ]
    capacity = go.Scatter(
        name=capacity_label,
        x=list(times),
        y=[capacity_gpus] * len(times),
        mode="lines",
        line={"shape": "hv", "width": 2, "dash": "dash", "color": OWNED_COLOR},
        hovertemplate=hover_line(capacity_label, hover),
    )
    figure = go.Figure([*policies, capacity])
    figure.update_layout(hovermode="x unified", showlegend=True)
    figure.update_yaxes(title_text=axis_label)
    return _fit(figure, title=title, height_px=420, legend_entries=len(figure.data))


def quota_history_figure(
    cycles: Sequence[str],
    guaranteed: Mapping[str, Sequence[float]],
    shared_pool: Sequence[float],
    *,
    title: str,
    shared_pool_label: str,
    axis_label: str,
    color_positions: Mapping[str, int] | None = None,
) -> go.Figure:
    """Stacked bars per quota cycle: each department's guarantee, and the shared pool on top.

    ``guaranteed`` maps a department's name to one value per cycle, stacked bottom-up in its
    order. Each department has its own colour: the one at its position in ``color_positions``
    (every department of the portal in a stable order, so that a department keeps its colour
    whoever looks), else at its position here. The shared pool is grey and hatched, apart from
    every department colour.
    """
    check_lengths("cycles", cycles, guaranteed)
    check_lengths("cycles", cycles, {"shared_pool": shared_pool})
    value = "%{y:,.1~f} " + axis_label
    positions = color_positions or {name: index for index, name in enumerate(guaranteed)}
    palette = department_colors(max([*positions.values(), len(guaranteed) - 1], default=-1) + 1)
    colors = [palette[positions.get(name, index)] for index, name in enumerate(guaranteed)]
    departments = [
        go.Bar(
            name=department,
            x=list(cycles),
            y=list(values),
            marker={"color": color},
            hovertemplate=hover_line(department, value, prefix="%{x}<br>"),
        )
        for (department, values), color in zip(guaranteed.items(), colors, strict=True)
    ]
    pool = go.Bar(
        name=shared_pool_label,
        x=list(cycles),
        y=list(shared_pool),
        marker={"color": SHARED_POOL_COLOR, "pattern": {"shape": "/", "fgcolor": "white"}},
        hovertemplate=hover_line(shared_pool_label, value, prefix="%{x}<br>"),
    )
    figure = go.Figure([*departments, pool])
    figure.update_layout(barmode="stack", bargap=0.3, showlegend=True)
    # Cycle names such as "2024" would otherwise become a numeric axis.
    figure.update_xaxes(type="category")
    figure.update_yaxes(title_text=axis_label)
    return _fit(figure, title=title, height_px=420, legend_entries=len(figure.data))


def department_colors(count: int) -> list[str]:
    """``count`` distinct colours, none grey: the palette first, then hues spread evenly."""
    colors = list(DEPARTMENT_COLORS[:count])
    extra = count - len(colors)
    for index in range(extra):
        # Golden-angle hues keep neighbours apart however many there are.
        hue = (index * 0.381966 + 0.05) % 1.0
        lightness = (0.42, 0.58)[index % 2]
        red, green, blue = colorsys.hls_to_rgb(hue, lightness, 0.62)
        colors.append(f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}")
    return colors


def _row_markers(
    name: str,
    rows: Sequence[str],
    values: Sequence[float | None],
    *,
    axis_label: str,
    marker: dict,
    log_scale: bool = False,
) -> go.Scatter:
    if log_scale:
        return go.Scatter(
            name=name,
            y=list(rows),
            x=[None if value is None else _log1p(value) for value in values],
            customdata=list(values),
            mode="markers",
            marker=marker,
            cliponaxis=False,
            hovertemplate=hover_line(name, "%{customdata:,.1~f} " + axis_label, prefix="%{y}<br>"),
        )
    return go.Scatter(
        name=name,
        y=list(rows),
        x=list(values),
        mode="markers",
        marker=marker,
        cliponaxis=False,
        hovertemplate=hover_line(name, "%{x:,.1~f} " + axis_label, prefix="%{y}<br>"),
    )


def _rows_layout(
    figure: go.Figure, rows: Sequence[str], *, title: str, bars_per_row: int, legend_entries: int = 3
) -> go.Figure:
    """Theme a chart with one category row per item: first item on top, height grown with rows."""
    # Categories run bottom-up by default; reverse so the list reads top-down in the given order.
    # An explicit order and type keep rows as given, even names that look like numbers.
    figure.update_yaxes(
        type="category",
        categoryarray=list(rows),
        categoryorder="array",
        autorange="reversed",
        # Long names wrap into lines, so that on a phone they leave the plot its width.
        tickmode="array",
        tickvals=list(rows),
        ticktext=[wrap_title(row, units=ROW_LABEL_UNITS) for row in rows],
    )
    legend_px = _legend_px(legend_entries)
    figure = _fit(
        figure,
        title=title,
        height_px=_rows_height_px(len(rows), bars_per_row, extra_px=legend_px),
        legend_entries=0,
    )
    # The theme assumes vertical values; here x carries them, so the grid moves to x.
    figure.update_xaxes(gridcolor=GRID_COLOR, showgrid=True, rangemode="tozero")
    figure.update_yaxes(showgrid=False)
    return figure


def _rows_height_px(rows: int, bars_per_row: int, *, extra_px: int = 0) -> int:
    row_px = max(DEPARTMENT_ROW_PX, BAR_PX * bars_per_row + ROW_GAP_PX)
    min_row_px = max(READABLE_ROW_PX, MIN_BAR_PX * bars_per_row)
    # Up to the usual maximum, as the usage department charts; past it rows shrink to stay
    # readable, and the chart keeps growing instead of dropping labels.
    ceiling_px = max(MAX_HEIGHT_PX, DEPARTMENT_CHROME_PX + extra_px + min_row_px * rows)
    return max(MIN_HEIGHT_PX, min(ceiling_px, DEPARTMENT_CHROME_PX + extra_px + row_px * rows))


def _legend_px(entries: int) -> int:
    return LEGEND_LINE_PX * (1 + entries // LEGEND_ENTRIES_PER_LINE)


def _fit(figure: go.Figure, *, title: str, height_px: int, legend_entries: int) -> go.Figure:
    """The theme (title above the plot, wrapped to the chart's width in the browser; legend below
    it), with room for the legend's lines added to ``height_px`` (0: already counted)."""
    height_px += _legend_px(legend_entries) if legend_entries else 0
    return apply_theme(figure, title=title, height_px=height_px)


def wrap_title(title: str, *, units: int = TITLE_LINE_UNITS) -> str:
    """``title`` broken into lines of at most ``units`` (a CJK character counts two) with <br>.

    Latin text breaks at spaces; CJK text between any two characters, except before closing
    punctuation. A word longer than a line stays whole.
    """
    lines: list[str] = []
    line = ""
    for token in _title_tokens(title):
        candidate = (line + token) if line else token.lstrip()
        if line and _units(candidate.rstrip()) > units:
            lines.append(line.rstrip())
            line = token.lstrip()
        else:
            line = candidate
    if line.strip():
        lines.append(line.rstrip())
    # The lines are text (a department's name); only the breaks between them are markup.
    return "<br>".join(plain(line) for line in lines)


CLOSING = set("，。、：；！？）」』》〉,.:;!?)")


def _title_tokens(title: str) -> list[str]:
    tokens: list[str] = []
    word = ""
    for char in title:
        if _units(char) == 2 or char == " ":
            if char in CLOSING and tokens and not word:
                tokens[-1] += char
                continue
            if word:
                tokens.append(word)
                word = ""
            if char == " ":
                word = " "
            else:
                tokens.append(char)
            continue
        if char in CLOSING and not word and tokens:
            tokens[-1] += char
            continue
        word += char
    if word:
        tokens.append(word)
    return tokens


def _units(text: str) -> int:
    return sum(2 if ord(char) >= 0x2E80 else 1 for char in text)
