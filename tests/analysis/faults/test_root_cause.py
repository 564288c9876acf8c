"""Root-cause choice: the most fundamental evidence, trusted first; silent ranks; the rank layout."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from efficiency.analysis.faults.root_cause import (
    ROOT_PRIORITY,
    log_root,
    rank_host_index,
    root_evidence,
    silent_ranks,
)
from efficiency.choices import FaultCategory

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@dataclass
class Signal:
    pk: int
    category: str
    minute: int
    trusted: bool = True
    rank: int | None = None

    @property
    def occurred_at(self) -> datetime:
        return T0 + timedelta(minutes=self.minute)


def test_every_root_priority_is_a_fault_category():
    assert set(ROOT_PRIORITY) <= set(FaultCategory.values)
    assert len(set(ROOT_PRIORITY)) == len(ROOT_PRIORITY)


def test_the_gpu_fault_is_the_cause_of_the_nccl_timeouts_that_followed_it():
    timeout = Signal(1, "nccl_timeout_hang", minute=0)
    xid = Signal(2, "hardware_gpu", minute=3)
    assert root_evidence([timeout, xid]) is xid


def test_the_earliest_of_the_root_category_wins_then_the_first_stored():
    later, earlier, same_time = Signal(1, "nvlink", 5), Signal(2, "nvlink", 2), Signal(3, "nvlink", 2)
    assert root_evidence([later, same_time, earlier]) is earlier


def test_job_output_cannot_outrank_a_trusted_signal():
    claimed = Signal(1, "hardware_gpu", minute=0, trusted=False)
    kernel = Signal(2, "software_error", minute=9, trusted=True)
    assert root_evidence([claimed, kernel]) is kernel
    assert root_evidence([claimed, Signal(3, "cuda_oom", 1, trusted=False)]) is claimed


def test_a_category_outside_the_priority_ranks_last():
    unknown = Signal(1, "not_a_category", minute=0)
    assert root_evidence([unknown, Signal(2, "slowdown", 5)]).pk == 2
    with pytest.raises(ValueError, match="no root cause"):
        root_evidence([])


def test_silent_ranks_are_those_that_reported_no_timeout():
    assert silent_ranks([0, 1, 3, None, 5, 6, 7], world_size=8) == [2, 4]
    assert silent_ranks([None], world_size=8) == []  # nobody reported: nothing to compare
    assert silent_ranks([0], world_size=1) == []


def test_ranks_are_laid_out_host_by_host():
    assert [rank_host_index(rank, world_size=16, hosts=2) for rank in (0, 7, 8, 15)] == [0, 0, 1, 1]
    assert rank_host_index(16, world_size=16, hosts=2) is None  # beyond the job
    assert rank_host_index(0, world_size=12, hosts=5) is None  # not an even layout
    assert rank_host_index(0, world_size=0, hosts=2) is None
    assert rank_host_index(0, world_size=8, hosts=0) is None


def test_a_logs_root_is_its_most_fundamental_finding_not_its_first():
    # Xid 79, then the CUDA error it causes, then the peers' timeout: the GPU is the root.
    findings = [
        Signal(1, "nccl_timeout_hang", minute=0),
        Signal(2, "hardware_gpu", minute=1),
        Signal(3, "hardware_gpu", minute=2),
        Signal(4, "software_error", minute=3),
    ]
    assert log_root(findings).pk == 2
    assert log_root([Signal(5, "nccl_socket_fallback", 0), Signal(6, "nccl_timeout_hang", 1)]).pk == 5
    assert log_root([]) is None
