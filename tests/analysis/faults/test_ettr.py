from datetime import UTC, datetime, timedelta

import pytest

from efficiency.analysis.faults.ettr import FaultLoss, ettr

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def h(hours):
    return T0 + timedelta(hours=hours)


def test_a_job_without_faults_is_fully_productive():
    assert ettr(h(0), h(10), []) == 1


def test_a_fault_costs_the_work_since_the_checkpoint_and_the_time_without_progress():
    # 10 h job; fault at 6 h, last checkpoint 1 h before, progress again at 7 h: 2 h lost -> 0.8.
    assert ettr(h(0), h(10), [FaultLoss(h(6), 3600, h(7))]) == pytest.approx(0.8)


def test_overlapping_losses_count_once_and_stay_inside_the_job():
    losses = [
        FaultLoss(h(6), 3600, h(7)),  # 5-7 h
        FaultLoss(h(6.5), 1800, h(8)),  # 6-8 h: overlaps -> 5-8 h = 3 h
        FaultLoss(h(0.5), 7200, h(1)),  # rollback before the start is clipped: 0-1 h
        FaultLoss(h(9.5), 0, None),  # never recovered: until the end, 0.5 h
    ]
    assert ettr(h(0), h(10), losses) == pytest.approx((10 - 3 - 1 - 0.5) / 10)


def test_no_wall_time_has_no_ratio():
    assert ettr(h(1), h(1), []) is None
