"""A chart with nothing to draw says so, instead of bare axes running from -1 to 6."""

from datetime import UTC, datetime

import plotly.graph_objects as go
from django.utils import translation

from efficiency.charts import usage


def utilization_trend_figure(*args, **kwargs) -> go.Figure:
    # The page's figure dict, validated and read back through Plotly's objects.
    return go.Figure(usage.utilization_trend_figure(*args, **kwargs))


def _texts(figure) -> list[str]:
    return [annotation.text for annotation in figure.layout.annotations]


def test_a_trend_without_points_says_there_is_no_data_and_hides_its_axes():
    with translation.override("en"):
        figure = utilization_trend_figure([], {"Utilization": []}, title="Trend", axis_label="%")

    assert _texts(figure) == ["No data in this range"]
    assert figure.layout.xaxis.visible is False
    assert figure.layout.yaxis.visible is False


def test_the_empty_message_is_in_the_readers_language():
    with translation.override("zh-hans"):
        figure = utilization_trend_figure([], {"利用率": []}, title="趋势", axis_label="%")

    assert _texts(figure) == ["此范围内没有数据"]


def test_a_trend_with_one_point_draws_it():
    moment = datetime(2026, 11, 26, 14, tzinfo=UTC)
    figure = utilization_trend_figure([moment], {"Utilization": [42.0]}, title="Trend", axis_label="%")

    assert _texts(figure) == []
    assert figure.layout.xaxis.visible is not False
