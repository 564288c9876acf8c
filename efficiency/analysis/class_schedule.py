"""When a node without a class will first be given one.

Nodes are classified nightly over the cycle of whole portal days that ended at the last midnight
(``efficiency.services.classification``), and a node needs ``min_covered_hours`` covered hours
(hours with samples) inside that cycle. A freshly connected node therefore shows "unknown" until
the first night after it has that many covered hours within whole days; this says which day that
is, assuming samples keep arriving every hour from now on. Plain Python: the zone and "now" are
arguments.
"""

from collections.abc import Iterable
from datetime import date, datetime, timedelta, tzinfo

from efficiency import days

HOUR = timedelta(hours=1)


def first_classification_day(
    covered_hours: Iterable[datetime],
    *,
    now: datetime,
    zone: tzinfo,
    min_covered_hours: int,
    cycle_days: int,
) -> date | None:
    """The portal day whose nightly run first classifies the node, or ``None`` when no cycle
    can ever hold ``min_covered_hours`` (a setting larger than the cycle).

    ``covered_hours`` are the starts of the node's hours with samples so far (any order). The
    hour under way and every later one are assumed covered. A cycle ending at midnight ``M`` is
    classified on the day that begins at ``M``; the first such day, from tomorrow on, whose cycle
    holds enough covered hours is the answer (today's run has already had its chance).
    """
    known = sorted(set(covered_hours))
    first_future = now.replace(minute=0, second=0, microsecond=0)
    for ahead in range(1, cycle_days + 2):
        cycle_end = days.day_start_after(now, ahead, zone)
        cycle_start = days.day_start_after(cycle_end, -cycle_days, zone)
        past = sum(1 for hour in known if cycle_start <= hour < cycle_end and hour < first_future)
        future_from = max(cycle_start, first_future)
        future = max(0, int((cycle_end - future_from) / HOUR)) if cycle_end > future_from else 0
        if past + future >= min_covered_hours:
            return days.day_of(cycle_end, zone)
    return None
