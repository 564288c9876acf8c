"""Showing stored moments: in the display time zone, or in UTC where that zone cannot hold them.

A job row can carry a time at the very edge of what ``datetime`` holds (year 1 or 9999: a broken
clock, a placeholder date in a scheduler's record). Shifting it into the display time zone then
overflows; the row must still be shown, so such a moment is shown in UTC and says so.
"""

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

from django.utils import timezone

from efficiency.days import day_of


def display_time(moment: datetime, zone: tzinfo | None = None) -> datetime:
    """``moment`` in ``zone`` (the current time zone by default), or in UTC when that would leave
    years 1–9999."""
    try:
        return timezone.localtime(moment, zone)
    except OverflowError:
        return moment.astimezone(UTC)


def portal_day_zone() -> ZoneInfo:
    """The zone whose midnights cut portal days (efficiency.days): the display zone, TIME_ZONE.

    The default zone, not the current one: a day rollup is stored once for everybody, so it
    cannot follow a zone activated for one request.
    """
    return timezone.get_default_timezone()


def portal_day_text(moment: datetime, pattern: str = "%Y-%m-%d") -> str:
    """The portal day ``moment`` falls in, as text: day labels and export file names."""
    return f"{day_of(moment, portal_day_zone()):{pattern}}"
