"""Which piece of evidence is an incident's root cause, and where it happened.

Plain functions over the incident's signals (any objects with the attributes named in ``Evidence``:
the fault service passes its ``FaultSignal`` rows). Categories are the ``FaultCategory`` values.
"""

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

# Which evidence is the cause when several kinds come together: the most fundamental first.
ROOT_PRIORITY = (
    "hardware_gpu",
    "hardware_memory_ecc",
    "nvlink",
    "network_rdma",
    "storage_io",
    "cuda_illegal_access",
    "cuda_oom",
    "loss_nan_inf",
    "software_error",
    "nccl_socket_fallback",
    "nccl_timeout_hang",
    "slowdown",
)
HANG = "nccl_timeout_hang"


class Evidence(Protocol):
    """What the choice reads of one signal."""

    pk: int
    category: str
    occurred_at: datetime
    trusted: bool
    rank: int | None


E = TypeVar("E", bound=Evidence)


def root_evidence(signals: Sequence[E], *, priority: Sequence[str] = ROOT_PRIORITY) -> E:
    """The most fundamental evidence, the earliest of its category (then the first stored).

    Job output cannot outrank trusted evidence: when any signal is trusted, the root is chosen
    among the trusted ones only. A category missing from ``priority`` ranks after all of it.
    """
    if not signals:
        raise ValueError("an incident without evidence has no root cause")
    rank_of = {category: index for index, category in enumerate(priority)}
    trusted = [s for s in signals if s.trusted]
    return min(
        trusted or signals, key=lambda s: (rank_of.get(s.category, len(priority)), s.occurred_at, s.pk)
    )


def silent_ranks(reported: Iterable[int | None], *, world_size: int) -> list[int]:
    """The ranks of a hung job that did *not* report a collective timeout, in order.

    In a hang every rank that entered the collective times out in it; those that never entered it
    are silent, and they are where the job got stuck. Empty when no rank reported one (nothing to
    compare against) or for a single-rank job.
    """
    seen = {rank for rank in reported if rank is not None}
    if not seen or world_size <= 1:
        return []
    return [rank for rank in range(world_size) if rank not in seen]


def rank_host_index(rank: int, *, world_size: int, hosts: int) -> int | None:
    """Which of a job's hosts (in hostname order) ran ``rank`` under the usual launch layout.

    srun and torchrun lay ranks out host by host, the same number on each; None when the ranks do
    not divide evenly over the hosts (another layout) or the rank lies beyond them.
    """
    if hosts <= 0 or world_size <= 0 or world_size % hosts:
        return None
    per_host = world_size // hosts
    index = rank // per_host
    return index if index < hosts else None


class Categorised(Protocol):
    category: str


C = TypeVar("C", bound=Categorised)


def log_root(findings: Sequence[C], *, priority: Sequence[str] = ROOT_PRIORITY) -> C | None:
    """The finding that is a log's root cause: the most fundamental category, its first line.

    What one log shows of a failure is a chain: the GPU falls off the bus, CUDA calls fail, the
    peers' collectives time out. The root is the finding of the category first in ``priority``
    (the earliest such line); the rest are its symptoms. None for a log without findings.
    """
    if not findings:
        return None
    rank_of = {category: index for index, category in enumerate(priority)}
    return min(findings, key=lambda f: rank_of.get(f.category, len(priority)))
