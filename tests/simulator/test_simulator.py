"""The simulator's ground truth: determinism, node classes, utilization, jobs, misconfigs, faults."""

import itertools
import statistics
from collections import Counter
from datetime import timedelta

import pytest

from efficiency.simulator.model import FAULT_KINDS, MISCONFIG_KINDS, ClusterSimulator
from tests.simulator.conftest import START, WEEK_END, make_simulator

HOURS = [START + timedelta(hours=h) for h in range(7 * 24)]


@pytest.fixture(scope="module")
def hourly(sim: ClusterSimulator) -> dict[str, list[float]]:
    """Expected activity (GR_ENGINE_ACTIVE, 0-1) of every node for every hour of the week."""
    return {host: [sim.node_hour_activity(host, hour) for hour in HOURS] for host in sim.hostnames()}


def test_same_seed_gives_identical_outputs():
    at = START + timedelta(days=1, hours=3)
    first, second = make_simulator(), make_simulator()
    assert first.exposition(at) == second.exposition(at)
    assert first.sacct_text(START, at, timezone=START.tzinfo) == second.sacct_text(
        START, at, timezone=START.tzinfo
    )
    assert first.kubernetes_jobs_json(START, at) == second.kubernetes_jobs_json(START, at)


def test_different_seed_gives_different_outputs():
    at = START + timedelta(hours=5)
    assert make_simulator(seed=1).exposition(at) != make_simulator(seed=2).exposition(at)


def test_values_do_not_depend_on_what_was_asked_before():
    early = START + timedelta(hours=30, minutes=7)
    late = START + timedelta(days=4)
    straight, wandering = make_simulator(), make_simulator()
    wandering.exposition(late)
    wandering.jobs(START, late)
    wandering.sample("gpu-010", 3, START + timedelta(days=2))
    assert wandering.exposition(early) == straight.exposition(early)
    assert wandering.jobs(START, early) == straight.jobs(START, early)
    assert wandering.faults(START, early) == straight.faults(START, early)


def test_designed_class_shares_match_the_reference_scenario(sim):
    shares = sim.designed_shares()
    for name, target in {"idle": 0.2, "hot": 0.2, "fluctuating": 0.3, "steady": 0.3}.items():
        assert shares[name] == pytest.approx(target, abs=0.05)
    assert {sim.node_class(host) for host in sim.hostnames()} == set(shares)


def test_cluster_average_activity_over_a_week_is_about_thirty_percent(sim, hourly):
    per_hour = [statistics.mean(values[i] for values in hourly.values()) for i in range(len(HOURS))]
    assert 0.25 <= statistics.mean(per_hour) <= 0.35


def test_each_node_behaves_like_its_designed_class(sim, hourly):
    def behaves(node_class: str, values: list[float]) -> bool:
        below_1 = sum(v < 0.01 for v in values) / len(values)
        above_80 = sum(v > 0.8 for v in values) / len(values)
        spread = statistics.pstdev(values)
        return {
            "idle": below_1 >= 0.8,
            "hot": above_80 >= 0.4,
            "fluctuating": spread >= 0.15 and above_80 < 0.3 and below_1 < 0.8,
            "steady": spread < 0.15 and above_80 < 0.05 and below_1 < 0.3,
        }[node_class]

    misfits = [host for host, values in hourly.items() if not behaves(sim.node_class(host), values)]
    assert len(misfits) <= 0.1 * len(hourly), misfits


def test_idle_nodes_belong_to_departments_that_do_not_use_them(sim):
    idle_hosts = {host for host in sim.hostnames() if sim.node_class(host) == "idle"}
    records = sim.jobs(START, WEEK_END)
    on_idle = [r for r in records if set(r.node_names) & idle_hosts]
    # A rare notebook at most: a few jobs a week on 13 nodes, against thousands elsewhere.
    assert len(on_idle) < 0.02 * len(records)


def test_sampled_activity_matches_the_expected_hourly_activity(sim):
    hour = START + timedelta(days=2, hours=14)
    for host in ("gpu-001", "gpu-040"):
        expected = sim.node_hour_activity(host, hour)
        sampled = statistics.mean(
            sim.sample(host, gpu, hour + timedelta(minutes=minute, seconds=30)).gr_active
            for gpu in range(8)
            for minute in range(60)
        )
        assert sampled == pytest.approx(expected, abs=0.03)


def test_gpu_util_overstates_sm_active_as_in_acme(sim):
    util, sm = [], []
    for step in range(0, 24 * 7, 5):
        at = START + timedelta(hours=step, minutes=11)
        for host in sim.hostnames():
            for gpu in range(8):
                sample = sim.sample(host, gpu, at)
                if not sample.blank and sample.util_pct > 0:
                    util.append(sample.util_pct)
                    sm.append(sample.sm_active)
    assert statistics.median(util) > 90
    assert 0.30 <= statistics.median(sm) <= 0.55


def test_power_and_temperature_stay_in_the_models_range(sim):
    at = START + timedelta(days=3, hours=10)
    for spec in sim.nodes:
        for gpu in range(8):
            sample = sim.sample(spec.hostname, gpu, at)
            if sample.blank:
                continue
            ceiling = 700 if "H100" in spec.gpu_model else 400
            assert 50 <= sample.power_w <= ceiling
            assert 20 <= sample.temp_c <= 90
            assert 0 <= sample.fb_used_mib <= 81_920


def test_jobs_never_share_a_gpu(sim):
    held: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for job in sim.sim_jobs(START - timedelta(days=3), WEEK_END):
        if job.start_s is None or job.end_s is None:
            continue
        for node, gpus in job.allocation:
            for gpu in gpus:
                held.setdefault((node, gpu), []).append((job.start_s, job.end_s))
    for intervals in held.values():
        intervals.sort()
        for (_, end), (start, _) in itertools.pairwise(intervals):
            assert start >= end


def test_multi_node_jobs_take_whole_nodes_of_their_department(sim):
    for job in sim.sim_jobs(START, WEEK_END):
        owners = {sim.nodes[node].owner for node in job.node_indices()}
        assert owners <= {job.department}
        if job.node_count > 1:
            assert all(len(gpus) == 8 for _, gpus in job.allocation)


def test_some_jobs_wait_in_the_queue(sim):
    at = START + timedelta(days=3)
    assert any(record.state == "pending" for record in sim.jobs(START, at))
    waits = [j.start_s - j.submit_s for j in sim.sim_jobs(START, WEEK_END) if j.start_s is not None]
    assert sum(wait > 600 for wait in waits) >= 20


def test_job_records_are_ground_truth_in_the_collectors_shape(sim):
    records = sim.jobs(START, START + timedelta(days=1))
    states = Counter(record.state for record in records)
    assert {"completed", "failed", "running"} <= set(states)
    for record in records:
        assert record.source == "slurm"
        assert record.gpu_model in {"h100", "a100"}
        assert record.account in {spec.owner for spec in sim.nodes}
        if record.started_at is not None:
            assert record.submitted_at <= record.started_at
            assert len(record.node_names) == record.node_count
        if record.ended_at is not None and record.started_at is None:
            # Its user cancelled it while it waited: it never ran anywhere.
            assert (record.state, record.node_names) == ("cancelled", ())
            assert record.submitted_at <= record.ended_at
        elif record.ended_at is not None:
            assert record.started_at <= record.ended_at


def test_misconfigured_jobs_carry_the_audited_config(sim):
    jobs = [job for job in sim.sim_jobs(START, WEEK_END) if job.kind != "interactive"]
    by_kind = Counter(job.misconfig for job in jobs)
    assert set(MISCONFIG_KINDS) <= set(by_kind)
    for job in jobs:
        config = job.config
        assert {"env", "image", "mounts", "storage_cache_mode", "launcher_args"} <= set(config)
        env = config["env"]
        if job.misconfig == "nccl_socket":
            assert job.rdma
            assert job.node_count >= 2
            assert "NCCL_IB_HCA" not in env
        elif job.rdma and "NCCL_IB_HCA" not in env:
            # A run of a socket family on one node: the same container, nothing between nodes.
            assert job.node_count == 1
        elif job.rdma:
            assert "NCCL_IB_DISABLE" not in env
        assert (config["storage_cache_mode"] == "metadata-only") == (job.misconfig == "storage_metadata_only")
        assert (job.framework == "pytorch") == (job.misconfig == "stock_framework")
        assert (job.slowdown > 1) == bool(job.misconfig)


def test_misconfigured_jobs_are_slower_and_less_active():
    sim = make_simulator()
    jobs = [job for job in sim.sim_jobs(START, START + timedelta(days=4)) if job.kind == "experiment"]
    clean = [job for job in jobs if not job.misconfig]
    for kind in MISCONFIG_KINDS:
        bad = [job for job in jobs if job.misconfig == kind]
        if not bad:
            continue
        # Every misconfigured run is at least 1.5× slower than it would be (the published cases:
        # 2× for sockets, up to 4× for the stock framework, ~40× for the cache), and slower on
        # average than the healthy runs (whose own speeds vary 6-fold).
        assert min(j.slowdown for j in bad) >= 1.5
        assert statistics.mean(j.iteration_s for j in bad) > 1.2 * statistics.mean(
            j.iteration_s for j in clean
        )
        sm_bad = statistics.mean(j.activity * j.sm_ratio * (1 - j.zero_share) for j in bad)
        sm_clean = statistics.mean(j.activity * j.sm_ratio * (1 - j.zero_share) for j in clean)
        assert sm_bad < 0.8 * sm_clean


@pytest.fixture(scope="module")
def faulty() -> ClusterSimulator:
    """The reference scenario with four faults a day on average."""
    return make_simulator(fault_rate_per_day=4.0)


def test_faults_arrive_at_roughly_the_configured_rate(faulty):
    sim = faulty
    faults = sim.faults(START, WEEK_END)
    assert 0.6 * 28 <= len(faults) <= 1.4 * 28
    assert len({fault.kind for fault in faults}) >= 5
    assert {fault.kind for fault in faults} <= set(FAULT_KINDS)
    for fault in faults:
        job = sim.sim_job(fault.job_external_id)
        assert job.start_s is not None
        assert job.end_s is not None
        assert job.start_s <= fault.occurred_at.timestamp() < job.end_s
        assert fault.node in {sim.nodes[i].hostname for i in job.node_indices()}


def test_jobs_killed_by_a_fault_are_resubmitted_later(sim):
    faults = [f for f in sim.faults(START, START + timedelta(days=5)) if f.kind != "straggler"]
    assert faults
    resubmitted = {job.resubmit_of for job in sim.sim_jobs(START, WEEK_END)}
    assert sum(int(f.job_external_id) in resubmitted for f in faults) >= 0.8 * len(faults)


def test_an_xid_fault_shows_in_the_gpu_metrics(faulty):
    sim = faulty
    xid_faults = [f for f in sim.faults(START, WEEK_END) if f.xid is not None]
    assert xid_faults
    for fault in xid_faults:
        assert fault.gpu is not None
        sample = sim.sample(fault.node, fault.gpu, fault.occurred_at + timedelta(minutes=1))
        assert sample.xid_last == fault.xid
        assert dict(sample.xid_counts) == {fault.xid: 1}
        assert sample.blank == (fault.xid == 79)
        later = sim.sample(fault.node, fault.gpu, fault.occurred_at + timedelta(minutes=10))
        assert later.xid_counts == ()  # outside dcgm-exporter's 5-minute window


def test_an_nccl_hang_keeps_gpus_busy_without_sm_work(faulty):
    sim = faulty
    fault = next(f for f in sim.faults(START, WEEK_END) if f.kind == "nccl_timeout")
    assert fault.gpu is not None
    job = sim.sim_job(fault.job_external_id)
    at = fault.occurred_at + timedelta(minutes=5)
    stuck = sim.sample(fault.node, fault.gpu, at)
    assert stuck.gr_active == 0
    other_rank = 0 if fault.rank != 0 else 1
    node, gpu = job.rank_location(other_rank)
    spinning = sim.sample(sim.nodes[node].hostname, gpu, at)
    assert spinning.util_pct == 100
    assert spinning.gr_active > 0.95
    assert spinning.sm_active < 0.05
