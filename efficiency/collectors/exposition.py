"""Prometheus text exposition (a ``/metrics`` page) → ``Sample`` records, fast.

dcgm-exporter pages are large and monotonous: every GPU repeats one label string on each of its
metrics, and every line has the shape ``NAME{k="v",...} VALUE [TIMESTAMP_MS]``. The fast path
handles exactly that shape with ``str`` methods and a cache of parsed label strings. Any line it
is not sure about goes, on its own, through ``prometheus_client``'s parser, so the result for that
line is whatever the reference parser makes of it; a line the reference parser also refuses
becomes a ``Rejected`` entry and parsing carries on with the next line.

Deliberate differences from ``prometheus_client.parser.text_string_to_metric_families``:

- Sample names are reported as written. ``prometheus_client`` renames the samples of a
  ``# TYPE x counter`` family to ``x_total`` (OpenMetrics munging); that is a family-level rewrite,
  not what the line says, and the DCGM mapping needs the exporter's names.
- ``#`` lines (HELP, TYPE, comments) are skipped without being validated, where
  ``prometheus_client`` aborts the whole page on a malformed ``# TYPE`` line.
- Lines longer than ``MAX_LINE_CHARS`` are rejected unparsed: the reference parser is quadratic
  on long label strings, and no exporter writes such lines.
- Timestamps are integer milliseconds. ``prometheus_client`` returns seconds as a float; a
  non-integer timestamp it accepts is rounded to the nearest millisecond.
"""

import gc
import math
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType

from prometheus_client.parser import text_string_to_metric_families

from efficiency.collectors.records import ParseOutcome, Sample

MAX_LINE_CHARS = 65_536

# The longest timestamp the fast path converts itself. Longer ones (beyond year 5138 in ms) take
# the reference route, whose seconds-float rounding then applies consistently to all of them.
_MAX_FAST_TIMESTAMP_CHARS = 15

_METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
# Stricter than the reference on purpose: ':' and the reserved '__' prefix take the slow route.
_FAST_LABEL_PAIR = r'(?!__)[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
# A whole label string the fast path takes: pairs separated by "," or ", ", an optional trailing
# separator, no backslash anywhere (escapes take the reference route).
_FAST_LABELS_RE = re.compile(rf"(?:{_FAST_LABEL_PAIR}(?:, ?{_FAST_LABEL_PAIR})*(?:, ?)?)?\Z")
_LABEL_PAIR_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')

_NO_LABELS: Mapping[str, str] = MappingProxyType({})
_UNSEEN = MappingProxyType({"": ""})  # a cache-miss marker no parse can return


def parse_exposition(text: str) -> ParseOutcome[Sample]:
    """Parse Prometheus text exposition into samples, keeping every good line of bad input.

    Values are floats (``NaN`` and ``±Inf`` included; deciding what they mean is the caller's
    job). Samples that share a label string share one read-only label mapping, which is what makes
    large pages cheap; copy it with ``dict()`` before changing or serialising it. The cyclic
    garbage collector is paused while the text is parsed and restored afterwards.
    """
    with gc_paused():
        return _parse(text)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, and restore it as it was.

    For loops that build many acyclic records (parsed samples, readings, rows to COPY): the
    collector would rescan the growing lists every few hundred allocations (a third of the run
    time on a 500k-line page). Nothing made there is cyclic, so pausing it only delays other
    garbage until the end of the block.
    """
    collector_was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collector_was_enabled:
            gc.enable()


def _parse(text: str) -> ParseOutcome[Sample]:
    """The loop of ``parse_exposition``: the common labelled line inline, everything else aside.

    The inline part returns a sample only where ``prometheus_client`` would return the very same
    one; any check that fails hands the line to ``_parse_line_other`` instead of guessing.
    """
    outcome: ParseOutcome[Sample] = ParseOutcome()
    append = outcome.records.append
    # Label string → parsed labels, or None when the fast path cannot vouch for that string.
    label_cache: dict[str, Mapping[str, str] | None] = {}
    cached_labels = label_cache.get
    # Validated metric names; the stored object is reused so 500k samples hold ~20 name strings.
    names: dict[str, str] = {}
    known_name = names.get

    line_no = 0
    for line in text.split("\n"):
        line_no += 1
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        # The last '}' closes the label set: label values may contain '}', values cannot, and the
        # strict label parse fails unless every earlier '}' sits inside quotes. Exactly one space
        # must follow it.
        close = line.rfind("}")
        if 0 < brace < close and line.startswith(" ", close + 1) and len(line) <= MAX_LINE_CHARS:
            label_text = line[brace + 1 : close]
            labels = cached_labels(label_text, _UNSEEN)
            if labels is _UNSEEN:
                labels = label_cache[label_text] = _parse_labels_fast(label_text)
            name = known_name(line[:brace]) or _checked_name(line[:brace], names)
            value_text = line[close + 2 :]
            # float()/int() tolerate surrounding whitespace the same way the reference strips
            # it, but accept '_' between digits, which the reference refuses.
            if labels is not None and name and "_" not in value_text:
                if " " not in value_text:
                    try:
                        append(Sample(name, labels, float(value_text), None))
                        continue
                    except ValueError:
                        pass
                else:
                    sample = _with_timestamp(name, labels, value_text)
                    if sample is not None:
                        append(sample)
                        continue

        sample = _parse_line_other(line, line_no, outcome, names)
        if sample is not None:
            append(sample)
    return outcome


def _checked_name(raw_name: str, names: dict[str, str]) -> str:
    """``raw_name`` if it is a plain metric name (remembered in ``names``), else ""."""
    if _METRIC_NAME_RE.match(raw_name) is None:
        return ""
    names[raw_name] = raw_name
    return raw_name


def _with_timestamp(name: str, labels: Mapping[str, str], value_and_timestamp: str) -> Sample | None:
    """``VALUE TIMESTAMP_MS`` after the labels, or None to hand the line on."""
    value_text, _, timestamp_text = value_and_timestamp.partition(" ")
    if " " in timestamp_text or len(timestamp_text) > _MAX_FAST_TIMESTAMP_CHARS:
        return None
    try:
        return Sample(name, labels, float(value_text), int(timestamp_text))
    except ValueError:
        return None


def _parse_line_other(
    line: str, line_no: int, outcome: ParseOutcome[Sample], names: dict[str, str]
) -> Sample | None:
    """A line the inline path did not take: too long, unlabelled, or for the reference parser.

    Returns None, after recording a rejection where due, when the line yields no sample.
    """
    if len(line) > MAX_LINE_CHARS:
        outcome.reject(f"line longer than {MAX_LINE_CHARS} characters", line, line_no)
        return None
    if "{" not in line:
        sample = _parse_unlabelled_fast(line, names)
        if sample is not None:
            return sample
    try:
        return _parse_line_reference(line)
    except _LineError as error:
        outcome.reject(str(error), line, line_no)
        return None


def _parse_unlabelled_fast(line: str, names: dict[str, str]) -> Sample | None:
    """``NAME VALUE [TS]`` without labels, or None to hand the line to the reference parser."""
    space = line.find(" ")
    if space <= 0:
        return None
    name = names.get(line[:space]) or _checked_name(line[:space], names)
    value_text = line[space + 1 :]
    if not name or "_" in value_text:
        return None
    if " " in value_text:
        return _with_timestamp(name, _NO_LABELS, value_text)
    try:
        return Sample(name, _NO_LABELS, float(value_text), None)
    except ValueError:
        return None


def _parse_labels_fast(label_text: str) -> Mapping[str, str] | None:
    """Parse ``k="v",k2="v2"`` (", " also allowed), or None if anything is unusual.

    Unusual means: a backslash anywhere (escapes), a label name that is not a plain legacy name,
    a duplicate name, whitespace elsewhere than one space after a comma, or an unquoted value.
    Two passes of compiled patterns (check the whole string, then take its pairs) instead of a
    loop in Python: a dcgm page parses one of these per GPU.
    """
    if _FAST_LABELS_RE.match(label_text) is None:
        return None
    # The check above guarantees the pairs follow each other with only ", ?" between them, so
    # scanning for pairs finds exactly those (a value holds no '"', a match never starts inside one).
    pairs = _LABEL_PAIR_RE.findall(label_text)
    labels = dict(pairs)
    if len(labels) != len(pairs):
        return None  # a duplicate label name
    return MappingProxyType(labels)


class _LineError(Exception):
    """A line that the reference parser refuses too; the message is the rejection reason."""


def _parse_line_reference(line: str) -> Sample | None:
    """Parse one line with ``prometheus_client``; None for a comment or blank line."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    try:
        families = list(text_string_to_metric_families(line))
    # The reference parser is lax and third-party: whatever it raises on one line, only that
    # line is lost.
    except Exception as error:
        raise _LineError(_diagnose(stripped, error)) from error
    reference = families[0].samples[0]

    try:
        value = float(reference.value)
    except OverflowError:
        # An integer beyond the float range: float() of the same text gives ±inf on the fast path.
        value = math.inf if reference.value > 0 else -math.inf

    timestamp_ms = None
    if reference.timestamp is not None:
        timestamp_ms_float = float(reference.timestamp) * 1000
        if not math.isfinite(timestamp_ms_float):
            raise _LineError("timestamp is not a finite number")
        timestamp_ms = round(timestamp_ms_float)
    return Sample(reference.name, MappingProxyType(reference.labels), value, timestamp_ms)


def _diagnose(line: str, error: Exception) -> str:
    """A short reason for a refused line, naming the usual culprit rather than the parser's text."""
    brace = line.find("{")
    if brace >= 0:
        unescaped = line[brace:].replace("\\\\", "").replace('\\"', "")
        if unescaped.count('"') % 2:
            return "unterminated quoted label value"
        close = line.rfind("}")
        if close < brace:
            return "unclosed label brace"
        if not line[close + 1 :].strip():
            return "missing value"
        if str(error).startswith("Invalid labels"):
            return "invalid labels"
        return "invalid value or timestamp"
    parts = line.split()
    if _METRIC_NAME_RE.match(parts[0]) is None:
        return "invalid metric name"
    if len(parts) == 1:
        return "missing value"
    return "invalid value or timestamp"
