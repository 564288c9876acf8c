"""The quota service's arithmetic, moved to analysis: jobs the backtest replays, pool hours, daily peaks."""

from dataclasses import dataclass

import pytest

from efficiency.analysis.backtest import BacktestJob, backtest_jobs
from efficiency.analysis.capacity import PoolHour, daily_peaks, pool_hours

H = 3600.0


@dataclass
class Row:
    department: str
    submit_s: float
    start_s: float | None
    end_s: float | None
    gpu_model: str = "H100"
    gpus: int = 8
    busy_fraction: float | None = 0.5


def test_backtest_jobs_fill_in_what_the_window_did_not_see():
    rows = [
        Row("a", 0, 10 * H, 12 * H),  # ran 2 h, started inside the window
        Row("a", 0, 10 * H, 14 * H),  # ran 4 h: a's median run is 3 h
        Row("b", -5 * H, -2 * H, None),  # running since before the window: run time so far
        Row("a", 20 * H, None, None),  # still waiting: a's median
        Row("b", 21 * H, None, 23 * H),  # cancelled while waiting: the median of all, 3 h; patience 2 h
    ]
    jobs = backtest_jobs(rows, start_s=0.0, end_s=24 * H)
    assert [job.duration_s for job in jobs] == [2 * H, 4 * H, 26 * H, 3 * H, 3 * H]
    assert [job.started_s for job in jobs] == [None, None, -2 * H, None, None]
    assert [job.patience_s for job in jobs] == [None, None, None, None, 2 * H]
    assert jobs[0] == BacktestJob(queue="a", gpu_model="H100", gpus=8, submit_s=0, duration_s=2 * H,
                                  started_s=None, busy_fraction=0.5, patience_s=None)  # fmt: skip


def test_backtest_jobs_with_no_finished_job_last_an_hour():
    [job] = backtest_jobs([Row("a", 0, None, None)], start_s=0.0, end_s=H)
    assert job.duration_s == H


def test_pool_hours_count_borrowed_gpus_and_the_longest_wait_at_each_hour_end():
    use = {("a", "H100"): [10.0, 20.0], ("b", "H100"): [4.0, 4.0]}
    guarantees = {("a", "H100"): 16, ("b", "H100"): 8}
    jobs = [
        Row("a", 0.5 * H, 1.5 * H, None),
        Row("b", 0.25 * H, None, None),
        Row("b", 0.9 * H, None, 1.2 * H),
    ]
    assert pool_hours(jobs, use, guarantees, start_s=0.0, hours=2) == [
        PoolHour(0.0, 0.75 * H),  # at 1 h: all three wait, the longest since 0.25 h
        PoolHour(4.0, 1.75 * H),  # at 2 h: a borrows 4; only b's first job still waits
    ]


def test_daily_peaks_are_the_p95_of_days_with_demand():
    hourly = [1.0] * 24 + [0.0] * 24 + [float(h) for h in range(24)] + [5.0] * 10  # last day partial
    days, peaks = daily_peaks(hourly)
    assert days == [0.0, 2.0]
    assert peaks[0] == 1.0
    assert peaks[1] == pytest.approx(21.85)  # 0.95 of the way from hour 0 to hour 23
