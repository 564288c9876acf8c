"""One look for every chart: large enough to read on a projector in a review meeting."""

import plotly.graph_objects as go

FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', 'Noto Sans CJK SC', 'Noto Sans', sans-serif"
COLORWAY = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def apply_theme(figure: go.Figure, *, title: str, height_px: int = 420) -> go.Figure:
    figure.update_layout(
        title={"text": title, "x": 0, "xanchor": "left"},
        font={"family": FONT_FAMILY, "size": 15},
        colorway=COLORWAY,
        height=height_px,
        margin={"l": 60, "r": 20, "t": 60, "b": 60},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1},
        plot_bgcolor="white",
        paper_bgcolor="white",
    )
    figure.update_xaxes(showgrid=False, automargin=True)
    figure.update_yaxes(gridcolor="#e5e7eb", automargin=True, rangemode="tozero")
    return figure
