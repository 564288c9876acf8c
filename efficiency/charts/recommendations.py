"""Recommendation charts: the metric window a recommendation was measured on."""

from collections.abc import Sequence
from datetime import datetime

import plotly.graph_objects as go

from efficiency.charts.theme import apply_theme
from efficiency.charts.toolkit import ALLOCATED_COLOR, BUSY_COLOR, PERCENT_RANGE, check_lengths, hover_line


def metric_window_figure(
    hours: Sequence[datetime],
    gpus_held: Sequence[float],
    engine_pct: Sequence[float | None],
    sm_pct: Sequence[float | None],
    *,
    title: str,
    held_label: str,
    engine_label: str,
    sm_label: str,
    ideal_pct: float | None = None,
    ideal_label: str = "",
    gpus_axis: str,
    pct_axis: str,
) -> go.Figure:
    """Per hour of the window: GPUs the family held (bars, right axis) and how busy they were
    (engine and SM activity, lines in %, left axis), with the ideal activity as a dotted line.

    SM activity is drawn solid and first: it is the truer measure; engine activity dashed. An hour
    without SM data leaves a gap in its line.
    """
    check_lengths("hours", hours, {"gpus_held": gpus_held, "engine_pct": engine_pct, "sm_pct": sm_pct})
    traces = [
        go.Bar(
            name=held_label,
            x=list(hours),
            y=list(gpus_held),
            yaxis="y2",
            marker={"color": ALLOCATED_COLOR},
            opacity=0.5,
            hovertemplate=hover_line(held_label, "%{y:,.1f}"),
        ),
        go.Scatter(
            name=sm_label,
            x=list(hours),
            y=list(sm_pct),
            mode="lines",
            line={"color": BUSY_COLOR, "width": 2},
            connectgaps=False,
            hovertemplate=hover_line(sm_label, "%{y:.1f}%"),
        ),
        go.Scatter(
            name=engine_label,
            x=list(hours),
            y=list(engine_pct),
            mode="lines",
            line={"color": BUSY_COLOR, "width": 1, "dash": "dash"},
            connectgaps=False,
            hovertemplate=hover_line(engine_label, "%{y:.1f}%"),
        ),
    ]
    figure = go.Figure(traces)
    if ideal_pct is not None and hours:
        figure.add_trace(
            go.Scatter(
                name=ideal_label,
                x=[hours[0], hours[-1]],
                y=[ideal_pct, ideal_pct],
                mode="lines",
                line={"color": "#2ca02c", "width": 1, "dash": "dot"},
                hovertemplate=hover_line(ideal_label, "%{y:.0f}%"),
            )
        )
    figure.update_layout(
        hovermode="x unified",
        showlegend=True,
        yaxis={"title": {"text": pct_axis}, "range": PERCENT_RANGE},
        yaxis2={"title": {"text": gpus_axis}, "overlaying": "y", "side": "right", "rangemode": "tozero"},
        bargap=0,
    )
    figure.update_xaxes(type="date")
    return apply_theme(figure, title=title)
