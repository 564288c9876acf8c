"""The verification chart: both windows, their levels and the level the expected gain promised."""

from datetime import date

import pytest

from efficiency.charts.tickets import verification_figure


def _figure(**overrides):
    values = {
        "before_days": [date(2026, 11, 20), date(2026, 11, 21)],
        "before_values": [2.0, None],
        "after_days": [date(2026, 11, 27)],
        "after_values": [1.0],
        "title": "Before and after",
        "metric_label": "Seconds per iteration",
        "before_label": "Before",
        "after_label": "After",
        "before_level": 2.0,
        "after_level": 1.0,
        "expected_level": 1.2,
        "expected_label": "Expected",
    }
    values.update(overrides)
    return verification_figure(**values)


def test_both_windows_their_levels_and_the_expected_level_are_drawn():
    figure = _figure()
    names = [trace.name for trace in figure.data]
    assert names == ["Before", "After", "Before", "After", "Expected"]
    assert list(figure.data[0].y) == [2.0, None]  # a day without a value is a gap
    expected = figure.data[4]
    assert list(expected.x) == [date(2026, 11, 27), date(2026, 11, 27)]
    assert list(expected.y) == [1.2, 1.2]
    # Only the expected level has a legend entry of its own; the levels share their window's colour.
    assert [trace.showlegend for trace in figure.data[2:]] == [False, False, True]


def test_levels_that_are_unknown_are_left_out():
    figure = _figure(before_level=None, after_level=None, expected_level=None)
    assert [trace.name for trace in figure.data] == ["Before", "After"]


def test_an_after_window_without_points_puts_the_expected_level_over_the_before_window():
    figure = _figure(after_days=[], after_values=[], after_level=None)
    assert list(figure.data[-1].x) == [date(2026, 11, 20), date(2026, 11, 21)]


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="before_values"):
        _figure(before_values=[1.0])


def test_labels_are_escaped():
    figure = _figure(before_label="<b>x</b>")
    assert figure.data[0].name == "&lt;b&gt;x&lt;/b&gt;"
