"""Training-job and kernel logs as real clusters write them, generated for any time window.

Every line has a time; a call returns the lines whose time falls in ``[since, until)``, so
writing consecutive windows appends exactly what one long window would have written: a tailer
reading by byte offset sees the files grow as on a real cluster.

Job logs (``<root>/<job id>/rank-<N>.log``, one process per GPU):

- every rank: NCCL INFO init lines. On an RDMA node with the IB settings present NCCL reports
  ``NET/IB : Using [0]mlx5_0:1/IB ...`` and ``Using network IB``; without them (the
  ``nccl_socket`` misconfiguration) or on a node without RDMA, ``NET/Socket : Using [0]eth0:…``
  and ``Using network Socket``.
- the last rank: Megatron-style iteration lines (``print_rank_last``), every ``log_interval``
  iterations, with a ``[YYYY-MM-DD HH:MM:SS]`` prefix in UTC (container clocks).
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
CHECKPOINT_EVERY_ITERS = 500

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
    """First iteration of a resubmitted job: its parent's last checkpoint."""
    if job.resubmit_of is None:
        return 0
    parent = sim._job_by_id[job.resubmit_of]
    assert parent.end_s is not None
    stop_s = parent.fault_s if parent.fault_s is not None else parent.end_s
    done = _iteration_offset(sim, parent) + int(_iterations_until(parent, stop_s))
    return done // CHECKPOINT_EVERY_ITERS * CHECKPOINT_EVERY_ITERS


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
    node_index, gpu = job.rank_location(rank)
    host = sim.nodes[node_index].hostname
    if job.kind == "interactive":
        stamp = f"[I {_clock(start + 4)}.{rank_pid(job, 0) % 1000:03d} ServerApp]"
        yield start + 4, 0, f"{stamp} Jupyter Server 2.14.0 is running at:"
        yield start + 4, 1, f"{stamp} http://{host}:8888/lab"
        return
    world = job.gpu_count
    local_ranks = job.ranks_on(node_index)
    local = [r for r, _ in local_ranks].index(rank)
    pid = rank_pid(job, rank)
    tid = pid + 61 + rank % 7
    ip = _node_ip(node_index)
    if rank == 0:
        tp = min(8, job.gpus_per_node)
        dp = max(1, world // tp)
        yield (
            start + 6,
            0,
            f"using world size: {world}, data-parallel size: {dp}, context-parallel size: 1, "
            f"tensor-model-parallel size: {tp}, pipeline-model-parallel size: 1",
        )
        yield start + 6, 1, "> initializing torch distributed ..."
    init = start + _init_s(job) - 20 + 5 * _unit("nccl", job.job_id, rank)
    head = f"{host}:{pid}:{pid} [{local}]"
    body = f"{host}:{pid}:{tid} [{local}]"
    lines = [
        f"{head} NCCL INFO Bootstrap : Using eth0:{ip}<0>",
        f"{head} NCCL INFO cudaDriverVersion {CUDA_DRIVER_VERSION}",
    ]
    if rank == 0:
        lines.append(f"NCCL version {NCCL_VERSION}+cuda12.4")
    env = job.config["env"]
    uses_ib = job.rdma and "NCCL_IB_HCA" in env and env.get("NCCL_IB_DISABLE") != "1"
    if uses_ib:
        devices = " ".join(f"[{i}]{hca}:1/IB" for i, hca in enumerate(IB_HCAS.split(",")))
        lines.append(f"{body} NCCL INFO NET/IB : Using {devices} [RO]; OOB eth0:{ip}<0>")
        lines.append(f"{body} NCCL INFO Using non-device net plugin version 0")
        lines.append(f"{body} NCCL INFO Using network IB")
    else:
        if env.get("NCCL_IB_DISABLE") != "1":
            lines.append(f"{body} NCCL INFO NET/IB : No device found.")
        lines.append(f"{body} NCCL INFO NET/Socket : Using [0]eth0:{ip}<0>")
        lines.append(f"{body} NCCL INFO Using non-device net plugin version 0")
        lines.append(f"{body} NCCL INFO Using network Socket")
    comm = f"0x{_hash_int('comm', job.job_id, rank) % 16**12:x}"
    comm_id = f"0x{_hash_int('commid', job.job_id) % 16**16:x}"
    bus = sim.pci_address(host, gpu).split(":")[1]
    described = (
        f"comm {comm} rank {rank} nranks {world} cudaDev {local} nvmlDev {gpu} busId {bus}000 "
        f"commId {comm_id}"
    )
    lines.append(f"{body} NCCL INFO {described} - Init START")
    lines.append(f"{body} NCCL INFO {described} - Init COMPLETE")
    for order, text in enumerate(lines):
        yield init + order * 0.05, order + 2, text


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
