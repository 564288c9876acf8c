"""Training-job and kernel logs as real clusters write them, generated for any time window.

Every line has a time; a call returns the lines whose time falls in ``[since, until)``, so
writing consecutive windows appends exactly what one long window would have written: a tailer
reading by byte offset sees the files grow as on a real cluster.

Job logs (``<root>/<job id>/rank-<N>.log``, one process per GPU):

- every rank: NCCL 2.20 INFO init lines, as NCCL_DEBUG=INFO prints them: the variables NCCL
  echoes from the environment, ``Bootstrap : Using eth0`` and the net-plugin probe (in healthy
  runs too), the network (``NET/IB : Using [0]mlx5_0:1/IB ...`` and ``Using network IB`` on an
  RDMA node with the IB settings; ``NET/Socket : Using [0]eth0:...`` and ``Using network Socket``
  without them, the ``nccl_socket`` misconfiguration, or on a node without RDMA), the comm's
  ``nRanks``/``nNodes``/``localRanks``, and the channel lines of its rings and trees: ``via
  P2P/CUMEM`` inside a node, ``[send]``/``[receive] via NET/IB/<hca>/GDRDMA`` or ``via
  NET/Socket/0`` between nodes (``nccl_network`` says which).
- the last rank: Megatron's arguments dump at start (``megatron_arguments``) and its iteration
  lines (``print_rank_last``), every ``log_interval`` iterations, with a ``[YYYY-MM-DD
  HH:MM:SS]`` prefix in UTC (container clocks); the ``save-checkpoint`` timer after each save.
- rank 0: Megatron's ``saving checkpoint at iteration ...`` and ``successfully saved checkpoint
  from iteration ...`` every ``save_interval`` iterations, with the same time prefix.
- fault text: the PyTorch NCCL watchdog timeout on every rank but the stuck one, ``lm loss: nan``
  iterations, a CUDA OOM traceback, CUDA errors after an Xid, ``slurmstepd`` cancel lines.

Kernel logs (``<root>/kern/<host>.log``): syslog lines ``Mon DD HH:MM:SS host kernel: [uptime]
NVRM: Xid (PCI:0000:18:00): 79, ...`` and the boot banner after a repair.
"""

from collections.abc import Iterator
from datetime import UTC, datetime, tzinfo
from math import ceil, floor
from pathlib import Path
from typing import TYPE_CHECKING

from efficiency.simulator.model import (
    IB_HCAS,
    NCCL_TIMEOUT_MS,
    SimJob,
    _dt,
    _hash_int,
    _ts,
    _unit,
)

if TYPE_CHECKING:
    from efficiency.simulator.model import ClusterSimulator

NCCL_VERSION = "2.20.5"
CUDA_DRIVER_VERSION = 12020
KERNEL_RELEASE = "5.15.0-105-generic"
CHECKPOINT_EVERY_ITERS = 500  # the unit of --save-interval: every save is at a multiple of it
SAVE_INTERVALS = (500, 1000, 2000, 2500, 5000, 10_000)
SAVE_EVERY_S = 3600  # users pick the first interval that keeps saves an hour or more apart

Line = tuple[float, int, str]  # (time, order within the same instant, text)

WATCHDOG_ASYNC = (
    "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
    "subsequent GPU operations might run on corrupted/incomplete data."
)
WATCHDOG_TAKEDOWN = "To avoid data inconsistency, we are taking the entire process down."
OOM_ADVICE = (
    "If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
    "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
CUDA_ERROR_ADVICE = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1."
)
PEER_NCCL_ERROR = (
    "NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or there was "
    f"a network error, NCCL version {NCCL_VERSION}"
)

USER_ERRORS = (
    "FileNotFoundError: [Errno 2] No such file or directory: '/mnt/pfs/datasets/{name}/shard-00417.tar'",
    "KeyError: 'labels'",
    "ValueError: Expected input batch_size (32) to match target batch_size (16).",
    "RuntimeError: shape '[8, -1, 4096]' is invalid for input of size 12582912",
    "AssertionError: micro batch size times data parallel size must divide the global batch size",
)


def rank_count(job: SimJob) -> int:
    """How many rank logs a job writes: one per GPU for training, one for interactive jobs."""
    return 1 if job.kind == "interactive" else job.gpu_count


def rank_pid(job: SimJob, rank: int) -> int:
    """The process id of one rank (also named in kernel Xid lines)."""
    return 10_000 + _hash_int("pid", job.job_id, rank) % 3_000_000


def _node_ip(node_index: int) -> str:
    return f"10.{16 + node_index // 65_000}.{(node_index // 250) % 256}.{node_index % 250 + 2}"


def _clock(seconds: float) -> str:
    return _dt(seconds).strftime("%Y-%m-%d %H:%M:%S")


def _glog_prefix(rank: int, seconds: float, tid: int, where: str) -> str:
    moment = _dt(seconds)
    return f"[rank{rank}]:[E{moment:%m%d} {moment:%H:%M:%S}.{moment.microsecond:06d} {tid} {where}]"


# ------------------------------------------------------------------------------------------------
# Iteration schedule


def _iteration_offset(sim: "ClusterSimulator", job: SimJob) -> int:
    """First iteration of a resubmitted job: the last checkpoint its parent finished saving."""
    if job.resubmit_of is None:
        return 0
    parent = sim._job_by_id[job.resubmit_of]
    assert parent.end_s is not None
    stop_s = parent.fault_s if parent.fault_s is not None else parent.end_s
    loaded = _iteration_offset(sim, parent)
    every = save_interval(parent)
    saved = (loaded + int(_iterations_until(parent, stop_s))) // every * every
    if saved > loaded and _save_window(parent, loaded, saved)[1] >= stop_s:
        saved -= every  # the fault cut that save short
    return max(loaded, saved)


def save_interval(job: SimJob) -> int:
    """A job's ``--save-interval`` in iterations: a multiple of ``CHECKPOINT_EVERY_ITERS``.

    Chosen for the job's healthy speed (a misconfiguration slows the job, not its settings), so a
    save comes every one to two hours.
    """
    healthy_s = job.iteration_s / job.slowdown
    return next((n for n in SAVE_INTERVALS if n * healthy_s >= SAVE_EVERY_S), SAVE_INTERVALS[-1])


def _init_s(job: SimJob) -> float:
    return 45 + 90 * _unit("init", job.job_id)


def _iterations_until(job: SimJob, at_s: float) -> float:
    """Iterations this job has completed (fractional) by ``at_s``."""
    assert job.start_s is not None
    first_s = job.start_s + _init_s(job)
    if at_s <= first_s:
        return 0.0
    if job.straggler_factor > 1 and job.fault_s is not None and at_s > job.fault_s:
        before = max(0.0, job.fault_s - first_s) / job.iteration_s
        return before + (at_s - max(job.fault_s, first_s)) / (job.iteration_s * job.straggler_factor)
    return (at_s - first_s) / job.iteration_s


def _iteration_time(job: SimJob, iterations: float) -> float:
    """Inverse of ``_iterations_until``: when the given number of iterations has completed."""
    assert job.start_s is not None
    first_s = job.start_s + _init_s(job)
    if job.straggler_factor > 1 and job.fault_s is not None:
        before = max(0.0, job.fault_s - first_s) / job.iteration_s
        if iterations > before:
            return max(job.fault_s, first_s) + (iterations - before) * job.iteration_s * job.straggler_factor
    return first_s + iterations * job.iteration_s


def _iteration_stop_s(job: SimJob) -> float:
    """When iteration lines stop: a crash or hang stops them at the fault, otherwise the end."""
    assert job.end_s is not None
    if job.fault is not None and job.fault_s is not None and job.fault.kind not in ("loss_nan", "straggler"):
        return job.fault_s
    return job.end_s


def _iteration_lines(sim: "ClusterSimulator", job: SimJob, since_s: float, until_s: float) -> Iterator[Line]:
    offset = _iteration_offset(sim, job)
    stop_s = min(_iteration_stop_s(job), until_s)
    interval = job.log_interval
    # One step of slack each side against float rounding; the time checks below decide.
    first = max(1, ceil(_iterations_until(job, since_s) / interval) - 1)
    last = floor(_iterations_until(job, stop_s) / interval) + 1
    nan_from = None
    if job.fault is not None and job.fault.kind == "loss_nan" and job.fault_s is not None:
        nan_from = _iterations_until(job, job.fault_s)
    for step in range(first, last + 1):
        done = step * interval
        time_s = _iteration_time(job, done)
        if time_s < since_s or time_s >= stop_s:
            continue
        iteration = offset + done
        if iteration > job.train_iters:
            break
        yield (
            time_s,
            50,
            _iteration_text(job, iteration, time_s, nan=nan_from is not None and done > nan_from),
        )


def _iteration_text(job: SimJob, iteration: int, time_s: float, *, nan: bool) -> str:
    noise = _unit("iter", job.job_id, iteration)
    factor = job.straggler_factor if job.fault_s is not None and time_s > job.fault_s else 1.0
    elapsed_ms = job.iteration_s * factor * 1000 * (0.97 + 0.06 * noise)
    warmup = max(1, job.train_iters // 100)
    max_lr = 3e-4 if job.kind == "pretrain" else 1e-5
    lr = max_lr * min(1.0, iteration / warmup) * (0.1 + 0.9 * max(0.0, 1 - iteration / job.train_iters))
    loss_field = True
    if nan:
        loss_text, grad_text, nan_count = "nan", "nan", job.log_interval
        # Megatron prints a loss only when its average is > 0, which NaN is not: most real runs
        # lose the ``lm loss`` field instead of printing ``nan`` (half the simulated ones do).
        loss_field = _unit("nan-shape", job.job_id) < 0.5
    else:
        loss = 1.7 + 8.8 * (1 + iteration / 300) ** -0.45 + 0.05 * (noise - 0.5)
        loss_text = f"{loss:.6E}"
        grad_text = f"{0.25 + 1.5 * (1 + iteration / 200) ** -0.6 + 0.1 * noise:.3f}"
        nan_count = 0
    return (
        f" [{_clock(time_s)}] iteration {iteration:8d}/{job.train_iters:8d} |"
        f" consumed samples: {iteration * job.global_batch:12d} |"
        f" elapsed time per iteration (ms): {elapsed_ms:.1f} |"
        f" learning rate: {lr:.3E} |"
        f" global batch size: {job.global_batch:5d} |"
        + (f" lm loss: {loss_text} |" if loss_field else "")
        + " loss scale: 1.0 |"
        f" grad norm: {grad_text} |"
        f" number of skipped iterations: {nan_count:3d} |"
        f" number of nan iterations: {nan_count:3d} |"
    )


# ------------------------------------------------------------------------------------------------
# Job logs


def _startup_lines(sim: "ClusterSimulator", job: SimJob, rank: int) -> Iterator[Line]:
    assert job.start_s is not None
    start = job.start_s
    node_index, _ = job.rank_location(rank)
    host = sim.nodes[node_index].hostname
    if job.kind == "interactive":
        stamp = f"[I {_clock(start + 4)}.{rank_pid(job, 0) % 1000:03d} ServerApp]"
        yield start + 4, 0, f"{stamp} Jupyter Server 2.14.0 is running at:"
        yield start + 4, 1, f"{stamp} http://{host}:8888/lab"
        return
    if rank == 0:
        tp, dp = _parallel_sizes(job)
        yield (
            start + 6,
            0,
            f"using world size: {job.gpu_count}, data-parallel size: {dp}, context-parallel size: 1, "
            f"tensor-model-parallel size: {tp}, pipeline-model-parallel size: 1",
        )
        yield start + 6, 500, "> initializing torch distributed ..."
    if rank == job.gpu_count - 1:
        for order, text in enumerate(megatron_arguments_dump(sim, job)):
            yield start + 6, 10 + order, text
    init = start + _init_s(job) - 20 + 5 * _unit("nccl", job.job_id, rank)
    for order, text in enumerate(_nccl_init_lines(sim, job, rank)):
        yield init + order * 0.05, order + 2, text


# ------------------------------------------------------------------------------------------------
# NCCL 2.20 INFO lines (NCCL_DEBUG=INFO, the default subsystems INIT and ENV)
#
# Format strings checked against NCCL v2.20.5-1's source, line shapes against real logs:
# - ``NCCL_SOCKET_IFNAME set by environment to eth0`` (src/misc/socket.cc:331), printed by each
#   interface lookup: bootstrap, then the IB and socket transports' init
#   (https://github.com/aws/aws-ofi-nccl/issues/715).
# - ``NET/Plugin : dlerror=... No plugin found (libnccl-net.so), using internal implementation``
#   (src/net.cc:357; https://github.com/NVIDIA/nccl/issues/1189).
# - ``NCCL_IB_HCA set to mlx5_0,...`` (src/transport/net_ib.cc:206), ``NCCL_IB_DISABLE set by
#   environment to 1.`` and ``NCCL_IB_GID_INDEX set by environment to 3.`` (NCCL_PARAM values,
#   src/misc/param.cc:75, printed when first read: the GID index by the proxy thread at the first
#   IB connection, https://github.com/NVIDIA/nccl/issues/1814), ``NCCL_NET_GDR_LEVEL set by
#   environment to PHB`` (src/graph/paths.cc:242).
# - ``comm 0x... rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0`` (src/init.cc:1125;
#   https://github.com/NVIDIA/nccl/issues/1412, https://github.com/NVIDIA/nccl-tests/issues/252).
# - ``Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM`` (src/transport/p2p.cc:368; cuMem is on by
#   default in 2.20, ``/read`` on A100 NVLink only, src/graph/paths.cc:338;
#   https://github.com/NVIDIA/nccl-tests/issues/252, https://github.com/NVIDIA/nccl/issues/1189).
# - ``Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/7/GDRDMA`` and ``... [receive] via
#   NET/IB/0/GDRDMA`` (src/transport/net.cc:194 and :233; https://github.com/NVIDIA/nccl/issues/1189),
#   ``via NET/Socket/0`` over TCP (https://github.com/NVIDIA/nccl/issues/952).
# - ``Connected all rings`` / ``Connected all trees`` (src/init.cc:1223 and :1233;
#   https://github.com/NVIDIA/nccl/issues/1814).
# NCCL connects peer by peer (src/transport.cc: for i = 1..nRanks-1, receive from rank - i, then
# send to rank + i, each over every channel); P2P prints only the sending side.

NCCL_CHANNELS = 2  # real H100 runs open 16-32; two keep the logs small and show the transport
NCCL_PLUGIN_PROBE = (
    "NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory "
    "No plugin found (libnccl-net.so), using internal implementation"
)


def nccl_network(job: SimJob) -> str:
    """The network NCCL picks for a job: ``IB`` with the RDMA settings on RDMA nodes, else ``Socket``."""
    env = job.config["env"]
    uses_ib = job.rdma and "NCCL_IB_HCA" in env and env.get("NCCL_IB_DISABLE") != "1"
    return "IB" if uses_ib else "Socket"


def _parallel_sizes(job: SimJob) -> tuple[int, int]:
    """(tensor-parallel, data-parallel) sizes: TP within a node, DP across nodes."""
    tp = min(8, job.gpus_per_node)
    return tp, max(1, job.gpu_count // tp)


def _ring_and_trees(job: SimJob, rank: int) -> tuple[int, int, list[int]]:
    """(previous, next) rank in the ring and the rank's tree neighbours.

    The ring runs in rank order, leaving each node from its last rank for the next node's first.
    The tree is a chain inside each node whose first rank links to the first ranks of the nodes
    before and after it.
    """
    world = job.gpu_count
    firsts, first = [], 0
    for _, gpus in job.allocation:
        firsts.append(first)
        first += len(gpus)
    node = max(i for i, f in enumerate(firsts) if f <= rank)
    neighbours = []
    if rank == firsts[node]:
        neighbours += [firsts[i] for i in (node - 1, node + 1) if 0 <= i < len(firsts)]
    else:
        neighbours.append(rank - 1)
    following = firsts[node + 1] if node + 1 < len(firsts) else world
    if rank + 1 < following:
        neighbours.append(rank + 1)
    return (rank - 1) % world, (rank + 1) % world, neighbours


def _connection_lines(job: SimJob, rank: int, sends: set[int], receives: set[int]) -> list[str]:
    """The channel lines of connecting to these peers, in NCCL's order."""
    world = job.gpu_count
    node, gpu = job.rank_location(rank)
    network = nccl_network(job)
    gdr = network == "IB"  # NCCL_NET_GDR_LEVEL=PHB: each GPU shares a PCIe switch with its HCA
    read = "/read" if job.gpu_model == "a100" else ""
    steps = sorted(
        [((rank - peer) % world, 0, peer) for peer in receives]
        + [((peer - rank) % world, 1, peer) for peer in sends]
    )
    lines = []
    for _, sending, peer in steps:
        peer_node, peer_gpu = job.rank_location(peer)
        for channel in range(NCCL_CHANNELS):
            head = f"Channel {channel:02d}/0 : "
            if peer_node == node:
                if sending:
                    lines.append(f"{head}{rank}[{gpu}] -> {peer}[{peer_gpu}] via P2P/CUMEM{read}")
                continue
            device = f"{network}/{gpu if network == 'IB' else 0}{'/GDRDMA' if gdr else ''}"
            if sending:
                lines.append(f"{head}{rank}[{gpu}] -> {peer}[{peer_gpu}] [send] via NET/{device}")
            else:
                lines.append(f"{head}{peer}[{peer_gpu}] -> {rank}[{gpu}] [receive] via NET/{device}")
    return lines


def _nccl_init_lines(sim: "ClusterSimulator", job: SimJob, rank: int) -> list[str]:
    """One rank's NCCL INFO lines from the first NCCL call to ``Init COMPLETE``."""
    world = job.gpu_count
    node_index, gpu = job.rank_location(rank)
    host = sim.nodes[node_index].hostname
    local_ranks = job.ranks_on(node_index)
    local = [r for r, _ in local_ranks].index(rank)
    pid = rank_pid(job, rank)
    tid = pid + 61 + rank % 7
    ip = _node_ip(node_index)
    head = f"{host}:{pid}:{pid} [{local}] NCCL INFO"
    body = f"{host}:{pid}:{tid} [{local}] NCCL INFO"
    proxy = f"{host}:{pid}:{tid + 88} [{local}] NCCL INFO"
    env = job.config["env"]
    ifname = env.get("NCCL_SOCKET_IFNAME")
    found = [f"NCCL_SOCKET_IFNAME set by environment to {ifname}"] if ifname else []
    bootstrap = [
        *(f"{head} {text}" for text in found),
        f"{head} Bootstrap : Using eth0:{ip}<0>",
        f"{head} {NCCL_PLUGIN_PROBE}",
    ]
    driver = f"{head} cudaDriverVersion {CUDA_DRIVER_VERSION}"
    # Rank 0 creates the unique id (bootstrap first); the others start in ncclCommInitRank.
    lines = (
        [*bootstrap, driver, f"NCCL version {NCCL_VERSION}+cuda12.4"] if rank == 0 else [driver, *bootstrap]
    )
    network = nccl_network(job)
    if network == "IB":
        devices = " ".join(f"[{i}]{hca}:1/IB" for i, hca in enumerate(IB_HCAS.split(",")))
        lines += [f"{body} {text}" for text in found]
        lines.append(f"{body} NCCL_IB_HCA set to {env['NCCL_IB_HCA']}")
        lines.append(f"{body} NET/IB : Using {devices} [RO]; OOB eth0:{ip}<0>")
    else:
        if env.get("NCCL_IB_DISABLE") == "1":
            lines.append(f"{body} NCCL_IB_DISABLE set by environment to 1.")
        else:
            lines += [f"{body} {text}" for text in found]
            lines.append(f"{body} NET/IB : No device found.")
        lines += [f"{body} {text}" for text in found]
        lines.append(f"{body} NET/Socket : Using [0]eth0:{ip}<0>")
    lines.append(f"{body} Using non-device net plugin version 0")
    lines.append(f"{body} Using network {network}")
    comm = f"0x{_hash_int('comm', job.job_id, rank) % 16**12:x}"
    comm_id = f"0x{_hash_int('commid', job.job_id) % 16**16:x}"
    bus = sim.pci_address(host, gpu).split(":")[1]
    described = (
        f"comm {comm} rank {rank} nranks {world} cudaDev {local} nvmlDev {gpu} busId {int(bus, 16) << 12:x} "
        f"commId {comm_id}"
    )
    lines.append(f"{body} {described} - Init START")
    if "NCCL_NET_GDR_LEVEL" in env and network == "IB":
        lines.append(f"{body} NCCL_NET_GDR_LEVEL set by environment to {env['NCCL_NET_GDR_LEVEL']}")
    lines.append(
        f"{body} comm {comm} rank {rank} nRanks {world} nNodes {len(job.allocation)} "
        f"localRanks {len(local_ranks)} localRank {local} MNNVL 0"
    )
    ring: list[str] = []
    trees: list[str] = []
    if world > 1:
        # The trees reuse the ring's connections and open only the missing ones.
        previous, following, tree = _ring_and_trees(job, rank)
        ring = _connection_lines(job, rank, {following}, {previous})
        trees = _connection_lines(job, rank, set(tree) - {following}, set(tree) - {previous})
    channels = [*ring, "Connected all rings", *trees, "Connected all trees"]
    gid_shown = "NCCL_IB_GID_INDEX" not in env or network != "IB"
    for text in channels:
        lines.append(f"{body} {text}")
        if not gid_shown and " via NET/" in text:
            lines.append(f"{proxy} NCCL_IB_GID_INDEX set by environment to {env['NCCL_IB_GID_INDEX']}.")
            gid_shown = True
    lines.append(f"{body} {described} - Init COMPLETE")
    return lines


# ------------------------------------------------------------------------------------------------
# Megatron: the arguments dump and checkpoint saves
#
# Shapes from Megatron-LM core_v0.7.0 (mid-2024, the NGC 24.05 era of NCCL 2.20):
# - ``_print_args``: ``'  {} {} {}'.format(arg, '.' * (48 - len(arg)), value)`` sorted by
#   lowercase text between the two rulers
#   (https://github.com/NVIDIA/Megatron-LM/blob/core_v0.7.0/megatron/training/arguments.py#L530).
# - ``saving checkpoint at iteration {:7d} to {} in {} format`` and ``  successfully saved
#   checkpoint from iteration {:7d} to {}``
#   (https://github.com/NVIDIA/Megatron-LM/blob/core_v0.7.0/megatron/training/checkpointing.py#L285,
#   #L360), then the ``save-checkpoint`` timer, ``(min, max) time across ranks (ms):`` and
#   ``    save-checkpoint ................................: (min, max)``, which Megatron prints on the
#   last rank (megatron/core/timers.py#L270-L279).
# Megatron prints the dump and the two checkpoint lines on rank 0 without a time; here they go to
# the last rank, beside the iteration lines, with the iteration lines' `` [YYYY-MM-DD HH:MM:SS]``
# prefix on the checkpoint lines, so one file shows when each save started and ended.

MEGATRON_NUM_WORKERS = 2  # Megatron's --num-workers default
SEQ_LENGTH = 4096
CKPT_FORMAT = "torch"  # --use-dist-ckpt off


def checkpoint_dir(sim: "ClusterSimulator", job: SimJob) -> str:
    """``--save`` (and ``--load``) of a job: a resubmission keeps its original's directory."""
    root = job
    while root.resubmit_of is not None:
        root = sim._job_by_id[root.resubmit_of]
    return f"/mnt/pfs/checkpoints/{root.k8s_name}"


def _launcher_value(job: SimJob, flag: str) -> str | None:
    for arg in job.config["launcher_args"]:
        if arg == flag:
            return "True"
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
    return None


def _micro_batch_size(job: SimJob, global_batch: int, dp: int) -> int:
    for micro in (4, 2, 1)[_hash_int("micro", job.job_id) % 3 :]:
        if global_batch % (micro * dp) == 0:
            return micro
    return 1


def megatron_arguments(sim: "ClusterSimulator", job: SimJob) -> dict[str, object]:
    """The Megatron arguments a training job runs with: its launcher flags, the rest defaults."""
    tp, dp = _parallel_sizes(job)
    global_batch = int(_launcher_value(job, "--global-batch-size") or job.global_batch)
    train_iters = int(_launcher_value(job, "--train-iters") or job.train_iters)
    bf16 = _launcher_value(job, "--bf16") == "True"
    fp16 = _launcher_value(job, "--fp16") == "True"
    save = checkpoint_dir(sim, job)
    return {
        "bf16": bf16,
        "data_parallel_size": dp,
        "fp16": fp16,
        "global_batch_size": global_batch,
        "load": save,
        "log_interval": job.log_interval,
        "lr": 3e-4 if job.kind == "pretrain" else 1e-5,
        "lr_warmup_iters": max(1, train_iters // 100),
        "micro_batch_size": _micro_batch_size(job, global_batch, dp),
        "num_workers": MEGATRON_NUM_WORKERS,
        "params_dtype": "torch.bfloat16" if bf16 else ("torch.float16" if fp16 else "torch.float32"),
        "pipeline_model_parallel_size": 1,
        "save": save,
        "save_interval": save_interval(job),
        "seq_length": SEQ_LENGTH,
        "tensor_model_parallel_size": tp,
        "train_iters": train_iters,
        "use_dist_ckpt": False,
        "world_size": job.gpu_count,
    }


def megatron_arguments_dump(sim: "ClusterSimulator", job: SimJob) -> list[str]:
    """The ``------------------------ arguments ------------------------`` block of a training job."""
    rows = [
        f"  {name} {'.' * (48 - len(name))} {value}" for name, value in megatron_arguments(sim, job).items()
    ]
    return [
        "------------------------ arguments ------------------------",
        *sorted(rows, key=lambda row: row.lower()),
        "-------------------- end of arguments ---------------------",
    ]


def _save_window(job: SimJob, offset: int, iteration: int) -> tuple[float, float]:
    """When the save at ``iteration`` starts and ends (the job resumed at ``offset``).

    Seconds to two minutes, set by the job, with a little jitter; at most 0.8 of the gap to the
    next iteration line, so the lines never interleave (iteration times are not delayed by saves).
    """
    done = iteration - offset
    start_s = _iteration_time(job, done)
    typical_s = 8 + 100 * _unit("save-s", job.job_id) ** 2
    save_s = typical_s * (0.9 + 0.2 * _unit("save", job.job_id, iteration))
    gap_s = _iteration_time(job, (done // job.log_interval + 1) * job.log_interval) - start_s
    return start_s, start_s + min(save_s, 0.8 * gap_s)


def _checkpoint_lines(
    sim: "ClusterSimulator", job: SimJob, rank: int, since_s: float, until_s: float
) -> Iterator[Line]:
    """Rank 0's ``saving``/``successfully saved`` lines and the last rank's save timer."""
    assert job.start_s is not None
    first, last = rank == 0, rank == job.gpu_count - 1
    if job.kind == "interactive" or not (first or last):
        return
    offset = _iteration_offset(sim, job)
    stop_s = _iteration_stop_s(job)
    every = save_interval(job)
    save = checkpoint_dir(sim, job)
    # Three minutes of slack cover the saves that began before the window.
    begin_done = _iterations_until(job, max(job.start_s, since_s - 180))
    end_done = _iterations_until(job, min(stop_s, until_s))
    for k in range(max(1, (offset + int(begin_done)) // every), (offset + int(end_done)) // every + 1):
        iteration = k * every
        done = iteration - offset
        if done <= 0 or iteration > job.train_iters:
            continue
        time_s, end_s = _save_window(job, offset, iteration)
        if time_s >= stop_s:
            break
        if first:
            text = f"saving checkpoint at iteration {iteration:7d} to {save} in {CKPT_FORMAT} format"
            yield time_s, 60, f" [{_clock(time_s)}] {text}"
        if end_s >= stop_s:
            break
        if first:
            text = f"  successfully saved checkpoint from iteration {iteration:7d} to {save}"
            yield end_s, 61, f" [{_clock(end_s)}] {text}"
        if last:
            max_ms = (end_s - time_s) * 1000
            min_ms = max_ms * (0.985 + 0.01 * _unit("save-min", job.job_id, iteration))
            yield end_s, 62, "(min, max) time across ranks (ms):"
            yield end_s, 63, f"    {'save-checkpoint '.ljust(48, '.')}: ({min_ms:.2f}, {max_ms:.2f})"


def _traceback(frames: list[tuple[str, int, str, str]], error: str) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for path, number, function, code in frames:
        lines.append(f'  File "{path}", line {number}, in {function}')
        lines.append(f"    {code}")
    lines.append(error)
    return lines


_TRAIN_FRAMES = [
    ("/workspace/train.py", 412, "<module>", "main()"),
    ("/workspace/train.py", 398, "main", "train(model, optimizer, data_iterator)"),
    ("/workspace/megatron/training/training.py", 1247, "train", "loss_dict, skipped_iter = train_step("),
]


def _fault_lines(sim: "ClusterSimulator", job: SimJob, rank: int) -> Iterator[Line]:
    fault = job.fault
    if fault is None or job.fault_s is None:
        return
    assert job.end_s is not None
    kind = fault.kind
    node_index, _ = job.rank_location(rank)
    local = [r for r, _ in job.ranks_on(node_index)].index(rank)
    pid = rank_pid(job, rank)
    culprit = rank == fault.rank
    if kind == "nccl_timeout":
        if culprit:
            return  # the stuck rank never entered the collective, so its watchdog stays silent
        assert job.hang_end_s is not None
        fire = job.hang_end_s - 5 * _unit("fire", job.job_id, rank)
        ran_ms = max(NCCL_TIMEOUT_MS + 1, int((fire - job.fault_s) * 1000))
        seq = 1000 + _hash_int("seq", job.job_id) % 90_000
        numel = (1 << (20 + _hash_int("numel", job.job_id) % 6)) * 3
        tid = pid + 200
        texts = [
            f"{_glog_prefix(rank, fire, tid, 'ProcessGroupNCCL.cpp:616')} [Rank {rank}] "
            f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
            f"NumelIn={numel}, NumelOut={numel}, Timeout(ms)={NCCL_TIMEOUT_MS}) ran for {ran_ms} "
            "milliseconds before timing out.",
            f"{_glog_prefix(rank, fire, tid, 'ProcessGroupNCCL.cpp:1537')} [PG 0 (default_pg) Rank {rank}] "
            f"Timeout at NCCL work: {seq}, last enqueued NCCL work: {seq}, "
            f"last completed NCCL work: {seq - 1}.",
            f"{_glog_prefix(rank, fire, tid, 'ProcessGroupNCCL.cpp:577')} [Rank {rank}] {WATCHDOG_ASYNC}",
            f"{_glog_prefix(rank, fire, tid, 'ProcessGroupNCCL.cpp:583')} [Rank {rank}] {WATCHDOG_TAKEDOWN}",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
        ]
        for order, text in enumerate(texts):
            yield fire, 100 + order, text
        return
    if kind == "cuda_oom" and culprit:
        total_gib = sim.nodes[node_index].gpu_memory_mib / 1024 - 0.55
        free_gib = 0.3 + 1.5 * _unit("oom-free", job.job_id)
        used_gib = total_gib - free_gib
        error = (
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {local} has a "
            f"total capacity of {total_gib:.2f} GiB of which {free_gib:.2f} GiB is free. Process {pid} has "
            f"{used_gib:.2f} GiB memory in use. Of the allocated memory {used_gib - 1.1:.2f} GiB is "
            f"allocated by PyTorch, and 1.10 GiB is reserved by PyTorch but unallocated. {OOM_ADVICE}"
        )
        frames = [
            *_TRAIN_FRAMES,
            (
                "/workspace/megatron/core/transformer/attention.py",
                331,
                "forward",
                "attn = torch.matmul(q, k.transpose(-2, -1))",
            ),
        ]
        for order, text in enumerate(_traceback(frames, error)):
            yield job.fault_s, 100 + order, text
        return
    if kind in ("xid79", "xid48", "xid74"):
        if culprit:
            message = {
                "xid79": "unspecified launch failure",
                "xid48": "uncorrectable ECC error encountered",
                "xid74": "uncorrectable NVLink error detected during the execution",
            }[kind]
            error = f"RuntimeError: CUDA error: {message}\n{CUDA_ERROR_ADVICE}"
            texts = "\n".join(_traceback(_TRAIN_FRAMES, error)).split("\n")
            for order, text in enumerate(texts):
                yield job.fault_s + 2, 100 + order, text
            return
        if job.gpu_count > 1:
            when = min(job.end_s - 1, job.fault_s + 10 + 20 * _unit("peer", job.job_id, rank))
            yield (
                when,
                100,
                f"torch.distributed.DistBackendError: {PEER_NCCL_ERROR}",
            )


def _end_lines(sim: "ClusterSimulator", job: SimJob, rank: int) -> Iterator[Line]:
    assert job.end_s is not None
    if rank != 0:
        return
    state = job.final_state
    host = sim.nodes[job.allocation[0][0]].hostname
    stamp = _dt(job.end_s).strftime("%Y-%m-%dT%H:%M:%S")
    if state == "CANCELLED":
        yield job.end_s, 200, f"slurmstepd: error: *** JOB {job.job_id} ON {host} CANCELLED AT {stamp} ***"
    elif state == "TIMEOUT":
        yield (
            job.end_s,
            200,
            f"slurmstepd: error: *** JOB {job.job_id} ON {host} CANCELLED AT {stamp} DUE TO TIME LIMIT ***",
        )
    elif state == "FAILED" and job.fault is None and job.kind != "interactive":
        choice = USER_ERRORS[_hash_int("user-error", job.job_id) % len(USER_ERRORS)]
        error = choice.format(name=job.name)
        for order, text in enumerate(_traceback(_TRAIN_FRAMES, error)):
            yield job.end_s - 1, 200 + order, text


def job_log_lines(
    sim: "ClusterSimulator", job: SimJob, rank: int, since_s: float, until_s: float
) -> list[str]:
    """Lines rank ``rank`` of ``job`` writes with a time in ``[since_s, until_s)``, in order."""
    sim._advance(until_s)
    if job.start_s is None or job.start_s >= until_s or rank >= rank_count(job):
        return []
    assert job.end_s is not None
    if job.end_s + 60 < since_s:
        return []
    lines: list[Line] = []
    lines.extend(_startup_lines(sim, job, rank))
    if job.kind != "interactive" and rank == job.gpu_count - 1:
        lines.extend(_iteration_lines(sim, job, since_s, until_s))
    lines.extend(_checkpoint_lines(sim, job, rank, since_s, until_s))
    lines.extend(_fault_lines(sim, job, rank))
    lines.extend(_end_lines(sim, job, rank))
    window = sorted(line for line in lines if since_s <= line[0] < until_s)
    return [text for _, _, text in window]


def write_job_logs(sim: "ClusterSimulator", root: Path, since: datetime, until: datetime) -> int:
    """Append each rank's lines of ``[since, until)`` to ``root/<job>/rank-<N>.log``; return the count."""
    since_s, until_s = _ts(since), _ts(until)
    written = 0
    for job in sim._jobs_between(since_s - 120, until_s):
        if job.start_s is None or job.start_s >= until_s:
            continue
        for rank in range(rank_count(job)):
            lines = job_log_lines(sim, job, rank, since_s, until_s)
            if not lines:
                continue
            folder = root / job.external_id
            folder.mkdir(parents=True, exist_ok=True)
            with (folder / f"rank-{rank}.log").open("a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")
            written += len(lines)
    return written


# ------------------------------------------------------------------------------------------------
# Kernel logs


def _xid_text(sim: "ClusterSimulator", host: str, gpu: int, xid: int, time_s: float) -> list[str]:
    pci = sim.pci_address(host, gpu)
    job = sim._job_at(sim._node_states[sim._index[host]], gpu, time_s)
    owner = "pid='<unknown>', name=<unknown>"
    if job is not None and xid != 79:
        rank = next(r for r, g in job.ranks_on(sim._index[host]) if g == gpu)
        owner = f"pid={rank_pid(job, rank)}, name=python3"
    if xid == 79:
        return [
            f"NVRM: Xid (PCI:{pci}): 79, {owner}, GPU has fallen off the bus.",
            f"NVRM: GPU {pci}.0: GPU has fallen off the bus.",
            "NVRM: A GPU crash dump has been created. If possible, please run",
            "NVRM: nvidia-bug-report.sh as root to collect this data before",
            "NVRM: the NVIDIA kernel module is unloaded.",
        ]
    if xid == 48:
        address = 0x7F000000 + _hash_int("dbe", host, gpu, int(time_s)) % 0xFFFFFF * 0x10
        partition = _hash_int("part", host, gpu, int(time_s)) % 8
        return [
            f"NVRM: Xid (PCI:{pci}): 48, {owner}, An uncorrectable double bit error (DBE) has been "
            f"detected on GPU in the framebuffer at physAddr 0x{address:x} partition {partition}, "
            f"subpartition {partition % 2}"
        ]
    link = _hash_int("link", host, gpu, int(time_s)) % 18
    return [
        f"NVRM: Xid (PCI:{pci}): 74, {owner}, NVLink: fatal error detected on link {link}"
        "(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)"
    ]


def _boot_text(host: str) -> list[str]:
    return [
        f"Linux version {KERNEL_RELEASE} (buildd@lcy02-amd64-054) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) "
        "11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024",
        f"Command line: BOOT_IMAGE=/boot/vmlinuz-{KERNEL_RELEASE} root=/dev/md0 ro iommu=pt hostname={host}",
        "nvidia: module license 'NVIDIA' taints kernel.",
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 22:42:46 UTC 2024",
    ]


def kernel_log_lines(
    sim: "ClusterSimulator", hostname: str, since: datetime, until: datetime, *, timezone: tzinfo = UTC
) -> list[str]:
    """A node's kernel log lines (syslog format, local time of ``timezone``) in ``[since, until)``."""
    since_s, until_s = _ts(since), _ts(until)
    sim._advance(until_s)
    node = sim._node_states[sim._index[hostname]]
    events: list[tuple[float, int, str]] = []
    for boot_s in node.boot_s:
        for order, text in enumerate(_boot_text(hostname)):
            events.append((boot_s + (0.0 if order < 2 else 11.3 + order), order, text))
    for time_s, gpu, xid, _ in node.xids:
        for order, text in enumerate(_xid_text(sim, hostname, gpu, xid, time_s)):
            events.append((time_s, 10 + order, text))
    lines = []
    for time_s, _, text in sorted(events):
        if not since_s <= time_s < until_s:
            continue
        booted = max(b for b in node.boot_s if b <= time_s)
        stamp = _dt(time_s).astimezone(timezone)
        lines.append(
            f"{stamp:%b} {stamp.day:2d} {stamp:%H:%M:%S} {hostname} kernel: [{time_s - booted:12.6f}] {text}"
        )
    return lines


def write_kernel_logs(
    sim: "ClusterSimulator", root: Path, since: datetime, until: datetime, *, timezone: tzinfo = UTC
) -> int:
    """Append each node's kernel lines of ``[since, until)`` to ``root/kern/<host>.log``."""
    folder = root / "kern"
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for spec in sim.nodes:
        lines = kernel_log_lines(sim, spec.hostname, since, until, timezone=timezone)
        # Every node has a kernel log, even a quiet one: create the file so tailers find it.
        with (folder / f"{spec.hostname}.log").open("a", encoding="utf-8") as handle:
            if lines:
                handle.write("\n".join(lines) + "\n")
        written += len(lines)
    return written
