"""The portal day (efficiency.days): where days begin and end, across daylight-saving changes."""

from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from efficiency.days import (
    day_bounds,
    day_of,
    day_start,
    day_start_after,
    day_start_of,
    days_covering,
    whole_days_before,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
SHANGHAI = ZoneInfo("Asia/Shanghai")
# Clocks here jumped from 00:00 to 01:00 on 2024-09-08: that day had no midnight.
SANTIAGO = ZoneInfo("America/Santiago")
ZONES = [UTC, BERLIN, NEW_YORK, SHANGHAI, SANTIAGO, ZoneInfo("Australia/Lord_Howe"), ZoneInfo("Asia/Kolkata")]


def hours(span: timedelta) -> float:
    return span.total_seconds() / 3600


def test_spring_forward_day_lasts_23_hours_in_berlin():
    start, end = day_bounds(date(2026, 3, 29), BERLIN)
    assert start == datetime(2026, 3, 28, 23, 0, tzinfo=UTC)  # midnight at +01:00
    assert end == datetime(2026, 3, 29, 22, 0, tzinfo=UTC)  # midnight at +02:00
    assert hours(end - start) == 23


def test_fall_back_day_lasts_25_hours_in_berlin():
    start, end = day_bounds(date(2026, 10, 25), BERLIN)
    assert hours(end - start) == 25


def test_new_york_changeover_days_last_23_and_25_hours():
    spring = day_bounds(date(2026, 3, 8), NEW_YORK)
    autumn = day_bounds(date(2026, 11, 1), NEW_YORK)
    assert (hours(spring[1] - spring[0]), hours(autumn[1] - autumn[0])) == (23, 25)
    assert spring[0] == datetime(2026, 3, 8, 5, 0, tzinfo=UTC)


def test_shanghai_day_starts_at_sixteen_utc_the_day_before():
    assert day_start(date(2026, 11, 30), SHANGHAI) == datetime(2026, 11, 29, 16, 0, tzinfo=UTC)
    assert day_of(datetime(2026, 11, 29, 16, 0, tzinfo=UTC), SHANGHAI) == date(2026, 11, 30)
    assert day_of(datetime(2026, 11, 29, 15, 59, tzinfo=UTC), SHANGHAI) == date(2026, 11, 29)


def test_a_day_without_midnight_starts_when_the_clock_jumps():
    start = day_start(date(2024, 9, 8), SANTIAGO)
    assert start.astimezone(SANTIAGO).time().hour == 1  # 00:00 never happened
    assert day_of(start - timedelta(microseconds=1), SANTIAGO) == date(2024, 9, 7)
    assert hours(day_bounds(date(2024, 9, 8), SANTIAGO)[1] - start) == 23


def test_day_start_of_a_moment_is_the_last_local_midnight():
    moment = datetime(2026, 3, 29, 12, 0, tzinfo=UTC)  # 14:00 in Berlin
    assert day_start_of(moment, BERLIN) == datetime(2026, 3, 28, 23, 0, tzinfo=UTC)


def test_naive_moments_are_refused():
    with pytest.raises(ValueError, match="naive"):
        day_of(datetime(2026, 3, 29, 12, 0), BERLIN)


def test_days_covering_includes_partial_days_and_excludes_the_end():
    start = datetime(2026, 3, 28, 22, 0, tzinfo=UTC)  # 23:00 on the 28th in Berlin
    end = datetime(2026, 3, 29, 22, 0, tzinfo=UTC)  # midnight of the 30th: not included
    assert list(days_covering(start, end, BERLIN)) == [date(2026, 3, 28), date(2026, 3, 29)]
    assert list(days_covering(end, end, BERLIN)) == []


def test_whole_days_before_spans_days_not_multiples_of_24_hours():
    start, end = whole_days_before(datetime(2026, 4, 2, 9, 0, tzinfo=UTC), 14, BERLIN)
    assert end == datetime(2026, 4, 1, 22, 0, tzinfo=UTC)
    assert start == datetime(2026, 3, 18, 23, 0, tzinfo=UTC)  # still midnight, at +01:00
    assert hours(end - start) == 14 * 24 - 1
    with pytest.raises(ValueError, match="at least 1"):
        whole_days_before(end, 0, BERLIN)


def test_fourteen_days_after_a_midnight_is_a_midnight_even_over_a_clock_change():
    start = day_start(date(2026, 3, 20), BERLIN)
    end = day_start_after(start, 14, BERLIN)
    assert end.astimezone(BERLIN).replace(tzinfo=None) == datetime(2026, 4, 3)  # not 01:00
    assert hours(end - start) == 14 * 24 - 1
    assert day_start_after(end, -14, BERLIN) == start
    # The plain 14 x 24 hours would end an hour into the day.
    assert (start + timedelta(days=14)).astimezone(BERLIN).hour == 1


zones = st.sampled_from(ZONES)
moments = st.datetimes(
    min_value=datetime(1971, 1, 2),  # hypothesis takes naive bounds
    max_value=datetime(2037, 12, 30),
    timezones=st.just(UTC),
)


@given(moment=moments, zone=zones)
def test_every_moment_belongs_to_exactly_the_day_whose_bounds_hold_it(moment, zone):
    day = day_of(moment, zone)
    start, end = day_bounds(day, zone)
    assert start <= moment < end
    assert day_of(start, zone) == day
    assert day_of(start - timedelta(microseconds=1), zone) == day - timedelta(days=1)
    assert day_of(end, zone) == day + timedelta(days=1)


@given(moment=moments, zone=zones)
# Santiago skipped 1987-10-11 00:00 to 01:00: the day starts at 01:00, the instant before is the 10th.
@example(moment=datetime(1987, 10, 11, 4, 0, tzinfo=UTC), zone=SANTIAGO)
def test_day_start_is_local_midnight_unless_the_clock_skips_it(moment, zone):
    local = day_start_of(moment, zone).astimezone(zone)
    assert local.date() == day_of(moment, zone)
    if local.time() != time.min:
        # Only where local midnight did not exist: read back, it lands later in the day.
        midnight = datetime.combine(local.date(), time.min)
        assert midnight.replace(tzinfo=zone).astimezone(UTC).astimezone(zone).replace(tzinfo=None) != midnight
        # The instant before, in absolute time (aware arithmetic in one zone is wall-clock time).
        assert day_of(local.astimezone(UTC) - timedelta(microseconds=1), zone) < local.date()


@given(start=moments, span=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=120)), zone=zones)
def test_days_tile_a_range_without_gap_or_overlap(start, span, zone):
    end = start + span
    days = list(days_covering(start, end, zone))
    if span == timedelta(0):
        assert days == []
        return
    bounds = [day_bounds(day, zone) for day in days]
    assert bounds[0][0] <= start
    assert end <= bounds[-1][1]
    for (_, previous_end), (next_start, _) in pairwise(bounds):
        assert previous_end == next_start
    assert all(20 <= hours(day_end - day_begin) <= 26 for day_begin, day_end in bounds)
    assert days == [days[0] + timedelta(days=i) for i in range(len(days))]
