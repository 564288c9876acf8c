import json
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.tickets.calendar import (
    CHINA_HOLIDAYS_JSON,
    WorkingCalendar,
    china_calendar,
    holidays_from_json,
)

SH = ZoneInfo("Asia/Shanghai")
BERLIN = ZoneInfo("Europe/Berlin")
H = 3600
PLAIN = WorkingCalendar()  # Shanghai, 9-18, Monday to Friday, no holidays
CHINA = china_calendar()


def sh(*args):
    return datetime(*args, tzinfo=SH)


# 2026-03-06 is a Friday with no holiday near it.


def test_four_business_hours_from_friday_five_pm_are_due_monday_noon():
    assert PLAIN.due_at(sh(2026, 3, 6, 17), 4) == sh(2026, 3, 9, 12)
    assert PLAIN.business_seconds_between(sh(2026, 3, 6, 17), sh(2026, 3, 9, 12)) == 4 * H


def test_the_last_hour_of_friday_ends_on_friday_not_monday_morning():
    assert PLAIN.due_at(sh(2026, 3, 6, 17), 1) == sh(2026, 3, 6, 18)


def test_a_start_outside_working_hours_counts_from_the_next_opening():
    assert PLAIN.due_at(sh(2026, 3, 6, 21), 2) == sh(2026, 3, 9, 11)
    assert PLAIN.due_at(sh(2026, 3, 9, 7), 2) == sh(2026, 3, 9, 11)


def test_the_due_date_comes_back_in_the_zone_it_was_asked_in():
    created = datetime(2026, 3, 6, 9, tzinfo=UTC)  # 17:00 in Shanghai
    due = PLAIN.due_at(created, 4)
    assert due == datetime(2026, 3, 9, 4, tzinfo=UTC)
    assert due.tzinfo is UTC


def test_a_pause_over_the_weekend_changes_nothing():
    weekend = (sh(2026, 3, 6, 18), sh(2026, 3, 9, 9))
    assert PLAIN.due_at(sh(2026, 3, 6, 17), 4, paused=[weekend]) == sh(2026, 3, 9, 12)


def test_an_hour_waiting_on_the_department_moves_the_due_date_by_an_hour():
    waiting = (sh(2026, 3, 9, 9), sh(2026, 3, 9, 10))
    assert PLAIN.due_at(sh(2026, 3, 6, 17), 4, paused=[waiting]) == sh(2026, 3, 9, 13)
    measured = PLAIN.business_seconds_between(sh(2026, 3, 6, 17), sh(2026, 3, 9, 13), paused=[waiting])
    assert measured == 4 * H


def test_overlapping_pauses_are_not_subtracted_twice():
    pauses = [(sh(2026, 3, 9, 9), sh(2026, 3, 9, 11)), (sh(2026, 3, 9, 10), sh(2026, 3, 9, 12))]
    assert PLAIN.business_seconds_between(sh(2026, 3, 9, 9), sh(2026, 3, 9, 18), paused=pauses) == 6 * H


def test_qingming_is_skipped():
    # 2026-04-04..06 (Saturday to Monday) are holidays: Friday 17:00 + 4h is Tuesday noon.
    assert CHINA.due_at(sh(2026, 4, 3, 17), 4) == sh(2026, 4, 7, 12)


def test_an_adjusted_working_sunday_counts():
    # 2026-09-20 is a Sunday worked in exchange for the National Day week.
    assert CHINA.due_at(sh(2026, 9, 18, 17), 4) == sh(2026, 9, 20, 12)


def test_the_spring_festival_week_is_skipped_after_its_working_saturday():
    # 2026-02-14 (Saturday) is worked; 2026-02-15..23 are the holiday; Tuesday 24th is back to work.
    assert CHINA.due_at(sh(2026, 2, 13, 17), 4) == sh(2026, 2, 14, 12)
    assert CHINA.due_at(sh(2026, 2, 14, 17), 4) == sh(2026, 2, 24, 12)


def test_a_berlin_working_day_is_nine_hours_on_both_dst_changes():
    every_day = WorkingCalendar(zone="Europe/Berlin", weekdays=frozenset(range(7)))
    for day in (date(2026, 3, 29), date(2026, 10, 25)):  # the clocks change in the night before
        start = datetime.combine(day, time(0), tzinfo=BERLIN)
        end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=BERLIN)
        assert every_day.business_seconds_between(start, end) == 9 * H
        assert every_day.due_at(start, 9) == datetime.combine(day, time(18), tzinfo=BERLIN)


def test_across_the_spring_change_friday_to_monday_is_eighteen_hours_of_eighty_on_the_clock():
    berlin = WorkingCalendar(zone="Europe/Berlin")
    start, end = datetime(2026, 3, 27, 9, tzinfo=BERLIN), datetime(2026, 3, 30, 18, tzinfo=BERLIN)
    assert (end - start.astimezone(UTC)).total_seconds() == 80 * H
    assert berlin.business_seconds_between(start, end) == 18 * H


def test_measuring_backwards_gives_a_negative_count():
    assert PLAIN.business_seconds_between(sh(2026, 3, 9, 12), sh(2026, 3, 6, 17)) == -4 * H


def test_sla_status_counts_the_time_left_in_business_hours():
    due = sh(2026, 3, 9, 10)  # Monday
    assert PLAIN.sla_status(sh(2026, 3, 5, 9), due) == "ok"
    assert PLAIN.sla_status(sh(2026, 3, 6, 17, 30), due, due_soon_s=2 * H) == "due_soon"  # 1.5 h left
    assert PLAIN.sla_status(sh(2026, 3, 6, 17, 30), due, due_soon_s=H) == "ok"
    assert PLAIN.sla_status(due, due) == "overdue"


def test_bad_input_fails_loudly():
    with pytest.raises(ValueError, match="Naive"):
        PLAIN.due_at(datetime(2026, 3, 6, 17), 4)
    with pytest.raises(ValueError, match="negative"):
        PLAIN.add_business_seconds(sh(2026, 3, 6, 17), -1)
    with pytest.raises(ValueError, match="ends before it starts"):
        PLAIN.business_seconds_between(
            sh(2026, 3, 6), sh(2026, 3, 7), paused=[(sh(2026, 3, 7), sh(2026, 3, 6))]
        )
    with pytest.raises(ValueError, match="both holiday and working day"):
        WorkingCalendar(holidays={date(2026, 1, 4)}, extra_workdays={date(2026, 1, 4)})
    with pytest.raises(ValueError, match="start before it ends"):
        WorkingCalendar(day_start=time(18), day_end=time(9))
    with pytest.raises(ValueError, match="no working day"):
        WorkingCalendar(weekdays=frozenset()).due_at(sh(2026, 3, 6), 1)


# The State Council's notices, as shipped in data/holidays-cn.json.


@pytest.mark.parametrize(
    "day",
    [
        *[date(2025, 1, 1), date(2025, 1, 28), date(2025, 2, 4), date(2025, 5, 5), date(2025, 10, 8)],
        *[date(2026, 1, 2), date(2026, 2, 23), date(2026, 4, 6), date(2026, 6, 19), date(2026, 10, 7)],
    ],
)
def test_known_public_holidays_are_not_working_days(day):
    assert day.weekday() < 5 or day in CHINA.holidays
    assert not CHINA.is_workday(day)


@pytest.mark.parametrize(
    "day",
    [
        *[date(2025, 1, 26), date(2025, 2, 8), date(2025, 4, 27), date(2025, 9, 28), date(2025, 10, 11)],
        *[date(2026, 1, 4), date(2026, 2, 14), date(2026, 2, 28), date(2026, 5, 9), date(2026, 9, 20)],
        date(2026, 10, 10),
    ],
)
def test_adjusted_weekend_days_are_working_days(day):
    assert day.weekday() >= 5
    assert CHINA.is_workday(day)


def test_each_notice_has_its_source_and_a_year_of_dates():
    notices = json.loads(CHINA_HOLIDAYS_JSON.read_text(encoding="utf-8"))["notices"]
    assert [n["year"] for n in notices] == [2025, 2026]
    assert all(n["source_url"].startswith("https://") for n in notices)
    holidays, workdays = holidays_from_json(CHINA_HOLIDAYS_JSON)
    # 2025: 1 + 8 + 3 + 5 + 3 + 8 days; 2026: 3 + 9 + 3 + 5 + 3 + 3 + 7 days.
    assert len({d for d in holidays if d.year == 2025}) == 28
    assert len({d for d in holidays if d.year == 2026}) == 33
    assert len(workdays) == 11


def test_a_holiday_range_that_disagrees_with_its_day_count_is_refused(tmp_path):
    bad = {
        "notices": [
            {"holidays": [{"name": "春节", "first": "2026-02-15", "last": "2026-02-22", "days": 9}]}
            | {"extra_workdays": []}
        ]
    }
    path = tmp_path / "holidays.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ValueError, match="spans 8 days; the notice says 9"):
        holidays_from_json(path)


# Properties, over China's calendar, a Berlin one with DST and an odd one that works weekends.

CALENDARS = st.sampled_from(
    [
        CHINA,
        WorkingCalendar(zone="Europe/Berlin"),
        WorkingCalendar(
            zone="America/New_York",
            day_start=time(0, 30),
            day_end=time(23, 30),
            weekdays=frozenset({0, 2, 5, 6}),
        ),
    ]
)
MOMENTS = st.datetimes(
    min_value=datetime(2025, 1, 1),
    max_value=datetime(2026, 12, 31),
    timezones=st.sampled_from([SH, BERLIN, UTC]),
)
SECONDS = st.integers(min_value=0, max_value=300 * H)


@st.composite
def pauses(draw, near):
    spans = []
    for offset, length in draw(
        st.lists(st.tuples(st.integers(-50 * H, 500 * H), st.integers(0, 80 * H)), max_size=4)
    ):
        start = near + timedelta(seconds=offset)
        spans.append((start, start + timedelta(seconds=length)))
    return spans


@given(CALENDARS, MOMENTS, SECONDS, st.data())
def test_measuring_what_was_added_gives_it_back(calendar, start, seconds, data):
    paused = data.draw(pauses(start))
    due = calendar.add_business_seconds(start, seconds, paused=paused)
    assert due >= start
    assert calendar.business_seconds_between(start, due, paused=paused) == seconds


@given(CALENDARS, MOMENTS, SECONDS, SECONDS)
def test_more_business_time_is_never_due_earlier(calendar, start, a, b):
    a, b = sorted((a, b))
    assert calendar.add_business_seconds(start, a) <= calendar.add_business_seconds(start, b)


@given(CALENDARS, MOMENTS, SECONDS, SECONDS)
def test_counts_add_up_over_consecutive_spans(calendar, start, a, b):
    start = start.astimezone(UTC)  # so that adding seconds adds real time, DST or not
    middle, end = start + timedelta(seconds=a), start + timedelta(seconds=a + b)
    whole = calendar.business_seconds_between(start, end)
    parts = calendar.business_seconds_between(start, middle) + calendar.business_seconds_between(middle, end)
    assert whole == pytest.approx(parts, abs=1e-6)  # floats; the timedeltas inside are exact
    assert 0 <= whole <= a + b


@given(CALENDARS, MOMENTS, SECONDS, st.data())
def test_pauses_never_increase_the_count(calendar, start, seconds, data):
    end = start.astimezone(UTC) + timedelta(seconds=seconds)
    paused = data.draw(pauses(start))
    assert (
        0
        <= calendar.business_seconds_between(start, end, paused=paused)
        <= (calendar.business_seconds_between(start, end))
    )
