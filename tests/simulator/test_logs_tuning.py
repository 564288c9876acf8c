"""What job logs tell the tuning rules: NCCL transports per channel, NCCL variables the environment
sets, Megatron's arguments and checkpoint saves, each in the shape real runs print."""

import itertools
import re
from datetime import UTC, datetime, timedelta

import pytest

from efficiency.analysis.faults.scanner import scan_bytes
from efficiency.analysis.faults.signatures import SIGNATURES_BY_ID
from efficiency.simulator.logs import (
    CHECKPOINT_EVERY_ITERS,
    NCCL_PLUGIN_PROBE,
    nccl_network,
    save_interval,
)
from efficiency.simulator.model import IB_HCAS, ClusterSimulator, SimJob, misconfig_truth
from tests.simulator.conftest import START, WEEK_END, make_simulator

DAY = timedelta(days=1)
# NCCL 2.20's src/transport/p2p.cc and net.cc formats: ``%d[%d] -> %d[%d]`` is rank[nvmlDev].
CHANNEL = re.compile(
    r" NCCL INFO Channel (\d\d)/0 : (\d+)\[(\d+)\] -> (\d+)\[(\d+)\] (?:\[(send|receive)\] )?via (\S+)$"
)
ARGUMENT = re.compile(r"^  (\w+) (\.+) (.*)$")
STAMP = re.compile(r"^ \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] ")
SAVING = re.compile(r"\] saving checkpoint at iteration +(\d+) to (\S+) in torch format$")
SAVED = re.compile(r"\]   successfully saved checkpoint from iteration +(\d+) to (\S+)$")
ITERATION = re.compile(r"\] iteration +(\d+)/ *\d+ \| consumed samples:")
SAVE_TIMER = re.compile(r"^    save-checkpoint \.+: \(([\d.]+), ([\d.]+)\)$")
SOCKET_FALLBACK = {"nccl-socket-fallback", "nccl-socket-fallback-no-ib"}


def _lines(sim: ClusterSimulator, job: SimJob, rank: int) -> list[str]:
    return sim.job_log_lines(job.job_id, rank, START - 3 * DAY, WEEK_END + DAY)


def _training_jobs(sim: ClusterSimulator, days: int = 4) -> list[SimJob]:
    return [
        job
        for job in sim.sim_jobs(START, START + days * DAY)
        if job.kind != "interactive" and job.start_s is not None
    ]


def _channels(lines: list[str]) -> list[tuple[int, int, str | None, str]]:
    """(from rank, to rank, send/receive/None, transport) of each channel line."""
    found = []
    for line in lines:
        match = CHANNEL.search(line)
        if match:
            found.append((int(match[2]), int(match[4]), match[6], match[7]))
    return found


def _node(job: SimJob, rank: int) -> int:
    return job.rank_location(rank)[0]


def _node_edges(job: SimJob) -> list[int]:
    """The first and last rank on each node: the ranks whose rings and trees cross nodes."""
    edges, first = [], 0
    for _, gpus in job.allocation:
        edges += [first, first + len(gpus) - 1]
        first += len(gpus)
    return sorted(set(edges))


def _between_nodes(job: SimJob, rank: int, lines: list[str]) -> list[str]:
    return [via for src, dst, _, via in _channels(lines) if _node(job, src) != _node(job, dst)]


def _time(line: str) -> datetime:
    match = STAMP.match(line)
    assert match, line
    return datetime.fromisoformat(match[1]).replace(tzinfo=UTC)


# ------------------------------------------------------------------------------------------------
# NCCL transports


def test_healthy_multi_node_jobs_on_rdma_nodes_connect_nodes_over_ib_with_gdrdma(sim):
    jobs = [
        job
        for job in _training_jobs(sim)
        if job.node_count > 1 and job.rdma and misconfig_truth(job) != "nccl_socket"
    ]
    assert jobs
    for job in jobs[:12]:
        assert nccl_network(job) == "IB"
        for rank in _node_edges(job):
            lines = _lines(sim, job, rank)
            text = "\n".join(lines)
            # The lines that alarm at a glance are in healthy IB runs too.
            assert " NCCL INFO Bootstrap : Using eth0:" in text
            assert f" NCCL INFO {NCCL_PLUGIN_PROBE}" in text
            assert " NCCL INFO Using network IB" in text
            between = _between_nodes(job, rank, lines)
            assert between
            assert all(re.fullmatch(r"NET/IB/[0-7]/GDRDMA", via) for via in between)
            assert "via NET/Socket" not in text


def test_socket_misconfigured_jobs_connect_nodes_over_sockets(sim):
    jobs = [job for job in _training_jobs(sim, days=7) if misconfig_truth(job) == "nccl_socket"]
    assert jobs
    for job in jobs:
        assert nccl_network(job) == "Socket"
        for rank in _node_edges(job):
            lines = _lines(sim, job, rank)
            between = _between_nodes(job, rank, lines)
            assert between
            assert set(between) == {"NET/Socket/0"}
            assert not any("via NET/IB" in line for line in lines)


def test_every_socket_misconfigured_job_spans_several_rdma_nodes(sim):
    jobs = [job for job in sim.sim_jobs(START, WEEK_END) if job.kind != "interactive"]
    socket = [job for job in jobs if misconfig_truth(job) == "nccl_socket"]
    assert socket
    for job in socket:
        assert job.rdma
        assert job.node_count >= 2
        assert job.start_s is None or len(job.allocation) >= 2
    # ... and on RDMA nodes the other jobs without the IB settings are their families' runs on
    # one node, which send nothing between nodes.
    for job in jobs:
        if job.rdma and nccl_network(job) == "Socket" and misconfig_truth(job) != "nccl_socket":
            assert job.node_count == 1


def test_single_node_jobs_connect_their_gpus_over_p2p_only(sim):
    jobs = [job for job in _training_jobs(sim) if job.node_count == 1]
    assert {job.gpu_model for job in jobs if job.gpu_count > 1} == {"h100", "a100"}
    for job in jobs[:40]:
        for rank in range(job.gpu_count):
            lines = _lines(sim, job, rank)
            channels = _channels(lines)
            assert bool(channels) == (job.gpu_count > 1)
            # NVLink P2P reads only on Ampere (NCCL 2.20 src/graph/paths.cc).
            p2p = "P2P/CUMEM/read" if job.gpu_model == "a100" else "P2P/CUMEM"
            assert {(side, via) for _, _, side, via in channels} <= {(None, p2p)}
            assert any(line.endswith(" NCCL INFO Connected all trees") for line in lines)


def test_each_rank_reports_its_comm_then_connects_rings_before_trees(sim):
    job = next(job for job in _training_jobs(sim) if job.node_count > 1)
    for rank in range(job.gpu_count):
        node = _node(job, rank)
        local = [r for r, _ in job.ranks_on(node)]
        lines = _lines(sim, job, rank)
        summary = (
            f"rank {rank} nRanks {job.gpu_count} nNodes {job.node_count} "
            f"localRanks {len(local)} localRank {local.index(rank)} MNNVL 0"
        )
        steps = [
            next(i for i, line in enumerate(lines) if line.endswith(" - Init START")),
            next(i for i, line in enumerate(lines) if line.endswith(summary)),
            next(i for i, line in enumerate(lines) if line.endswith(" NCCL INFO Connected all rings")),
            next(i for i, line in enumerate(lines) if line.endswith(" NCCL INFO Connected all trees")),
            next(i for i, line in enumerate(lines) if line.endswith(" - Init COMPLETE")),
        ]
        assert steps == sorted(steps)
        # Two channels: every connection is listed once per channel.
        channels = _channels(lines)
        assert {line[:2] for line in channels} == {(src, dst) for src, dst, _, _ in channels}
        assert len(channels) % 2 == 0


def test_nccl_echoes_the_variables_the_environment_sets(sim):
    jobs = _training_jobs(sim, days=7)
    ib = next(job for job in jobs if job.node_count > 1 and nccl_network(job) == "IB")
    text = "\n".join(_lines(sim, ib, 0))
    assert " NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0" in text
    assert f" NCCL INFO NCCL_IB_HCA set to {IB_HCAS}" in text
    assert " NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PHB" in text
    assert " NCCL INFO NCCL_IB_GID_INDEX set by environment to 3." in text
    assert "NCCL_IB_DISABLE" not in text
    disabled = [job for job in jobs if job.config["env"].get("NCCL_IB_DISABLE") == "1"]
    assert disabled
    for job in disabled:
        text = "\n".join(_lines(sim, job, 0))
        assert " NCCL INFO NCCL_IB_DISABLE set by environment to 1." in text
        assert "NCCL_IB_HCA" not in text
        assert "NET/IB : No device found." not in text


# ------------------------------------------------------------------------------------------------
# Megatron


def _launcher(job: SimJob, flag: str) -> str:
    return next(arg.split("=", 1)[1] for arg in job.config["launcher_args"] if arg.startswith(flag + "="))


def _arguments(lines: list[str]) -> dict[str, str]:
    begin = lines.index("------------------------ arguments ------------------------")
    end = lines.index("-------------------- end of arguments ---------------------")
    rows = lines[begin + 1 : end]
    assert rows == sorted(rows, key=str.lower)
    found = {}
    for row in rows:
        match = ARGUMENT.match(row)
        assert match, row
        assert len(match[1]) + len(match[2]) == 48  # Megatron pads names with dots to 48
        found[match[1]] = match[3]
    return found


def test_the_arguments_dump_on_the_last_rank_matches_the_launcher(sim):
    jobs = [job for job in _training_jobs(sim) if job.gpu_count > 1][:20]
    assert jobs
    for job in jobs:
        assert "--bf16" in job.config["launcher_args"]
        arguments = _arguments(_lines(sim, job, job.gpu_count - 1))
        assert arguments["bf16"] == "True"
        assert arguments["fp16"] == "False"
        assert arguments["params_dtype"] == "torch.bfloat16"
        assert arguments["global_batch_size"] == _launcher(job, "--global-batch-size")
        assert arguments["train_iters"] == _launcher(job, "--train-iters")
        assert int(arguments["world_size"]) == job.gpu_count
        tp, dp = int(arguments["tensor_model_parallel_size"]), int(arguments["data_parallel_size"])
        assert tp * dp == job.gpu_count
        assert arguments["num_workers"] == "2"
        assert int(arguments["log_interval"]) == job.log_interval
        assert int(arguments["save_interval"]) == save_interval(job)
        assert save_interval(job) % CHECKPOINT_EVERY_ITERS == 0
        assert arguments["save"] == arguments["load"] == f"/mnt/pfs/checkpoints/{job.name}-{job.job_id}"
        assert not any("arguments ---" in line for line in _lines(sim, job, 0))


def _saves(lines: list[str]) -> list[tuple[int, datetime, datetime]]:
    """(iteration, start, end) of each finished save on rank 0."""
    started = {int(m[1]): _time(line) for line in lines if (m := SAVING.search(line))}
    return [(int(m[1]), started[int(m[1])], _time(line)) for line in lines if (m := SAVED.search(line))]


def test_checkpoint_saves_come_every_save_interval_and_take_seconds_to_minutes(sim):
    jobs = [
        job
        for job in _training_jobs(sim)
        if job.gpu_count > 1
        and job.fault is None
        and job.resubmit_of is None
        and job.final_state == "COMPLETED"
    ]
    checked = 0
    for job in jobs:
        first, last = _lines(sim, job, 0), _lines(sim, job, job.gpu_count - 1)
        saves = _saves(first)
        if len(saves) < 3:
            continue
        every = save_interval(job)
        iterations = [iteration for iteration, _, _ in saves]
        assert iterations == list(range(every, every * (len(saves) + 1), every))
        for (_, start, end), (_, next_start, _) in itertools.pairwise(saves):
            assert timedelta(0) <= end - start <= timedelta(seconds=151)
            spacing_s = (next_start - start).total_seconds()
            assert spacing_s == pytest.approx(every * job.iteration_s, abs=2)
            assert spacing_s >= 3600 * job.slowdown - 2  # an hour apart at the job's healthy speed
        # The last rank times each save (Megatron's save-checkpoint timer), in milliseconds.
        timers = [float(m[2]) for line in last if (m := SAVE_TIMER.match(line))]
        assert len(timers) == len(saves)
        for (_, start, end), max_ms in zip(saves, timers, strict=True):
            assert max_ms / 1000 == pytest.approx((end - start).total_seconds(), abs=1)
        assert not any(SAVING.search(line) for line in last)
        # Training waits for the save: no iteration is logged while one runs.
        logged = [_time(line) for line in last if ITERATION.search(line)]
        assert not any(start < at < end for _, start, end in saves for at in logged)
        checked += 1
        if checked == 5:
            break
    assert checked


@pytest.fixture(scope="module")
def faulty() -> ClusterSimulator:
    return make_simulator(fault_rate_per_day=6.0)


def test_a_resubmission_resumes_from_the_last_save_its_parent_finished_before_the_fault(faulty):
    resubmitted = [
        job
        for job in faulty.sim_jobs(START, WEEK_END)
        if job.resubmit_of is not None and job.start_s is not None and job.kind != "interactive"
    ]
    resumed = 0
    for job in resubmitted:
        parent = faulty.sim_job(job.resubmit_of)
        assert parent.fault_s is not None
        fault = datetime.fromtimestamp(parent.fault_s, tz=UTC)
        # After a NaN loss the later saves hold NaN weights: the user goes back before it.
        saves = [save for save in _saves(_lines(faulty, parent, 0)) if save[2] < fault]
        last = _lines(faulty, job, job.gpu_count - 1)
        first_iteration = next(int(m[1]) for line in last if (m := ITERATION.search(line)))
        loaded = saves[-1][0] if saves else 0
        assert first_iteration == loaded + job.log_interval
        assert _arguments(last)["load"] == _arguments(_lines(faulty, parent, parent.gpu_count - 1))["save"]
        resumed += bool(saves)
    assert resumed


# ------------------------------------------------------------------------------------------------
# Windows and the fault scanner


def test_consecutive_windows_append_what_one_window_writes_through_init_and_saves(sim):
    job = next(
        job
        for job in _training_jobs(sim)
        if job.node_count > 1 and job.fault is None and len(_saves(_lines(sim, job, 0))) >= 2
    )
    assert job.start_s is not None
    start = datetime.fromtimestamp(job.start_s, tz=UTC)
    (_, save_start, save_end), *_ = _saves(_lines(sim, job, 0))
    # Every second of the start (the NCCL init lines of a rank span about 1.5 s) and into a save.
    cuts = sorted(
        {start + timedelta(seconds=seconds) for seconds in [*range(150), 6.5, 3600]}
        | {save_start, save_start + (save_end - save_start) / 2, save_end}
    )
    end = save_end + DAY
    for rank in (0, job.gpu_count // 2, job.gpu_count - 1):
        whole = sim.job_log_lines(job.job_id, rank, start - DAY, end)
        pieces = []
        for since, until in zip([start - DAY, *cuts], [*cuts, end], strict=True):
            pieces += sim.job_log_lines(job.job_id, rank, since, until)
        assert pieces == whole


def test_healthy_jobs_raise_no_fault_and_socket_channels_only_the_socket_fallback(sim):
    jobs = [
        job
        for job in sim.sim_jobs(START + DAY, START + 2 * DAY)
        if job.kind != "interactive"
        and job.start_s is not None
        and job.fault is None
        and job.final_state != "FAILED"
    ]
    kinds: dict[tuple[str, bool], list[SimJob]] = {}
    for job in jobs:
        kinds.setdefault((nccl_network(job), job.node_count > 1), []).append(job)
    assert set(kinds) == {("IB", True), ("IB", False), ("Socket", True), ("Socket", False)}
    for job in itertools.chain.from_iterable(group[:12] for group in kinds.values()):
        for rank in _node_edges(job):
            lines = _lines(sim, job, rank)
            found = {f.signature_id for f in scan_bytes("\n".join(lines).encode(), year=START.year)}
            if nccl_network(job) == "IB":
                assert found == set()
                continue
            assert found <= SOCKET_FALLBACK
            # The channel lines only repeat what ``Using network Socket`` already said.
            quiet = [line for line in lines if not CHANNEL.search(line)]
            before = {f.signature_id for f in scan_bytes("\n".join(quiet).encode(), year=START.year)}
            assert {SIGNATURES_BY_ID[s].category for s in found} == {
                SIGNATURES_BY_ID[s].category for s in before
            }
