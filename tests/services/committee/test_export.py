"""The review pack's files: PDF text layer, fonts and vector charts; the CSV bundle's manifest;
both frozen at sealing; a head's copy; hostile names inert."""

import csv
import hashlib
import io
import json
import re
import zipfile

import pytest
from django.utils import translation
from pypdf import PdfReader

from efficiency.charts.committee_print import pack_svg_charts
from efficiency.services.committee import export
from tests.factories import ClusterFactory, DepartmentFactory
from tests.services.committee_sample import sample_content, store_pack

pytestmark = pytest.mark.django_db

HOURS = 24
HOSTILE_FORMULA = "=cmd|' /C calc'!A0"
HOSTILE_MARKUP = "<script>alert(1)</script>"


def _pack(departments, **kwargs):
    return store_pack(sample_content(departments, hours=HOURS), cluster=ClusterFactory(), **kwargs)


def _text(pdf: bytes) -> str:
    return "\n".join(page.extract_text() or "" for page in PdfReader(io.BytesIO(pdf)).pages)


def _fonts(pdf: bytes) -> set[str]:
    names = set()
    for page in PdfReader(io.BytesIO(pdf)).pages:
        names |= {str(font.get_object()["/BaseFont"]) for font in _resources(page, "/Font")}
    return names


def _resources(holder, kind: str, seen=None):
    """Every resource of ``kind`` of a page, and of the form XObjects it draws (SVG images)."""
    seen = set() if seen is None else seen
    resources = holder.get("/Resources")
    if resources is None:
        return
    resources = resources.get_object()
    yield from (resources.get(kind) or {}).values()
    for xobject in (resources.get("/XObject") or {}).values():
        obj = xobject.get_object()
        key = id(obj)
        if key in seen:
            continue
        seen.add(key)
        if obj.get("/Subtype") == "/Form":
            yield from _resources(obj, kind, seen)


def _image_xobjects(pdf: bytes) -> list:
    images = []
    for page in PdfReader(io.BytesIO(pdf)).pages:
        images += [x for x in _resources(page, "/XObject") if x.get_object().get("/Subtype") == "/Image"]
    return images


def _bundle(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))


def test_english_pdf_has_the_section_headings_and_chart_text_as_text():
    pack = _pack(3)
    pdf = export.pack_pdf(pack, language="en")
    text = _text(pdf)
    for heading in (
        "GPU committee review pack",
        "Summary",
        "Since the last meeting",
        "Cluster",
        "Departments",
        "Quota proposals",
        "Reliability",
        "Showback",
    ):
        assert heading in text, heading
    # Chart titles and labels are text in the PDF, not paths or pixels.
    assert "Where the capacity went" in text
    assert "Department 1: guarantee and use" in text


def test_charts_are_vector_no_raster_images():
    pack = _pack(2)
    pdf = export.pack_pdf(pack, language="en")
    assert _image_xobjects(pdf) == []
    charts = pack_svg_charts(pack.content)
    assert {"waterfall", "states", "heatmap", "node_classes", "scatter", "pareto", "phases", "ageing",
            "showback", "dept:dept000", "dept:dept001"} <= set(charts)  # fmt: skip
    for svg in charts.values():
        assert svg.startswith("<svg")
        assert "<image" not in svg
    assert "<text" in charts["waterfall"]


def test_chinese_pdf_embeds_a_cjk_font_and_keeps_chinese_names_as_text():
    pack = _pack([("perception", "感知算法部"), ("planning", "规划控制部")])
    pdf = export.pack_pdf(pack, language="zh-hans")
    assert any("NotoSansCJK" in name.replace(" ", "").replace("-", "") for name in _fonts(pdf)), _fonts(pdf)
    text = _text(pdf)
    assert "感知算法部" in text
    assert "规划控制部" in text
    # The headings are Chinese in the text layer (the catalog's, and not the English fallback).
    with translation.override("zh-hans"):
        headings = [
            translation.gettext(h)
            for h in (
                "GPU committee review pack",
                "Summary",
                "Since the last meeting",
                "Reliability",
                "Showback",
            )
        ]
    for heading in headings:
        assert re.search("[\u4e00-\u9fff]", heading), heading
        assert heading in text, heading
    assert "概要" in text  # "Summary", read by a person


def test_times_are_shown_where_the_committee_meets():
    """The pack stores UTC; its PDF and CSV show the pack's time zone (Asia/Shanghai, UTC+8)."""
    pack = _pack(2)
    assert "2026-11-16 08:00" in _text(export.pack_pdf(pack, language="en"))  # 00:00 UTC
    cover = dict(_rows(_bundle(export.pack_csv_bundle(pack, language="en"))["cover.csv"])[1:])
    assert cover["Period start"] == "2026-11-16T08:00:00+08:00"


def test_files_do_not_change_when_the_data_changes_after_sealing():
    department = DepartmentFactory(code="dept000", name="Department 0")
    cluster = ClusterFactory()
    pack = store_pack(sample_content(2, hours=HOURS), cluster=cluster)
    pdf_before = export.pack_pdf(pack, language="en")
    csv_before = export.pack_csv_bundle(pack, language="en")
    department.name = "Renamed after sealing"
    department.save()
    DepartmentFactory(code="late", name="Created after sealing")
    pack.refresh_from_db()
    pdf_after = export.pack_pdf(type(pack).objects.get(pk=pack.pk), language="en")
    csv_after = export.pack_csv_bundle(type(pack).objects.get(pk=pack.pk), language="en")
    assert _text(pdf_after) == _text(pdf_before)
    assert "Renamed after sealing" not in _text(pdf_after)
    assert csv_after == csv_before


def test_manifest_lists_every_file_with_its_rows_and_hash():
    pack = _pack(3)
    files = _bundle(export.pack_csv_bundle(pack, language="en"))
    manifest = json.loads(files["manifest.json"])
    assert manifest["pack_id"] == pack.pk
    assert manifest["version"] == pack.version
    assert manifest["content_hash"] == pack.content_hash
    assert manifest["language"] == "en"
    assert manifest["period"]["start"] == pack.content["period"]["start"]
    listed = {entry["name"]: entry for entry in manifest["files"]}
    assert set(listed) == set(files) - {"manifest.json", "README.txt"}
    expected = {
        "cover.csv", "kpis.csv", "states_per_hour.csv", "departments_per_hour.csv", "department_totals.csv",
        "pareto_idle.csv", "proposals.csv", "capacity.csv", "incidents.csv", "phases.csv", "tickets.csv",
        "showback.csv",
    }  # fmt: skip
    assert set(listed) == expected
    for name, entry in listed.items():
        assert entry["sha256"] == hashlib.sha256(files[name]).hexdigest(), name
        assert entry["rows"] == len(_rows(files[name])) - 1, name
    assert listed["states_per_hour.csv"]["rows"] == HOURS
    assert listed["departments_per_hour.csv"]["rows"] == 3 * HOURS
    assert files["README.txt"].startswith(b"Review pack")


def test_csv_numbers_add_up_to_the_capacity_each_hour():
    pack = _pack(4)
    rows = _rows(_bundle(export.pack_csv_bundle(pack, language="en"))["states_per_hour.csv"])
    capacities = {round(sum(float(v) for v in row[1:]), 3) for row in rows[1:]}
    assert len(capacities) == 1


def test_heads_copy_has_no_other_department():
    pack = _pack([("vision", "Vehicle vision"), ("radar", "Radar perception"), ("lidar", "Lidar")])
    data = export.pack_csv_bundle(pack, language="en", department_codes=("vision",))
    files = _bundle(data)
    for name, content in files.items():
        text = content.decode("utf-8-sig")
        assert "radar" not in text.lower(), name
        assert "lidar" not in text.lower(), name
    totals = _rows(files["department_totals.csv"])
    assert [row[0] for row in totals[1:]] == ["vision"]
    assert json.loads(files["manifest.json"])["copy"] == ["vision"]
    # Cluster-wide tables are empty in a copy.
    assert _rows(files["states_per_hour.csv"])[1:] == []
    pdf_text = _text(export.pack_pdf(pack, language="en", department_codes=("vision",)))
    assert "Vehicle vision" in pdf_text
    assert "Radar perception" not in pdf_text
    assert "Lidar" not in pdf_text


def test_hostile_names_are_inert_in_csv_and_pdf():
    pack = _pack([("evil", HOSTILE_FORMULA), ("xss", HOSTILE_MARKUP)])
    files = _bundle(export.pack_csv_bundle(pack, language="en"))
    names = [row[1] for row in _rows(files["department_totals.csv"])[1:]]
    assert "'" + HOSTILE_FORMULA in names
    assert HOSTILE_MARKUP in names
    for name, content in files.items():
        for row in _rows(content) if name.endswith(".csv") else []:
            assert not any(cell.startswith(("=", "+", "@")) for cell in row), (name, row)
    content = pack.content
    charts = pack_svg_charts(content)
    html = export.render_to_string(export.PRINT_TEMPLATE, export.print_context(pack, content, charts=charts))
    assert HOSTILE_MARKUP not in html
    assert "&lt;script&gt;" in html
    assert "<script" not in charts["dept:xss"]
    text = _text(export.pack_pdf(pack, language="en"))
    assert HOSTILE_MARKUP in text  # shown as the characters, never run
    assert HOSTILE_FORMULA in text


def test_a_missing_weasyprint_is_a_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_weasyprint(name, *args, **kwargs):
        if name == "weasyprint":
            raise OSError("cannot load library 'libpango-1.0-0'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_weasyprint)
    with pytest.raises(export.ExportUnavailable, match="libpango"):
        export.pack_pdf(_pack(1), language="en")


def test_unavailable_sections_have_no_chart():
    content = sample_content(2, hours=HOURS)
    for key in ("cluster_section", "reliability", "tickets", "showback"):
        content[key] = {"available": False, "reason": "no data yet"}
    content["pareto_idle"] = {"available": False, "reason": "no data yet"}
    charts = pack_svg_charts(content)
    assert set(charts) == {"scatter", "dept:dept000", "dept:dept001"}


def test_filename_names_the_first_day_where_the_committee_meets():
    from datetime import UTC, datetime
    from types import SimpleNamespace

    pack = SimpleNamespace(
        cluster=SimpleNamespace(slug="main"),
        period_start=datetime(2026, 11, 15, 16, tzinfo=UTC),  # Monday 00:00 in Shanghai
        time_zone="Asia/Shanghai",
        version=2,
    )
    assert export.export_filename(pack, language="zh-hans", extension="pdf") == (
        "review-pack-main-20261116-v2-zh-hans.pdf"
    )
    assert export.export_filename(pack, language="en", extension="zip", department_codes=("a", "b")) == (
        "review-pack-main-20261116-v2-en-a-b.zip"
    )
