"""Charts of the inventory: who owns which GPUs."""

from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

import plotly.graph_objects as go

from efficiency.charts.theme import apply_theme


class OwnershipLike(Protocol):
    department: str | None
    gpu_model: str
    gpu_count: int


def gpu_ownership_figure(
    rows: Sequence[OwnershipLike],
    *,
    title: str,
    shared_pool_label: str,
    axis_label: str,
) -> go.Figure:
    """Stacked bars: GPUs per owner (a department, or ``shared_pool_label`` for GPUs no department
    owns), one trace per GPU model."""
    owners: list[str] = []
    by_model: dict[str, dict[str, int]] = defaultdict(dict)
    for row in rows:
        owner = row.department if row.department is not None else shared_pool_label
        if owner not in owners:
            owners.append(owner)
        by_model[row.gpu_model][owner] = by_model[row.gpu_model].get(owner, 0) + row.gpu_count
    figure = go.Figure(
        [
            go.Bar(
                name=model,
                x=owners,
                y=[counts.get(owner, 0) for owner in owners],
                hovertemplate="%{x}<br>" + model + ": %{y}<extra></extra>",
            )
            for model, counts in sorted(by_model.items())
        ]
    )
    # One department's chart has a single bar: keep it narrow and keep its model in a legend.
    figure.update_layout(barmode="stack", showlegend=True, bargap=max(0.2, 0.8 - 0.1 * len(owners)))
    figure.update_yaxes(title_text=axis_label)
    return apply_theme(figure, title=title)
