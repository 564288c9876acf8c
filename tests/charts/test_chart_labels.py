"""No chart renders markup from data: plotly.js reads ``<a href>``, ``<b>``, ``<br>`` in any label,
and a job named ``<a href="https://…">`` became a link on the fault chart. Every builder's data
labels reach the figure escaped, and unescaped they are the names as given."""

import html
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
from hypothesis import given, settings
from hypothesis import strategies as st

from efficiency.charts.faults import TimelinePoint, count_bar_figure, ettr_figure, fault_timeline_figure
from efficiency.charts.quotas import backtest_waits_figure, quota_history_figure, quota_use_figure
from efficiency.charts.theme import DATA_TEXT_PROPERTIES
from efficiency.charts.usage import department_utilization_figure, heatmap_figure, utilization_trend_figure

T0 = datetime(2026, 11, 1, tzinfo=UTC)
HOSTILE = ['<a href="https://evil.example">x</a>', "<b>bold</b>", "a<br>b", "R&D", "&lt;", "<img src=x>"]
names = st.lists(
    st.one_of(st.sampled_from(HOSTILE), st.text(min_size=1, max_size=15)), min_size=1, max_size=4, unique=True
)


def _builders(labels: list[str]):
    n = len(labels)
    times = [T0 + timedelta(hours=i) for i in range(3)]
    return {
        "fault timeline": fault_timeline_figure(
            [TimelinePoint(label, T0, "hardware_gpu", "critical", label, 1) for label in labels],
            row_order=labels, category_labels={"hardware_gpu": "GPU"}, title="Faults", axis_label="Time",
        ),
        "ettr": ettr_figure(labels, [50.0] * n, title="ETTR", axis_label="%"),
        "count bar": count_bar_figure(labels, [1] * n, title="Count", axis_label="n"),
        # The usage builders give the page's figure dict: read it through Plotly's objects.
        "department utilization": go.Figure(department_utilization_figure(
            labels, [10.0] * n, [20.0] * n, title="U", utilization_label="u", allocation_label="a",
            axis_label="%",
        )),
        "heatmap": go.Figure(heatmap_figure(
            labels, times, [[5.0] * 3 for _ in labels], title="H", colorbar_label="%", missing_label="-"
        )),
        "utilization trend": go.Figure(utilization_trend_figure(
            times, {label: [1.0] * 3 for label in labels}, title="T", axis_label="%"
        )),
        "quota use": quota_use_figure(
            labels, [1.0] * n, [1.0] * n, [0.0] * n, title="Q", guaranteed_label="g", used_label="u",
            borrowed_label="b", axis_label="GPUs",
        ),
        "backtest waits": backtest_waits_figure(
            labels, {"fixed": [1.0] * n, "quotas": [0.5] * n}, title="W", axis_label="h"
        ),
        "quota history": quota_history_figure(
            ["2026-11-01"], {label: [4.0] for label in labels}, [2.0], title="Q", shared_pool_label="pool",
            axis_label="GPUs",
        ),
    }  # fmt: skip


def _data_strings(figure) -> list[str]:
    found = []

    def walk(value):
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    for trace in figure.data:
        for prop in DATA_TEXT_PROPERTIES:
            if prop in trace:
                walk(trace[prop])
    for axis in (figure.layout.xaxis, figure.layout.yaxis):
        walk(axis.categoryarray)
        walk(axis.tickvals)
        walk(axis.ticktext)
    return found


@settings(max_examples=40, deadline=None)
@given(names)
def test_no_chart_builder_passes_markup_from_data_to_plotly(labels):
    for name, figure in _builders(labels).items():
        strings = _data_strings(figure)
        for text in strings:
            # Tick texts may break long names with the portal's own <br>; nothing else is a tag.
            assert "<" not in text.replace("<br>", ""), (name, text)
        shown = {html.unescape(text.replace("<br>", "")) for text in strings}
        for label in labels:
            if label.strip() and "<br>" not in label:
                assert any(label.replace(" ", "") in s.replace(" ", "") for s in shown), (name, label)


def test_a_job_named_like_a_link_is_plain_text_on_the_fault_chart():
    link = '<a href="https://evil.example">open</a>'
    figure = _builders([link])["fault timeline"]
    assert figure.data[0].y == ('&lt;a href="https://evil.example"&gt;open&lt;/a&gt;',)
    assert figure.layout.yaxis.categoryarray == figure.data[0].y  # the point stays on its row
