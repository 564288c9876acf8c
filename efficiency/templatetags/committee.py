"""Template helpers of the committee's pack pages."""

from datetime import datetime
from zoneinfo import ZoneInfo

from django import template
from django.urls import NoReverseMatch, reverse

from efficiency.committee_messages import decision_request_text

register = template.Library()


@register.simple_tag
def optional_url(name: str, *args) -> str:
    """The URL of ``name``, or "" while no such URL exists (a face another change adds)."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return ""


@register.filter
def item(mapping, key):
    """``mapping[key]`` for keys a template cannot spell (``charts|item:"dept:vision"``); "" if absent."""
    try:
        return mapping.get(key, "")
    except AttributeError:
        return ""


@register.filter
def dept_chart_key(code: str) -> str:
    return f"dept:{code}"


@register.filter
def pack_time(stamp: str | None, zone: ZoneInfo | None = None) -> str:
    """A pack's ISO UTC time in the pack's time zone, "2026-11-17 00:00"; "—" when missing."""
    if not stamp:
        return "—"
    try:
        moment = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return str(stamp)
    if zone is not None and moment.tzinfo is not None:
        moment = moment.astimezone(zone)
    return moment.strftime("%Y-%m-%d %H:%M")


@register.filter
def gpu_hours(value) -> str:
    """GPU-hours as a whole number with thousands separators; "—" when unknown."""
    if value is None or value == "":
        return "—"
    try:
        return f"{float(value):,.0f}"
    except (TypeError, ValueError):
        return str(value)


def _number(value) -> float | None:
    """A pack's number, or None for what is missing or not a number (a section without data)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@register.filter
def ratio(value) -> str:
    """A 0-1 ratio as "31.2%"; "—" when unknown."""
    number = _number(value)
    return "—" if number is None else f"{number * 100:.1f}%"


@register.filter
def seconds(value) -> str:
    """A duration in words ("3.7 h"); "—" when unknown."""
    from efficiency.charts.toolkit import duration_text

    number = _number(value)
    return "—" if number is None else duration_text(number)


@register.filter
def decision_request(item) -> str:
    """A requested decision of a pack, worded (``efficiency.committee_messages``)."""
    return decision_request_text(item) if isinstance(item, dict) else ""
