"""Node classes from hand-worked hourly utilization series."""

import math
from datetime import UTC, datetime, timedelta

import pytest

from efficiency.analysis.node_classes import (
    FLUCTUATING,
    HOT,
    IDLE,
    STEADY,
    UNKNOWN,
    ClassThresholds,
    NodeClassResult,
    NodeHourUtil,
    class_shares,
    classify_node,
    classify_nodes,
)

CYCLE_START = datetime(2026, 11, 2, tzinfo=UTC)


def series(*parts: tuple[int, float | None]) -> list[float | None]:
    """``series((24, 0.0), (6, 90.0))``: 24 hours at 0% followed by 6 hours at 90%."""
    return [value for count, value in parts for _ in range(count)]


def node_rows(node_id: int, values: list[float | None]) -> list[NodeHourUtil]:
    return [
        NodeHourUtil(node_id, CYCLE_START + timedelta(hours=hour), value) for hour, value in enumerate(values)
    ]


def result(node_id: int, node_class: str) -> NodeClassResult:
    return NodeClassResult(node_id, node_class, 100, 0.0, 0.0, 0.0, 0.0, "")


# Idle


def test_idle_node_needs_exactly_eighty_percent_of_hours_below_one_percent():
    at_boundary = classify_node(series((800, 0.5), (200, 30.0)))
    assert at_boundary.node_class == IDLE
    assert at_boundary.reason == "idle_hours"
    assert at_boundary.idle_hour_share == 0.8


def test_node_with_seventy_nine_point_nine_percent_idle_hours_is_not_idle():
    below = classify_node(series((799, 0.5), (201, 30.0)))
    assert below.node_class != IDLE
    assert below.idle_hour_share == pytest.approx(0.799)


def test_exactly_one_percent_is_not_an_idle_hour():
    outcome = classify_node(series((24, 1.0)))
    assert outcome.idle_hour_share == 0.0
    assert outcome.node_class == STEADY


def test_eighty_percent_of_thirty_hours_is_idle():
    assert classify_node(series((24, 0.0), (6, 50.0))).node_class == IDLE
    assert classify_node(series((23, 0.0), (7, 50.0))).node_class != IDLE


# Missing hours


def test_hours_without_samples_are_ignored_not_counted_as_zero():
    outcome = classify_node(series((30, 0.2), (300, None)))
    assert outcome.node_class == IDLE
    assert outcome.covered_hours == 30
    assert outcome.idle_hour_share == 1.0


def test_missing_hours_do_not_make_a_busy_node_idle():
    # 30 busy covered hours and 300 without data: were None read as 0%, this would be idle.
    assert classify_node(series((30, 50.0), (300, None))).node_class == STEADY


def test_node_with_too_few_covered_hours_is_unknown_but_keeps_its_numbers():
    outcome = classify_node(series((10, 0.0), (300, None)))
    assert outcome.node_class == UNKNOWN
    assert outcome.reason == "too_few_hours"
    assert outcome.covered_hours == 10
    assert outcome.idle_hour_share == 1.0
    assert outcome.mean_util_pct == 0.0


def test_minimum_covered_hours_is_enough_to_classify():
    assert classify_node(series((23, 0.0), (5, None))).node_class == UNKNOWN
    assert classify_node(series((24, 0.0), (5, None))).node_class == IDLE


def test_node_without_any_covered_hour_has_no_statistics():
    outcome = classify_node(series((336, None)))
    assert outcome == NodeClassResult(0, UNKNOWN, 0, None, None, None, None, "too_few_hours")
    assert classify_node([]).node_class == UNKNOWN


# Hot, fluctuating and steady


def test_hot_node_needs_forty_percent_of_hours_above_eighty_percent():
    # 10 of 25 hours at 90%, the rest at 50%: std-dev sqrt(384) = 19.6 points, below 20.
    at_boundary = classify_node(series((10, 90.0), (15, 50.0)))
    assert at_boundary.node_class == HOT
    assert at_boundary.reason == "hot_hours"
    assert at_boundary.hot_hour_share == 0.4
    below = classify_node(series((9, 90.0), (16, 50.0)))
    assert below.node_class == STEADY


def test_exactly_eighty_percent_is_not_a_hot_hour():
    outcome = classify_node(series((24, 80.0)))
    assert outcome.hot_hour_share == 0.0
    assert outcome.node_class == STEADY


def test_hot_node_with_idle_hours_stays_hot_despite_its_spread():
    # Half the hours saturated, half idle between jobs: std-dev 47.5 points, yet hot.
    outcome = classify_node(series((24, 95.0), (24, 0.0)))
    assert outcome.stddev_pct == pytest.approx(47.5)
    assert outcome.node_class == HOT


def test_idle_node_with_busy_bursts_stays_idle_despite_its_spread():
    outcome = classify_node(series((80, 0.0), (20, 90.0)))
    assert outcome.stddev_pct == pytest.approx(36.0)
    assert outcome.node_class == IDLE


def test_idle_check_comes_before_hot_when_thresholds_allow_both():
    thresholds = ClassThresholds(idle_hour_share=0.5, hot_hour_share=0.5)
    assert classify_node(series((12, 0.0), (12, 95.0)), thresholds).node_class == IDLE


def test_node_swinging_by_twenty_points_is_fluctuating():
    # Alternating 10% and 50%: mean 30, every deviation 20 points, so the std-dev is exactly 20.
    outcome = classify_node([10.0, 50.0] * 12)
    assert outcome.stddev_pct == 20.0
    assert outcome.node_class == FLUCTUATING
    assert outcome.reason == "spread"


def test_node_swinging_a_little_less_is_steady():
    outcome = classify_node([10.2, 49.8] * 12)
    assert outcome.stddev_pct == pytest.approx(19.8)
    assert outcome.node_class == STEADY
    assert outcome.reason == "steady"


def test_steady_node_reports_its_numbers():
    outcome = classify_node([25.0, 35.0] * 12)
    assert outcome == NodeClassResult(
        node_id=0,
        node_class=STEADY,
        covered_hours=24,
        mean_util_pct=30.0,
        idle_hour_share=0.0,
        hot_hour_share=0.0,
        stddev_pct=5.0,
        reason="steady",
    )


def test_stddev_is_the_population_stddev_of_covered_hours():
    # Mean 5; squared deviations 9+1+1+1+0+0+4+16 = 32; 32 / 8 = 4; sqrt = 2.
    # (The sample std-dev would be sqrt(32 / 7) = 2.14.)
    outcome = classify_node([2.0, 4.0, None, 4.0, 4.0, 5.0, 5.0, None, 7.0, 9.0])
    assert outcome.covered_hours == 8
    assert outcome.mean_util_pct == 5.0
    assert outcome.stddev_pct == 2.0


def test_thresholds_are_the_callers():
    strict = ClassThresholds(fluctuation_pct=4.0, min_covered_hours=1)
    assert classify_node([25.0, 35.0], strict).node_class == FLUCTUATING


# Input checks


def test_rows_carry_the_node_id():
    assert classify_node(node_rows(42, series((24, 0.0)))).node_id == 42


@pytest.mark.parametrize("bad", [-0.1, 100.1, math.nan, math.inf])
def test_utilization_outside_zero_to_hundred_is_refused(bad):
    with pytest.raises(ValueError, match="0-100"):
        classify_node([*series((23, 10.0)), bad])


def test_one_call_takes_one_nodes_rows():
    with pytest.raises(ValueError, match="one node"):
        classify_node(node_rows(1, [0.0]) + node_rows(2, [0.0]))


def test_an_hour_counted_twice_is_refused():
    with pytest.raises(ValueError, match="more than once"):
        classify_node(node_rows(1, [0.0, 5.0]) + node_rows(1, [0.0]))


@pytest.mark.parametrize(
    "options",
    [{"idle_hour_share": 0.0}, {"hot_hour_share": 1.5}, {"hot_util_pct": 120.0}, {"min_covered_hours": 0}],
)
def test_thresholds_out_of_range_are_refused(options):
    with pytest.raises(ValueError, match="must be"):
        ClassThresholds(**options)


# Several nodes


def test_classify_nodes_groups_rows_and_sorts_by_node_id():
    rows = [
        *node_rows(7, series((48, 95.0))),
        *node_rows(3, series((48, 0.0))),
        *node_rows(5, series((5, 40.0), (43, None))),
    ]
    rows.reverse()
    outcome = classify_nodes(rows)
    assert [(r.node_id, r.node_class) for r in outcome] == [(3, IDLE), (5, UNKNOWN), (7, HOT)]


def test_class_shares_leave_unknown_nodes_out_of_the_denominator():
    results = [
        result(1, IDLE),
        result(2, IDLE),
        result(3, HOT),
        result(4, STEADY),
        result(5, UNKNOWN),
    ]
    assert class_shares(results) == {IDLE: 0.5, HOT: 0.25, FLUCTUATING: 0.0, STEADY: 0.25}


def test_class_shares_without_classified_nodes_are_all_zero():
    expected = {IDLE: 0.0, HOT: 0.0, FLUCTUATING: 0.0, STEADY: 0.0}
    assert class_shares([]) == expected
    assert class_shares([result(1, UNKNOWN)]) == expected
