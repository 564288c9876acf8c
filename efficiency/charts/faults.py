"""Charts of faults: the node x time fault timeline, an incident's phases, MTTR, ETTR and counts.

Every builder takes plain data and already translated text, and returns a themed Plotly figure.
Times are passed to Plotly as given. Plotly.js ignores the UTC offset in a date string and shows the
wall-clock time as written, so callers convert times to the display time zone first.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

import plotly.graph_objects as go

from efficiency.charts.theme import GRID_COLOR, apply_theme, legend_aside
from efficiency.charts.toolkit import (
    BUSY_COLOR,
    DEPARTMENT_CHROME_PX,
    DEPARTMENT_ROW_PX,
    HORIZONTAL_LEGEND_MAX_ENTRIES,
    MAX_HEIGHT_PX,
    MIN_HEIGHT_PX,
    OWNED_COLOR,
    PERCENT_RANGE,
    check_lengths,
    hover_line,
    percent_text,
)
from efficiency.charts.toolkit import duration_text as spoken_duration

# One colour per fault category (efficiency.choices.FaultCategory), the same on every page.
# Related causes share a hue family: GPU hardware reds, interconnect blues and purples, CUDA
# oranges and pinks, so a burst of one kind reads as one colour across the timeline.
CATEGORY_COLORS = {
    "hardware_gpu": "#d62728",
    "hardware_memory_ecc": "#7f1d1d",
    "nvlink": "#9467bd",
    "network_rdma": "#1f77b4",
    "nccl_timeout_hang": "#17becf",
    "nccl_socket_fallback": "#393b79",
    "cuda_oom": "#ff7f0e",
    "cuda_illegal_access": "#e377c2",
    "loss_nan_inf": "#bcbd22",
    "slowdown": "#2ca02c",
    "storage_io": "#8c564b",
    "software_error": "#7f7f7f",
}
OTHER_CATEGORY_COLOR = "#111827"

SEVERITY_ORDER = ("critical", "error", "warning")
SEVERITY_SYMBOLS = {"critical": "x", "error": "circle", "warning": "triangle-up"}
SEVERITY_SIZES = {"critical": 12, "error": 9, "warning": 10}
SEVERITY_KEY_COLOR = "#6b7280"

# SVG markers slow the page down past a few thousand points; WebGL stays smooth, but a browser
# allows only a handful of WebGL contexts per page, so only big timelines use it.
WEBGL_ABOVE_POINTS = 5_000

# A timeline row is one node. Up to the usual maximum height rows get room to breathe; past it
# they shrink to one line of 15 px labels with air, and the chart keeps growing (the page
# scrolls) rather than dropping node names.
TIMELINE_ROW_PX = 26
TIMELINE_MIN_ROW_PX = 18
TIMELINE_CHROME_PX = 160

OPEN_PHASE_FILL_COLOR = "rgba(31, 119, 180, 0.25)"
OPEN_PHASE_PATTERN = "/"

MTTR_WIDTH_PX = 3
PART_WIDTH_PX = 2

# Below this many incidents Plotly would put ticks at halves, which make no sense for counts.
WHOLE_TICKS_MAX_COUNT = 10


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """One fault signal on the timeline: a node (row), when, what kind and how bad.

    ``category`` and ``severity`` are keys (efficiency.choices.FaultCategory and Severity);
    ``text`` is the short evidence shown on hover; ``incident_id`` is None for a signal not yet
    grouped into an incident.
    """

    row: str
    time: datetime
    category: str
    severity: str
    text: str
    incident_id: int | None


def fault_timeline_figure(
    points: Sequence[TimelinePoint],
    *,
    row_order: Sequence[str],
    category_labels: Mapping[str, str],
    title: str,
    axis_label: str,
    severity_labels: Mapping[str, str] | None = None,
) -> go.Figure:
    """Fault signals on a node x time grid: one trace per category, the marker shape per severity.

    Rows are nodes, top-down in ``row_order``; a node without signals keeps its (empty) row. The
    known categories come in a fixed order with fixed colours (CATEGORY_COLORS), then any other in
    order of appearance; only categories with points get a trace. A category without a label in
    ``category_labels`` shows its key. Critical signals are crosses, errors circles, warnings
    triangles; given ``severity_labels``, the legend adds a grey key for each severity shown.
    Each point's ``customdata`` is its incident id (None when it has none), so that the page
    script can link to the incident. Past WEBGL_ABOVE_POINTS points the traces use WebGL.

    Raises ValueError for a point on a row outside ``row_order``, a row named twice, or an
    unknown severity.
    """
    rows = list(row_order)
    _check_rows(rows, points)
    unknown = sorted({point.severity for point in points} - set(SEVERITY_SYMBOLS))
    if unknown:
        raise ValueError(f"unknown severity {unknown[0]!r}; expected one of {', '.join(SEVERITY_ORDER)}")

    by_category: dict[str, list[TimelinePoint]] = {}
    for point in points:
        by_category.setdefault(point.category, []).append(point)
    categories = [key for key in CATEGORY_COLORS if key in by_category]
    categories += [key for key in by_category if key not in CATEGORY_COLORS]

    scatter = go.Scattergl if len(points) > WEBGL_ABOVE_POINTS else go.Scatter
    traces = [
        _category_trace(
            scatter,
            category_labels.get(key, key),
            by_category[key],
            color=CATEGORY_COLORS.get(key, OTHER_CATEGORY_COLOR),
        )
        for key in categories
    ]
    if severity_labels:
        present = {point.severity for point in points}
        traces += [
            _severity_key(severity_labels[severity], severity)
            for severity in SEVERITY_ORDER
            if severity in present and severity in severity_labels
        ]
    figure = go.Figure(traces)
    figure.update_layout(hovermode="closest", showlegend=True)
    figure.update_xaxes(type="date", title_text=axis_label)
    # An explicit order and type keep rows as given, even names that look like numbers; an
    # explicit range keeps the rows of healthy nodes, which have no points to autorange on.
    figure.update_yaxes(type="category", categoryorder="array", categoryarray=rows)
    if rows:
        figure.update_yaxes(range=[len(rows) - 0.5, -0.5])
    else:
        figure.update_yaxes(autorange="reversed")
    figure = apply_theme(figure, title=title, height_px=_timeline_height_px(len(rows)))
    figure.update_xaxes(showgrid=True, gridcolor=GRID_COLOR)
    if len(figure.data) > HORIZONTAL_LEGEND_MAX_ENTRIES:
        legend_aside(figure)
    return figure


def incident_phases_figure(
    phases: Sequence[tuple[str, datetime, datetime | None]],
    *,
    title: str,
    axis_label: str | None = None,
    now: datetime | None = None,
    duration_text: Callable[[float], str] | None = None,
) -> go.Figure:
    """An incident's phases as a horizontal Gantt: one bar per phase, top-down in the given order.

    Each phase is ``(label, start, end)``. Each bar is labelled with its duration (s, min or h),
    and its hover shows start, end and duration. A phase whose end is None is still running: its
    bar runs to ``now`` when given, else to the latest time known in ``phases``; it is hatched,
    an arrowhead marks its open end (visible even when the bar has no length yet), and its
    duration reads "≥ …". An end before its start (clocks of two sources disagree) counts as 0.
    ``duration_text`` writes a duration (default: the toolkit's, in the active language).
    """
    known = [moment for _, start, end in phases for moment in (start, end) if moment is not None]
    open_until = now if now is not None else max(known, default=None)
    text = duration_text or spoken_duration
    bars = [
        _phase_bar(name, start, end, open_until=open_until, duration_text=text) for name, start, end in phases
    ]
    names = [bar.name for bar in bars]
    bar_trace = go.Bar(
        name=title,
        y=names,
        # On a date axis a horizontal bar starts at its base and x is its length in milliseconds.
        base=[bar.start for bar in bars],
        x=[bar.duration_s * 1000 for bar in bars],
        orientation="h",
        text=[bar.duration_text for bar in bars],
        textposition="auto",
        cliponaxis=False,
        customdata=[[bar.start_text, bar.end_text, bar.duration_text] for bar in bars],
        marker={
            "color": [OPEN_PHASE_FILL_COLOR if bar.is_open else BUSY_COLOR for bar in bars],
            "line": {"color": BUSY_COLOR, "width": 1.5},
            "pattern": {
                "shape": [OPEN_PHASE_PATTERN if bar.is_open else "" for bar in bars],
                "fgcolor": BUSY_COLOR,
            },
        },
        hovertemplate="%{y}<br>%{customdata[0]} → %{customdata[1]}<br>%{customdata[2]}<extra></extra>",
    )
    open_bars = [bar for bar in bars if bar.is_open]
    open_marks = go.Scatter(
        name=title,
        y=[bar.name for bar in open_bars],
        x=[bar.end for bar in open_bars],
        mode="markers",
        marker={"symbol": "triangle-right", "size": 14, "color": BUSY_COLOR},
        cliponaxis=False,
        hoverinfo="skip",
    )
    figure = go.Figure([bar_trace, open_marks])
    figure.update_layout(showlegend=False, bargap=0.35)
    figure.update_xaxes(type="date", title_text=axis_label)
    return _rows_layout(figure, names, title=title)


def mttr_trend_figure(
    days: Sequence[date],
    mttr_minutes: Sequence[float | None],
    detect_minutes: Sequence[float | None],
    locate_minutes: Sequence[float | None],
    *,
    title: str,
    mttr_label: str,
    detect_label: str,
    locate_label: str,
    axis_label: str,
) -> go.Figure:
    """Daily mean time to recover, with its detect and locate parts, as lines in minutes.

    MTTR is the thick solid line, its parts thinner dashed ones. A None value (a day without
    incidents) leaves a gap; points carry markers, so a day between two gaps still shows.
    """
    check_lengths(
        "days",
        days,
        {"mttr_minutes": mttr_minutes, "detect_minutes": detect_minutes, "locate_minutes": locate_minutes},
    )
    hover = "%{y:,.1f} " + axis_label
    lines = (
        (mttr_label, mttr_minutes, {"width": MTTR_WIDTH_PX, "color": OWNED_COLOR}),
        (detect_label, detect_minutes, {"width": PART_WIDTH_PX, "dash": "dot"}),
        (locate_label, locate_minutes, {"width": PART_WIDTH_PX, "dash": "dash"}),
    )
    figure = go.Figure(
        [
            go.Scatter(
                name=label,
                x=list(days),
                y=list(values),
                mode="lines+markers",
                line=line,
                marker={"size": 6},
                connectgaps=False,
                hovertemplate=hover_line(label, hover),
            )
            for label, values, line in lines
        ]
    )
    figure.update_layout(hovermode="x unified", showlegend=True)
    figure.update_xaxes(type="date")
    figure.update_yaxes(title_text=axis_label)
    # Whole days: without this a single day is drawn with millisecond ticks.
    figure.update_xaxes(type="date", tickformat="%Y-%m-%d", dtick=86_400_000)
    return apply_theme(figure, title=title)


def ettr_figure(
    jobs: Sequence[str],
    ettr_pct: Sequence[float],
    *,
    title: str,
    axis_label: str,
) -> go.Figure:
    """Effective training time ratio per job (0-100%) as horizontal bars, lowest on top.

    Jobs with equal ratios keep their given order. Each bar is labelled ("87%").
    """
    check_lengths("jobs", jobs, {"ettr_pct": ettr_pct})
    ranked = sorted(zip(jobs, ettr_pct, strict=True), key=lambda pair: pair[1])
    names = [name for name, _ in ranked]
    values = [value for _, value in ranked]
    figure = go.Figure(
        go.Bar(
            name=axis_label,
            y=names,
            x=values,
            orientation="h",
            marker={"color": BUSY_COLOR},
            text=[percent_text(value) for value in values],
            textposition="auto",
            cliponaxis=False,
            hovertemplate="%{y}<br>" + hover_line(axis_label, "%{x:.1f}%"),
        )
    )
    figure.update_layout(showlegend=False)
    figure.update_xaxes(title_text=axis_label, range=PERCENT_RANGE, ticksuffix="%")
    return _rows_layout(figure, names, title=title)


def count_bar_figure(
    labels: Sequence[str],
    counts: Sequence[int],
    *,
    title: str,
    axis_label: str,
    color: str | None = None,
) -> go.Figure:
    """Counts per label (incidents by category, by fault domain) as horizontal bars, largest on top.

    Labels with equal counts keep their given order. Each bar is labelled with its count. Without
    ``color`` the bars take the theme's first colour.
    """
    check_lengths("labels", labels, {"counts": counts})
    ranked = sorted(zip(labels, counts, strict=True), key=lambda pair: -pair[1])
    names = [name for name, _ in ranked]
    values = [value for _, value in ranked]
    figure = go.Figure(
        go.Bar(
            name=axis_label,
            y=names,
            x=values,
            orientation="h",
            marker={"color": color},
            text=[f"{value:,}" for value in values],
            textposition="auto",
            cliponaxis=False,
            hovertemplate="%{y}<br>" + hover_line(axis_label, "%{x:,}"),
        )
    )
    figure.update_layout(showlegend=False)
    figure.update_xaxes(title_text=axis_label)
    if max(values, default=0) <= WHOLE_TICKS_MAX_COUNT:
        figure.update_xaxes(tick0=0, dtick=1)
    return _rows_layout(figure, names, title=title)


@dataclass(frozen=True, slots=True)
class _PhaseBar:
    name: str
    start: datetime
    end: datetime
    is_open: bool
    duration_s: float
    duration_text: str
    start_text: str
    end_text: str


def _phase_bar(
    name: str,
    start: datetime,
    end: datetime | None,
    *,
    open_until: datetime | None,
    duration_text: Callable[[float], str],
) -> _PhaseBar:
    shown_end = end if end is not None else max(start, open_until or start)
    duration_s = max(0.0, (shown_end - start).total_seconds())
    duration_text = duration_text(duration_s)
    return _PhaseBar(
        name=name,
        start=start,
        end=shown_end,
        is_open=end is None,
        duration_s=duration_s,
        duration_text=duration_text if end is not None else "≥ " + duration_text,
        start_text=_time_text(start),
        end_text=_time_text(end) if end is not None else "…",
    )


def _category_trace(
    scatter: type[go.Scatter] | type[go.Scattergl],
    label: str,
    points: Sequence[TimelinePoint],
    *,
    color: str,
) -> go.Scatter | go.Scattergl:
    return scatter(
        name=label,
        x=[point.time for point in points],
        y=[point.row for point in points],
        mode="markers",
        marker={
            "color": color,
            "symbol": [SEVERITY_SYMBOLS[point.severity] for point in points],
            "size": [SEVERITY_SIZES[point.severity] for point in points],
            "opacity": 0.85,
        },
        # Escaped with every data label by apply_theme: evidence such as "<unknown>" shows as written.
        text=[point.text for point in points],
        customdata=[point.incident_id for point in points],
        hovertemplate="%{y} · %{x|%Y-%m-%d %H:%M:%S}<br>" + hover_line(label, "%{text}"),
    )


def _severity_key(label: str, severity: str) -> go.Scatter:
    """A legend entry only: the marker shape of one severity, in grey."""
    return go.Scatter(
        name=label,
        x=[None],
        y=[None],
        mode="markers",
        marker={
            "symbol": SEVERITY_SYMBOLS[severity],
            "size": SEVERITY_SIZES[severity],
            "color": SEVERITY_KEY_COLOR,
        },
        legendgroup="severity",
        hoverinfo="skip",
    )


def _check_rows(rows: Sequence[str], points: Sequence[TimelinePoint]) -> None:
    """Raise ValueError when ``rows`` names a row twice or a point lies on a row not in ``rows``."""
    seen: set[str] = set()
    for row in rows:
        if row in seen:
            raise ValueError(f"row_order names {row!r} twice")
        seen.add(row)
    for point in points:
        if point.row not in seen:
            raise ValueError(f"point on row {point.row!r}, which is not in row_order")


def _rows_layout(figure: go.Figure, rows: Sequence[str], *, title: str) -> go.Figure:
    """Theme a chart with one category row per item: first item on top, height grown with rows."""
    # Categories run bottom-up by default; reverse so the list reads top-down in the given order.
    # An explicit order and type keep rows as given, even names that look like numbers.
    figure.update_yaxes(
        type="category", categoryorder="array", categoryarray=list(rows), autorange="reversed"
    )
    height_px = max(MIN_HEIGHT_PX, DEPARTMENT_CHROME_PX + DEPARTMENT_ROW_PX * len(rows))
    figure = apply_theme(figure, title=title, height_px=height_px)
    # The theme assumes vertical values; here x carries them, so the grid moves to x.
    figure.update_xaxes(gridcolor=GRID_COLOR, showgrid=True)
    figure.update_yaxes(showgrid=False)
    return figure


def _timeline_height_px(rows: int) -> int:
    ceiling_px = max(MAX_HEIGHT_PX, TIMELINE_CHROME_PX + TIMELINE_MIN_ROW_PX * rows)
    return max(MIN_HEIGHT_PX, min(ceiling_px, TIMELINE_CHROME_PX + TIMELINE_ROW_PX * rows))


def _time_text(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")
