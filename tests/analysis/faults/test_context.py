"""The rules one line cannot prove: throughput drops against the log's own baseline, and the
Hyperscan prefilter of slow values that lets the scanner skip the normal ones.

Expected results are worked out by hand from the rules in ``context``'s docstring: baseline = the
median of the first normal values (judging from the 2nd value on, frozen at 8), slow = 25% worse,
reported at the 2nd slow value in a row.
"""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.faults import context, scanner
from efficiency.analysis.faults.context import (
    METRICS,
    StreamContext,
    ThroughputTracker,
    metric_value,
    slow_number_pattern,
)
from efficiency.analysis.faults.scanner import scan_bytes

ENGINES = [engine for engine in scanner.ENGINES if engine != "hyperscan" or scanner.hyperscan is not None]


def _rates(values):
    tracker = ThroughputTracker(higher_is_faster=True)
    return [tracker.add(value) for value in values]


def test_a_rate_that_drops_a_quarter_for_two_values_is_reported_at_the_second():
    # Judged from the 3rd value on: 99 is normal (baseline 98), so the baseline is median(100, 96,
    # 99) = 99 and slow means below 74.25: 70 and 60 are a drop, reported at 60.
    assert _rates([100, 96, 99, 70, 60, 61]) == [None, None, None, None, 99.0, None]


def test_one_slow_value_is_not_a_drop_and_a_normal_one_ends_a_run():
    assert _rates([100, 100, 50, 100, 50, 100, 50]) == [None] * 7


def test_the_slow_start_of_a_run_only_lowers_the_first_baseline():
    # Warm-up at 20, then 100s: never slower than the baseline.
    assert _rates([20, 100, 101, 99, 100, 102, 98, 100, 100, 99]) == [None] * 10


def test_after_a_drop_the_baseline_forms_anew_and_a_further_drop_is_reported():
    values = [100, 100, 100, 60, 60, 60, 60, 60, 30, 30]
    # Drop reported at the 2nd 60 (baseline 100); the 60s form the new baseline (median 60 from
    # the 2nd of them); 30 < 45 twice is a second drop.
    assert _rates(values) == [None, None, None, None, 100.0, None, None, None, None, 60.0]


def test_a_time_that_grows_by_a_third_is_slow():
    tracker = ThroughputTracker(higher_is_faster=False)
    # Baseline 10 s; slow above 13.33 s.
    assert [tracker.add(v) for v in [10, 10, 13, 13.4, 14]] == [None, None, None, None, 10.0]


def test_the_baseline_freezes_after_eight_normal_values():
    tracker = ThroughputTracker(higher_is_faster=True)
    for value in [100, 90, 110, 100, 95, 105, 100, 100]:
        tracker.add(value)
    assert tracker.frozen == 100.0
    assert tracker.normal == []
    tracker.add(1000)  # a faster value no longer moves it
    assert tracker.frozen == 100.0


@pytest.mark.parametrize(
    ("line", "literal", "value"),
    [
        (b"Epoch 1: 3%| 30/1000 [00:10<05:00,  1.37it/s, loss=2.1]", b"it/s", 1.37),
        (b"Epoch 2: 100%| 60/60 [06:06<00:00,  6.11s/it]", b"s/it", 1 / 6.11),
        (
            b" iteration 10/ 99 | elapsed time per iteration (ms): 84606.2 | lm",
            b"elapsed time per iteration (ms)",
            84606.2,
        ),
        (b"Speed: 95.71 samples/sec\tTrain-CrossEntropy=3.167187", b"samples/sec", 95.71),
        (b"Epoch: [11][1/48]\tTime 0.470 (1.206)\tData 0.076 (0.004)", b"Time ", 0.47),
        (b"Epoch: [5][0/808]       Time 7.420s (7.420s)    Speed 6.5 samples/s     Data", b"samples/s ", 6.5),
        (b"1000\timages/sec: 195.8 +/- 0.5 (jitter = 15.1)\t7.050", b"images/sec", 195.8),
        (b"Time elapsed: 3 days", b"Time ", None),  # no ``(`` after a value: not the AverageMeter
        (b"rate 1e3it/s", b"it/s", None),  # not a number standing alone
        (b"v1.2.3it/s", b"it/s", None),  # digits and dots of a version, not a number
    ],
)
def test_a_metric_value_is_the_number_beside_its_words(line, literal, value):
    metric = next(m for m in METRICS if m.literal == literal)
    got = metric_value(line, metric, line.index(literal), 0)
    assert got == pytest.approx(value) if value is not None else got is None


def _number(draw_int, draw_frac, zeros):
    return ("0" * zeros + str(draw_int) + (f".{draw_frac}" if draw_frac is not None else "")).encode()


@given(
    bound=st.one_of(
        st.floats(min_value=0, max_value=1e7, allow_nan=False),
        st.integers(0, 10**6).map(float),
        st.integers(0, 10**4).map(lambda n: n / 100),
    ),
    direction=st.sampled_from(["above", "below"]),
    integer=st.integers(0, 10**8),
    fraction=st.one_of(st.none(), st.from_regex(r"\A[0-9]{1,6}\Z")),
    zeros=st.integers(0, 2),
)
def test_the_slow_number_prefilter_matches_every_slow_number(bound, direction, integer, fraction, zeros):
    text = _number(integer, fraction, zeros)
    value = float(text)
    slow = value > bound if direction == "above" else value < bound
    if slow:
        pattern = re.compile(b"(?:" + slow_number_pattern(direction, bound) + rb")\Z")
        assert pattern.match(text), (text, bound, direction)


def test_the_slow_number_prefilter_skips_normal_numbers_a_few_percent_away():
    below = re.compile(b"(?:" + slow_number_pattern("below", 1.0275) + rb")\Z")
    assert below.match(b"0.9")
    assert below.match(b"1.01")
    assert not below.match(b"1.37")
    above = re.compile(b"(?:" + slow_number_pattern("above", 17333.3) + rb")\Z")
    assert above.match(b"17400")
    assert above.match(b"123456.5")
    assert not above.match(b"13000.1")


def _series_log(values):
    return "".join(
        f" iteration {i:5d}/ 99999 | elapsed time per iteration (ms): {v:.1f} | lm loss: 2.1E+00 |\n"
        for i, v in enumerate(values, 1)
    ).encode()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_long_log_reports_each_sustained_drop_once_at_its_second_slow_line(engine):
    # 2,000 steady iterations at 1,000 ms +-2%, a checkpoint spike, a drop to 1,600 ms at line 1201,
    # recovery at 1301 (the 1,600s became the baseline: recovering is no drop), a second drop.
    values = [1000 * (1 + 0.02 * ((i * 7919) % 11 - 5) / 5) for i in range(2000)]
    values[500] = 5000
    values[1200:1300] = [1600] * 100
    values[1600:1700] = [2500] * 100
    findings = scan_bytes(_series_log(values), engine=engine)
    assert [(f.line_no, f.signature_id) for f in findings] == [
        (1202, "throughput-drop"),
        (1602, "throughput-drop"),
    ]
    assert findings[0].value == 1600
    assert findings[0].baseline == pytest.approx(1000, rel=0.03)
    assert findings[1].baseline == 1600


@pytest.mark.parametrize("engine", ENGINES)
def test_tqdm_switching_to_seconds_per_iteration_is_the_same_series_dropping(engine):
    lines = [f"Epoch 0: {i}%|  | {i}/100 [00:{i:02d}<00:10,  2.{i % 3}{i}it/s]" for i in range(10, 20)]
    lines += [f"Epoch 0: {i}%|  | {i}/100 [00:{i:02d}<09:10,  3.52s/it]" for i in range(20, 23)]
    findings = scan_bytes(("\n".join(lines) + "\n").encode(), engine=engine)
    assert [(f.line_no, f.code) for f in findings] == [(12, "it_per_s")]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_context_carries_a_run_from_one_piece_to_the_next(engine):
    ctx = StreamContext()
    first = _series_log([100, 100, 100, 100, 100, 100, 100, 100, 100, 300])
    assert scan_bytes(first, context=ctx, engine=engine) == []
    restored = StreamContext.from_json(ctx.as_json())
    assert restored.trackers["elapsed_ms"].run == 1
    (finding,) = scan_bytes(_series_log([300]), context=restored, engine=engine)
    assert finding.signature_id == "throughput-drop"


def test_a_stored_context_that_cannot_be_read_starts_afresh():
    for junk in (None, [], {"trackers": {"elapsed_ms": {"faster": "x", "normal": "abc"}}}, {"trackers": 7}):
        assert StreamContext.from_json(junk).trackers == {}
    kept = StreamContext.from_json({"trackers": {"nope": {"faster": True}}, "seen": ["lm loss:"]})
    assert kept.trackers == {}
    assert kept.seen == {"lm loss:"}


def test_the_rules_are_the_ones_the_readme_states():
    # The README's fault section quotes these numbers; change both together.
    assert (context.DROP, context.SUSTAINED, context.MIN_BASELINE, context.WINDOW) == (0.25, 2, 2, 8)
