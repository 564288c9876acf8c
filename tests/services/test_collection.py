"""Each periodic collector, through ``source_collect``, against real formats and a real HTTP server."""

import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from efficiency.choices import JobState, MappingKind, RunStatus, SourceKind
from efficiency.models import DataSource, GpuSample, Job, LogChunk, SourceRun
from efficiency.services.sources import (
    SOURCE_LOCK_SPACE,
    SourceConfigError,
    SourceUnavailable,
    source_collect,
    sources_due,
)
from tests.factories import ClusterFactory, DepartmentFactory, DepartmentMappingFactory, NodeFactory
from tests.workers import database_url_for_processes

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


class _Exporter(BaseHTTPRequestHandler):
    pages: dict[str, tuple[int, bytes]] = {}

    def do_GET(self):
        status, body = self.pages.get(self.path, (404, b"not found"))
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def exporter():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield _Exporter.pages, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def cluster(db):
    cluster = ClusterFactory(slug="c1")
    NodeFactory(cluster=cluster, hostname="k8s-gpu1", gpu_count=1)
    return cluster


def test_dcgm_scrape_stores_a_real_exporter_page_and_records_the_run(cluster, exporter):
    pages, base = exporter
    pages["/metrics"] = (200, (FIXTURES / "dcgm" / "dcgm_exporter_issue363_rtx_a5000.txt").read_bytes())
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.DCGM_SCRAPE, name="dcgm", config={"urls": [f"{base}/metrics"]}
    )
    run = source_collect(source_id=source.pk, now=NOW)
    assert (run.status, run.stored, run.rejected) == (RunStatus.OK, 1, 0)
    sample = GpuSample.objects.get()
    assert (sample.util_pct, sample.fb_used_mib) == (0.0, 21383.0)
    source.refresh_from_db()
    assert source.watermark == NOW
    assert source.last_success_at is not None


def test_dcgm_scrape_keeps_good_exporters_when_one_is_down(cluster, exporter):
    pages, base = exporter
    pages["/ok"] = (200, (FIXTURES / "dcgm" / "dcgm_exporter_issue363_rtx_a5000.txt").read_bytes())
    pages["/broken"] = (500, b"boom")
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.DCGM_SCRAPE,
        name="dcgm",
        config={"urls": [f"{base}/ok", f"{base}/broken"]},
    )
    run = source_collect(source_id=source.pk, now=NOW)
    assert run.status == RunStatus.PARTIAL
    assert run.stored == 1
    assert "answered HTTP 500" in run.rejects[0]["reason"]


def test_dcgm_scrape_with_malformed_lines_keeps_the_good_ones(cluster, exporter):
    pages, base = exporter
    good = (FIXTURES / "dcgm" / "dcgm_exporter_issue363_rtx_a5000.txt").read_text()
    hostile = (
        good
        + 'DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="k8s-gpu1" 41\n'  # unclosed brace
        + "\x00\xff garbage\n"
        + 'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="k8s-gpu1"} NaN\n'
    )
    pages["/metrics"] = (200, hostile.encode("utf-8", errors="surrogateescape"))
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.DCGM_SCRAPE, name="dcgm", config={"urls": [f"{base}/metrics"]}
    )
    run = source_collect(source_id=source.pk, now=NOW)
    assert run.stored == 1
    assert run.rejected == 3
    reasons = {item["reason"] for item in run.rejects}
    assert "not a finite number" in reasons
    assert any(item["line"] for item in run.rejects)


def test_all_exporters_down_is_a_failed_run_to_retry(cluster):
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.DCGM_SCRAPE,
        name="dcgm",
        config={"urls": ["http://127.0.0.1:1/metrics"]},
    )
    with pytest.raises(SourceUnavailable):
        source_collect(source_id=source.pk, now=NOW)
    source.refresh_from_db()
    assert source.consecutive_failures == 1
    assert SourceRun.objects.get().status == RunStatus.FAILED


def test_misconfigured_source_fails_with_a_message_naming_the_setting(cluster):
    source = DataSource.objects.create(cluster=cluster, kind=SourceKind.DCGM_SCRAPE, name="dcgm", config={})
    with pytest.raises(SourceConfigError):
        source_collect(source_id=source.pk, now=NOW)
    assert "configuration needs 'urls'" in SourceRun.objects.get().message


def test_a_source_held_by_another_worker_is_skipped(cluster):
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.DCGM_SCRAPE, name="dcgm", config={"urls": []}, running_since=NOW
    )
    if connection.vendor == "postgresql":
        # The holder is a live session with the source's advisory lock; once it is gone (a killed
        # worker's connection closes) the source is taken at once, whatever running_since says.
        with psycopg.connect(database_url_for_processes(), autocommit=True) as other_worker:
            other_worker.execute("SELECT pg_advisory_lock(%s, %s)", [SOURCE_LOCK_SPACE, source.pk])
            assert source_collect(source_id=source.pk, now=NOW + timedelta(minutes=1)) is None
            # (A closed session's locks go when its server process has ended, a moment later.)
            other_worker.execute("SELECT pg_advisory_unlock(%s, %s)", [SOURCE_LOCK_SPACE, source.pk])
        assert source_collect(source_id=source.pk, now=NOW + timedelta(minutes=1)) is not None
        return
    assert source_collect(source_id=source.pk, now=NOW + timedelta(minutes=1)) is None
    # A lease older than 15 minutes is considered abandoned (a killed worker) and taken over.
    assert source_collect(source_id=source.pk, now=NOW + timedelta(minutes=20)) is not None


def test_sources_due_respects_each_interval(cluster):
    fresh = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.SLURM, name="a", interval_s=300, last_attempt_at=NOW
    )
    stale = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.SLURM, name="b", interval_s=60, last_attempt_at=NOW
    )
    never = DataSource.objects.create(cluster=cluster, kind=SourceKind.SLURM, name="c")
    DataSource.objects.create(cluster=cluster, kind=SourceKind.LOG_PUSH, name="push")
    assert sorted(sources_due(now=NOW + timedelta(minutes=2))) == sorted([stale.pk, never.pk])
    assert fresh.pk not in sources_due(now=NOW + timedelta(minutes=2))


def test_a_run_claimed_late_in_its_pass_is_due_again_at_the_next_pass(cluster):
    # Beat's pass comes every 15 s; a 15 s source whose run a busy worker claimed 7 s after the
    # pass that queued it is due at the next pass (8 s later), not one pass after that. A 60 s
    # source is not due after three passes (45 s), and a duplicate of the message inside the
    # pass finds the source taken already.
    every_15 = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.SLURM,
        name="a",
        interval_s=15,
        last_attempt_at=NOW + timedelta(seconds=7),
    )
    every_60 = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.SLURM, name="b", interval_s=60, last_attempt_at=NOW
    )
    assert sources_due(now=NOW + timedelta(seconds=15)) == [every_15.pk]
    assert every_60.pk not in sources_due(now=NOW + timedelta(seconds=45))
    assert every_60.pk in sources_due(now=NOW + timedelta(seconds=60))
    assert every_15.pk not in sources_due(now=NOW + timedelta(seconds=10))


def test_slurm_sacct_file_is_ingested_and_re_reading_it_changes_nothing(cluster):
    DepartmentMappingFactory(
        kind=MappingKind.SLURM_ACCOUNT, value="vision", department=DepartmentFactory(code="vision")
    )
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.SLURM, name="sacct",
        config={"path": str(FIXTURES / "jobs" / "sacct_allocations.txt"), "timezone": "Asia/Shanghai"},
    )  # fmt: skip
    first = source_collect(source_id=source.pk, now=NOW)
    DataSource.objects.filter(pk=source.pk).update(last_attempt_at=None)
    second = source_collect(source_id=source.pk, now=NOW + timedelta(minutes=1))
    assert first.stored > 0
    assert (second.stored, second.duplicates) == (0, second.received)
    assert Job.objects.count() == first.stored


def test_kubernetes_jobs_file_is_ingested_without_secrets(cluster):
    DepartmentMappingFactory(
        kind=MappingKind.K8S_NAMESPACE, value="team-vision", department=DepartmentFactory(code="vision")
    )
    source = DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.KUBERNETES,
        name="k8s",
        config={"path": str(FIXTURES / "jobs" / "k8s_jobs.json")},
    )
    run = source_collect(source_id=source.pk, now=NOW)
    assert run.stored > 0
    assert "hf_" not in str(list(Job.objects.values_list("config", flat=True))).lower().replace(
        "hf_token", ""
    )


def test_missing_sacct_file_is_unavailable_not_a_crash(cluster, tmp_path):
    missing = tmp_path / "nonexistent" / "sacct.txt"
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.SLURM, name="sacct", config={"path": str(missing)}
    )
    with pytest.raises(SourceUnavailable, match=rf"cannot read {missing}"):
        source_collect(source_id=source.pk, now=NOW)


def test_log_directory_is_tailed_and_cursors_survive_between_runs(cluster, tmp_path):
    job_dir = tmp_path / "4242"
    job_dir.mkdir()
    log = job_dir / "rank-0.log"
    log.write_bytes(b"iteration 1 | lm loss: 2.0\niteration 2 | lm loss: 1.9\npartial")
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.LOG_FILES, name="logs", config={"root": str(tmp_path)}
    )
    first = source_collect(source_id=source.pk, now=NOW)
    with log.open("ab") as handle:
        handle.write(b" line completed\n\xff\xfe binary \x00 junk\n")
    DataSource.objects.filter(pk=source.pk).update(last_attempt_at=None)
    second = source_collect(source_id=source.pk, now=NOW + timedelta(minutes=1))
    assert (first.stored, second.stored) == (1, 1)
    texts = "".join(LogChunk.objects.order_by("start_offset").values_list("text", flat=True))
    assert texts.count("iteration") == 2
    assert "partial line completed\n" in texts
    assert LogChunk.objects.filter(job_external_id="4242", rank=0).count() == 2


def test_import_jobs_reads_the_real_alibaba_2023_pod_list(cluster, capsys):
    for code in ("vision", "radar", "data", "bev", "mapping", "sim", "pnc", "e2e", "cabin"):
        DepartmentFactory(code=code)
    path = FIXTURES / "jobs" / "alibaba_2023_pods.csv"
    call_command("import_jobs", str(path), "--cluster", "c1")
    assert "8152 rows read: 8152 stored, 0 unchanged, 0 rejected" in capsys.readouterr().out
    assert Job.objects.count() == 8152
    assert Job.objects.filter(state=JobState.PENDING, started_at__isnull=True).count() == 897
    assert not Job.objects.filter(department__isnull=True).exists()
    call_command("import_jobs", str(path), "--cluster", "c1")
    assert "0 stored, 8152 unchanged" in capsys.readouterr().out


def test_import_jobs_with_an_unknown_cluster_is_a_clear_error(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no cluster with slug 'nope'"):
        call_command("import_jobs", "x.csv", "--cluster", "nope")
