"""Fault chart builders are pure: plain data in, a Plotly figure out, no database."""

import json
from datetime import UTC, date, datetime, timedelta

import plotly.graph_objects as go
import pytest

from efficiency.charts.faults import (
    CATEGORY_COLORS,
    OTHER_CATEGORY_COLOR,
    WEBGL_ABOVE_POINTS,
    TimelinePoint,
    count_bar_figure,
    ettr_figure,
    fault_timeline_figure,
    incident_phases_figure,
    mttr_trend_figure,
)
from efficiency.charts.toolkit import MAX_HEIGHT_PX, MIN_HEIGHT_PX

START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
NODES = ["gpu-a01", "gpu-a02", "gpu-b01"]
LABELS = {"hardware_gpu": "GPU hardware", "nccl_timeout_hang": "NCCL timeout / hang", "cuda_oom": "CUDA OOM"}
# Below this a 15 px node name no longer fits its row and Plotly starts dropping labels.
READABLE_ROW_PX = 18


def serialises(figure: go.Figure) -> bool:
    return bool(json.loads(figure.to_json())["layout"]["title"]["text"])


def by_name(figure: go.Figure) -> dict:
    return {trace.name: trace for trace in figure.data}


def point(row="gpu-a01", minutes=0, category="hardware_gpu", severity="error", text="Xid 79", incident_id=7):
    return TimelinePoint(
        row=row,
        time=START + timedelta(minutes=minutes),
        category=category,
        severity=severity,
        text=text,
        incident_id=incident_id,
    )


def timeline(points, rows=NODES, **kwargs) -> go.Figure:
    return fault_timeline_figure(
        points, row_order=rows, category_labels=LABELS, title="Faults", axis_label="Time", **kwargs
    )


def test_timeline_draws_one_trace_per_category_with_its_label_and_fixed_colour():
    figure = timeline(
        [
            point(category="cuda_oom", minutes=5),
            point(category="hardware_gpu", minutes=1),
            point(row="gpu-b01", category="nccl_timeout_hang", minutes=2),
            point(row="gpu-a02", category="hardware_gpu", minutes=3),
        ]
    )

    # Known categories come in the fixed order, not in order of appearance.
    assert [trace.name for trace in figure.data] == ["GPU hardware", "NCCL timeout / hang", "CUDA OOM"]
    gpu, nccl, oom = figure.data
    assert gpu.marker.color == CATEGORY_COLORS["hardware_gpu"]
    assert nccl.marker.color == CATEGORY_COLORS["nccl_timeout_hang"]
    assert oom.marker.color == CATEGORY_COLORS["cuda_oom"]
    assert list(gpu.y) == ["gpu-a01", "gpu-a02"]
    assert list(gpu.x) == [START + timedelta(minutes=1), START + timedelta(minutes=3)]
    assert {trace.type for trace in figure.data} == {"scatter"}
    assert {trace.mode for trace in figure.data} == {"markers"}
    assert "GPU hardware" in gpu.hovertemplate
    assert figure.layout.xaxis.type == "date"
    assert figure.layout.xaxis.title.text == "Time"
    assert figure.layout.title.text == "Faults"
    assert serialises(figure)


def test_timeline_gives_every_category_its_own_colour_apart_from_unknown_ones():
    # That every FaultCategory has a colour: tests/charts/test_colour_maps.py.
    assert len(set(CATEGORY_COLORS.values())) == len(CATEGORY_COLORS)
    assert OTHER_CATEGORY_COLOR not in CATEGORY_COLORS.values()


def test_timeline_shows_an_unlabelled_or_unknown_category_by_its_key_after_the_known_ones():
    figure = timeline([point(category="firmware_bug"), point(category="storage_io")])

    assert [trace.name for trace in figure.data] == ["storage_io", "firmware_bug"]
    assert figure.data[0].marker.color == CATEGORY_COLORS["storage_io"]
    assert figure.data[1].marker.color == OTHER_CATEGORY_COLOR


def test_timeline_lists_nodes_top_down_in_row_order_keeping_rows_without_faults():
    figure = timeline([point(row="gpu-b01")], rows=["gpu-b01", "10", "gpu-a01"])

    assert list(figure.layout.yaxis.categoryarray) == ["gpu-b01", "10", "gpu-a01"]
    assert figure.layout.yaxis.type == "category"
    # First row on top, and every row in view even when it has no points.
    assert list(figure.layout.yaxis.range) == [2.5, -0.5]


def test_timeline_marks_severity_by_marker_shape():
    figure = timeline(
        [point(severity="critical"), point(severity="error", minutes=1), point(severity="warning", minutes=2)]
    )

    assert list(figure.data[0].marker.symbol) == ["x", "circle", "triangle-up"]
    sizes = list(figure.data[0].marker.size)
    assert sizes[0] > sizes[1]  # a critical cross stands out


def test_timeline_adds_a_grey_severity_key_for_the_severities_shown():
    figure = timeline(
        [point(severity="warning"), point(severity="critical", minutes=1)],
        severity_labels={"critical": "Critical", "error": "Error", "warning": "Warning"},
    )

    keys = [trace for trace in figure.data if trace.legendgroup == "severity"]
    assert [key.name for key in keys] == ["Critical", "Warning"]
    assert [key.marker.symbol for key in keys] == ["x", "triangle-up"]
    assert {key.hoverinfo for key in keys} == {"skip"}
    assert serialises(figure)


def test_timeline_without_severity_labels_has_category_traces_only():
    figure = timeline([point(severity="warning")])

    assert [trace.name for trace in figure.data] == ["GPU hardware"]


def test_timeline_points_carry_incident_ids_and_escaped_evidence_for_hover():
    figure = timeline(
        [point(incident_id=42, text="Xid 79 <GPU 0>"), point(incident_id=None, minutes=1, text="fell off")]
    )

    trace = figure.data[0]
    assert list(trace.customdata) == [42, None]
    assert list(trace.text) == ["Xid 79 &lt;GPU 0&gt;", "fell off"]
    assert "%{text}" in trace.hovertemplate
    assert "%{y}" in trace.hovertemplate
    assert json.loads(figure.to_json())["data"][0]["customdata"] == [42, None]


def test_timeline_switches_to_webgl_above_the_point_threshold():
    rows = [f"gpu-{index:04d}" for index in range(100)]

    def points(count):
        return [point(row=rows[index % 100], minutes=index) for index in range(count)]

    assert timeline(points(WEBGL_ABOVE_POINTS), rows=rows).data[0].type == "scatter"
    large = timeline(points(WEBGL_ABOVE_POINTS + 1), rows=rows)
    assert large.data[0].type == "scattergl"
    assert len(large.data[0].x) == WEBGL_ABOVE_POINTS + 1
    assert list(large.data[0].marker.symbol[:1]) == ["circle"]


def test_timeline_grows_with_nodes_and_keeps_a_thousand_rows_readable():
    def height(count):
        return timeline([], rows=[f"gpu-{index:04d}" for index in range(count)]).layout.height

    assert height(0) == MIN_HEIGHT_PX
    assert height(64) > height(8) >= MIN_HEIGHT_PX
    assert height(1000) > MAX_HEIGHT_PX
    assert height(1000) / 1000 >= READABLE_ROW_PX


def test_timeline_moves_a_long_legend_aside():
    few = timeline([point(category="hardware_gpu")])
    many = timeline([point(category=key, minutes=index) for index, key in enumerate(CATEGORY_COLORS)])

    assert few.layout.legend.orientation == "h"
    assert many.layout.legend.orientation == "v"


def test_timeline_without_points_keeps_the_rows_and_no_traces():
    figure = timeline([])

    assert len(figure.data) == 0
    assert list(figure.layout.yaxis.categoryarray) == NODES
    assert serialises(figure)


def test_timeline_rejects_a_point_on_a_row_outside_row_order():
    with pytest.raises(ValueError, match="gpu-z99"):
        timeline([point(row="gpu-z99")])


def test_timeline_rejects_a_row_named_twice():
    with pytest.raises(ValueError, match="gpu-a01"):
        timeline([], rows=["gpu-a01", "gpu-a01"])


def test_timeline_rejects_an_unknown_severity():
    with pytest.raises(ValueError, match="fatal"):
        timeline([point(severity="fatal")])


DETECTED = START + timedelta(seconds=45)
LOCATED = DETECTED + timedelta(seconds=150)
RESTARTED = LOCATED + timedelta(minutes=30)
RECOVERED = RESTARTED + timedelta(minutes=90)


def test_phases_draw_one_horizontal_bar_per_phase_from_start_for_its_duration():
    figure = incident_phases_figure(
        [
            ("Detect", START, DETECTED),
            ("Locate", DETECTED, LOCATED),
            ("Restart", LOCATED, RESTARTED),
            ("Recover", RESTARTED, RECOVERED),
        ],
        title="Incident #7",
    )

    bars = figure.data[0]
    assert bars.type == "bar"
    assert bars.orientation == "h"
    assert list(bars.y) == ["Detect", "Locate", "Restart", "Recover"]
    assert list(bars.base) == [START, DETECTED, LOCATED, RESTARTED]
    assert list(bars.x) == [45_000, 150_000, 1_800_000, 5_400_000]
    assert list(bars.text) == ["45 s", "2.5 min", "30 min", "1.5 h"]
    assert [row[2] for row in bars.customdata] == ["45 s", "2.5 min", "30 min", "1.5 h"]
    assert "%{customdata[2]}" in bars.hovertemplate
    assert figure.layout.xaxis.type == "date"
    assert list(figure.layout.yaxis.categoryarray) == ["Detect", "Locate", "Restart", "Recover"]
    assert figure.layout.yaxis.autorange == "reversed"
    assert set(bars.marker.pattern.shape) == {""}
    assert len(figure.data[1].y) == 0  # no open phase, no arrowhead
    assert figure.layout.title.text == "Incident #7"
    assert serialises(figure)


def test_phase_durations_are_written_by_the_formatter_the_page_passes():
    def in_words(seconds: float) -> str:
        return f"{seconds:.0f} 秒"

    figure = incident_phases_figure(
        [("发现", START, DETECTED), ("定位", DETECTED, None)],
        title="故障事件 7",
        now=LOCATED,
        duration_text=in_words,
    )
    bars = figure.data[0]
    assert list(bars.text) == ["45 秒", "≥ 150 秒"]
    assert [row[2] for row in bars.customdata] == ["45 秒", "≥ 150 秒"]


def test_an_open_phase_runs_hatched_to_the_last_known_time_with_an_arrowhead():
    figure = incident_phases_figure(
        [("Detect", START, DETECTED), ("Locate", DETECTED, None), ("Restart", LOCATED, RECOVERED)],
        title="Incident #7",
    )

    bars, arrowheads = figure.data
    # The open phase ends at the latest time known: the end of the restart.
    assert list(bars.x)[1] == (RECOVERED - DETECTED).total_seconds() * 1000
    assert list(bars.text)[1] == "≥ 2 h"
    assert list(bars.customdata)[1][1] == "…"
    assert list(bars.marker.pattern.shape) == ["", "/", ""]
    closed_fill, open_fill, _ = bars.marker.color
    assert open_fill != closed_fill
    assert list(arrowheads.y) == ["Locate"]
    assert list(arrowheads.x) == [RECOVERED]
    assert arrowheads.marker.symbol == "triangle-right"
    assert serialises(figure)


def test_an_open_last_phase_runs_to_now_when_given_and_stays_visible_without():
    phases = [("Detect", START, DETECTED), ("Recover", DETECTED, None)]

    until_now = incident_phases_figure(phases, title="Incident", now=DETECTED + timedelta(hours=2))
    without_now = incident_phases_figure(phases, title="Incident")

    assert list(until_now.data[0].text)[1] == "≥ 2 h"
    assert list(without_now.data[0].x)[1] == 0
    assert list(without_now.data[0].text)[1] == "≥ 0 s"
    assert list(without_now.data[1].y) == ["Recover"]


def test_a_phase_ending_before_it_starts_counts_as_no_time():
    figure = incident_phases_figure([("Detect", DETECTED, START)], title="Incident")

    assert list(figure.data[0].x) == [0]
    assert list(figure.data[0].text) == ["0 s"]


def test_phases_without_phases_give_an_empty_chart():
    figure = incident_phases_figure([], title="Incident")

    assert [len(trace.y) for trace in figure.data] == [0, 0]
    assert figure.layout.height == MIN_HEIGHT_PX
    assert serialises(figure)


DAYS = [date(2024, 3, 4), date(2024, 3, 5), date(2024, 3, 6)]


def mttr(mttr_minutes, detect_minutes, locate_minutes, days=DAYS) -> go.Figure:
    return mttr_trend_figure(
        days,
        mttr_minutes,
        detect_minutes,
        locate_minutes,
        title="MTTR",
        mttr_label="MTTR",
        detect_label="Time to detect",
        locate_label="Time to locate",
        axis_label="min",
    )


def test_mttr_draws_three_lines_and_keeps_days_without_incidents_as_gaps():
    figure = mttr([42.0, None, 30.5], [2.0, None, 1.0], [10.0, None, 5.5])

    assert [trace.name for trace in figure.data] == ["MTTR", "Time to detect", "Time to locate"]
    total, detect, locate = figure.data
    assert list(total.x) == DAYS
    assert list(total.y) == [42.0, None, 30.5]
    assert list(locate.y) == [10.0, None, 5.5]
    assert {trace.connectgaps for trace in figure.data} == {False}
    # A day between two gaps is a lone point: it needs a marker to show at all.
    assert {trace.mode for trace in figure.data} == {"lines+markers"}
    assert total.line.width > detect.line.width
    assert total.line.dash is None
    assert detect.line.dash is not None
    assert locate.line.dash is not None
    assert "min" in total.hovertemplate
    assert "Time to detect" in detect.hovertemplate
    assert figure.layout.yaxis.title.text == "min"
    assert serialises(figure)


def test_mttr_without_days_keeps_three_empty_lines():
    figure = mttr([], [], [], days=[])

    assert [len(trace.x) for trace in figure.data] == [0, 0, 0]
    assert serialises(figure)


def test_mttr_rejects_a_series_of_another_length():
    with pytest.raises(ValueError, match="locate_minutes"):
        mttr([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0])


def test_ettr_lists_jobs_lowest_first_on_a_percent_axis():
    figure = ettr_figure(
        ["llm-pretrain", "bev-train", "sim-rl", "ocr-ft"],
        [97.5, 61.0, 88.0, 61.0],
        title="ETTR",
        axis_label="ETTR",
    )

    bars = figure.data[0]
    assert bars.orientation == "h"
    # Ties keep the given order.
    assert list(bars.y) == ["bev-train", "ocr-ft", "sim-rl", "llm-pretrain"]
    assert list(bars.x) == [61.0, 61.0, 88.0, 97.5]
    assert list(bars.text) == ["61%", "61%", "88%", "98%"]
    assert list(figure.layout.yaxis.categoryarray) == list(bars.y)
    assert figure.layout.yaxis.autorange == "reversed"
    assert list(figure.layout.xaxis.range) == [0, 100]
    assert figure.layout.xaxis.ticksuffix == "%"
    assert serialises(figure)


def test_ettr_rejects_values_of_another_length():
    with pytest.raises(ValueError, match="ettr_pct"):
        ettr_figure(["a", "b"], [50.0], title="ETTR", axis_label="ETTR")


def test_counts_put_the_largest_on_top_and_label_each_bar():
    figure = count_bar_figure(
        ["NVLink", "CUDA OOM", "GPU hardware", "Storage I/O"],
        [3, 12, 7, 3],
        title="Incidents by category",
        axis_label="Incidents",
    )

    bars = figure.data[0]
    assert bars.orientation == "h"
    assert list(bars.y) == ["CUDA OOM", "GPU hardware", "NVLink", "Storage I/O"]
    assert list(bars.x) == [12, 7, 3, 3]
    assert list(bars.text) == ["12", "7", "3", "3"]
    assert figure.layout.yaxis.autorange == "reversed"
    assert bars.marker.color is None  # the theme's first colour
    assert "Incidents" in bars.hovertemplate
    assert figure.layout.xaxis.title.text == "Incidents"
    assert serialises(figure)


def test_counts_take_a_given_colour_and_whole_ticks_for_small_counts():
    small = count_bar_figure(
        ["node", "rack"], [2, 1], title="By domain", axis_label="Incidents", color="#9467bd"
    )
    large = count_bar_figure(["node"], [250], title="By domain", axis_label="Incidents")

    assert small.data[0].marker.color == "#9467bd"
    assert small.layout.xaxis.dtick == 1
    assert large.layout.xaxis.dtick is None


def test_counts_grow_with_rows_and_accept_no_labels():
    many = count_bar_figure([f"L{index}" for index in range(30)], list(range(30)), title="C", axis_label="N")
    empty = count_bar_figure([], [], title="C", axis_label="N")

    assert many.layout.height > empty.layout.height == MIN_HEIGHT_PX
    assert len(empty.data[0].y) == 0
    assert serialises(empty)


def test_counts_reject_values_of_another_length():
    with pytest.raises(ValueError, match="counts"):
        count_bar_figure(["a"], [1, 2], title="C", axis_label="N")
