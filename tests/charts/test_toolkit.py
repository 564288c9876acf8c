"""The chart toolkit: the one place for the checks, hover lines and duration text every chart,
page and template tag shares."""

from datetime import datetime, timedelta

import pytest
from django.utils import translation

from efficiency.charts.toolkit import (
    MAX_HEIGHT_PX,
    MIN_HEIGHT_PX,
    check_lengths,
    clamp_height,
    clock_duration,
    duration_text,
    hover_line,
    percent_text,
)


@pytest.mark.parametrize(
    ("seconds", "english", "chinese"),
    [
        (0, "0 s", "0 秒"),
        (44.6, "45 s", "45 秒"),
        (59.4, "59 s", "59 秒"),
        (60, "1 min", "1 分钟"),
        (150, "2.5 min", "2.5 分钟"),
        (3120, "52 min", "52 分钟"),
        (3599, "60 min", "60 分钟"),
        (3600, "1 h", "1 小时"),
        (5400, "1.5 h", "1.5 小时"),
        (93_600, "26 h", "26 小时"),
    ],
)
def test_a_duration_is_said_in_the_readers_language(seconds, english, chinese):
    with translation.override("en"):
        assert duration_text(seconds) == english
    with translation.override("zh-hans"):
        assert duration_text(seconds) == chinese


def test_an_unknown_duration_is_a_dash():
    assert duration_text(None) == "—"
    assert clock_duration(None) == "—"


@pytest.mark.parametrize(
    ("seconds", "english", "chinese"),
    [
        (0, "00:00:00", "00:00:00"),
        (7500.9, "02:05:00", "02:05:00"),
        (86_399, "23:59:59", "23:59:59"),
        (86_400, "1d 00:00:00", "1天 00:00:00"),
        (15 * 86_400 + 12 * 3600, "15d 12:00:00", "15天 12:00:00"),
    ],
)
def test_a_clock_duration_counts_whole_days_in_the_readers_language(seconds, english, chinese):
    with translation.override("en"):
        assert clock_duration(seconds) == english
    with translation.override("zh-hans"):
        assert clock_duration(seconds) == chinese


def test_pages_template_tags_and_charts_write_a_duration_the_same_way():
    from efficiency.charts.faults import incident_phases_figure
    from efficiency.templatetags.faults import fault_duration
    from efficiency.templatetags.portal import duration
    from efficiency.views import faults as fault_views

    start = datetime(2024, 3, 4, 9, 0)
    end = start + timedelta(seconds=150)
    with translation.override("zh-hans"):
        figure = incident_phases_figure([("定位", start, end)], title="故障事件 7")
        assert list(figure.data[0].text) == ["2.5 分钟"]
        assert fault_duration(150) == "2.5 分钟"
        assert fault_views.duration_text is duration_text
        assert duration(86_400) == clock_duration(86_400) == "1天 00:00:00"


def test_lengths_that_differ_name_the_sequence_and_both_lengths():
    check_lengths("times", [1, 2], {"busy": [1, 2], "owned": [1, 2]})
    with pytest.raises(ValueError, match=r"'owned' has 1 values, but times has 2"):
        check_lengths("times", [1, 2], {"busy": [1, 2], "owned": [1]})


def test_a_hover_line_names_its_series_and_hides_plotlys_side_box():
    assert hover_line("Busy", "%{y:.1f}%") == "Busy: %{y:.1f}%<extra></extra>"
    assert hover_line("BEV", "%{x}", prefix="%{y}<br>") == "%{y}<br>BEV: %{x}<extra></extra>"


def test_heights_stay_between_the_bounds():
    assert clamp_height(10) == MIN_HEIGHT_PX
    assert clamp_height(MIN_HEIGHT_PX + 1) == MIN_HEIGHT_PX + 1
    assert clamp_height(10_000) == MAX_HEIGHT_PX


def test_a_missing_percentage_has_no_label():
    assert percent_text(None) == ""
    assert percent_text(44.6) == "45%"
