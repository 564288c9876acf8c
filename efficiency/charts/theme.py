"""One look for every chart: large enough to read on a projector in a review meeting.

The title sits at the top left above the plot and the legend at the bottom of the chart, each
reserving its own margin, so neither overlaps the plot, its tick labels or the other at any
width. A title wider than its chart is wrapped onto more lines by
static/efficiency/js/charts.js, which knows the width the chart is drawn at, and which makes a
chart taller when its title, legend and tick labels leave the plot too little room (a phone).
"""

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache

import plotly.graph_objects as go
from django.utils.html import _json_script_escapes
from django.utils.translation import gettext as _
from plotly.utils import PlotlyJSONEncoder

FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', 'Noto Sans CJK SC', 'Noto Sans', sans-serif"
FONT_SIZE_PX = 15
TITLE_FONT_SIZE_PX = 18
COLORWAY = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
GRID_COLOR = "#e5e7eb"
LEGEND_MAX_HEIGHT_SHARE = 0.3


# Trace properties that carry names and values from data (job, node, department names …).
DATA_TEXT_PROPERTIES = ("name", "x", "y", "text", "hovertext", "customdata", "labels", "ids")


def plain(text: str) -> str:
    """``text`` shown as itself: plotly.js reads ``<a href>``, ``<b>``, ``<br>`` … in any label as
    markup, and a job named ``<a href="https://…">`` became a link. Its entities (``&lt;``) are
    drawn as the characters, so escaping changes nothing a reader sees."""
    return html.escape(text, quote=False)


def _plain_values(value):
    if isinstance(value, str):
        return plain(value)
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [_plain_values(item) for item in value]
    if hasattr(value, "tolist"):  # numpy arrays
        return _plain_values(value.tolist())
    return value


def _has_text(value) -> bool:
    if isinstance(value, str):
        return True
    if isinstance(value, (list, tuple)):
        # Strings first: a long array of times or numbers is scanned once, without a call per item.
        return any(isinstance(item, str) for item in value) or any(
            _has_text(item) for item in value if isinstance(item, (list, tuple))
        )
    return False


def escape_data_labels(figure: go.Figure) -> go.Figure:
    """Escape every data-bearing text of ``figure``'s traces (see ``plain``). Titles, axis labels
    and hover templates are the portal's own text and keep their markup (``<br>``, ``%{y}``).

    Called by ``apply_theme``, which every chart builder goes through, so a new chart cannot
    forget it; a builder that writes data into the layout itself (tick texts) uses ``plain``.
    """
    for trace in figure.data:
        for prop in DATA_TEXT_PROPERTIES:
            if prop in trace and trace[prop] is not None and _has_text(trace[prop]):
                trace[prop] = _plain_values(trace[prop])
    # Category axes list the same values in the layout: escaped alike, or no point finds its row.
    for axis_name in figure.layout:
        if axis_name.startswith(("xaxis", "yaxis")):
            axis = figure.layout[axis_name]
            for prop in ("categoryarray", "tickvals"):
                if axis[prop] is not None and _has_text(axis[prop]):
                    axis[prop] = _plain_values(axis[prop])
    return figure


def _theme_layout(*, title: str, height_px: int) -> dict:
    """The layout every chart shares (``apply_theme`` and ``themed`` set the same)."""
    return {
        "title": {
            "text": title,
            "font": {"size": TITLE_FONT_SIZE_PX},
            "x": 0,
            "xanchor": "left",
            "xref": "container",
            # Just above the plot, which moves down by the title's height, however many lines it
            # has (in the container, plotly.js 3 draws extra lines above the chart's top edge).
            "y": 1,
            "yanchor": "bottom",
            "yref": "paper",
            "automargin": True,
            "pad": {"t": 6, "b": 14, "l": 4},
        },
        "font": {"family": FONT_FAMILY, "size": FONT_SIZE_PX},
        "colorway": COLORWAY,
        "height": height_px,
        "margin": {"l": 60, "r": 20, "t": 10, "b": 10},
        # At the bottom of the container: its rows (a long legend wraps) are reserved below the
        # x axis, whose tick labels push their own margin.
        "legend": {
            "orientation": "h",
            "xref": "paper",
            "x": 0,
            "xanchor": "left",
            "yref": "container",
            "y": 0,
            "yanchor": "bottom",
            # A long legend on a narrow screen scrolls rather than squeezing the plot away.
            "maxheight": LEGEND_MAX_HEIGHT_SHARE,
        },
        "plot_bgcolor": "white",
        "paper_bgcolor": "white",
    }


X_AXIS_THEME = {"showgrid": False, "automargin": True}
Y_AXIS_THEME = {"gridcolor": GRID_COLOR, "automargin": True, "rangemode": "tozero"}


def _no_data_annotation() -> dict:
    # Plotly draws bare axes from -1 to 6 for no data: say so instead.
    return {
        "text": _("No data in this range"),
        "xref": "paper",
        "yref": "paper",
        "x": 0.5,
        "y": 0.5,
        "showarrow": False,
        "font": {"size": TITLE_FONT_SIZE_PX, "color": "#6b7280"},
    }


def apply_theme(figure: go.Figure, *, title: str, height_px: int = 420) -> go.Figure:
    escape_data_labels(figure)
    figure.update_layout(**_theme_layout(title=title, height_px=height_px))
    figure.update_xaxes(**X_AXIS_THEME)
    figure.update_yaxes(**Y_AXIS_THEME)
    if not has_points(figure):
        figure.update_xaxes(visible=False)
        figure.update_yaxes(visible=False)
        figure.add_annotation(**_no_data_annotation())
    return figure


# Figures as plain dicts: what the page sends to plotly.js, built without plotly.py's objects.
# Building a chart with plotly.graph_objects validated every property and copied every array
# several times: most of a usage page's server time. The dict is the same figure (the same JSON
# as ``go.Figure(...).to_plotly_json()`` gives, template included); tests/charts pass every
# builder's dict through ``go.Figure`` to validate it, once, instead of on every request.


@cache
def plotly_template() -> dict:
    """The layout template ``go.Figure()`` applies (plotly.io's default), as a dict; built once."""
    import plotly.io as pio

    return pio.templates[pio.templates.default].to_plotly_json()


def figure_dict(data: list[dict], **layout) -> dict:
    """A figure as plotly.js takes it: ``{"data": [...], "layout": {...}}`` with the template."""
    return {"data": data, "layout": {"template": plotly_template(), **layout}}


def merge(target: dict, updates: dict) -> dict:
    """Set ``updates`` into ``target``, merging nested dicts as plotly's ``update_layout`` does."""
    for key, value in updates.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = value
    return target


def axes(figure: dict, letter: str) -> list[dict]:
    """Every ``xaxis``/``yaxis``… of ``figure``'s layout (``letter`` "x" or "y"), the first one
    created when missing, as ``update_xaxes`` finds them."""
    layout = figure["layout"]
    layout.setdefault(f"{letter}axis", {})
    return [
        axis
        for name, axis in layout.items()
        if name == f"{letter}axis" or (name.startswith(f"{letter}axis") and name[5:].isdigit())
    ]


def update_axes(figure: dict, letter: str, **properties) -> dict:
    for axis in axes(figure, letter):
        merge(axis, properties)
    return figure


def themed(figure: dict, *, title: str, height_px: int = 420) -> dict:
    """``apply_theme`` for a figure dict: the same title, font, legend, axes and no-data text."""
    for trace in figure["data"]:
        for prop in DATA_TEXT_PROPERTIES:
            value = trace.get(prop)
            if value is not None and _has_text(value):
                trace[prop] = _plain_values(value)
    for letter in ("x", "y"):
        for axis in axes(figure, letter):
            for prop in ("categoryarray", "tickvals"):
                if axis.get(prop) is not None and _has_text(axis[prop]):
                    axis[prop] = _plain_values(axis[prop])
    merge(figure["layout"], _theme_layout(title=title, height_px=height_px))
    update_axes(figure, "x", **X_AXIS_THEME)
    update_axes(figure, "y", **Y_AXIS_THEME)
    if not dict_has_points(figure):
        update_axes(figure, "x", visible=False)
        update_axes(figure, "y", visible=False)
        figure["layout"].setdefault("annotations", []).append(_no_data_annotation())
    return figure


def dict_has_points(figure: dict) -> bool:
    """``has_points`` of a figure dict."""
    for trace in figure["data"]:
        for attribute in ("y", "x", "z", "values"):
            values = trace.get(attribute)
            if values is not None and any(_present(value) for value in values):
                return True
    return False


def has_points(figure: go.Figure) -> bool:
    """Whether any trace has a value to draw (not just empty or all-missing arrays)."""
    for trace in figure.data:
        for attribute in ("y", "x", "z", "values"):
            values = getattr(trace, attribute, None)
            if values is None:
                continue
            if any(_present(value) for value in values):
                return True
    return False


def _present(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_present(item) for item in value)
    return value is not None


def legend_aside(figure: go.Figure) -> go.Figure:
    """Move the legend to a column right of the plot, for legends too long to wrap below it."""
    figure.update_layout(
        legend={
            "orientation": "v",
            "xref": "paper",
            "x": 1.02,
            "xanchor": "left",
            "yref": "paper",
            "y": 1,
            "yanchor": "top",
        }
    )
    return figure


class ChartJSONEncoder(PlotlyJSONEncoder):
    """Plotly's encoder (NaN and infinities as null, as plotly.js wants them) with a quick path
    for the times of a figure dict: the ISO text Plotly's encoder writes for them."""

    def default(self, obj):
        if isinstance(obj, (datetime, date)):
            return obj.isoformat()
        return super().default(obj)


@dataclass(frozen=True)
class ChartJSON:
    """A figure encoded as the page sends it: its JSON, escaped for a ``<script>`` element as
    ``django.utils.html.json_script`` escapes it, and its title (the chart's accessible name).
    What the pages' cache keeps of a chart, so that a cached chart is not encoded again."""

    title: str
    escaped_json: str


def chart_json(figure: "go.Figure | dict | ChartJSON") -> ChartJSON:
    """``figure`` (a Plotly figure or a figure dict) encoded once (see ``ChartJSON``)."""
    if isinstance(figure, ChartJSON):
        return figure
    if isinstance(figure, dict):
        payload, title = figure, (figure["layout"].get("title") or {}).get("text")
    else:
        payload, title = figure.to_plotly_json(), figure.layout.title.text
    text = json.dumps(payload, cls=ChartJSONEncoder).translate(_json_script_escapes)
    return ChartJSON(title or "", text)
