"""The review pack as files: a PDF (WeasyPrint, vector charts, CJK fonts embedded) and a ZIP of
CSV tables with a manifest of their SHA-256.

Both are rendered from the pack's sealed content only (``pack.content``), never from the live
tables: a change of the source data after sealing changes neither file. A department head gets
their copy (``department_copy``): the cover and their departments' parts.

The PDF is made from ``PRINT_TEMPLATE``; WeasyPrint needs Pango and its fonts, and when they
cannot be loaded ``ExportUnavailable`` says why (the page offers the CSV bundle instead).
"""

import base64
import csv
import hashlib
import io
import json
import re
import zipfile
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import PermissionDenied
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.translation import gettext as _

from efficiency.analysis.committee.copy import department_copy
from efficiency.charts.committee_print import pack_svg_charts
from efficiency.choices import Role
from efficiency.committee_messages import KPI_LABELS
from efficiency.models import ReviewPack
from efficiency.permissions import headed_departments
from efficiency.quota_explanation import pack_proposal_rows
from efficiency.scoping import user_role
from efficiency.spreadsheet import csv_cell_text

# The PDF's own layout (tables + charts as SVG images); the browser's print face is the pack
# page's sections (efficiency/committee/print.html).
PRINT_TEMPLATE = "efficiency/committee/print_pdf.html"
PDF_FONT_FAMILY = "'Noto Sans CJK SC', 'DejaVu Sans', sans-serif"


class PackNotFound(LookupError):
    """No review pack has that id."""


class ExportUnavailable(RuntimeError):
    """The PDF cannot be made on this server (WeasyPrint or its libraries are missing)."""


# --- Which pack, which copy --------------------------------------------------------------------


def pack_for_export(*, user, pk: int):
    """(pack, department codes of the reader's copy or None for the whole pack).

    Committee and platform admins get the whole pack; a department head gets their copy of any
    pack (their departments only). ``PackNotFound`` for an unknown id, PermissionDenied
    for anyone else.
    """
    role = user_role(user)
    if role not in (Role.COMMITTEE, Role.PLATFORM_ADMIN, Role.DEPARTMENT_HEAD):
        raise PermissionDenied
    try:
        pack = ReviewPack.objects.select_related("cluster").get(pk=pk)
    except ReviewPack.DoesNotExist:
        raise PackNotFound(pk) from None
    if role == Role.DEPARTMENT_HEAD:
        return pack, tuple(sorted(headed_departments(user).values_list("code", flat=True)))
    return pack, None


def _zone(pack):
    """The pack's time zone (where the committee meets): its times are shown there."""
    try:
        return ZoneInfo(pack.time_zone)
    except (ValueError, ZoneInfoNotFoundError):
        return UTC


def export_filename(pack, *, language: str, extension: str, department_codes=None) -> str:
    """``review-pack-<cluster>-<YYYYMMDD>-v<version>-<lang>[-<departments>].<ext>``."""
    # The period's first day where the committee meets (a Shanghai Monday starts on Sunday in UTC).
    day = pack.period_start.astimezone(_zone(pack)).strftime("%Y%m%d")
    words = ["review-pack", pack.cluster.slug, day, f"v{pack.version}", language.lower()]
    if department_codes is not None:
        words.append("-".join(department_codes) or "copy")
    safe = "-".join(words)
    return (
        "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in safe)[:180]
        + f".{extension}"
    )


# --- Which content --------------------------------------------------------------------------------


def export_content(pack, department_codes=None) -> dict:
    """The pack's content, or the copy of ``department_codes`` when given."""
    content = pack.content
    if department_codes is None:
        return content
    return department_copy(content, sorted(department_codes))


# --- Labels ----------------------------------------------------------------------------------------


def kpi_labels() -> dict[str, str]:
    return {key: str(label) for key, label in KPI_LABELS.items()}


def _number_text(value, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "ratio":
        return f"{100 * float(value):.1f}%"
    if unit == "seconds":
        from efficiency.charts.toolkit import duration_text

        return duration_text(float(value))
    if unit == "count":
        return f"{value:,}" if isinstance(value, int) else f"{float(value):,.0f}"
    return f"{float(value):,.1f}"


def _available(section) -> bool:
    return not (isinstance(section, dict) and section.get("available") is False)


def _reason(section) -> str:
    if isinstance(section, dict) and section.get("available") is False:
        return _(section.get("reason") or "") if section.get("reason") else ""
    return ""


def _data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def print_context(pack, content: dict, *, charts: dict[str, str]) -> dict:
    """What the print template reads: the content, its charts, and the rows made readable."""
    summary = content.get("summary") or {}
    labels = kpi_labels()
    kpis = []
    if _available(summary):
        for row in summary.get("kpis") or []:
            unit = row.get("unit", "")
            kpis.append(
                {
                    "key": row.get("key"),
                    "label": labels.get(row.get("key"), row.get("key")),
                    "value": _number_text(row.get("value"), unit),
                    "previous": _number_text(row.get("previous"), unit),
                    "target": _number_text(row.get("target"), unit),
                }
            )
    sections = {}
    for key in (
        "summary",
        "since_last",
        "cluster_section",
        "proposals",
        "capacity",
        "reliability",
        "recommendations",
        "tickets",
        "showback",
    ):
        section = content.get(key)
        sections[key] = {
            "available": section is not None and _available(section),
            "reason": _reason(section) if section is not None else _("not in this pack"),
        }
    # The PDF embeds each chart as an SVG image (data URI): still vector with its text as text,
    # but parsed by WeasyPrint's SVG reader alone, not as HTML (ten times faster, no clashing ids).
    chart_src = {key.replace(":", "_"): _data_uri(svg) for key, svg in charts.items()}
    departments = [
        {
            **department,
            "chart": charts.get(f"dept:{department.get('code')}"),
            "chart_src": chart_src.get(f"dept_{department.get('code')}"),
        }
        for department in content.get("departments") or []
    ]
    return {
        "pack": pack,
        "content": content,
        "charts": charts,
        "chart_src": chart_src,
        "kpis": kpis,
        "sections": sections,
        "departments": departments,
        "proposal_rows": pack_proposal_rows(content.get("proposals") or {}),
        "copy": content.get("copy"),
        "font_family": PDF_FONT_FAMILY,
        "zone": _zone(pack),
    }


# --- PDF -------------------------------------------------------------------------------------------


def _weasyprint():
    try:
        import weasyprint
    except (ImportError, OSError) as error:  # OSError: Pango / GObject libraries not found
        raise ExportUnavailable(f"WeasyPrint cannot be loaded on this server: {error}") from error
    return weasyprint


def pack_pdf(pack, *, language: str, department_codes=None) -> bytes:
    """The pack (or a department's copy) as a PDF in ``language``."""
    weasyprint = _weasyprint()
    content = export_content(pack, department_codes)
    with translation.override(language):
        charts = pack_svg_charts(content)
        html = render_to_string(PRINT_TEMPLATE, print_context(pack, content, charts=charts))
    # The charts' data URIs only: nothing in a pack makes the server fetch a URL or read a file.
    try:
        document = weasyprint.HTML(
            string=html, base_url=".", url_fetcher=weasyprint.URLFetcher(allowed_protocols=("data",))
        )
        return document.write_pdf()
    except OSError as error:
        raise ExportUnavailable(f"WeasyPrint could not render the pack: {error}") from error


# --- CSV bundle ------------------------------------------------------------------------------------


# A pack's times are ISO 8601 in UTC ("…Z"); a CSV is for people and shows them where the committee
# meets, each with its UTC offset (unambiguous when clocks go back).
UTC_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|\+00:00)$")


def _cell(value, zone=UTC):
    if isinstance(value, str) and UTC_STAMP.match(value):
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return moment.astimezone(zone).isoformat(timespec="seconds")
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(_("Yes") if value else _("No"))
    if isinstance(value, list | dict):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, str):
        return csv_cell_text(value)
    return value


def _csv_bytes(header: list[str], rows: list[list], zone=UTC) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([str(title) for title in header])
    for row in rows:
        writer.writerow([_cell(value, zone) for value in row])
    # With a BOM, so that spreadsheet programs read Chinese names right.
    return ("\ufeff" + buffer.getvalue()).encode("utf-8")


def _section(content: dict, key: str):
    section = content.get(key)
    return section if section is not None and _available(section) else None


def _tables(pack, content: dict) -> list[tuple[str, list[str], list[list]]]:
    tables = []
    period = content.get("period") or {}
    cover_rows = [
        [_("Cluster"), (content.get("cluster") or {}).get("name", "")],
        [_("Period start"), period.get("start")],
        [_("Period end"), period.get("end")],
        [_("Time zone"), period.get("time_zone")],
        [_("Pack version"), pack.version],
        [_("Definitions version"), content.get("definitions_version")],
        [_("Generated at"), content.get("generated_at")],
        [_("Content SHA-256"), pack.content_hash],
    ]
    if content.get("copy"):
        cover_rows.append([_("Copy for departments"), " ".join(content["copy"].get("departments") or [])])
    tables.append(("cover.csv", [_("Item"), _("Value")], cover_rows))

    summary = _section(content, "summary") or {}
    tables.append(
        (
            "kpis.csv",
            [_("Indicator"), _("Key"), _("Value"), _("Last cycle"), _("Target"), _("Unit"), _("Better")],
            [
                [
                    kpi_labels().get(r.get("key"), r.get("key")),
                    r.get("key"),
                    r.get("value"),
                    r.get("previous"),
                    r.get("target"),
                    r.get("unit"),
                    r.get("better"),
                ]
                for r in summary.get("kpis") or []
            ],
        )
    )

    states = (_section(content, "cluster_section") or {}).get("states") or {}
    keys = ["busy", "allocated_idle", "unallocated", "down"]
    tables.append(
        (
            "states_per_hour.csv",
            [
                _("Hour (UTC)"),
                _("Busy GPU-hours"),
                _("Allocated idle GPU-hours"),
                _("Unallocated GPU-hours"),
                _("Down GPU-hours"),
            ],
            [
                [hour, *[(states.get(k) or [None] * (i + 1))[i] for k in keys]]
                for i, hour in enumerate(states.get("hours") or [])
            ],
        )
    )

    departments = content.get("departments") if isinstance(content.get("departments"), list) else []
    hourly = []
    for d in departments:
        series = [d.get(k) or [] for k in ("guarantee", "within", "borrowed", "unused_guarantee")]
        for i, hour in enumerate(d.get("hours") or []):
            hourly.append([d.get("code"), hour, *[s[i] if i < len(s) else None for s in series]])
    tables.append(
        (
            "departments_per_hour.csv",
            [
                _("Department"),
                _("Hour (UTC)"),
                _("Guaranteed GPUs"),
                _("GPUs used within guarantee"),
                _("GPUs borrowed"),
                _("Unused guaranteed GPUs"),
            ],
            hourly,
        )
    )

    total_keys = [
        ("allocated_gpu_hours", _("Allocated GPU-hours")),
        ("busy_gpu_hours", _("Busy GPU-hours")),
        ("utilization", _("Utilization")),
        ("allocation_rate", _("Allocation rate")),
        ("guaranteed_gpu_hours", _("Guaranteed GPU-hours")),
        ("within_gpu_hours", _("GPU-hours within guarantee")),
        ("borrowed_gpu_hours", _("Borrowed GPU-hours")),
        ("lent_gpu_hours", _("Lent GPU-hours")),
        ("unused_guarantee_gpu_hours", _("Unused guarantee GPU-hours")),
        ("idle_gpu_hours", _("Idle GPU-hours")),
    ]
    tables.append(
        (
            "department_totals.csv",
            [_("Department"), _("Name"), *[label for _k, label in total_keys]],
            [
                [d.get("code"), d.get("name"), *[(d.get("totals") or {}).get(k) for k, _l in total_keys]]
                for d in departments
            ],
        )
    )

    pareto = content.get("pareto_idle") if isinstance(content.get("pareto_idle"), list) else []
    tables.append(
        (
            "pareto_idle.csv",
            [_("Department"), _("Cause"), _("Idle GPU-hours")],
            [[r.get("department"), r.get("cause"), r.get("gpu_hours")] for r in pareto],
        )
    )

    proposals = _section(content, "proposals") or {}
    tables.append(
        (
            "proposals.csv",
            [_("Department"), _("GPU model"), _("Current GPUs"), _("Proposed GPUs"), _("Explanation")],
            [
                [
                    r.get("department"),
                    r.get("gpu_model"),
                    r.get("current"),
                    r.get("proposed"),
                    " ".join(r["why"]),
                ]
                for r in pack_proposal_rows(proposals)
            ],
        )
    )

    capacity = _section(content, "capacity") or {}
    tables.append(
        (
            "capacity.csv",
            [_("GPU model"), _("Capacity (GPUs)"), _("Peak demand (GPUs)"), _("Unmet GPU-hours")],
            [
                [r.get("gpu_model"), r.get("capacity_gpus"), r.get("demand_peak"), r.get("unmet_gpu_hours")]
                for r in capacity.get("models") or []
            ],
        )
    )

    reliability = _section(content, "reliability") or {}
    tables.append(
        (
            "incidents.csv",
            [
                _("Incident"),
                _("Category"),
                _("Severity"),
                _("Node"),
                _("Occurred at (UTC)"),
                _("Recovered at (UTC)"),
                _("Lost GPU-hours"),
            ],
            [
                [
                    r.get("id"),
                    r.get("category"),
                    r.get("severity"),
                    r.get("node"),
                    r.get("occurred_at"),
                    r.get("recovered_at"),
                    r.get("lost_gpu_hours"),
                ]
                for r in reliability.get("incidents") or []
            ],
        )
    )
    phases = reliability.get("phases") or {}
    tables.append(
        (
            "phases.csv",
            [_("Phase"), _("Median (s)"), _("90th percentile (s)"), _("Longest (s)"), _("Incidents")],
            [
                [
                    name,
                    (phases.get(name) or {}).get("p50"),
                    (phases.get(name) or {}).get("p90"),
                    (phases.get(name) or {}).get("max"),
                    (phases.get(name) or {}).get("n"),
                ]
                for name in ("detect", "locate", "restart", "recover")
                if name in phases
            ],
        )
    )

    tickets = _section(content, "tickets") or {}
    ticket_rows = [
        [_("State"), state, count] for state, count in sorted((tickets.get("by_state") or {}).items())
    ]
    ticket_rows += [[_("Age"), r.get("bucket"), r.get("count")] for r in tickets.get("ageing") or []]
    tables.append(("tickets.csv", [_("Group"), _("Key"), _("Tickets")], ticket_rows))

    showback = _section(content, "showback") or {}
    showback_rows = []
    for r in showback.get("departments") or []:
        for m in r.get("by_model") or [{}]:
            showback_rows.append(
                [
                    r.get("code"),
                    r.get("name"),
                    m.get("gpu_model"),
                    m.get("charged_gpu_hours"),
                    m.get("rate"),
                    m.get("cost"),
                    r.get("cost"),
                    r.get("busy_gpu_hours"),
                    r.get("cost_per_effective_gpu_hour"),
                ]
            )
    central = showback.get("central")
    if central:
        showback_rows.append(
            [
                _("central"),
                _("Unallocated and down"),
                None,
                (central.get("unallocated_idle_gpu_hours") or 0) + (central.get("down_gpu_hours") or 0),
                None,
                central.get("cost"),
                central.get("cost"),
                None,
                None,
            ]
        )
    currency = (showback.get("rate_card") or {}).get("currency", "")
    tables.append(
        (
            "showback.csv",
            [
                _("Department"),
                _("Name"),
                _("GPU model"),
                _("Charged GPU-hours"),
                _("Rate (%(currency)s per GPU-hour)") % {"currency": currency},
                _("Cost by model"),
                _("Department cost"),
                _("Busy GPU-hours"),
                _("Cost per busy GPU-hour"),
            ],
            showback_rows,
        )
    )
    return tables


README = """Review pack {pack_id} v{version}, {cluster}, {start} to {end} ({time_zone}).

One CSV per table (UTF-8 with BOM). Times are UTC (ISO 8601) as sealed in the pack; numbers are
GPU-hours, ratios 0-1 and seconds as stored. manifest.json lists every file with its row count and
SHA-256, and the SHA-256 of the pack's sealed content: the same pack always gives the same files.
A cell that a spreadsheet program would read as a formula starts with an apostrophe.
"""


def _zip_time(content: dict) -> tuple[int, int, int, int, int, int]:
    try:
        moment = datetime.fromisoformat(str(content.get("generated_at")).replace("Z", "+00:00"))
    except ValueError:
        return (1980, 1, 1, 0, 0, 0)
    return (max(moment.year, 1980), moment.month, moment.day, moment.hour, moment.minute, moment.second)


def pack_csv_bundle(pack, *, language: str, department_codes=None) -> bytes:
    """A ZIP of the pack's tables as CSV, a manifest.json and a README.txt; byte for byte the same
    for the same pack, language and copy."""
    content = export_content(pack, department_codes)
    with translation.override(language):
        tables = _tables(pack, content)
    stamp = _zip_time(content)
    files = []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:

        def add(name: str, data: bytes) -> None:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)

        for name, header, rows in tables:
            data = _csv_bytes(header, rows, _zone(pack))
            files.append({"name": name, "rows": len(rows), "sha256": hashlib.sha256(data).hexdigest()})
            add(name, data)
        period = content.get("period") or {}
        manifest = {
            "pack_id": pack.pk,
            "version": pack.version,
            "cluster": (content.get("cluster") or {}).get("slug"),
            "period": {
                "start": period.get("start"),
                "end": period.get("end"),
                "time_zone": period.get("time_zone"),
            },
            "content_hash": pack.content_hash,
            "generated_at": content.get("generated_at"),
            "language": language,
            "copy": (content.get("copy") or {}).get("departments"),
            "files": files,
        }
        add(
            "manifest.json",
            json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True).encode("utf-8"),
        )
        readme = README.format(
            pack_id=pack.pk,
            version=pack.version,
            cluster=(content.get("cluster") or {}).get("name", ""),
            start=period.get("start"),
            end=period.get("end"),
            time_zone=period.get("time_zone"),
        )
        add("README.txt", readme.encode("utf-8"))
    return buffer.getvalue()
