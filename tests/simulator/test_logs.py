"""Job and kernel logs: realistic text, the right evidence for each fault and misconfiguration."""

import filecmp
from datetime import timedelta

import pytest

from efficiency.simulator.model import ClusterSimulator
from tests.simulator.conftest import START, make_simulator

DAY = timedelta(days=1)


@pytest.fixture(scope="module")
def faulty() -> ClusterSimulator:
    """Six faults a day on average, so every kind shows up within the week."""
    return make_simulator(fault_rate_per_day=6.0)


def _lines(sim: ClusterSimulator, job_id: int | str, rank: int) -> list[str]:
    return sim.job_log_lines(job_id, rank, START - 3 * DAY, START + 8 * DAY)


def _is_iteration(line: str) -> bool:
    """A Megatron training-log line (checkpoint lines also say ``iteration``)."""
    return " iteration " in line and "| consumed samples:" in line


def test_socket_lines_appear_exactly_for_jobs_without_the_ib_settings_on_rdma_nodes(sim):
    """A family whose container lacks the NCCL IB settings uses sockets in every run; the runs
    that span nodes are the misconfigured ones (a single-node run sends nothing between nodes)."""
    jobs = [
        job
        for job in sim.sim_jobs(START, START + 4 * DAY)
        if job.rdma and job.kind != "interactive" and job.start_s is not None
    ]
    assert any(job.misconfig == "nccl_socket" for job in jobs)
    for job in jobs:
        start = START.fromtimestamp(job.start_s, tz=START.tzinfo)
        text = "\n".join(sim.job_log_lines(job.job_id, 0, start, start + timedelta(minutes=5)))
        env = job.config["env"]
        socket = "NCCL_IB_HCA" not in env or env.get("NCCL_IB_DISABLE") == "1"
        if job.misconfig == "nccl_socket":
            assert socket
            assert job.node_count >= 2
        elif socket:
            assert job.node_count == 1
        assert ("NCCL INFO NET/Socket : Using [0]eth0:" in text) == socket
        assert ("NCCL INFO Using network Socket" in text) == socket
        assert ("NCCL INFO NET/IB : Using [0]mlx5_0:1/IB" in text) == (not socket)


def test_nodes_without_rdma_always_use_sockets(sim):
    job = next(j for j in sim.sim_jobs(START, START + DAY) if not j.rdma and j.kind != "interactive")
    assert "NCCL INFO Using network Socket" in "\n".join(_lines(sim, job.job_id, 0))


def test_the_last_rank_logs_megatron_iterations(sim):
    job = next(
        j
        for j in sim.sim_jobs(START, START + DAY)
        if j.kind == "pretrain" and j.final_state == "COMPLETED" and j.fault is None
    )
    iterations = [line for line in _lines(sim, job.job_id, job.gpu_count - 1) if _is_iteration(line)]
    assert len(iterations) > 3
    assert "| consumed samples:" in iterations[0]
    assert "| elapsed time per iteration (ms):" in iterations[0]
    assert "| lm loss: " in iterations[0]
    assert "number of nan iterations:   0 |" in iterations[0]
    if job.gpu_count > 1:
        assert not any(_is_iteration(line) for line in _lines(sim, job.job_id, 0))


def test_an_nccl_hang_ends_in_watchdog_timeouts_except_on_the_stuck_rank(faulty):
    fault = next(f for f in faulty.faults(START, START + 7 * DAY) if f.kind == "nccl_timeout")
    job = faulty.sim_job(fault.job_external_id)
    for rank in range(job.gpu_count):
        text = "\n".join(_lines(faulty, job.job_id, rank))
        caught = f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum="
        assert (caught in text) == (rank != fault.rank)
        if rank != fault.rank:
            assert "Timeout(ms)=600000) ran for 6" in text


def test_a_nan_loss_shows_in_the_iteration_lines(faulty):
    fault = next(f for f in faulty.faults(START, START + 7 * DAY) if f.kind == "loss_nan")
    job = faulty.sim_job(fault.job_external_id)
    lines = [line for line in _lines(faulty, job.job_id, job.gpu_count - 1) if _is_iteration(line)]
    nan = [line for line in lines if "lm loss: nan" in line]
    assert nan
    assert lines[-1] == nan[-1]


def test_cuda_oom_is_logged_by_the_failing_rank(faulty):
    fault = next(f for f in faulty.faults(START, START + 7 * DAY) if f.kind == "cuda_oom")
    assert fault.rank is not None
    text = "\n".join(_lines(faulty, fault.job_external_id, fault.rank))
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU " in text


def test_xid_faults_appear_in_the_node_kernel_log(faulty):
    for fault in faulty.faults(START, START + 7 * DAY):
        if fault.xid is None:
            continue
        assert fault.gpu is not None
        lines = faulty.kernel_log_lines(
            fault.node, fault.occurred_at, fault.occurred_at + timedelta(seconds=1)
        )
        pci = faulty.pci_address(fault.node, fault.gpu)
        assert f"NVRM: Xid (PCI:{pci}): {fault.xid}, " in lines[0]
        assert f" {fault.node} kernel: [" in lines[0]


def test_writing_two_windows_appends_what_one_window_writes(tmp_path):
    sim = make_simulator(fault_rate_per_day=6.0)
    begin, middle, end = START + DAY, START + DAY + timedelta(hours=5, minutes=17), START + 2 * DAY
    whole, split = tmp_path / "whole", tmp_path / "split"
    sim.write_job_logs(whole, begin, end)
    sim.write_kernel_logs(whole, begin, end)
    for since, until in ((begin, middle), (middle, end)):
        sim.write_job_logs(split, since, until)
        sim.write_kernel_logs(split, since, until)
    files = sorted(path.relative_to(whole) for path in whole.rglob("*.log"))
    assert len(files) > 100
    assert files == sorted(path.relative_to(split) for path in split.rglob("*.log"))
    _, mismatch, errors = filecmp.cmpfiles(whole, split, [str(f) for f in files], shallow=False)
    assert (mismatch, errors) == ([], [])
