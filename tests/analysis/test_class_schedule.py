"""When a node that has no class yet will first be classified."""

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.class_schedule import first_classification_day

NOW = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
SHANGHAI = ZoneInfo("Asia/Shanghai")


def expected(covered, zone=UTC, *, min_hours=24, cycle_days=14) -> date | None:
    return first_classification_day(
        covered, now=NOW, zone=zone, min_covered_hours=min_hours, cycle_days=cycle_days
    )


def test_a_node_without_samples_needs_a_whole_day_after_the_rest_of_today():
    # 08:00-23:00 today is 16 hours (< 24); with tomorrow's 24 the cycle ending on the 22nd has 40.
    assert expected([]) == date(2026, 11, 22)


def test_hours_already_covered_count_towards_the_next_night():
    # 10 covered hours before this one (19 Nov 22:00 - 20 Nov 07:00) plus 16 more today from the
    # hour under way: 26, tonight's run.
    covered = [datetime(2026, 11, 19, 22, tzinfo=UTC) + timedelta(hours=n) for n in range(11)]
    assert expected(covered) == date(2026, 11, 21)


def test_days_are_portal_days_in_the_display_zone():
    # 16:30 in Shanghai: 8 hours left today (08:00-16:00 UTC), then a whole Shanghai day; that
    # cycle ends at midnight starting 22 November, Shanghai time.
    assert expected([], SHANGHAI) == date(2026, 11, 22)


def test_a_threshold_larger_than_the_cycle_is_never_reached():
    assert expected([], min_hours=14 * 24 + 1) is None


def test_hours_outside_the_next_cycle_do_not_count():
    old = [datetime(2026, 10, 1, tzinfo=UTC) + timedelta(hours=n) for n in range(100)]
    assert expected(old) == expected([])


hour_offsets = st.lists(st.integers(min_value=-20 * 24, max_value=0), unique=True)


@given(offsets=hour_offsets, extra=hour_offsets, min_hours=st.integers(1, 14 * 24))
def test_more_coverage_never_delays_the_first_class(offsets, extra, min_hours):
    base = NOW.replace(minute=0)
    few = [base + timedelta(hours=n) for n in offsets]
    more = few + [base + timedelta(hours=n) for n in extra]
    early, late = expected(more, min_hours=min_hours), expected(few, min_hours=min_hours)
    assert early is not None
    assert late is not None
    assert date(2026, 11, 21) <= early <= late <= date(2026, 11, 21) + timedelta(days=14)
