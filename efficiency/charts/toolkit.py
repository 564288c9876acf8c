"""The chart toolkit: what every chart module shares, in one place.

Colours that mean the same on every page, chart sizes, the argument checks, hover lines, and how
a number or a duration is written. A chart module (usage, quotas, faults, inventory) imports from
here and from ``theme`` (the look), never from another chart module: the import-linter contract
"Chart modules are independent" in pyproject.toml holds them to it. Views and template tags take
their duration text from here too, so a duration reads the same in a table, a card and a chart.
"""

from collections.abc import Mapping, Sequence

from django.utils.translation import gettext as _

# What a colour means, the same in every chart: the GPUs one has (owned, guaranteed, capacity)
# dark, the GPUs in use blue, the GPUs allocated light blue.
OWNED_COLOR = "#374151"
BUSY_COLOR = "#1f77b4"
ALLOCATED_COLOR = "#9ecae1"

PERCENT_RANGE = [0, 100]

# Chart heights: charts with a row per item grow with the rows, between these bounds.
MIN_HEIGHT_PX = 320
MAX_HEIGHT_PX = 1400
# One row per department (or job, or category) of a horizontal bar chart, and the room its
# title, axis and legend take.
DEPARTMENT_ROW_PX = 56
DEPARTMENT_CHROME_PX = 140
# Past this many entries a legend below the plot takes too many lines: it moves aside.
HORIZONTAL_LEGEND_MAX_ENTRIES = 8


def check_lengths(
    reference_name: str, reference: Sequence[object], sequences: Mapping[str, Sequence[object]]
) -> None:
    """Raise ValueError when a sequence does not have one value per item of ``reference``."""
    for name, values in sequences.items():
        if len(values) != len(reference):
            raise ValueError(f"{name!r} has {len(values)} values, but {reference_name} has {len(reference)}")


def hover_line(name: str, value_template: str, *, prefix: str = "") -> str:
    """A hover template naming its series: ``"{prefix}{name}: {value}"`` without Plotly's side box.

    Unified hover shows only the template's text, so the series name goes in it explicitly.
    """
    return f"{prefix}{name}: {value_template}<extra></extra>"


def clamp_height(height_px: int) -> int:
    """``height_px`` kept between MIN_HEIGHT_PX and MAX_HEIGHT_PX."""
    return max(MIN_HEIGHT_PX, min(MAX_HEIGHT_PX, height_px))


def percent_text(value_pct: float | None) -> str:
    """A percentage (0-100) as a bar label, "45%"; blank for None (no bar, no label)."""
    return "" if value_pct is None else f"{value_pct:.0f}%"


def duration_text(seconds: float | None) -> str:
    """A duration as people say it, in the active language: "45 s", "2.5 min", "30 min", "1.5 h".

    The one way the portal writes a time to detect, locate or recover, in tables, cards, reports
    and charts alike; "—" when unknown.
    """
    if seconds is None:
        return "—"
    whole = round(seconds)
    if whole < 60:
        return _("%(n)s s") % {"n": whole}
    if whole < 3600:
        return _("%(n)s min") % {"n": _short_number(whole / 60)}
    return _("%(n)s h") % {"n": _short_number(whole / 3600)}


def clock_duration(seconds: float | None) -> str:
    """A duration to the second, as a clock: "02:03:04", with whole days first: "9d 01:02:03".

    For waits and run times of jobs and source lags, where the seconds matter (a job's run time
    is checked against the scheduler's own); "—" when unknown.
    """
    if seconds is None:
        return "—"
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    # Translators: a duration of whole days and a clock time, e.g. "9d 01:02:03".
    return _("%(days)sd %(clock)s") % {"days": days, "clock": clock} if days else clock


def _short_number(value: float) -> str:
    # One decimal where it matters (2.5 min), none where it is noise (42 min).
    text = f"{value:.1f}" if value < 10 else f"{value:.0f}"
    return text.removesuffix(".0")
