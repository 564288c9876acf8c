"""Quota chart builders are pure: plain data in, a Plotly figure out, no database."""

import json
import math
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from efficiency.charts.quotas import (
    DemandRow,
    backtest_allocation_figure,
    backtest_waits_figure,
    demand_distribution_figure,
    quota_history_figure,
    quota_use_figure,
)
from efficiency.charts.toolkit import DEPARTMENT_CHROME_PX, MAX_HEIGHT_PX, MIN_HEIGHT_PX

START = datetime(2024, 3, 4, 0, 0, tzinfo=UTC)
TIMES = [START + timedelta(hours=hour) for hour in range(3)]
# Below this a 15 px department label no longer fits its row and Plotly starts dropping labels.
READABLE_ROW_PX = 28


def serialises(figure: go.Figure) -> bool:
    return bool(json.loads(figure.to_json())["layout"]["title"]["text"])


def by_name(figure: go.Figure) -> dict:
    return {trace.name: trace for trace in figure.data}


def quota_use(departments, guaranteed, used, borrowed) -> go.Figure:
    return quota_use_figure(
        departments,
        guaranteed,
        used,
        borrowed,
        title="Quota use",
        guaranteed_label="Guaranteed",
        used_label="Used within guarantee",
        borrowed_label="Borrowed",
        axis_label="GPUs",
    )


def test_quota_use_sets_the_guarantee_beside_use_split_into_own_and_borrowed_gpus():
    figure = quota_use(["BEV", "Mapping"], [16.0, 8.0], [12.0, 10.0], [0.0, 4.0])

    guaranteed, within, borrowed = figure.data
    assert [trace.name for trace in figure.data] == ["Guaranteed", "Used within guarantee", "Borrowed"]
    assert {trace.type for trace in figure.data} == {"bar"}
    assert {trace.orientation for trace in figure.data} == {"h"}
    assert list(guaranteed.y) == ["BEV", "Mapping"]
    assert list(guaranteed.x) == [16.0, 8.0]
    assert list(within.x) == [12.0, 6.0]
    # The borrowed part starts where the part within the guarantee ends: the bar ends at `used`.
    assert list(borrowed.x) == [0.0, 4.0]
    assert list(borrowed.base) == [12.0, 6.0]
    assert within.offsetgroup == borrowed.offsetgroup != guaranteed.offsetgroup
    assert figure.layout.barmode == "group"
    assert guaranteed.marker.line.width > 0
    assert len({trace.marker.color for trace in figure.data}) == 3
    assert "GPUs" in borrowed.hovertemplate
    assert figure.layout.xaxis.title.text == "GPUs"
    assert figure.layout.title.text == "Quota use"
    assert serialises(figure)


def test_quota_use_lists_departments_top_down_in_the_given_order():
    figure = quota_use(["Simulation", "BEV", "2024"], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 0.0, 0.0])

    assert list(figure.layout.yaxis.categoryarray) == ["Simulation", "BEV", "2024"]
    assert figure.layout.yaxis.autorange == "reversed"
    # A department named like a number stays a row, not a position on a numeric axis.
    assert figure.layout.yaxis.type == "category"


def test_quota_use_never_draws_a_negative_part_within_the_guarantee():
    figure = quota_use(["BEV"], [0.0], [3.0], [3.0000001])

    assert list(by_name(figure)["Used within guarantee"].x) == [0.0]


def test_quota_use_grows_with_departments_and_keeps_every_row_readable_past_fifty():
    few = quota_use(["BEV"], [1.0], [1.0], [0.0])
    ten = quota_use([f"D{i}" for i in range(10)], [1.0] * 10, [1.0] * 10, [0.0] * 10)
    sixty = quota_use([f"D{i}" for i in range(60)], [1.0] * 60, [1.0] * 60, [0.0] * 60)

    assert few.layout.height == MIN_HEIGHT_PX
    assert MIN_HEIGHT_PX < ten.layout.height < sixty.layout.height
    assert sixty.layout.height > MAX_HEIGHT_PX
    assert (sixty.layout.height - DEPARTMENT_CHROME_PX) / 60 >= READABLE_ROW_PX


def test_quota_use_without_departments_keeps_three_empty_traces():
    figure = quota_use([], [], [], [])

    assert [len(trace.y) for trace in figure.data] == [0, 0, 0]
    assert serialises(figure)


def test_quota_use_rejects_values_of_another_length():
    with pytest.raises(ValueError, match="borrowed"):
        quota_use(["BEV", "Mapping"], [1.0, 2.0], [1.0, 2.0], [1.0])


def demand(rows) -> go.Figure:
    return demand_distribution_figure(
        rows,
        title="Demand",
        demand_label="Hourly demand",
        percentile_label="P75",
        proposed_label="Proposed",
        current_label="Current",
        axis_label="GPUs",
        log_axis_label="GPUs (log scale)",
    )


DEMAND_ROWS = [
    DemandRow("BEV", [2.0, 4.0, 6.0, 8.0], percentile_gpus=6.5, proposed_gpus=7.0, current_gpus=5.0),
    DemandRow("Mapping", [1.0, 1.0, 3.0], percentile_gpus=2.0, proposed_gpus=2.0, current_gpus=None),
    DemandRow("Simulation", [10.0, 12.0], percentile_gpus=11.5, proposed_gpus=12.0, current_gpus=16.0),
]


def test_demand_draws_one_horizontal_box_of_hourly_gpus_per_row_in_order():
    figure = demand(DEMAND_ROWS)

    boxes = [trace for trace in figure.data if trace.type == "box"]
    assert [box.y0 for box in boxes] == ["BEV", "Mapping", "Simulation"]
    assert [list(box.x) for box in boxes] == [[2.0, 4.0, 6.0, 8.0], [1.0, 1.0, 3.0], [10.0, 12.0]]
    assert {box.orientation for box in boxes} == {"h"}
    assert list(figure.layout.yaxis.categoryarray) == ["BEV", "Mapping", "Simulation"]
    assert figure.layout.yaxis.autorange == "reversed"
    assert figure.layout.xaxis.title.text == "GPUs"
    assert serialises(figure)


def test_demand_has_one_legend_entry_per_kind_not_per_row():
    figure = demand(DEMAND_ROWS)

    in_legend = [trace.name for trace in figure.data if trace.showlegend is not False]
    assert in_legend == ["Hourly demand", "P75", "Proposed", "Current"]
    assert {trace.legendgroup for trace in figure.data if trace.type == "box"} == {"demand"}


def test_demand_marks_percentile_and_proposed_quota_on_each_row():
    markers = by_name(demand(DEMAND_ROWS))

    percentile, proposed = markers["P75"], markers["Proposed"]
    assert dict(zip(percentile.y, percentile.x, strict=True)) == {
        "BEV": 6.5,
        "Mapping": 2.0,
        "Simulation": 11.5,
    }
    assert dict(zip(proposed.y, proposed.x, strict=True)) == {"BEV": 7.0, "Mapping": 2.0, "Simulation": 12.0}
    assert percentile.mode == proposed.mode == "markers"
    assert percentile.marker.symbol == "diamond"
    assert proposed.marker.symbol == "line-ns"
    assert "P75" in percentile.hovertemplate
    assert "GPUs" in proposed.hovertemplate


def test_demand_marks_the_current_quota_hollow_and_skips_rows_without_one():
    current = by_name(demand(DEMAND_ROWS))["Current"]

    assert dict(zip(current.y, current.x, strict=True)) == {"BEV": 5.0, "Simulation": 16.0}
    assert current.marker.symbol.endswith("-open")


def test_demand_row_without_hours_still_shows_its_quota_markers():
    figure = demand([DemandRow("New team", [], percentile_gpus=0.0, proposed_gpus=2.0, current_gpus=None)])

    assert len(by_name(figure)["Hourly demand"].x) == 0
    assert list(by_name(figure)["Proposed"].y) == ["New team"]
    assert serialises(figure)


def test_demand_without_rows_keeps_the_marker_kinds_empty():
    figure = demand([])

    assert [trace.name for trace in figure.data] == ["P75", "Proposed", "Current"]
    assert [len(trace.x) for trace in figure.data] == [0, 0, 0]
    assert figure.layout.height == MIN_HEIGHT_PX
    assert serialises(figure)


def test_demand_chart_grows_with_rows():
    rows = [DemandRow(f"D{i}", [1.0], 1.0, 1.0, 1.0) for i in range(60)]

    assert demand(rows).layout.height > demand(rows[:10]).layout.height > demand(rows[:1]).layout.height


def test_backtest_waits_group_one_bar_series_per_policy_in_order():
    figure = backtest_waits_figure(
        ["BEV", "Mapping", "Simulation"],
        {"Fixed": [4.0, None, 12.5], "Current quotas": [2.0, 0.5, 6.0], "Proposal": [1.0, 0.5, 3.0]},
        title="P95 wait",
        axis_label="P95 wait (hours)",
    )

    assert [trace.name for trace in figure.data] == ["Fixed", "Current quotas", "Proposal"]
    assert {trace.type for trace in figure.data} == {"bar"}
    assert {trace.orientation for trace in figure.data} == {"h"}
    fixed = figure.data[0]
    assert list(fixed.y) == ["BEV", "Mapping", "Simulation"]
    # No wait to report is a missing bar, not a zero wait.
    assert list(fixed.x) == [4.0, None, 12.5]
    assert figure.layout.barmode == "group"
    assert figure.layout.yaxis.autorange == "reversed"
    assert figure.layout.xaxis.title.text == "P95 wait (hours)"
    assert "Fixed" in fixed.hovertemplate
    assert serialises(figure)


def test_backtest_waits_give_rows_more_room_for_more_policies():
    departments = [f"D{i}" for i in range(10)]
    two = backtest_waits_figure(
        departments, {"A": [1.0] * 10, "B": [1.0] * 10}, title="Waits", axis_label="Hours"
    )
    four = backtest_waits_figure(
        departments, {name: [1.0] * 10 for name in "ABCD"}, title="Waits", axis_label="Hours"
    )

    assert four.layout.height > two.layout.height > MIN_HEIGHT_PX


def test_backtest_waits_reject_a_policy_of_another_length():
    with pytest.raises(ValueError, match="Proposal"):
        backtest_waits_figure(
            ["BEV", "Mapping"], {"Fixed": [1.0, 2.0], "Proposal": [1.0]}, title="Waits", axis_label="Hours"
        )


def allocation(times, allocated) -> go.Figure:
    return backtest_allocation_figure(
        times, allocated, 512, title="Allocated", capacity_label="Capacity", axis_label="GPUs"
    )


def test_backtest_allocation_draws_a_step_line_per_policy_under_a_dashed_capacity():
    figure = allocation(TIMES, {"Fixed": [100.0, 200.0, 150.0], "Proposal": [300.0, 450.0, 400.0]})

    assert [trace.name for trace in figure.data] == ["Fixed", "Proposal", "Capacity"]
    fixed, proposal, capacity = figure.data
    assert list(fixed.x) == TIMES
    assert list(proposal.y) == [300.0, 450.0, 400.0]
    assert fixed.line.shape == proposal.line.shape == "hv"
    assert list(capacity.y) == [512, 512, 512]
    assert capacity.line.dash == "dash"
    assert fixed.line.dash is None
    assert "GPUs" in fixed.hovertemplate
    assert figure.layout.yaxis.title.text == "GPUs"
    assert serialises(figure)


def test_backtest_allocation_without_hours_keeps_empty_lines():
    figure = allocation([], {"Fixed": []})

    assert [len(trace.x) for trace in figure.data] == [0, 0]
    assert serialises(figure)


def test_backtest_allocation_rejects_a_policy_of_another_length():
    with pytest.raises(ValueError, match="Fixed"):
        allocation(TIMES, {"Fixed": [1.0, 2.0]})


def history(cycles, guaranteed, shared_pool) -> go.Figure:
    return quota_history_figure(
        cycles,
        guaranteed,
        shared_pool,
        title="Quota history",
        shared_pool_label="Shared pool",
        axis_label="GPUs",
    )


def test_quota_history_stacks_departments_with_the_shared_pool_on_top():
    figure = history(["2024Q1", "2024Q2"], {"BEV": [16.0, 24.0], "Mapping": [8.0, 8.0]}, [40.0, 32.0])

    assert [trace.name for trace in figure.data] == ["BEV", "Mapping", "Shared pool"]
    assert {trace.type for trace in figure.data} == {"bar"}
    bev, _, pool = figure.data
    assert list(bev.x) == ["2024Q1", "2024Q2"]
    assert list(bev.y) == [16.0, 24.0]
    assert list(pool.y) == [40.0, 32.0]
    assert figure.layout.barmode == "stack"
    assert pool.marker.color == "#9ca3af"
    assert "BEV" in bev.hovertemplate
    assert figure.layout.yaxis.title.text == "GPUs"
    assert serialises(figure)


def test_quota_history_keeps_cycles_named_like_years_as_categories():
    figure = history(["2023", "2024"], {"BEV": [1.0, 2.0]}, [3.0, 4.0])

    assert figure.layout.xaxis.type == "category"


def test_quota_history_gives_every_department_its_own_colour_and_the_pool_a_grey_apart():
    # The demo's nine departments once shared the theme's eight colours: two were both blue.
    departments = {f"Department {i:02d}": [1.0] for i in range(24)}
    figure = history(["2024Q1"], departments, [1.0])

    *bars, pool = figure.data
    colours = [bar.marker.color for bar in bars]
    assert len(set(colours)) == 24
    assert pool.marker.color not in colours
    for colour in colours:
        red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
        assert max(red, green, blue) - min(red, green, blue) > 40, colour  # no grey like the pool's


def test_quota_history_colours_follow_the_department_not_its_neighbours():
    # Assigned by the order given (the view sorts by name): the same department keeps its colour
    # from one page to the next.
    first = history(["2024Q1"], {"BEV": [1.0], "Mapping": [1.0]}, [1.0])
    again = history(["2024Q1"], {"BEV": [2.0], "Mapping": [3.0]}, [1.0])

    assert [t.marker.color for t in first.data] == [t.marker.color for t in again.data]


def test_quota_history_puts_a_long_legend_below_the_bars_and_grows_for_it():
    few = history(["2024Q1"], {"BEV": [1.0]}, [1.0])
    many = history(["2024Q1"], {f"D{i}": [1.0] for i in range(20)}, [1.0])

    for figure in (few, many):
        assert figure.layout.legend.orientation == "h"
        assert (figure.layout.legend.yref, figure.layout.legend.yanchor) == ("container", "bottom")
    assert many.layout.height > few.layout.height


def test_quota_history_rejects_series_of_another_length():
    with pytest.raises(ValueError, match="Mapping"):
        history(["2024Q1", "2024Q2"], {"BEV": [1.0, 2.0], "Mapping": [1.0]}, [1.0, 2.0])
    with pytest.raises(ValueError, match="shared_pool"):
        history(["2024Q1", "2024Q2"], {"BEV": [1.0, 2.0]}, [1.0])


def test_quota_history_accepts_a_department_named_like_a_parameter():
    figure = history(["2024Q1"], {"shared_pool": [1.0]}, [2.0])

    assert [list(trace.y) for trace in figure.data] == [[1.0], [2.0]]


# --- Fitting on a projector and on a phone ----------------------------------------------------


def all_quota_figures(title):
    return [
        quota_use_figure(
            ["BEV"], [1.0], [1.0], [0.0], title=title, guaranteed_label="G", used_label="U",
            borrowed_label="B", axis_label="GPUs",
        ),
        demand_distribution_figure(
            DEMAND_ROWS, title=title, demand_label="D", percentile_label="P", proposed_label="N",
            current_label="C", axis_label="GPUs",
        ),
        backtest_waits_figure(["BEV"], {"A": [1.0]}, title=title, axis_label="Hours"),
        backtest_allocation_figure(TIMES, {"A": [1.0, 2.0, 3.0]}, 8, title=title, capacity_label="C",
                                   axis_label="GPUs"),
        quota_history_figure(["2024Q1"], {"BEV": [1.0]}, [1.0], title=title, shared_pool_label="S",
                             axis_label="GPUs"),
    ]  # fmt: skip


def display_width(line: str) -> int:
    return sum(2 if ord(char) > 0x2E80 else 1 for char in line)


@pytest.mark.parametrize(
    "title",
    [
        "Hourly demand last cycle (GPUs held or waited for)",
        "上一周期每小时需求（已占用或等待中的 GPU）按部门与型号分列，供委员会评审",
    ],
)
def test_long_titles_stay_whole_above_the_plot_and_clear_of_the_legend(title):
    """The theme's contract: the title, whole, sits above the plot with its own margin
    (static/efficiency/js/charts.js wraps it to the width the chart is drawn at, see
    tests/e2e for a phone), and the legend sits at the bottom of the chart."""
    for figure in all_quota_figures(title):
        assert figure.layout.title.text == title
        assert figure.layout.title.automargin is True
        assert figure.layout.title.yref == "paper"
        assert figure.layout.title.yanchor == "bottom"
        assert figure.layout.legend.yref == "container"
        assert figure.layout.legend.yanchor == "bottom"


def test_long_row_names_wrap_on_the_axis_but_stay_whole_as_categories():
    name = "End-to-end driving models · A100"
    figure = quota_use([name, "BEV"], [1.0, 2.0], [1.0, 2.0], [0.0, 0.0])

    assert list(figure.data[0].y) == [name, "BEV"]
    assert list(figure.layout.yaxis.tickvals) == [name, "BEV"]
    assert list(figure.layout.yaxis.ticktext) == ["End-to-end driving<br>models · A100", "BEV"]


def test_a_short_title_stays_on_one_line():
    assert quota_history_figure(
        ["2024Q1"], {"BEV": [1.0]}, [1.0], title="Guaranteed GPUs per cycle", shared_pool_label="S",
        axis_label="GPUs",
    ).layout.title.text == "Guaranteed GPUs per cycle"  # fmt: skip


# --- A demand box plot that one huge department does not flatten ------------------------------


def test_demand_stays_linear_while_rows_are_of_a_size():
    figure = demand(DEMAND_ROWS)

    assert figure.layout.xaxis.type in (None, "linear")
    assert figure.layout.xaxis.tickvals is None


def test_demand_of_one_department_far_above_the_others_switches_to_a_log_scale_in_gpus():
    # The demo's vision department waited for ~2,600 GPUs; the others for tens: on a linear axis
    # every other box was a dot at the left.
    rows = [
        DemandRow("Vehicle vision", [2400.0, 2600.0, 3000.0], 2609.0, 100.0, 80.0),
        DemandRow("BEV", [0.0, 40.0, 60.0, 80.0], 65.0, 64.0, 57.0),
        DemandRow("Mapping", [0.0, 0.0, 1.0], 0.5, 8.0, 19.0),
    ]
    figure = demand(rows)

    boxes = [trace for trace in figure.data if trace.type == "box"]
    # log10(1 + GPUs): zero stays at zero, and each box keeps its order statistics.
    assert list(boxes[1].x) == pytest.approx([math.log10(1 + v) for v in (0.0, 40.0, 60.0, 80.0)])
    percentile = by_name(figure)["P75"]
    assert list(percentile.x) == pytest.approx([math.log10(1 + v) for v in (2609.0, 65.0, 0.5)])
    # Hover and ticks speak GPUs, not logarithms.
    assert list(percentile.customdata) == [2609.0, 65.0, 0.5]
    assert "%{customdata" in percentile.hovertemplate
    ticks = dict(zip(figure.layout.xaxis.ticktext, figure.layout.xaxis.tickvals, strict=True))
    assert ticks["0"] == 0
    assert ticks["1,000"] == pytest.approx(math.log10(1001))
    assert "log" in figure.layout.xaxis.title.text
