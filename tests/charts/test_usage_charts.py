"""Usage chart builders are pure: plain data in, a figure out, no database.

The pages' builders return the figure as a plain dict (what plotly.js draws); every test passes
it through ``go.Figure``, which validates each property as plotly.py did on every request before,
and reads it back through Plotly's objects."""

import json
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from efficiency.charts import usage as usage_charts
from efficiency.charts.toolkit import MAX_HEIGHT_PX, MIN_HEIGHT_PX
from efficiency.charts.usage import HEATMAP_MISSING_COLOR, NODE_CLASS_COLORS, job_timeseries_figure


def validated(builder):
    """``builder`` whose figure dict is checked by Plotly's validators (a bad property raises)."""

    def build(*args, **kwargs) -> go.Figure:
        return go.Figure(builder(*args, **kwargs))

    return build


department_utilization_figure = validated(usage_charts.department_utilization_figure)
gpu_hours_figure = validated(usage_charts.gpu_hours_figure)
heatmap_figure = validated(usage_charts.heatmap_figure)
node_class_figure = validated(usage_charts.node_class_figure)
utilization_trend_figure = validated(usage_charts.utilization_trend_figure)
water_level_figure = validated(usage_charts.water_level_figure)

START = datetime(2024, 3, 4, 0, 0, tzinfo=UTC)
TIMES = [START + timedelta(hours=hour) for hour in range(3)]


def serialises(figure: go.Figure) -> bool:
    return bool(json.loads(figure.to_json())["layout"]["title"]["text"])


def water_level(times, allocated, total) -> go.Figure:
    return water_level_figure(
        times,
        allocated,
        total,
        title="Water level",
        allocated_label="Allocated",
        total_label="Available",
        axis_label="GPUs",
    )


def test_water_level_fills_allocated_under_the_available_line():
    figure = water_level(TIMES, [100, None, 300], [512, 512, 512])

    allocated, total = figure.data
    assert (allocated.name, total.name) == ("Allocated", "Available")
    assert allocated.fill == "tozeroy"
    assert total.fill is None
    assert list(allocated.x) == TIMES
    assert list(allocated.y) == [100, None, 300]
    assert allocated.connectgaps is False
    assert list(total.y) == [512, 512, 512]
    assert "GPUs" in allocated.hovertemplate
    assert figure.layout.yaxis.title.text == "GPUs"
    assert figure.layout.title.text == "Water level"
    assert serialises(figure)


def test_water_level_without_times_keeps_both_traces_empty():
    figure = water_level([], [], [])

    assert [len(trace.x) for trace in figure.data] == [0, 0]
    assert serialises(figure)


def test_water_level_rejects_series_of_another_length():
    with pytest.raises(ValueError, match="total_gpus"):
        water_level(TIMES, [1, 2, 3], [1, 2])


def test_utilization_trend_draws_one_percent_line_per_series_in_order():
    figure = utilization_trend_figure(
        TIMES,
        {"Utilization": [30.0, None, 45.0], "Allocation rate": [70.0, 72.5, 80.0]},
        title="Trend",
        axis_label="Share of available GPU-hours",
    )

    assert [trace.name for trace in figure.data] == ["Utilization", "Allocation rate"]
    utilization = figure.data[0]
    assert list(utilization.y) == [30.0, None, 45.0]
    assert utilization.connectgaps is False
    assert "%" in utilization.hovertemplate
    assert tuple(figure.layout.yaxis.range) == (0, 100)
    assert figure.layout.yaxis.ticksuffix == "%"
    assert serialises(figure)


def test_utilization_trend_without_data_is_an_empty_figure():
    assert len(utilization_trend_figure([], {}, title="Trend", axis_label="%").data) == 0
    figure = utilization_trend_figure([], {"Utilization": []}, title="Trend", axis_label="%")
    assert len(figure.data[0].x) == 0
    assert serialises(figure)


def test_utilization_trend_rejects_a_series_of_another_length():
    with pytest.raises(ValueError, match="Utilization"):
        utilization_trend_figure(TIMES, {"Utilization": [1.0]}, title="Trend", axis_label="%")


def test_utilization_trend_accepts_a_series_named_like_a_parameter():
    figure = utilization_trend_figure(TIMES, {"times": [1.0, 2.0, 3.0]}, title="Trend", axis_label="%")

    assert figure.data[0].name == "times"


def gpu_hours(times, owned, allocated, busy) -> go.Figure:
    return gpu_hours_figure(
        times,
        owned,
        allocated,
        busy,
        title="GPU-hours",
        owned_label="Owned",
        allocated_label="Allocated",
        busy_label="Busy",
        axis_label="GPU-hours",
    )


def test_gpu_hours_draws_owned_as_a_line_and_busy_bars_in_front_of_allocated():
    figure = gpu_hours(TIMES, [512.0, 512.0, 512.0], [300.0, 350.0, 400.0], [100.0, 150.0, 200.0])

    owned, allocated, busy = figure.data
    assert (owned.type, allocated.type, busy.type) == ("scatter", "bar", "bar")
    assert [trace.name for trace in figure.data] == ["Owned", "Allocated", "Busy"]
    assert list(busy.y) == [100.0, 150.0, 200.0]
    assert figure.layout.barmode == "overlay"
    assert allocated.marker.color != busy.marker.color
    assert "GPU-hours" in busy.hovertemplate
    assert serialises(figure)


def test_gpu_hours_without_times_keeps_three_empty_traces():
    figure = gpu_hours([], [], [], [])

    assert [len(trace.x) for trace in figure.data] == [0, 0, 0]
    assert serialises(figure)


def test_gpu_hours_rejects_series_of_another_length():
    with pytest.raises(ValueError, match="busy"):
        gpu_hours(TIMES, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0])


def departments(names, utilization, allocation) -> go.Figure:
    return department_utilization_figure(
        names,
        utilization,
        allocation,
        title="Departments",
        utilization_label="Utilization",
        allocation_label="Allocation rate",
        axis_label="Share of available GPU-hours",
    )


def test_department_bars_are_horizontal_labelled_and_listed_top_down():
    figure = departments(["BEV", "Mapping", "Simulation"], [45.0, 12.4, None], [80.0, 99.6, 10.0])

    utilization, allocation = figure.data
    assert [trace.name for trace in figure.data] == ["Utilization", "Allocation rate"]
    assert utilization.orientation == "h"
    assert list(utilization.y) == ["BEV", "Mapping", "Simulation"]
    assert list(utilization.x) == [45.0, 12.4, None]
    assert list(utilization.text) == ["45%", "12%", ""]
    assert list(allocation.text) == ["80%", "100%", "10%"]
    assert figure.layout.barmode == "group"
    assert figure.layout.yaxis.autorange == "reversed"
    assert tuple(figure.layout.xaxis.range) == (0, 100)
    assert figure.layout.xaxis.ticksuffix == "%"
    assert serialises(figure)


def test_department_chart_grows_with_departments_within_bounds():
    few = departments(["BEV"], [1.0], [2.0])
    many = departments([f"D{i}" for i in range(100)], [1.0] * 100, [2.0] * 100)

    assert few.layout.height == MIN_HEIGHT_PX
    assert many.layout.height == MAX_HEIGHT_PX


def test_department_chart_without_departments_keeps_two_empty_traces():
    figure = departments([], [], [])

    assert [len(trace.y) for trace in figure.data] == [0, 0]
    assert serialises(figure)


def test_department_chart_rejects_values_of_another_length():
    with pytest.raises(ValueError, match="allocation_pct"):
        departments(["BEV", "Mapping"], [1.0, 2.0], [1.0])


CLASS_LABELS = {"idle": "Idle", "hot": "Hot", "fluctuating": "Fluctuating", "steady": "Steady"}


def test_node_classes_come_in_fixed_order_with_fixed_colours_and_shares():
    counts = {"steady": 20, "idle": 13, "drained": 2, "fluctuating": 30}

    figure = node_class_figure(counts, title="Node classes", class_labels=CLASS_LABELS, axis_label="Nodes")

    (bars,) = figure.data
    assert bars.name == "Node classes"
    assert list(bars.x) == ["Idle", "Hot", "Fluctuating", "Steady", "drained"]
    assert list(bars.y) == [13, 0, 30, 20, 2]
    assert list(bars.marker.color[:4]) == [
        NODE_CLASS_COLORS["idle"],
        NODE_CLASS_COLORS["hot"],
        NODE_CLASS_COLORS["fluctuating"],
        NODE_CLASS_COLORS["steady"],
    ]
    assert bars.marker.color[4] not in NODE_CLASS_COLORS.values()
    assert list(bars.text) == ["13 · 20%", "0 · 0%", "30 · 46%", "20 · 31%", "2 · 3%"]
    assert serialises(figure)


def test_a_tiny_node_class_share_does_not_read_as_zero():
    figure = node_class_figure(
        {"idle": 1, "steady": 499}, title="Node classes", class_labels=CLASS_LABELS, axis_label="Nodes"
    )

    assert figure.data[0].text[0] == "1 · &lt;1%"  # escaped text: plotly.js draws "1 · <1%"


def test_no_node_classes_gives_one_empty_trace():
    figure = node_class_figure({}, title="Node classes", class_labels=CLASS_LABELS, axis_label="Nodes")

    assert len(figure.data) == 1
    assert len(figure.data[0].x) == 0
    assert serialises(figure)


def heatmap(rows, times, values) -> go.Figure:
    return heatmap_figure(
        rows, times, values, title="Nodes", colorbar_label="Utilization", missing_label="No data"
    )


def test_heatmap_keeps_the_first_node_on_top_and_marks_missing_cells():
    figure = heatmap(["gpu-001", "gpu-002"], TIMES, [[0.5, None, 99.0], [50.0, 60.0, 70.0]])

    cells, missing_key = figure.data
    assert list(cells.y) == ["gpu-001", "gpu-002"]
    assert figure.layout.yaxis.autorange == "reversed"
    assert list(cells.x) == TIMES
    assert [list(row) for row in cells.z] == [[0.5, None, 99.0], [50.0, 60.0, 70.0]]
    assert (cells.zmin, cells.zmax) == (0, 100)
    # The missing cell is a gap showing the grey background; a grey legend key says what it means.
    assert cells.hoverongaps is False
    assert "%{z:.1f}%" in cells.hovertemplate
    assert figure.layout.plot_bgcolor == HEATMAP_MISSING_COLOR
    assert missing_key.name == "No data"
    assert missing_key.marker.color == HEATMAP_MISSING_COLOR
    assert missing_key.showlegend is True
    assert serialises(figure)


def test_heatmap_grows_with_rows_within_bounds():
    times = TIMES[:1]
    assert heatmap(["a"], times, [[1.0]]).layout.height == MIN_HEIGHT_PX
    assert heatmap(["a"] * 20, times, [[1.0]] * 20).layout.height == 140 + 28 * 20
    assert heatmap(["a"] * 500, times, [[1.0]] * 500).layout.height == MAX_HEIGHT_PX


def test_heatmap_without_rows_or_times_is_an_empty_heatmap():
    for figure in (heatmap([], [], []), heatmap(["gpu-001"], [], [[]])):
        assert [trace.type for trace in figure.data] == ["heatmap", "scatter"]
        assert serialises(figure)


def test_heatmap_rejects_rows_or_cells_of_another_length():
    with pytest.raises(ValueError, match="rows"):
        heatmap(["gpu-001", "gpu-002"], TIMES, [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="row 1"):
        heatmap(["gpu-001", "gpu-002"], TIMES, [[1.0, 2.0, 3.0], [1.0]])


def test_job_timeseries_stacks_one_row_per_metric_on_a_shared_time_axis():
    series = {
        "Activity": [90.0, None, 95.0],
        "Memory": [70.0, 71.0, 71.5],
        "Power": [600.0, 610.0, 590.0],
    }
    units = {"Activity": "%", "Memory": "GiB", "Power": "W"}

    figure = job_timeseries_figure(TIMES, series, units, title="Job 42")

    assert [trace.name for trace in figure.data] == list(series)
    assert [trace.yaxis for trace in figure.data] == ["y", "y2", "y3"]
    assert list(figure.data[0].y) == [90.0, None, 95.0]
    assert figure.data[0].connectgaps is False
    # make_subplots ties the upper x axes to the bottom one.
    assert figure.layout.xaxis.matches == "x3"
    assert figure.layout.xaxis2.matches == "x3"
    assert tuple(figure.layout.yaxis.range) == (0, 100)
    assert figure.layout.yaxis2.range is None
    assert "GiB" in figure.data[1].hovertemplate
    assert "W" in figure.data[2].hovertemplate
    assert figure.layout.showlegend is False
    assert serialises(figure)


def test_every_job_metric_axis_names_its_unit():
    series = {"Activity": [90.0], "Memory": [70.0], "Power": [600.0], "Count": [3.0]}
    units = {"Activity": "%", "Memory": "GiB", "Power": "W"}

    figure = job_timeseries_figure(TIMES[:1], series, units, title="Job 42", axis_title="{name}（{unit}）")

    titles = [figure.layout[f"yaxis{n}"].title.text for n in ("", "2", "3", "4")]
    assert titles == ["Activity（%）", "Memory（GiB）", "Power（W）", "Count"]
    default = job_timeseries_figure(TIMES[:1], series, units, title="Job 42")
    assert default.layout.yaxis2.title.text == "Memory (GiB)"


def test_job_timeseries_without_series_or_times_does_not_raise():
    empty = job_timeseries_figure([], {}, {}, title="Job 42")
    no_times = job_timeseries_figure([], {"Power (W)": []}, {}, title="Job 42")

    assert len(empty.data) == 0
    assert len(no_times.data) == 1
    assert serialises(empty)
    assert serialises(no_times)


def test_job_timeseries_rejects_a_series_of_another_length():
    with pytest.raises(ValueError, match="Power"):
        job_timeseries_figure(TIMES, {"Power (W)": [1.0]}, {"Power (W)": "W"}, title="Job 42")
