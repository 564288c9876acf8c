from datetime import UTC, datetime, timedelta

from efficiency.analysis.idle import IdleHour, find_idle_stretches

T = datetime(2026, 11, 2, 0, tzinfo=UTC)


def idle(job, hour, gpus=8):
    return IdleHour(job, T + timedelta(hours=hour), gpus * 3600.0)


def test_consecutive_idle_hours_make_one_stretch_with_the_gpu_hours_held():
    (stretch,) = find_idle_stretches([idle(1, 0), idle(1, 1), idle(1, 2)], min_hours=2)
    assert (stretch.start, stretch.end, stretch.hours) == (T, T + timedelta(hours=3), 3)
    assert stretch.allocated_gpu_s / 3600 == 24


def test_a_missing_hour_splits_stretches_and_short_ones_are_dropped():
    stretches = find_idle_stretches([idle(1, 0), idle(1, 1), idle(1, 3)], min_hours=2)
    assert [(s.start, s.hours) for s in stretches] == [(T, 2)]


def test_jobs_do_not_merge_and_the_biggest_waste_comes_first():
    rows = [idle(1, 0, gpus=1), idle(1, 1, gpus=1), idle(2, 0, gpus=8), idle(2, 1, gpus=8)]
    assert [s.job_id for s in find_idle_stretches(rows, min_hours=2)] == [2, 1]


def test_no_idle_hours_no_stretches():
    assert find_idle_stretches([], min_hours=1) == []
