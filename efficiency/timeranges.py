"""The time range every usage, fault and queue reading is over: a plain value, no form.

Selectors take a ``TimeRange``; the range form (``efficiency.forms.RangeForm``) and the API
build one from the query parameters.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone


@dataclass(frozen=True)
class TimeRange:
    """A half-open UTC interval [start, end) on whole hours, as the rollups are."""

    key: str  # a preset key, or "custom"
    start: datetime
    end: datetime

    @property
    def duration(self) -> timedelta:
        return self.end - self.start

    @property
    def bucket(self) -> str:
        """Chart resolution: hours up to a week, days beyond (a readable number of points)."""
        return "hour" if self.duration <= timedelta(days=7) else "day"

    @property
    def bucket_seconds(self) -> int:
        return 3600 if self.bucket == "hour" else 86400

    def previous(self) -> "TimeRange":
        """The period of the same length just before, for trends."""
        return TimeRange(self.key, self.start - self.duration, self.start)

    def query(self) -> str:
        """URL parameters that reproduce this range (shared links show the same numbers)."""
        if self.key != "custom":
            return f"range={self.key}"
        tz = timezone.get_current_timezone()
        start = self.start.astimezone(tz).date()
        end = (self.end.astimezone(tz) - timedelta(days=1)).date()
        return f"range=custom&start={start.isoformat()}&end={end.isoformat()}"
