"""What one line cannot prove: a throughput that drops against the log's own baseline.

A slowdown shows only as numbers: the iteration lines keep their shape while ``samples/sec`` falls
or ``elapsed time per iteration`` grows. ``ThroughputTracker`` follows each *metric* of one log
(one file, one stream) in order and reports the value at which a drop has lasted ``SUSTAINED``
reports in a row. The rules (the README's fault section states them for users):

- **Metrics.** ``METRICS`` lists the shapes real training logs print: Megatron's ``elapsed time per
  iteration (ms): 812.3`` and ``samples per second: 95.1``, tqdm's ``3.52it/s`` (and ``2.10s/it``,
  which tqdm switches to when an iteration takes more than a second: read as its inverse, so the
  two are one series), ``samples/sec``, ``images/sec``, ``img/sec``, ``tokens/s``, ``TFLOPs``. A
  value is the run of digits (and one dot) right beside the metric's words; anything else there
  is no value.
- **Baseline.** The median of the metric's recent *normal* values: the last ``WINDOW`` values that
  were not slow. It needs ``MIN_BASELINE`` of them; while fewer than ``WINDOW`` values are known it
  is recomputed at each value, afterwards every ``REFRESH`` values (a long log need not sort at every
  line, and a drop of ``SUSTAINED`` reports is judged against the same baseline either way).
- **Slow.** A rate below ``(1 - DROP)`` of the baseline, a time above ``1 / (1 - DROP)`` of it. Slow
  values never enter the baseline, so a slowdown that lasts does not become the new normal.
- **Reported** once per drop: at its ``SUSTAINED``-th slow value in a row. A normal value ends the
  drop; a later drop is reported again. One slow report (a checkpoint save, an evaluation) is not a
  slowdown, and neither is the slow start of a run (the baseline forms after it).

``StreamContext`` is everything a scan must remember about a stream between two pieces of it (the
trackers, and whether a line with a loss value was seen: see ``Signature.after``); it is plain
JSON for the portal, which scans each log stream piece by piece as it is collected.
"""

import re
from dataclasses import dataclass, field

WINDOW = 16
REFRESH = 16
MIN_BASELINE = 4
DROP = 0.4
SUSTAINED = 3
# A value is at most this many bytes before (or after) the metric's words.
VALUE_REACH = 32


@dataclass(frozen=True, slots=True)
class Metric:
    """One throughput shape: the words, which side the value is on, and which way is slow."""

    key: str  # the series it belongs to (s/it joins it/s)
    literal: bytes  # the words, found as a plain substring
    value_after: bool  # "samples/sec: 95.1" (True) or "3.52it/s" (False)
    higher_is_faster: bool
    inverse: bool = False  # s/it: read as it/s


METRICS = (
    Metric("elapsed_ms", b"elapsed time per iteration (ms):", True, False),
    Metric("samples_per_second", b"samples per second:", True, True),
    Metric("tflops", b"TFLOPs:", True, True),
    Metric("samples_per_sec", b"samples/sec:", True, True),
    Metric("images_per_sec", b"images/sec:", True, True),
    Metric("img_per_sec", b"img/sec", False, True),
    Metric("tokens_per_s", b"tokens/s", False, True),
    Metric("it_per_s", b"it/s", False, True),
    Metric("it_per_s", b"s/it", False, True, inverse=True),
)

_AFTER = re.compile(rb" ?([0-9]+(?:\.[0-9]+)?)(?![0-9.])")
_BEFORE = re.compile(rb"(?<![0-9.])([0-9]+(?:\.[0-9]+)?) ?\Z")


def metric_value(data: bytes | bytearray, metric: Metric, start: int, end: int, floor: int) -> float | None:
    """The value beside an occurrence of ``metric.literal`` at ``data[start:end]``, if any.

    ``floor`` is the start of the line (a value never reaches into the line before): the value
    before ``it/s`` is looked for in at most ``VALUE_REACH`` bytes from there.
    """
    if metric.value_after:
        match = _AFTER.match(data, end, end + VALUE_REACH)
    else:
        # ``s/it`` must not be read inside ``it/s`` nor ``it/s`` inside ``s/it``... the words stand
        # right after the number (and an optional space), which the pattern's anchor checks.
        match = _BEFORE.search(data, max(floor, start - VALUE_REACH), start)
    if match is None:
        return None
    value = float(match[1])
    if metric.inverse:
        return 1.0 / value if value > 0 else None
    return value


@dataclass(slots=True)
class ThroughputTracker:
    """One metric's series in one log; ``add`` says when a drop has lasted long enough to report."""

    higher_is_faster: bool
    normal: list[float] = field(default_factory=list)  # the last WINDOW normal values, oldest first
    baseline: float | None = None
    since_refresh: int = 0
    slow_run: int = 0

    def add(self, value: float) -> float | None:
        """Take the next value; the baseline it fell from when this value completes a drop."""
        baseline = self.baseline
        if baseline is not None and baseline > 0 and self._slow(value, baseline):
            self.slow_run += 1
            return baseline if self.slow_run == SUSTAINED else None
        self.slow_run = 0
        self.normal.append(value)
        if len(self.normal) > WINDOW:
            del self.normal[0]
        self.since_refresh += 1
        if len(self.normal) >= MIN_BASELINE and (len(self.normal) < WINDOW or self.since_refresh >= REFRESH):
            ordered = sorted(self.normal)
            middle = len(ordered) // 2
            self.baseline = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
            self.since_refresh = 0
        return None

    def _slow(self, value: float, baseline: float) -> bool:
        if self.higher_is_faster:
            return value < baseline * (1 - DROP)
        return value > baseline / (1 - DROP)

    def as_json(self) -> dict:
        return {
            "faster": self.higher_is_faster,
            "normal": self.normal,
            "baseline": self.baseline,
            "since_refresh": self.since_refresh,
            "slow_run": self.slow_run,
        }

    @classmethod
    def from_json(cls, data: dict) -> "ThroughputTracker":
        return cls(
            higher_is_faster=bool(data["faster"]),
            normal=[float(v) for v in data.get("normal", [])][-WINDOW:],
            baseline=None if data.get("baseline") is None else float(data["baseline"]),
            since_refresh=int(data.get("since_refresh", 0)),
            slow_run=int(data.get("slow_run", 0)),
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
                if key in _METRIC_KEYS
            }
            return cls(trackers=trackers, seen={str(s) for s in data.get("seen") or ()})
        except (TypeError, ValueError, KeyError, AttributeError):
            return cls()


_METRIC_KEYS = {metric.key for metric in METRICS}
