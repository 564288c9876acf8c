import json
from datetime import UTC, date, datetime

from django import template
from django.template.defaultfilters import floatformat, truncatechars
from django.urls import reverse
from django.utils import dateformat
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from plotly.graph_objects import Figure

from efficiency.charts.theme import ChartJSON, chart_json
from efficiency.charts.toolkit import clock_duration
from efficiency.choices import JobState, NodeClass, NodeState
from efficiency.gpu_shares import MILLI_PER_GPU, gpus_text
from efficiency.markdown_text import markdown_code, markdown_text
from efficiency.times import display_time

register = template.Library()


@register.simple_tag
def plotly_chart(figure: "Figure | dict | ChartJSON", element_id: str) -> str:
    """A chart placeholder plus its figure as escaped JSON; static/efficiency/js/charts.js draws it.

    ``figure`` is a Plotly figure, a figure dict (``efficiency.charts.theme.figure_dict``) or one
    already encoded (``ChartJSON``, as the pages' cache keeps it). The markup is what
    ``json_script`` writes."""
    data_id = f"{element_id}-data"
    chart = chart_json(figure)
    return format_html(
        '<div class="chart" id="{}" data-plotly="{}" role="img" aria-label="{}"></div>'
        '<script id="{}" type="application/json">{}</script>',
        element_id,
        data_id,
        chart.title,
        data_id,
        mark_safe(chart.escaped_json),  # noqa: S308 -- escaped as json_script escapes
    )


@register.filter(expects_localtime=False)
def when(moment: datetime | date | None, fmt: str = "Y-m-d H:i") -> str:
    """A stored moment in the display time zone, formatted like Django's ``date`` filter.

    Unlike ``date``, a moment the display time zone cannot hold (year 1 or 9999) is shown in UTC
    with its zone named, instead of failing the whole page.
    """
    if moment is None or moment == "":
        return ""
    if not isinstance(moment, datetime):
        return dateformat.format(moment, fmt)
    local = display_time(moment)
    text = dateformat.format(local, fmt)
    # display_time falls back to datetime.UTC itself; the display zone is a zoneinfo, even "UTC".
    return f"{text} UTC" if local.tzinfo is UTC else text


@register.filter
def md(value: object) -> str:
    """Data as literal inline Markdown (the Markdown fault report; see efficiency.markdown_text)."""
    return "" if value is None else markdown_text(value)


@register.filter
def md_code(value: object) -> str:
    """Data as an inline Markdown code span that it cannot break out of."""
    return markdown_code("" if value is None else value)


@register.simple_tag(takes_context=True)
def export_url(context, export: str = "csv") -> str:
    """The link of a "Download CSV": this page's query string without ``page``, plus ``export``.

    Every filter and the range stay, so the download holds exactly the rows the page shows (all
    of them, not one page). Relative (``?…``): it resolves against the page the browser shows,
    also when it is rendered in an htmx partial that was fetched with the page's query string.
    """
    query = context["request"].GET.copy()
    for name in ("page", "export"):
        query.pop(name, None)
    query["export"] = export
    return "?" + query.urlencode()


# Parameters of the range picker itself, and those that make no sense on another range.
RANGE_PARAMETERS = ("range", "start", "end", "page", "export")


def _other_parameters(request):
    query = request.GET.copy()
    for name in RANGE_PARAMETERS:
        query.pop(name, None)
    return query


@register.simple_tag(takes_context=True)
def range_url(context, key: str) -> str:
    """The link of a range preset: ``?range=<key>`` plus every other parameter of this page.

    A department, a GPU model or a filter the reader chose stays when they switch to "7 days";
    the custom range's days and the page number go.
    """
    query = _other_parameters(context["request"])
    query["range"] = key
    return "?" + query.urlencode()


@register.simple_tag(takes_context=True)
def other_parameters_as_hidden_inputs(context) -> str:
    """Hidden inputs for this page's parameters other than the range's: the custom range form
    keeps them, as the presets do."""
    query = _other_parameters(context["request"])
    return format_html_join(
        "", '<input type="hidden" name="{}" value="{}">', ((n, v) for n in query for v in query.getlist(n))
    )


@register.filter
def pretty_json(value: object) -> str:
    """Indented JSON for config snapshots (autoescaped by the template like any string)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds as a clock, ``02:03:04`` / ``1d 02:03:04``; "—" when unknown (job waits, run times)."""
    return clock_duration(seconds)


@register.filter
def pct(ratio: float | None) -> str:
    """A 0-1 ratio as "31.2%"; "—" when unknown (no samples is not 0%)."""
    if ratio is None:
        return "—"
    return f"{ratio * 100:.1f}%"


@register.filter
def signed_points(points: float | None) -> str:
    """A change in percentage points, signed: "+4.5 pp" ("+4.5 个百分点")."""
    if points is None:
        return "—"
    # Translators: a signed change in percentage points, e.g. "+4.5 pp".
    return _("%(points)s pp") % {"points": f"{points:+.1f}"}


@register.filter
def percentage(share: float | None) -> str:
    """A 0-1 share as a whole percentage: "87%"."""
    return "—" if share is None else f"{share * 100:.0f}%"


@register.filter
def node_class_label(node_class: str) -> str:
    try:
        return NodeClass(node_class).label
    except ValueError:
        return node_class


def _choice_label(choices, value: str):
    try:
        return choices(value).label
    except ValueError:
        return value


@register.filter
def job_state_label(state: str):
    """``job.get_state_display`` without its cost: Django hashes every choice's lazy label on
    each call, a tenth of a table's render time for 50 rows."""
    return _choice_label(JobState, state)


@register.filter
def node_state_label(state: str):
    """``node.get_state_display`` without hashing every choice's lazy label on each row."""
    return _choice_label(NodeState, state)


def _detail_prefix(url_name: str) -> str:
    """The path of a detail page up to its id (``/nodes/``), reversed once a table: each row
    appends ``<pk>/``."""
    return reverse(url_name, args=[0]).removesuffix("0/")


def _table_rows(rows: list[str], *, columns: int, empty: str) -> str:
    """Rows written by the tags below, or the one row saying the table is empty, as safe markup:
    each tag escapes every value it puts in its rows."""
    if not rows:
        rows = [f'<tr><td colspan="{columns}">{escape(empty)}</td></tr>']
    return mark_safe("\n".join(rows))  # noqa: S308 -- every value in the rows is escaped


@register.simple_tag
def node_rows(nodes) -> str:
    """The node table's rows (``partials/node_table.html``), written in one Python loop.

    The same markup the template loop wrote (``tests/views/test_node_rows.py`` compares them):
    on a department page of a few hundred nodes, the template engine's work per cell was a third
    of the page's own time.
    """
    yes, no = _("yes,no").split(",")[:2]
    unowned = _("Unowned")
    prefix = _detail_prefix("efficiency:node-detail")
    rows = []
    for node in nodes:
        owner = node.owner_department.name if node.owner_department_id else ""
        rows.append(
            "<tr>"
            f'<td><a href="{prefix}{node.pk}/">{escape(node.hostname)}</a></td>'
            f"<td>{escape(node.cluster.name)}</td>"
            f"<td>{escape(node.gpu_model)}</td>"
            f'<td class="num">{node.gpu_count}</td>'
            f"<td>{escape(yes if node.rdma_capable else no)}</td>"
            f"<td>{escape(node.fault_domain)}</td>"
            f'<td><span class="state state-{escape(node.state)}">'
            f"{escape(node_state_label(node.state))}</span></td>"
            f"<td>{escape(owner or unowned)}</td>"
            "</tr>"
        )
    return _table_rows(rows, columns=8, empty=_("No nodes to show."))


@register.simple_tag
def idle_rows(idle_allocations) -> str:
    """The department jobs part's idle-allocation rows, written in one Python loop (the markup of
    the template loop they replaced: ``tests/views/test_node_rows.py``)."""
    prefix = _detail_prefix("efficiency:job-detail")
    rows = [
        "<tr>"
        f'<td><a href="{prefix}{idle.job.pk}/">{escape(idle.job.external_id)}</a></td>'
        f"<td>{escape(truncatechars(idle.job.name, 40))}</td><td>{escape(idle.job.user_name)}</td>"
        f"<td>{escape(when(idle.start))}</td><td>{escape(when(idle.end))}</td>"
        f'<td class="num">{idle.idle_hours}</td><td class="num">{floatformat(idle.wasted_gpu_hours, 1)}</td>'
        "</tr>"
        for idle in idle_allocations
    ]
    return _table_rows(rows, columns=7, empty=_("No idle allocations in this range."))


@register.simple_tag
def job_usage_rows(jobs_usage) -> str:
    """The department jobs part's rows of jobs by GPU-hours, written in one Python loop (the
    markup of the template loop they replaced: ``tests/views/test_node_rows.py``)."""
    prefix = _detail_prefix("efficiency:job-detail")
    unknown = f'<small class="muted placement-unknown">{escape(_("placement unknown"))}</small>'
    rows = []
    for row in jobs_usage:
        job = row.job
        rows.append(
            "<tr>"
            f'<td><a href="{prefix}{job.pk}/">{escape(job.external_id)}</a></td>'
            f"<td>{escape(truncatechars(job.name, 40))}</td><td>{escape(job.user_name)}</td>"
            f'<td><span class="state state-{escape(job.state)}">'
            f"{escape(job_state_label(job.state))}</span></td>"
            f'<td class="num">{escape(job.gpus_text)}</td>'
            f'<td class="num">{floatformat(row.gpu_hours, 1)}</td>'
            f'<td class="num">{escape(pct(row.efficiency)) if row.placed else unknown}</td>'
            "</tr>"
        )
    return _table_rows(rows, columns=7, empty=_("No jobs held GPUs in this range."))


@register.filter
def gpus(count: float | int | None) -> str:
    """A number of GPUs that may hold shares, without trailing zeros: 8.0 → "8", 0.37 → "0.37"."""
    if count is None:
        return "—"
    return gpus_text(round(count * MILLI_PER_GPU))
