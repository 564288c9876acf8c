"""What a job import says about its rows: a missing department, an end time on a running job,
and what the pages then count as running now."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from efficiency.choices import JobSource, JobState, RunStatus, SourceKind
from efficiency.collectors.records import JobRecord
from efficiency.models import Job
from efficiency.selectors.home import home_summary
from efficiency.selectors.inventory import department_list
from efficiency.services.ingest import jobs_ingest
from efficiency.services.sources import jobs_csv_import
from tests.factories import ClusterFactory, DataSourceFactory, JobFactory

HEADER = "job_id,department,account,user,name,gpus,nodes,submit_time,start_time,end_time,state\n"
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


def _reasons(run) -> list[str]:
    return [item["reason"] for item in run.rejects]


def test_an_unknown_department_code_is_named_with_what_to_do(org):
    run = jobs_csv_import(
        cluster=org.cluster,
        text=HEADER
        + "j1,xyz,,ann,a,1,1,2026-11-01T00:00:00Z,2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,completed\n"
        + "j2,xyz,,ann,b,1,1,2026-11-01T00:00:00Z,2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,completed\n",
        now=NOW,
    )
    assert _reasons(run) == [
        "department code 'xyz' does not exist (2 jobs, stored without a department): create a "
        "department with this code (Admin → Departments) or correct the code at the source"
    ]
    assert "(empty)" not in run.message
    assert Job.objects.filter(external_id__in=["j1", "j2"], department=None).count() == 2


def test_a_known_code_and_an_unmapped_account_each_say_their_own_thing(org):
    run = jobs_csv_import(
        cluster=org.cluster,
        text=HEADER
        + "j1,vision,,ann,a,1,1,2026-11-01T00:00:00Z,,,pending\n"
        + "j2,,ghost-team,ann,b,1,1,2026-11-01T00:00:00Z,,,pending\n",
        now=NOW,
    )
    assert Job.objects.get(external_id="j1").department == org.dept_a
    assert _reasons(run) == [
        "account or namespace 'ghost-team' maps to no department (1 jobs); add a mapping"
    ]


def test_a_job_with_no_account_and_no_code_says_so(db):
    record = JobRecord(
        source=JobSource.SLURM,
        external_id="7",
        account="",
        user_name="ann",
        name="x",
        state=JobState.PENDING,
        gpu_count=1,
        submitted_at=NOW - timedelta(hours=1),
    )
    result = jobs_ingest(cluster=ClusterFactory(), source=JobSource.SLURM, records=[record], now=NOW)
    assert [w.reason for w in result.warnings] == [
        "1 jobs name no department code and no account or namespace (stored without a department): "
        "fill in the account, namespace or department column at the source"
    ]


@pytest.fixture
def ended_trace(org):
    """A trace cut off months ago: two rows still say running, one pending, all with end times;
    two jobs run now, one with an expected end later today."""
    text = HEADER + (
        "r1,vision,,ann,a,8,1,2026-06-01T00:00:00Z,2026-06-01T00:10:00Z,2026-06-02T00:00:00Z,running\n"
        "r2,vision,,ann,b,2,1,2026-06-01T00:00:00Z,2026-06-01T00:10:00Z,2026-06-01T05:00:00Z,running\n"
        "p1,vision,,ann,c,4,1,2026-06-01T00:00:00Z,,2026-06-01T02:00:00Z,pending\n"
        "r3,vision,,ann,d,1,1,2026-11-20T10:00:00Z,2026-11-20T10:00:00Z,,running\n"
        "r4,vision,,ann,e,1,1,2026-11-20T10:00:00Z,2026-11-20T10:00:00Z,2026-11-20T14:00:00Z,running\n"
    )
    return jobs_csv_import(cluster=org.cluster, text=text, now=NOW)


def test_a_running_row_with_an_end_time_is_stored_as_ended_and_the_run_says_so(ended_trace):
    states = dict(Job.objects.filter(source=JobSource.CSV).values_list("external_id", "state"))
    assert states == {
        "r1": JobState.COMPLETED,
        "r2": JobState.COMPLETED,
        "p1": JobState.CANCELLED,  # it never started
        "r3": JobState.RUNNING,  # no end time: still running
        "r4": JobState.RUNNING,  # its end time is still to come (it was imported at noon)
    }
    assert Job.objects.get(external_id="r1").config["reported_state"] == "running"
    assert ended_trace.status == RunStatus.OK
    assert _reasons(ended_trace) == [
        "1 rows had an end time but state PENDING: counted as ended at their end time "
        "(stored as completed, or cancelled when they never started)",
        "2 rows had an end time but state RUNNING: counted as ended at their end time "
        "(stored as completed, or cancelled when they never started)",
    ]


@pytest.fixture
def stale_rows(org):
    """Rows stored before the rule: state running or pending, with an end time long past."""
    ended = timezone.now() - timedelta(days=90)
    for state in (JobState.RUNNING, JobState.RUNNING, JobState.PENDING):
        JobFactory(
            department=org.dept_a,
            cluster=org.cluster,
            state=state,
            submitted_at=ended - timedelta(hours=5),
            started_at=ended - timedelta(hours=4),
            ended_at=ended,
            gpu_count=8,
        )
    # Running now, with the end its scheduler expects in an hour.
    JobFactory(
        department=org.dept_a, cluster=org.cluster, name="expected-end", gpu_count=2,
        ended_at=timezone.now() + timedelta(hours=1),
    )  # fmt: skip
    return org


def test_the_home_page_does_not_count_ended_jobs_as_running_now(client, stale_rows):
    # The org's own two jobs run now (8 GPUs each), and one with an expected end (2 GPUs); the
    # three stale rows ended 90 days ago.
    summary = home_summary(user=stale_rows.admin)
    assert (summary.running_job_count, summary.running_gpu_count) == (3, 18)
    vision = department_list(user=stale_rows.admin).get(code="vision")
    assert (vision.running_job_count, vision.running_gpu_count) == (2, 10)
    assert (summary.pending_job_count, summary.pending_gpu_count) == (0, 0)


def test_the_job_list_and_api_running_filter_leave_out_ended_jobs(client, stale_rows):
    client.force_login(stale_rows.admin)
    body = client.get("/api/v1/jobs/?state=running").json()
    rows = body["results"] if isinstance(body, dict) else body
    assert sorted(row["name"] for row in rows) == ["expected-end", "radar-train", "vision-train"]
    assert client.get("/api/v1/jobs/?state=pending").json()["count"] == 0
    page = client.get("/jobs/?state=running").content.decode()
    assert "vision-train" in page
    assert "radar-train" in page
    assert page.count("train-bev-") == 0  # the stale rows' factory names


def test_the_csv_import_source_reads_imported_by_command_not_disabled(client, org, ended_trace):
    client.force_login(org.admin)
    body = client.get("/sources/").content.decode()
    row = body[body.index("csv-import") :].split("</tr>")[0]
    assert "Disabled" not in row
    assert "Imported by command" in row
    assert "(OK): 5 stored, 0 rejected" in row


def test_a_csv_import_source_never_imported_says_how_to(client, org):
    DataSourceFactory(cluster=org.cluster, kind=SourceKind.CSV_IMPORT, name="csv-import", enabled=False)
    client.force_login(org.admin)
    body = client.get("/sources/").content.decode()
    row = body[body.index("csv-import") :].split("</tr>")[0]
    assert "nothing imported yet (manage.py import_jobs)" in row
    assert "Disabled" not in row
