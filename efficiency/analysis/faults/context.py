"""What one line cannot prove: a throughput that drops against the log's own baseline.

A slowdown shows only as numbers: the iteration lines keep their shape while ``samples/sec`` falls
or ``elapsed time per iteration`` grows. ``ThroughputTracker`` follows each *metric* of one log
(one file, one stream) in order and reports the value at which a drop has lasted ``SUSTAINED``
values in a row. The rules (the README's fault section states them for users):

- **Metrics.** ``METRICS`` lists the shapes real training logs print: Megatron's ``elapsed time
  per iteration (ms): 812.3``, ``samples per second: 95.1`` and ``TFLOPs: 149.10``, tqdm's
  ``3.52it/s`` (and ``2.10s/it``, which tqdm switches to when an iteration takes more than a
  second: read as its inverse, so the two are one series), ``95.71 samples/sec``, ``images/sec``,
  ``tokens/s``, the ``Time 0.470 (1.206)`` of PyTorch's ``AverageMeter``. A value is the run of
  digits (and one dot) right beside the metric's words; anything else there is no value.
- **Baseline.** The median of the metric's first values: it judges from the ``MIN_BASELINE``-th
  value on and keeps forming until ``WINDOW`` normal values are known, then stays. Slow values
  never enter it.
- **Slow.** A rate below ``(1 - DROP)`` of the baseline, a time above ``1 / (1 - DROP)`` of it.
- **Reported** once per drop: at its ``SUSTAINED``-th slow value in a row (a normal value ends a
  run). The baseline then forms anew from the values that follow, so a drop that lasts becomes the
  new normal and a further drop is reported again. One slow value (a checkpoint save, an
  evaluation) is not a slowdown; neither is the slow start of a run, which only makes the first
  baseline lower.

``StreamContext`` is everything a scan must remember about a log between two pieces of it (the
trackers, and the ``Signature.after`` literals seen); it is plain JSON for the portal, which scans
each log stream piece by piece as it is collected.

A frozen baseline is what lets the scanner keep up with grep: past the ``WINDOW`` values that form
it, only values beyond the slow threshold matter, and ``slow_number_pattern`` writes a pattern that
matches (a superset of) exactly those, so the multi-pattern engine skips the normal ones.
"""

import math
import re
from dataclasses import dataclass, field

WINDOW = 8
MIN_BASELINE = 2
DROP = 0.25
SUSTAINED = 2
# A value is within this many bytes before the metric's words (or this many after them).
VALUE_REACH = 32

NUMBER = rb"[0-9]+(?:\.[0-9]+)?"


@dataclass(frozen=True, slots=True)
class Metric:
    """One throughput shape: its words, where its value stands, and which way is slow.

    ``after``: the value follows the words (``samples per second: 95.1``), matched from the end of
    the words by ``exact`` (group 1 is the number); else it precedes them (``3.52it/s``), found in
    the ``VALUE_REACH`` bytes before them. ``gap``: a Hyperscan pattern for what may stand between
    words and value, as loose as ``exact`` or looser (the engine's prefilter).
    """

    key: str  # the series it belongs to (s/it joins it/s)
    literal: bytes
    after: bool
    higher_is_faster: bool
    exact: re.Pattern[bytes]
    gap: bytes
    inverse: bool = False  # s/it: read as it/s


def _after(separator: bytes, tail: bytes = rb"(?![0-9.])") -> re.Pattern[bytes]:
    return re.compile(separator + b"(" + NUMBER + b")" + tail)


_BEFORE = re.compile(rb"(?<![0-9.A-Za-z_])(" + NUMBER + rb") ?\Z")
_COLON = _after(rb": ?")

METRICS = (
    Metric("elapsed_ms", b"elapsed time per iteration (ms)", True, False, _COLON, b": ?"),
    Metric("elapsed_s", b"elapsed time per iteration (s)", True, False, _COLON, b": ?"),
    Metric("iter_time", b"iter_time", True, False, _COLON, b": ?"),
    Metric("samples_per_second", b"samples per second", True, True, _COLON, b": ?"),
    Metric("tflops", b"TFLOPs", True, True, _COLON, b": ?"),
    Metric("tflops_per_gpu", b"(TFLOP/s/GPU)", True, True, _COLON, b": ?"),
    # PyTorch's AverageMeter: ``Time 0.470 (1.206)``, ``Time 7.420s (7.420s)``: value, then average.
    Metric("time_meter", b"Time ", True, False, _after(b"", rb"s? \("), b""),
    Metric("samples_per_sec", b"samples/sec", False, True, _BEFORE, b" ?"),
    Metric("samples_per_s", b"samples/s ", False, True, _BEFORE, b" ?"),
    Metric("images_per_sec", b"images/sec", True, True, _COLON, b": ?"),
    Metric("img_per_sec", b"img/sec", False, True, _BEFORE, b" ?"),
    Metric("tokens_per_s", b"tokens/s", False, True, _BEFORE, b" ?"),
    Metric("it_per_s", b"it/s", False, True, _BEFORE, b" ?"),
    Metric("it_per_s", b"s/it", False, True, _BEFORE, b" ?", inverse=True),
)


def metric_value(data: bytes | bytearray, metric: Metric, start: int, floor: int) -> float | None:
    """The value beside the occurrence of ``metric.literal`` at ``data[start:]``, if it has one.

    ``floor``: where the data may be read back to (the start of a line or before; the value
    pattern never crosses a newline).
    """
    if metric.after:
        end = start + len(metric.literal)
        match = metric.exact.match(data, end, end + VALUE_REACH)
    else:
        match = metric.exact.search(data, max(floor, start - VALUE_REACH), start)
    if match is None:
        return None
    value = float(match[1])
    if metric.inverse:
        return 1.0 / value if value > 0 else None
    return value


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


@dataclass(slots=True)
class ThroughputTracker:
    """One metric's series in one log; ``add`` says when a drop has lasted long enough to report."""

    higher_is_faster: bool
    normal: list[float] = field(default_factory=list)  # the values forming the baseline
    frozen: float | None = None  # the baseline, once WINDOW normal values formed it
    run: int = 0  # slow values in a row

    def baseline(self) -> float | None:
        if self.frozen is not None:
            return self.frozen
        return _median(self.normal) if len(self.normal) >= MIN_BASELINE else None

    def is_slow(self, value: float, baseline: float) -> bool:
        if self.higher_is_faster:
            return value < baseline * (1 - DROP)
        return value > baseline / (1 - DROP)

    def add(self, value: float) -> float | None:
        """Take the next value; the baseline it fell from when this value completes a drop."""
        baseline = self.baseline()
        if baseline is not None and self.is_slow(value, baseline):
            self.run += 1
            if self.run < SUSTAINED:
                return None
            self.normal, self.frozen, self.run = [], None, 0  # the baseline forms anew
            return baseline
        self.run = 0
        if self.frozen is None:
            self.normal.append(value)
            if len(self.normal) == WINDOW:
                self.frozen, self.normal = _median(self.normal), []
        return None

    def as_json(self) -> dict:
        return {
            "faster": self.higher_is_faster,
            "normal": self.normal,
            "frozen": self.frozen,
            "run": self.run,
        }

    @classmethod
    def from_json(cls, data: dict) -> "ThroughputTracker":
        frozen = data.get("frozen")
        return cls(
            higher_is_faster=bool(data["faster"]),
            normal=[float(v) for v in data.get("normal") or []][: WINDOW - 1],
            frozen=None if frozen is None else float(frozen),
            run=min(max(int(data.get("run") or 0), 0), SUSTAINED - 1),
        )


@dataclass(slots=True)
class StreamContext:
    """What a scan remembers about one log between two pieces of it."""

    trackers: dict[str, ThroughputTracker] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)  # ``Signature.after`` literals seen in earlier lines

    def tracker(self, metric: Metric) -> ThroughputTracker:
        tracker = self.trackers.get(metric.key)
        if tracker is None:
            tracker = self.trackers[metric.key] = ThroughputTracker(metric.higher_is_faster)
        return tracker

    def as_json(self) -> dict:
        return {
            "trackers": {key: tracker.as_json() for key, tracker in sorted(self.trackers.items())},
            "seen": sorted(self.seen),
        }

    @classmethod
    def from_json(cls, data: dict | None) -> "StreamContext":
        """The context stored by ``as_json``; an empty one for None or anything unreadable."""
        if not isinstance(data, dict):
            return cls()
        try:
            trackers = {
                str(key): ThroughputTracker.from_json(value)
                for key, value in (data.get("trackers") or {}).items()
                if key in METRIC_KEYS
            }
            return cls(trackers=trackers, seen={str(s) for s in data.get("seen") or ()})
        except (TypeError, ValueError, KeyError, AttributeError):
            return cls()


METRIC_KEYS = {metric.key for metric in METRICS}


# ------------------------------------------------------------------------------------------------
# Prefilter patterns for a frozen baseline


def slow_threshold(metric: Metric, baseline: float) -> tuple[str, float]:
    """Which raw numbers beside ``metric`` are slow against ``baseline``: ("below" | "above", bound).

    A rate is slow below ``baseline * (1 - DROP)``; a time above ``baseline / (1 - DROP)``; an
    inverse metric (s/it) is read as a rate, so its raw number is slow *above* the inverse bound.
    """
    if metric.higher_is_faster:
        bound = baseline * (1 - DROP)
        if metric.inverse:
            return ("above", 1 / bound) if bound > 0 else ("above", math.inf)
        return "below", bound
    return "above", baseline / (1 - DROP)


SIGNIFICANT = 3  # digits of the bound the prefilter compares


def slow_number_pattern(direction: str, bound: float) -> bytes:
    """A Hyperscan pattern matching every number (``NUMBER``) above / below ``bound``, and a few others.

    The number and the bound are compared on the bound's first ``SIGNIFICANT`` digits: both are
    cut (not rounded) to as many decimals, which keeps the order of any two numbers or makes them
    equal; numbers equal to the bound when cut match either way. Leading zeros are allowed.
    Exactness is the scanner's job: it checks each hit.
    """
    if not math.isfinite(bound):
        return rb"(?!)x" if direction == "above" else NUMBER
    integer = str(int(bound))
    k = 0 if integer == "0" else len(integer)
    q = max(0, SIGNIFICANT - k)
    fraction_digits = f"{bound:.{q + 3}f}".split(".")[1][:q] if q else ""
    t_int = integer.encode()
    t_frac = fraction_digits.encode()
    any_fraction = rb"(?:\.[0-9]+)?"
    alternatives: list[bytes] = []

    def digits(n: int) -> bytes:
        return rb"[0-9]{%d}" % n if n else b""

    def digit_range(low: int, high: int) -> bytes | None:
        return None if low > high else (b"%d" % low if low == high else b"[%d-%d]" % (low, high))

    if direction == "above":
        alternatives.append((rb"[1-9][0-9]{%d,}" % k if k else rb"[1-9][0-9]*") + any_fraction)
        for i in range(k):
            step = digit_range(t_int[i] - 47, 9)
            if step:
                alternatives.append(t_int[:i] + step + digits(k - 1 - i) + any_fraction)
        int_part = t_int if k else b"0"
        for j in range(q):
            step = digit_range(t_frac[j] - 47, 9)
            if step:
                alternatives.append(int_part + rb"\." + t_frac[:j] + step + rb"[0-9]*")
        kept = t_frac.rstrip(b"0")
        if kept:
            alternatives.append(int_part + rb"\." + kept + rb"[0-9]*")
        else:
            alternatives.append(int_part + any_fraction)
    else:
        if k >= 2:
            alternatives.append(rb"[0-9]{1,%d}" % (k - 1) + any_fraction)
        for i in range(k):
            step = digit_range(1 if i == 0 and k > 1 else 0, t_int[i] - 49)
            if step:
                alternatives.append(t_int[:i] + step + digits(k - 1 - i) + any_fraction)
        int_part = t_int if k else b"0"
        for j in range(q):
            step = digit_range(0, t_frac[j] - 49)
            if step:
                alternatives.append(int_part + rb"\." + t_frac[:j] + step + rb"[0-9]*")
        # Equal when cut, or ending early (a missing decimal is a 0, never more than the bound's).
        alternatives.append(int_part + rb"(?:\." + t_frac + rb"[0-9]*)?")
        for j in range(1, q):
            alternatives.append(int_part + rb"\." + t_frac[:j])
    return rb"0*(?:" + b"|".join(alternatives) + rb")"


def slow_value_pattern(metric: Metric, baseline: float) -> bytes:
    """The Hyperscan pattern of the metric's occurrences whose value may be slow (a superset)."""
    number = slow_number_pattern(*slow_threshold(metric, baseline))
    words = re.escape(metric.literal)
    if metric.after:
        return words + metric.gap + number + rb"(?:[^0-9.]|$)"
    return rb"(?:^|[^0-9.])" + number + metric.gap + words
