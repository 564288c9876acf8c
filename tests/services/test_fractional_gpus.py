"""Shared (fractional) GPUs and job history without node placement, end to end.

A real slice of the Alibaba 2023 pod list (tests/fixtures/jobs/alibaba_2023_pods_slice.csv, see
the README there) goes through ``manage.py import_jobs`` and the hourly rollups; GPU-hours per job
size and per department are checked against the arithmetic below, done by hand from the raw
trace rows (alibaba_2023_pods_slice_raw.csv: ``num_gpu`` x ``gpu_milli`` x (``deletion_time`` -
``scheduled_time``)). The pod list names no nodes, so every one of these GPU-hours is
"placement unknown": before, they counted for no department at all.
"""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command

from efficiency.choices import JobState, Role
from efficiency.models import Job, JobHour, NodeHour
from efficiency.selectors import usage
from efficiency.services.rollups import rollups_refresh
from efficiency.timeranges import TimeRange
from tests.factories import ClusterFactory, DepartmentFactory, UserFactory

from .test_import_jobs import FIXTURES

SLICE = FIXTURES / "alibaba_2023_pods_slice.csv"
# The trace's second 0 is 2026-10-01T00:00Z (convert_alibaba_2023.TRACE_EPOCH); the slice holds the
# pods scheduled in trace days 125.0-126.5, i.e. from 2027-02-03T00:00Z, the last ending in day 128.
RANGE = TimeRange("custom", datetime(2027, 2, 3, tzinfo=UTC), datetime(2027, 2, 7, tzinfo=UTC))
NOW = datetime(2027, 2, 10, tzinfo=UTC)
DEPARTMENTS = ("vision", "radar", "bev", "cabin", "data", "mapping", "sim", "e2e", "pnc")

# GPU-seconds in thousandths (milli-GPU-seconds), pod by pod, from the raw rows:
#
# Shared pods (num_gpu 1, gpu_milli < 1000), 14 of them:
#   2209 mapping 370 x 808 = 298,960     2266 mapping 370 x 882 = 326,340
#   2275 mapping 550 x 52 = 28,600       2287 mapping 370 x 790 = 292,300
#   2470 mapping 370 x 349 = 129,130                       mapping: 1,075,330
#   2210 sim 370 x 789 = 291,930         2237 sim 550 x 71 = 39,050
#   2270 sim 550 x 26 = 14,300           2372 sim 550 x 28 = 15,400
#   2456 sim 370 x 69 = 25,530           2474 sim 370 x 2,460 = 910,200
#                                                          sim: 1,296,410
#   2232 data 550 x 745 = 409,750        2379 data 370 x 793 = 293,410
#   2460 data 810 x 42 = 34,020                            data: 737,180
#   all shared: 1,075,330 + 1,296,410 + 737,180 = 3,108,920 -> 0.8636 GPU-hours
#   (counted as whole GPUs they were 7,904 s = 2.1956 GPU-hours: 2.5 times too many)
# 2-GPU: 2322 bev 2 x 1000 x 13,054 = 26,108,000 -> 7.2522 GPU-hours
# 4-GPU: 2263 cabin 4 x 1000 x 548 = 2,192,000; 2443 cabin 4 x 1000 x 3,669 = 14,676,000
#   -> 16,868,000 -> 4.6856 GPU-hours
# 8-GPU (x 8,000): 2250 bev 525 s, 2338 bev 573 s (bev 1,098 s = 8,784,000);
#   2265 radar 443, 2317 radar 521, 2385 radar 259, 2441 radar 175,089 (radar 176,312 s =
#   1,410,496,000); 2288 vision 553, 2316 vision 499, 2376 vision 150, 2384 vision 155,
#   2420 vision 217 (vision 1,574 s = 12,592,000)
#   -> 178,984 s x 8,000 = 1,431,872,000 -> 397.7422 GPU-hours
# 1-GPU whole (42 pods): 44,007 s x 1,000 = 44,007,000 -> 12.2242 GPU-hours
# No GPU: 2228 (vision), 2341 (radar): 0. Pending 2214 (never started): 0.
# Total 3,108,920 + 26,108,000 + 16,868,000 + 1,431,872,000 + 44,007,000 = 1,521,963,920
#   -> 422.7678 GPU-hours.
#
# Per department, the 1-GPU whole pods added (from the raw rows, seconds x 1,000):
#   vision 13,334,000, radar 8,111,000, bev 5,564,000, cabin 4,128,000, e2e 6,616,000,
#   data 3,094,000, mapping 1,459,000, sim 1,701,000 (sum 44,007,000) so that
#   vision 13,334,000 + 12,592,000 = 25,926,000 -> 7.2017 GPU-hours
#   radar 8,111,000 + 1,410,496,000 = 1,418,607,000 -> 394.0575
#   bev 5,564,000 + 26,108,000 + 8,784,000 = 40,456,000 -> 11.2378
#   cabin 4,128,000 + 16,868,000 = 20,996,000 -> 5.8322
#   e2e 6,616,000 -> 1.8378
#   data 3,094,000 + 737,180 = 3,831,180 -> 1.0642
#   mapping 1,459,000 + 1,075,330 = 2,534,330 -> 0.7040
#   sim 1,701,000 + 1,296,410 = 2,997,410 -> 0.8326
#   pnc 0
MILLI_GPU_S_BY_DEPARTMENT = {
    "vision": 25_926_000,
    "radar": 1_418_607_000,
    "bev": 40_456_000,
    "cabin": 20_996_000,
    "e2e": 6_616_000,
    "data": 3_831_180,
    "mapping": 2_534_330,
    "sim": 2_997_410,
    "pnc": 0,
}
TOTAL_MILLI_GPU_S = 1_521_963_920


def _gpu_hours(milli_gpu_s: int) -> float:
    return milli_gpu_s / 1000 / 3600


@pytest.fixture
def imported(db, capsys):
    cluster = ClusterFactory(slug="alibaba")  # no nodes: the pod list names none
    for code in DEPARTMENTS:
        DepartmentFactory(code=code)
    with time_machine.travel(NOW, tick=False):
        call_command("import_jobs", str(SLICE), "--cluster", "alibaba")
        rollups_refresh(now=NOW)
    assert "73 rows read: 73 stored, 0 unchanged, 0 rejected" in capsys.readouterr().out
    return cluster


def _size(job: Job) -> str:
    if job.gpu_count == 1 and job.gpu_milli < 1000:
        return "shared"
    return f"{job.gpu_count}-GPU"


def test_gpu_hours_per_job_size_count_shared_pods_by_their_share(imported):
    by_size: dict[str, float] = {}
    for job in Job.objects.filter(started_at__isnull=False):
        by_size[_size(job)] = by_size.get(_size(job), 0.0) + job.gpu_hours
    assert by_size == pytest.approx(
        {
            "shared": _gpu_hours(3_108_920),  # 0.8636, not the 2.1956 of whole GPUs
            "1-GPU": _gpu_hours(44_007_000),
            "2-GPU": _gpu_hours(26_108_000),
            "4-GPU": _gpu_hours(16_868_000),
            "8-GPU": _gpu_hours(1_431_872_000),
            "0-GPU": 0.0,
        },
        abs=1e-9,
    )
    shared = Job.objects.get(external_id="openb-pod-2474")
    assert (shared.gpu_count, shared.gpu_milli, shared.gpus_text, shared.is_shared) == (1, 370, "0.37", True)
    assert Job.objects.get(external_id="openb-pod-2441").gpus_text == "8"
    pending = Job.objects.get(external_id="openb-pod-2214")
    assert (pending.state, pending.gpu_milli, pending.gpu_hours) == (JobState.PENDING, 470, None)


def test_jobs_without_nodes_count_for_their_department_and_cluster(imported):
    committee = UserFactory(role=Role.COMMITTEE)
    departments = {
        d.department.code: d for d in usage.department_usage_list(user=committee, time_range=RANGE)
    }
    allocated = {code: d.totals.allocated_gpu_hours for code, d in departments.items()}
    expected = {code: _gpu_hours(value) for code, value in MILLI_GPU_S_BY_DEPARTMENT.items()}
    assert allocated == pytest.approx(expected, abs=1e-6)
    # every one of them without placement: no node holds any of it
    assert {code: d.unplaced_gpu_hours for code, d in departments.items()} == pytest.approx(
        expected, abs=1e-6
    )
    assert not NodeHour.objects.exists()
    cluster = usage.cluster_usage(user=committee, time_range=RANGE)
    assert cluster.allocated_gpu_hours == pytest.approx(_gpu_hours(TOTAL_MILLI_GPU_S), abs=1e-6)
    # busy time is unknown without nodes, not zero: no idle stretches, no efficiency
    assert usage.idle_allocation_list(user=committee, time_range=RANGE) == []
    jobs = usage.job_usage_list(user=committee, time_range=RANGE, limit=None)
    assert len(jobs) == 70  # 73 less the pending pod and the two without GPUs
    assert {j.placed for j in jobs} == {False}
    assert {j.efficiency for j in jobs} == {None}
    assert sum(j.gpu_hours for j in jobs) == pytest.approx(_gpu_hours(TOTAL_MILLI_GPU_S), abs=1e-6)


def test_a_second_import_changes_nothing(imported, capsys):
    before = sorted(JobHour.objects.values_list("job__external_id", "hour", "allocated_gpu_s"))
    with time_machine.travel(NOW, tick=False):
        call_command("import_jobs", str(SLICE), "--cluster", "alibaba")
        rollups_refresh(now=NOW)
    assert "0 stored, 73 unchanged" in capsys.readouterr().out
    assert sorted(JobHour.objects.values_list("job__external_id", "hour", "allocated_gpu_s")) == before


def test_pages_show_the_share_and_say_placement_unknown(imported, client):
    with time_machine.travel(NOW + timedelta(hours=1), tick=False):
        client.force_login(UserFactory(role=Role.COMMITTEE))
        department = client.get(f"/departments/sim/jobs/?{RANGE.query()}").content.decode()
        radar = client.get(f"/departments/radar/?{RANGE.query()}").content.decode()
        overview = client.get(f"/usage/?{RANGE.query()}").content.decode()
        job = client.get(f"/jobs/{Job.objects.get(external_id='openb-pod-2474').pk}/").content.decode()
        response = client.get("/jobs/?department=sim&export=csv")
        listing = b"".join(response.streaming_content).decode("utf-8-sig")
    table = department[department.index('id="job-usage"') :]
    row = table[table.index("openb-pod-2474") :]
    row = row[: row.index("</tr>")]
    assert '<td class="num">0.37</td>' in row
    # 0.37 x 2,460 s = 910.2 GPU-seconds = 0.25 GPU-hours
    assert '<td class="num">0.3</td>' in row
    assert "placement unknown" in row
    sim = overview[overview.index("Department sim</a>") :]
    # sim: 2,997,410 milli-GPU-s = 0.8326 GPU-hours, all of it without placement
    assert "0.8 placement unknown" in sim[: sim.index("</tr>")]
    # radar: 1,418,607,000 milli-GPU-s = 394.06 GPU-hours, all without placement
    assert 'id="unplaced-gpu-hours">394 placement unknown</span>' in radar
    assert 'id="job-gpus">0.37</span>' in job
    assert "(a share of 1 GPU)" in job
    assert 'id="job-placement-unknown">Placement unknown: the scheduler named no node.' in job
    line = next(line for line in listing.splitlines() if line.startswith("openb-pod-2474,"))
    # GPUs 0.37; GPU-hours 0.37 x 2,460 / 3,600 = 0.25283 -> 0.25
    assert ",0.37,0.25," in line


def test_the_whole_pod_list_gives_the_gpu_time_shares_of_its_sharing_pods(db, capsys):
    """Issue 14's figures on all 8,152 pods: counted as whole GPUs the pods held 59,612 GPU-hours
    (1-GPU pods 87.2%, 8-GPU pods 11.7%); by their shares 51,471 (85.2%, 13.6%), so whole GPUs
    were 15.8% too many. Running pods count up to the trace's end (2027-02-27T08:09:20Z, their
    deletion_time). Recomputed apart from the portal, from the CSV cells:
    sum over scheduled pods of gpus x gpu_milli / 1000 x (end or deletion_time - start_time)."""
    ClusterFactory(slug="alibaba")
    for code in DEPARTMENTS:
        DepartmentFactory(code=code)
    trace_end = datetime(2027, 2, 27, 8, 9, 20, tzinfo=UTC)
    with time_machine.travel(trace_end, tick=False):
        call_command("import_jobs", str(FIXTURES / "alibaba_2023_pods.csv"), "--cluster", "alibaba")
        by_size: dict[int, float] = {}
        whole = 0.0
        for job in Job.objects.filter(started_at__isnull=False).only(
            "gpu_count", "gpu_milli", "started_at", "ended_at", "state"
        ):
            by_size[job.gpu_count] = by_size.get(job.gpu_count, 0.0) + job.gpus * job.run_s / 3600
            whole += job.gpu_count * job.run_s / 3600
    total = sum(by_size.values())
    assert (round(whole), round(total)) == (59_612, 51_471)
    assert round((whole / total - 1) * 100, 1) == 15.8
    shares = {size: round(100 * hours / total, 1) for size, hours in by_size.items()}
    assert (shares[1], shares[8]) == (85.2, 13.6)
