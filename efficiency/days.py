"""The portal day: what "a day" means for rollups, node classes, quota cycles and exports.

A portal day is a calendar day in one time zone, the portal's display zone (``TIME_ZONE``, read
by ``efficiency.times.portal_day_zone``): the day a chart labels "3 March" is the same span of
time a day rollup, a cycle boundary or an export covers. It runs from the first instant of the
date in that zone up to the first instant of the next date, so it lasts 23 or 25 hours on a
daylight-saving change, and its start is the end of the gap in the rare zones whose clocks jump
over midnight.

Plain Python on purpose (no Django): analysis code takes the zone as an argument. Instants in
and out are timezone-aware; the bounds come back in UTC, as they are stored.
"""

from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta, tzinfo

ONE_DAY = timedelta(days=1)
_RESOLUTION = timedelta(microseconds=1)


def day_of(moment: datetime, zone: tzinfo) -> date:
    """The portal day ``moment`` (timezone-aware) falls in."""
    if moment.tzinfo is None:
        raise ValueError(f"a naive datetime has no day in {zone}: {moment!r}")
    return moment.astimezone(zone).date()


def day_start(day: date, zone: tzinfo) -> datetime:
    """The first instant of ``day`` in ``zone``, in UTC.

    Local midnight where it exists (the first one where the clock goes back over it); where the
    clock jumps over midnight, the first instant after the jump that carries the date.
    """
    first = datetime.combine(day, time.min, tzinfo=zone).astimezone(UTC)
    second = datetime.combine(day, time.min, tzinfo=zone).replace(fold=1).astimezone(UTC)
    early, late = min(first, second), max(first, second)
    if day_of(early, zone) == day:
        return early
    # Midnight falls in a gap: the day begins at the transition, somewhere in (early, late].
    while late - early > _RESOLUTION:
        middle = early + (late - early) / 2
        if day_of(middle, zone) >= day:
            late = middle
        else:
            early = middle
    return late


def day_bounds(day: date, zone: tzinfo) -> tuple[datetime, datetime]:
    """``[start, end)`` of ``day`` in ``zone`` as UTC instants (23, 24 or 25 hours apart)."""
    return day_start(day, zone), day_start(day + ONE_DAY, zone)


def day_start_of(moment: datetime, zone: tzinfo) -> datetime:
    """The start (UTC) of the portal day ``moment`` falls in: "today, midnight"."""
    return day_start(day_of(moment, zone), zone)


def day_start_after(moment: datetime, days: int, zone: tzinfo) -> datetime:
    """The start (UTC) of the portal day ``days`` days after ``moment``'s day (before it, when
    negative): whole days, so 14 days over a daylight-saving change are 14 x 24 +- 1 hours."""
    return day_start(day_of(moment, zone) + timedelta(days=days), zone)


def days_covering(start: datetime, end: datetime, zone: tzinfo) -> Iterator[date]:
    """Each portal day that shares time with ``[start, end)``, in order; none if it is empty."""
    if end <= start:
        return
    day, last = day_of(start, zone), day_of(end - _RESOLUTION, zone)
    while day <= last:
        yield day
        day += ONE_DAY


def whole_days_before(moment: datetime, days: int, zone: tzinfo) -> tuple[datetime, datetime]:
    """``[start, end)`` (UTC) of the ``days`` whole portal days that end where ``moment``'s day
    begins: a cycle of ``days`` days that ended at the last midnight."""
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days!r}")
    today = day_of(moment, zone)
    return day_start(today - timedelta(days=days), zone), day_start(today, zone)
