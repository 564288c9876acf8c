"""The import_jobs command: encodings Excel writes, clear errors, and a stream with progress."""

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from efficiency.choices import RunStatus
from efficiency.collectors.jobs_csv import iter_jobs_csv
from efficiency.models import Job, SourceRun
from tests.factories import ClusterFactory

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "jobs"
HEADER = "job_id,department,account,user,name,gpus,nodes,submit_time,start_time,end_time,state"


@pytest.fixture
def cluster(db):
    return ClusterFactory(slug="c1")


def _import(*args) -> str:
    out = io.StringIO()
    call_command("import_jobs", *args, stdout=out)
    return out.getvalue()


def test_a_gbk_file_from_excel_on_chinese_windows_is_read_as_chinese_with_a_warning(cluster):
    output = _import(str(FIXTURES / "excel_gbk_zh_cn.csv"), "--cluster", "c1", "--timezone", "Asia/Shanghai")
    names = dict(Job.objects.values_list("external_id", "name"))
    assert names == {
        "zh-1001": "训练-bev-融合",
        "zh-1002": "毫米波点云预训练",
        "zh-1003": "语音大模型微调（第二轮）",
    }
    assert Job.objects.get(external_id="zh-1001").account == "视觉感知"
    run = SourceRun.objects.get()
    assert run.status == RunStatus.OK
    assert run.message == "the file is not UTF-8: read as gb18030; save it as UTF-8 to be sure of its text"
    assert "warning: the file is not UTF-8: read as gb18030" in output


def test_a_file_in_no_known_encoding_is_refused_with_the_reason_and_nothing_stored(cluster, tmp_path):
    path = tmp_path / "unicode-text.csv"
    path.write_text(HEADER + "\n1,vision,a,u,训练,8,1,2026-11-01T08:00:00,,,pending\n", encoding="utf-16")
    with pytest.raises(
        CommandError, match=r"byte 0 is not UTF-8, and the file is not gb18030 / big5 / cp1252"
    ):
        _import(str(path), "--cluster", "c1")
    assert Job.objects.count() == 0
    assert SourceRun.objects.get().status == RunStatus.FAILED


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", "", "America"])
def test_a_bad_time_zone_is_a_clear_error(cluster, zone):
    with pytest.raises(CommandError, match=r"unknown time zone .*: use an IANA name"):
        _import(str(FIXTURES / "excel_gbk_zh_cn.csv"), "--cluster", "c1", "--timezone", zone)


def test_the_import_prints_progress_per_batch(cluster, tmp_path):
    path = tmp_path / "jobs.csv"
    rows = [f"j{i},vision,a,u,n,1,1,2026-11-01T08:00:00,,,pending" for i in range(5)]
    path.write_text("\n".join([HEADER, *rows, "bad,vision,a,u,n,x,1,2026-11-01T08:00:00,,,pending"]) + "\n")
    output = _import(str(path), "--cluster", "c1", "--batch", "2")
    progress = [line.strip() for line in output.splitlines() if line.startswith("  ") and "rows read" in line]
    assert [line.split(" (")[0] for line in progress] == [
        "2 rows read, 2 stored, 0 rejected",
        "4 rows read, 4 stored, 0 rejected",
        "6 rows read, 5 stored, 1 rejected",
    ]
    assert Job.objects.count() == 5


def test_the_parser_yields_a_batch_before_the_file_is_read_to_its_end():
    consumed = []

    def lines():
        yield HEADER + "\n"
        for i in range(10):
            consumed.append(i)
            yield f"j{i},vision,a,u,n,1,1,2026-11-01T08:00:00,,,pending\n"

    first = next(iter_jobs_csv(lines(), batch_rows=3))
    assert [record.external_id for record in first.records] == ["j0", "j1", "j2"]
    assert len(consumed) == 3
