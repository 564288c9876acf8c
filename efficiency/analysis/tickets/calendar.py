"""The working calendar a ticket's SLA is counted in: business hours on working days, in one zone.

A ticket due in "8 business hours" is due after eight hours of the department's working time have
passed, not eight hours of the clock: nights, weekends and public holidays do not count, and neither
do the stretches in which the ticket waited on the department (the ``paused`` intervals).

China moves working days around its public holidays (调休): some Saturdays and Sundays become working
days, so holidays and extra working days are both data (``holidays_from_json``), not rules.

All arithmetic is done on aware datetimes in UTC with ``timedelta`` (exact to the microsecond), so a
working day of 9:00-18:00 local is nine hours even on the day a zone with DST changes its clock at
night, and measuring what ``add_business_seconds`` added gives back exactly the same seconds.
"""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo

Pause = tuple[datetime, datetime]
SlaStatus = Literal["ok", "due_soon", "overdue"]

CHINA_HOLIDAYS_JSON = Path(__file__).parent / "data" / "holidays-cn.json"

# A calendar with no working day for ten years is misconfigured; stop rather than loop forever.
_MAX_IDLE_DAYS = 3660
DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class WorkingCalendar:
    """Working hours ``day_start``-``day_end`` (local to ``zone``) on working days.

    A day works when it is an ``extra_workdays`` date, or when its weekday (Monday = 0) is in
    ``weekdays`` and it is not one of the ``holidays``.
    """

    zone: str = "Asia/Shanghai"
    day_start: time = time(9)
    day_end: time = time(18)
    weekdays: frozenset[int] = frozenset(range(5))
    holidays: frozenset[date] = frozenset()
    extra_workdays: frozenset[date] = frozenset()

    def __post_init__(self) -> None:
        ZoneInfo(self.zone)  # an unknown zone fails here, not at the first due date
        for name in ("weekdays", "holidays", "extra_workdays"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        if not self.day_start < self.day_end:
            raise ValueError(f"The working day must start before it ends: {self.day_start}-{self.day_end}.")
        if not self.weekdays <= set(range(7)):
            raise ValueError(f"Weekdays are 0 (Monday) to 6 (Sunday), not {sorted(self.weekdays)}.")
        both = self.holidays & self.extra_workdays
        if both:
            raise ValueError(f"Dates both holiday and working day: {sorted(both)}.")

    def is_workday(self, day: date) -> bool:
        """Whether ``day`` (a local date) has working hours."""
        if day in self.extra_workdays:
            return True
        return day.weekday() in self.weekdays and day not in self.holidays

    def business_seconds_between(
        self, start: datetime, end: datetime, *, paused: Iterable[Pause] = ()
    ) -> float:
        """Working seconds in ``[start, end)`` outside the ``paused`` intervals.

        Datetimes must be aware, in any zone. Negative when ``end`` is before ``start``.
        """
        return self._business_time(_utc(start), _utc(end), _merge(paused)).total_seconds()

    def add_business_seconds(
        self, start: datetime, seconds: float, *, paused: Iterable[Pause] = ()
    ) -> datetime:
        """The earliest instant at which ``seconds`` of working time have passed since ``start``.

        Time inside ``paused`` does not count. The result is in ``start``'s zone; it may be the
        end of a working day (Friday 18:00 rather than Monday 9:00).
        """
        if seconds < 0:
            raise ValueError(f"Business seconds to add must not be negative: {seconds}.")
        remaining = timedelta(seconds=seconds)
        if not remaining:
            return start
        since = _utc(start)
        pauses = _merge(paused)
        for opens, closes in self._working_hours_from(since):
            for free_from, free_to in _unpaused(max(opens, since), closes, pauses):
                if free_to - free_from >= remaining:
                    return (free_from + remaining).astimezone(start.tzinfo)
                remaining -= free_to - free_from
        raise AssertionError("unreachable: _working_hours_from never ends")  # pragma: no cover

    def due_at(self, created: datetime, severity_hours: float, *, paused: Iterable[Pause] = ()) -> datetime:
        """When a ticket created at ``created`` with an SLA of ``severity_hours`` business hours is due."""
        return self.add_business_seconds(created, severity_hours * 3600, paused=paused)

    def sla_status(self, now: datetime, due: datetime, *, due_soon_s: float = 4 * 3600) -> SlaStatus:
        """ "overdue" from ``due`` on; "due_soon" when at most ``due_soon_s`` business seconds remain.

        Counting the remaining time in business seconds means a ticket due Monday 10:00 is already
        due soon on Friday evening: nobody works on it in between.
        """
        if _utc(now) >= _utc(due):
            return "overdue"
        if self.business_seconds_between(now, due) <= due_soon_s:
            return "due_soon"
        return "ok"

    def _hours_of(self, day: date) -> tuple[datetime, datetime]:
        zone = ZoneInfo(self.zone)
        opens = datetime.combine(day, self.day_start, tzinfo=zone).astimezone(UTC)
        closes = datetime.combine(day, self.day_end, tzinfo=zone).astimezone(UTC)
        return opens, closes

    def _local_date(self, moment: datetime) -> date:
        return moment.astimezone(ZoneInfo(self.zone)).date()

    def _business_time(self, start: datetime, end: datetime, pauses: list[Pause]) -> timedelta:
        if end < start:
            return -self._business_time(end, start, pauses)
        total = timedelta(0)
        day, last = self._local_date(start), self._local_date(end)
        while day <= last:
            if self.is_workday(day):
                opens, closes = self._hours_of(day)
                opens, closes = max(opens, start), min(closes, end)
                if opens < closes:
                    total += (closes - opens) - _paused_within(opens, closes, pauses)
            day += DAY
        return total

    def _working_hours_from(self, since: datetime) -> Iterator[tuple[datetime, datetime]]:
        """Each working day's hours in UTC, from the local day of ``since`` on, in order."""
        day = self._local_date(since)
        idle_days = 0
        while True:
            if self.is_workday(day):
                idle_days = 0
                yield self._hours_of(day)
            else:
                idle_days += 1
                if idle_days > _MAX_IDLE_DAYS:
                    raise ValueError("The calendar has no working day in ten years.")
            day += DAY


def holidays_from_json(path: Path | str) -> tuple[frozenset[date], frozenset[date]]:
    """Holidays and extra working days from a notices file such as ``data/holidays-cn.json``.

    Each notice lists holidays as named date ranges with the number of days the notice states
    (checked, so a mistyped date fails loudly) and the weekend dates that become working days.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    holidays: set[date] = set()
    workdays: set[date] = set()
    for notice in data["notices"]:
        for holiday in notice["holidays"]:
            first, last = date.fromisoformat(holiday["first"]), date.fromisoformat(holiday["last"])
            days = (last - first).days + 1
            if days != holiday["days"]:
                raise ValueError(
                    f"{holiday['name']} {first}..{last} spans {days} days; the notice says {holiday['days']}."
                )
            holidays.update(first + DAY * i for i in range(days))
        workdays.update(date.fromisoformat(day) for day in notice["extra_workdays"])
    return frozenset(holidays), frozenset(workdays)


def china_calendar() -> WorkingCalendar:
    """Asia/Shanghai, 9:00-18:00, Monday to Friday, with the State Council's holidays we ship."""
    holidays, workdays = holidays_from_json(CHINA_HOLIDAYS_JSON)
    return WorkingCalendar(holidays=holidays, extra_workdays=workdays)


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"Naive datetime {moment.isoformat()}: give a zone.")
    return moment.astimezone(UTC)


def _merge(paused: Iterable[Pause]) -> list[Pause]:
    """Pauses in UTC, sorted, overlapping ones merged (so their lengths can simply be added)."""
    spans = []
    for start, end in paused:
        start, end = _utc(start), _utc(end)
        if end < start:
            raise ValueError(f"A pause ends before it starts: {start.isoformat()} > {end.isoformat()}.")
        spans.append((start, end))
    merged: list[Pause] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _paused_within(start: datetime, end: datetime, pauses: list[Pause]) -> timedelta:
    total = timedelta(0)
    for pause_start, pause_end in pauses:
        overlap = min(end, pause_end) - max(start, pause_start)
        if overlap > timedelta(0):
            total += overlap
    return total


def _unpaused(start: datetime, end: datetime, pauses: list[Pause]) -> Iterator[tuple[datetime, datetime]]:
    """The pieces of ``[start, end)`` outside the (merged, sorted) pauses, in order."""
    for pause_start, pause_end in pauses:
        if pause_end <= start:
            continue
        if pause_start >= end:
            break
        if pause_start > start:
            yield start, pause_start
        start = max(start, pause_end)
    if start < end:
        yield start, end
