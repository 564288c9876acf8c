"""GPU-hours by state: hand-checked hours, and the four states add up to capacity for any input."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.committee.states import (
    DownInterval,
    down_per_hour,
    hour_states,
    merge_intervals,
    state_series,
)

T0 = datetime(2026, 11, 1, tzinfo=UTC)
H = timedelta(hours=1)


def test_hand_checked_hour():
    # 16 GPUs for an hour; 10 held, 6.5 busy; a node of 4 GPUs down half the hour.
    s = hour_states(capacity=16, allocated=10, busy=6.5, down=2)
    assert (s.busy, s.allocated_idle, s.unallocated, s.down) == (6500, 3500, 4000, 2000)
    assert s.gpu_hours("busy") == 6.5


def test_clamping():
    # busy beyond allocated, allocated beyond capacity, down beyond the unallocated part
    s = hour_states(capacity=8, allocated=9, busy=12, down=3)
    assert (s.busy, s.allocated_idle, s.unallocated, s.down) == (8000, 0, 0, 0)
    s = hour_states(capacity=8, allocated=6, busy=1, down=5)
    assert (s.busy, s.allocated_idle, s.unallocated, s.down) == (1000, 5000, 0, 2000)
    s = hour_states(capacity=-1, allocated=float("nan"), busy=-3, down=float("inf"))
    assert (s.capacity, s.busy, s.allocated_idle, s.unallocated, s.down) == (0, 0, 0, 0, 0)


finite = st.floats(min_value=-10, max_value=1e6) | st.sampled_from([float("nan"), float("inf")])


@given(st.lists(st.tuples(finite, finite, finite, finite), max_size=50))
def test_states_add_up_to_capacity(hours):
    series = state_series(
        capacity=[h[0] for h in hours],
        allocated=[h[1] for h in hours],
        busy=[h[2] for h in hours],
        down=[h[3] for h in hours],
    )
    for hour in series.hours:
        assert hour.busy + hour.allocated_idle + hour.unallocated + hour.down == hour.capacity
        assert min(hour.busy, hour.allocated_idle, hour.unallocated, hour.down) >= 0
    parts = sum(series.total(state) for state in ("busy", "allocated_idle", "unallocated", "down"))
    assert abs(parts - series.capacity) <= 1e-9 * max(1.0, series.capacity)


def test_down_per_hour_splits_intervals():
    hours = [T0 + H * i for i in range(3)]
    # 8 GPUs down from 00:30 to 02:15; 4 GPUs from before the period to 00:15
    intervals = [
        DownInterval(8, T0 + H / 2, T0 + 2 * H + H / 4),
        DownInterval(4, T0 - H, T0 + H / 4),
    ]
    assert down_per_hour(intervals, hours) == [4.0 + 1.0, 8.0, 2.0]
    assert down_per_hour([], []) == []


def test_merge_intervals():
    a = (T0, T0 + H)
    b = (T0 + H / 2, T0 + 2 * H)
    c = (T0 + 3 * H, T0 + 4 * H)
    assert merge_intervals([c, b, a]) == [(T0, T0 + 2 * H), c]
