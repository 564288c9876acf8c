"""Sortable column headers: a link that sorts by the column and keeps every other parameter."""

from django import template
from django.utils.html import format_html
from django.utils.translation import gettext as _

register = template.Library()


@register.simple_tag(takes_context=True)
def sort_header(context, key: str, label: str) -> str:
    """A header link to ``?sort=<key>`` (or ``-<key>`` when already sorted by it ascending)
    with this page's filters and range kept and the page number dropped; the current column
    shows its direction, for screen readers too (``aria-sort`` belongs on the ``th``: see
    ``sort_state``)."""
    request = context["request"]
    current = context.get("sort") or ""
    query = request.GET.copy()
    for name in ("page", "export", "sort"):
        query.pop(name, None)
    query["sort"] = f"-{key}" if current == key else key
    marker = " ▲" if current == key else " ▼" if current == f"-{key}" else ""
    title = _("Sort by %(column)s") % {"column": label}
    return format_html(
        '<a href="?{}" class="sort-link" title="{}">{}{}</a>', query.urlencode(), title, label, marker
    )


@register.simple_tag(takes_context=True)
def sort_state(context, key: str) -> str:
    """``aria-sort`` for a column's ``th``: ascending, descending or none."""
    current = context.get("sort") or ""
    state = "ascending" if current == key else "descending" if current == f"-{key}" else "none"
    return format_html('aria-sort="{}"', state)
