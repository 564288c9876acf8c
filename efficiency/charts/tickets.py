"""Ticket charts: the verification of a fix, the windows before and after it."""

from collections.abc import Sequence
from datetime import date, datetime

import plotly.graph_objects as go

from efficiency.charts.theme import apply_theme
from efficiency.charts.toolkit import ALLOCATED_COLOR, BUSY_COLOR, check_lengths, hover_line

EXPECTED_COLOR = "#2ca02c"


def verification_figure(
    before_days: Sequence[date | datetime],
    before_values: Sequence[float | None],
    after_days: Sequence[date | datetime],
    after_values: Sequence[float | None],
    *,
    title: str,
    metric_label: str,
    before_label: str,
    after_label: str,
    before_level: float | None = None,
    after_level: float | None = None,
    expected_level: float | None = None,
    expected_label: str = "",
    value_format: str = ",.3g",
) -> go.Figure:
    """The metric per day in the window before the fix (grey) and after it (blue), each window's
    median as a flat line across it, and the level the expected gain promised (dotted green, across
    the after window): a reader sees at once whether the after window reached it.

    A day without a value leaves a gap. ``before_level`` / ``after_level`` are the compared values
    (medians) and ``expected_level`` the after value the expected gain would have given.
    """
    check_lengths("before_days", before_days, {"before_values": before_values})
    check_lengths("after_days", after_days, {"after_values": after_values})
    value = f"%{{y:{value_format}}}"
    figure = go.Figure(
        [
            go.Scatter(
                name=before_label,
                x=list(before_days),
                y=list(before_values),
                mode="lines+markers",
                line={"color": ALLOCATED_COLOR, "width": 2},
                marker={"color": ALLOCATED_COLOR},
                connectgaps=False,
                hovertemplate=hover_line(before_label, value),
            ),
            go.Scatter(
                name=after_label,
                x=list(after_days),
                y=list(after_values),
                mode="lines+markers",
                line={"color": BUSY_COLOR, "width": 2},
                marker={"color": BUSY_COLOR},
                connectgaps=False,
                hovertemplate=hover_line(after_label, value),
            ),
        ]
    )
    for days, level, color, dash, name in (
        (before_days, before_level, ALLOCATED_COLOR, "dash", before_label),
        (after_days, after_level, BUSY_COLOR, "dash", after_label),
        (after_days or before_days, expected_level, EXPECTED_COLOR, "dot", expected_label),
    ):
        if level is None or not days:
            continue
        figure.add_trace(
            go.Scatter(
                name=name,
                x=[days[0], days[-1]],
                y=[level, level],
                mode="lines",
                line={"color": color, "width": 1, "dash": dash},
                showlegend=name == expected_label,
                hovertemplate=hover_line(name, value),
            )
        )
    figure.update_layout(hovermode="x unified", showlegend=True, yaxis={"title": {"text": metric_label}})
    figure.update_xaxes(type="date")
    return apply_theme(figure, title=title)
