"""dcgm-exporter samples of one scrape → one ``GpuReading`` per GPU (or MIG instance).

The exporter's label set drifted over the years (see tests/fixtures/dcgm/README.md): ``UUID`` or
``uuid``, ``pod``/``namespace`` or ``pod_name``/``pod_namespace``, ``Hostname`` missing in older
versions and sometimes the exporter *pod* name rather than the node, lower-case metric names in
some deployments, pod labels absent on idle MIG slices. This module absorbs that drift and the
unit differences (profiling fields are ratios 0-1, ``GPU_UTIL`` is a percent).

A reading exists for every (hostname, gpu, MIG instance) that has at least one sample of a metric
we map; samples of other metrics are ignored without being looked at.
"""

import math
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from itertools import groupby, repeat, starmap
from operator import itemgetter
from typing import NamedTuple

from efficiency.collectors.exposition import (
    MAX_LINE_CHARS,
    _parse_labels_fast,
    gc_paused,
    parse_exposition,
)
from efficiency.collectors.records import GpuReading, ParseOutcome, Sample

# DCGM's "blank" values (dcgm_structs.h, DCGM_*_BLANK and the NOT_FOUND / NOT_SUPPORTED /
# NOT_PERMISSIONED codes just above them). dcgm-exporter skips them since it learned to (its
# ToString), but older exporters print them, e.g. 9223372036854775794 = INT64 NOT_SUPPORTED in the
# README quickstart. DCGM tests FP64 and INT64 fields with ">= blank"; INT64 blanks (≥ 2**63 - 16)
# are above the FP64 one (2**47), so one threshold covers both. INT32 blanks can appear in INT64
# fields (the exporter checks for them there too). No metric we map reaches either range.
DCGM_FP64_BLANK = 140737488355328.0
DCGM_INT32_BLANK = 0x7FFFFFF0
DCGM_INT32_MAX = 0x7FFFFFFF

# Metric name → (GpuReading field, factor to portal units, is a percentage). Listed in the order
# of GpuReading's fields: a draft keeps the values in a list in this order.
_GAUGES: dict[str, tuple[str, float, bool]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("util_pct", 1.0, True),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gr_engine_active_pct", 100.0, True),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_pct", 100.0, True),
    "DCGM_FI_DEV_FB_USED": ("fb_used_mib", 1.0, False),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0, False),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0, False),
    # A counter, read as a level: the fault detector looks for increases between samples.
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_dbe_total", 1.0, False),
}
XID_LAST_METRIC = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT_METRIC = "DCGM_EXP_XID_ERRORS_COUNT"
_MAPPED = frozenset(_GAUGES) | {XID_LAST_METRIC, XID_COUNT_METRIC}
_UNSEEN = object()
_SLOT = {attribute: index for index, (attribute, _, _) in enumerate(_GAUGES.values())}


def is_dcgm_blank(value: float) -> bool:
    """Whether ``value`` is one of DCGM's "no value" codes rather than a measurement."""
    return value >= DCGM_FP64_BLANK or DCGM_INT32_BLANK <= value <= DCGM_INT32_MAX


class _GpuLabels(NamedTuple):
    """What one label text says about its GPU: where it is and what it is."""

    # In GpuReading's order (less its timestamp), so a reading's fields are ``*gpu[2:]``.
    hostname: str  # "" when the text has no Hostname label (the scrape's default then applies)
    gpu_index: int
    uuid: str
    model: str
    pci_bus_id: str
    namespace: str
    pod: str
    mig_instance: str


def _gpu_labels(labels: Mapping[str, str]) -> _GpuLabels | str:
    """The GPU these labels name, or why they name none."""
    gpu = labels.get("gpu")
    if gpu is None:
        return "no gpu label"
    # isdecimal() alone admits non-ASCII digits; int() alone admits signs, spaces and '_'.
    if not (gpu.isascii() and gpu.isdecimal()):
        return "gpu label is not an integer"
    return _GpuLabels(
        labels.get("Hostname", ""),
        int(gpu),
        labels.get("UUID") or labels.get("uuid", ""),
        labels.get("modelName", ""),
        labels.get("pci_bus_id", ""),
        labels.get("namespace") or labels.get("pod_namespace", ""),
        labels.get("pod") or labels.get("pod_name", ""),
        labels.get("GPU_I_ID", ""),
    )


@dataclass(slots=True)
class _Draft:
    """A reading being assembled from the samples of one GPU."""

    hostname: str
    gpu_index: int
    mig_instance: str
    uuid: str = ""
    model: str = ""
    pci_bus_id: str = ""
    namespace: str = ""
    pod: str = ""
    timestamp_ms: int | None = None
    values: list[float | None] = field(default_factory=lambda: [None] * len(_GAUGES))
    xid_last: int | None = None
    xid_counts: dict[int, float] = field(default_factory=dict)

    def take_labels(self, gpu: _GpuLabels) -> None:
        """Fill descriptive fields still empty: idle MIG slices carry no pod labels at all."""
        if not self.uuid:
            self.uuid = gpu.uuid
        if not self.model:
            self.model = gpu.model
        if not self.pci_bus_id:
            self.pci_bus_id = gpu.pci_bus_id
        if not self.namespace:
            self.namespace = gpu.namespace
        if not self.pod:
            self.pod = gpu.pod

    def reading(self, scrape_time_ms: int) -> GpuReading:
        """The finished, immutable reading."""
        # Positional, in GpuReading's field order (one per GPU: keywords cost measurably).
        return GpuReading(
            self.hostname,
            self.gpu_index,
            self.timestamp_ms if self.timestamp_ms is not None else scrape_time_ms,
            self.uuid,
            self.model,
            self.pci_bus_id,
            self.namespace,
            self.pod,
            self.mig_instance,
            *self.values,  # util_pct .. ecc_dbe_total
            self.xid_last,
            tuple(sorted(self.xid_counts.items())) if self.xid_counts else (),
        )


def gpu_readings_from_samples(
    samples: Iterable[Sample], *, scrape_time_ms: int, default_hostname: str = ""
) -> ParseOutcome[GpuReading]:
    """Group the samples of one dcgm-exporter scrape into one reading per GPU or MIG instance.

    The key is (``Hostname`` label or ``default_hostname``, ``gpu`` label, ``GPU_I_ID`` label).
    A sample's own timestamp wins over ``scrape_time_ms``; when the samples of one GPU carry
    several, the reading takes the latest. DCGM's blank codes become None (not reported). A value
    that is not finite, negative, or a percentage above 100 is rejected and leaves its field None;
    the rest of the reading stays. A sample whose GPU cannot be identified is rejected whole.
    Metric names are matched case-insensitively (some deployments lower-case them).
    """
    outcome: ParseOutcome[GpuReading] = ParseOutcome()
    drafts: dict[tuple[str, int, str], _Draft] = {}
    canonical_names: dict[str, str | None] = {}
    by_labels: dict[int, tuple[Mapping[str, str], _Draft]] = {}

    # The hot loop of every scrape: locals and tuple unpacking rather than attribute lookups.
    gauges = _GAUGES
    blank = DCGM_INT32_BLANK
    for sample in samples:
        name, labels, value, timestamp_ms = sample
        metric = canonical_names.get(name, _UNSEEN)
        if metric is _UNSEEN:
            upper = name.upper()
            metric = canonical_names[name] = upper if upper in _MAPPED else None
        if metric is None:
            continue

        # The parser shares one label mapping per distinct label text, so every metric of a
        # GPU arrives with the same object: look its draft up by identity first. The object
        # is kept in the cache too, so its id cannot be reused while we hold it.
        cached = by_labels.get(id(labels))
        if cached is not None and cached[0] is labels:
            draft = cached[1]
        else:
            draft = _draft_for(sample, drafts, default_hostname, outcome)
            if draft is None:
                continue
            by_labels[id(labels)] = (labels, draft)
        if timestamp_ms is not None and (draft.timestamp_ms is None or timestamp_ms > draft.timestamp_ms):
            draft.timestamp_ms = timestamp_ms

        # Fast path for the common case, an ordinary non-negative number (NaN fails it too).
        if not 0.0 <= value < blank:
            value = _usable_value(sample, outcome)
            if value is None:
                continue
        gauge = gauges.get(metric)
        if gauge is not None:
            attribute, factor, is_percent = gauge
            scaled = value * factor
            if is_percent and scaled > 100:
                outcome.reject("percentage above 100", _render(sample))
            elif draft.values[_SLOT[attribute]] is None:
                # A GPU shared by several pods can be listed once per pod with the same values;
                # the first one stands.
                draft.values[_SLOT[attribute]] = scaled
        elif metric == XID_COUNT_METRIC:
            _add_xid_count(draft, sample, value, outcome)
        elif not value.is_integer():
            outcome.reject("Xid code is not an integer", _render(sample))
        elif draft.xid_last is None:
            draft.xid_last = int(value)

    outcome.records.extend(draft.reading(scrape_time_ms) for draft in drafts.values())
    return outcome


def _draft_for(
    sample: Sample,
    drafts: dict[tuple[str, int, str], _Draft],
    default_hostname: str,
    outcome: ParseOutcome[GpuReading],
) -> _Draft | None:
    """The draft reading this sample belongs to, or None (rejected) if its GPU is unknown."""
    draft_or_reason = _gpu_draft(sample.labels, drafts, default_hostname)
    if isinstance(draft_or_reason, str):
        outcome.reject(draft_or_reason, _render(sample))
        return None
    return draft_or_reason


def _gpu_draft(
    labels: Mapping[str, str], drafts: dict[tuple[str, int, str], _Draft], default_hostname: str
) -> _Draft | str:
    """The draft for the GPU these labels name (created on first sight), or why there is none."""
    gpu = _gpu_labels(labels)
    if isinstance(gpu, str):
        return gpu
    return _draft_of_gpu(gpu, drafts, default_hostname)


def _draft_of_gpu(
    gpu: _GpuLabels, drafts: dict[tuple[str, int, str], _Draft], default_hostname: str
) -> _Draft | str:
    """The draft for ``gpu`` (created on first sight), or why there is none."""
    hostname = gpu.hostname or default_hostname
    if not hostname:
        return "no Hostname label and no default hostname"
    key = (hostname, gpu.gpu_index, gpu.mig_instance)
    draft = drafts.get(key)
    if draft is None:
        draft = drafts[key] = _Draft(hostname, gpu.gpu_index, gpu.mig_instance, *gpu[2:7])
    else:
        draft.take_labels(gpu)
    return draft


def _usable_value(sample: Sample, outcome: ParseOutcome[GpuReading]) -> float | None:
    """The sample's value if it is a measurement; None for blanks (silently) and bad values."""
    # float(): samples built elsewhere may carry ints, which lack is_integer() before 3.12.
    value = float(sample.value)
    if not math.isfinite(value):
        outcome.reject("not a finite number", _render(sample))
        return None
    if is_dcgm_blank(value):
        return None
    if value < 0:
        outcome.reject("negative value", _render(sample))
        return None
    return value


def _add_xid_count(draft: _Draft, sample: Sample, count: float, outcome: ParseOutcome[GpuReading]) -> None:
    """Record ``DCGM_EXP_XID_ERRORS_COUNT{xid="79"} 2`` as (79, 2.0) on the draft."""
    xid = sample.labels.get("xid", "")
    if not (xid.isascii() and xid.isdecimal()):
        outcome.reject("xid label is not an integer", _render(sample))
        return
    draft.xid_counts.setdefault(int(xid), count)


def _render(sample: Sample) -> str:
    """The sample as an exposition line, for the excerpt of a rejection."""
    labels = ",".join(f'{name}="{value}"' for name, value in sample.labels.items())
    return f"{sample.name}{{{labels}}} {sample.value!r}"


def gpu_readings_from_exposition(
    text: str, *, scrape_time_ms: int, default_hostname: str = "", origin: str = ""
) -> ParseOutcome[GpuReading]:
    """``parse_exposition`` then ``gpu_readings_from_samples``, in one pass where that is safe.

    The collectors' hot path: a dcgm-exporter page is thousands of lines of one shape, so the
    common case is handled in a single loop that never builds ``Sample`` objects. The first line
    that is in any way unusual (a timestamp, an escape, a bad or blank value, an unknown GPU, a
    line that would be rejected) abandons the single pass and the whole text goes through the two
    general steps instead, so the result is always exactly theirs (tests/collectors prove it on
    generated pages). Rejections of both steps come back together, parse ones first.

    ``origin`` names where the page came from (its URL): a page is compared with the one read
    before from the same origin, and when only its values changed it is read from what was found
    there (``_template_pass``). Without one, pages are told apart by their first line's name.
    """
    with gc_paused():  # the readings are acyclic
        fast = _template_pass(text, scrape_time_ms, default_hostname, origin)
    if fast is not None:
        return fast
    parsed = parse_exposition(text)
    outcome = gpu_readings_from_samples(
        parsed.records, scrape_time_ms=scrape_time_ms, default_hostname=default_hostname
    )
    outcome.rejected[:0] = parsed.rejected
    return outcome


# One sample line of the common shape, ``NAME{LABELS} VALUE``, found by one compiled pattern over
# the whole page rather than a loop of string calls per line. The groups are exactly the slices
# the general parser takes: the name up to the first '{', the labels up to the last '}' (the
# value may hold no '}'), one space, and a value with no space or '_' (the reference refuses
# '_' between digits; a space means a timestamp, which the general path handles). Name and value
# are bounded so that, with the label text checked once per distinct text, no line the pattern
# takes can be longer than MAX_LINE_CHARS.
_MAX_NAME_CHARS = 1000
_MAX_VALUE_CHARS = 400
_MAX_LABEL_TEXT_CHARS = MAX_LINE_CHARS - _MAX_NAME_CHARS - _MAX_VALUE_CHARS - 3
# Each match starts at the newline before its line (the first line is matched with one put in
# front): a pattern that begins with a literal is found by a fast scan, where '^' with MULTILINE
# is tried at every character. Every line that is neither empty nor a comment gives one
# match: its three groups when it has the common shape, else an empty name (the second branch,
# one character long), so one scan both takes the lines and tells whether the page is common.
_LINE_RE = re.compile(
    rf"\n(?:([a-zA-Z_:][a-zA-Z0-9_:]{{0,{_MAX_NAME_CHARS - 1}}})"  # the name
    r"\{([^\n]*)\} "  # the labels, up to the last '}'
    rf"([^ \n}}_]{{1,{_MAX_VALUE_CHARS}}})(?=\n|\Z)"  # the value
    r"|[^#\n])"  # any other line that is not empty or a comment
)
# Label text → its parsed labels and the GPU they name (None: not for the fast path), kept across
# pages: an exporter repeats each GPU's label text scrape after scrape, and parsing it was a fifth
# of the pass. Parsing is a pure function of the text, so a shared cache (threads included)
# changes nothing but the time; it is emptied at _LABEL_CACHE_MAX texts (twice a 10,000-GPU
# fleet, some 30 MB).
_LabelText = tuple[Mapping[str, str], _GpuLabels | str]
_LABEL_CACHE: dict[str, _LabelText | None] = {}
_LABEL_CACHE_MAX = 20_000
# Label text → the key and the first fields of the row of the GPU it names, for texts with their
# own Hostname label (a default hostname is the scrape's, not the text's). A page whose first run
# of a mapped metric names GPUs all known from earlier pages makes its rows from these in whole-run
# operations: one row at a time from the labels was a third of the pass. Same bound as above.
_RowPrototype = tuple[tuple[str, int, str], tuple]
_ROW_CACHE: dict[str, _RowPrototype] = {}


def _labels_cached(label_text: str) -> _LabelText | None:
    """``_parse_labels_fast`` and ``_gpu_labels`` through ``_LABEL_CACHE``; None also for a text
    too long for the pass."""
    try:
        return _LABEL_CACHE[label_text]
    except KeyError:
        pass
    labels = None if len(label_text) > _MAX_LABEL_TEXT_CHARS else _parse_labels_fast(label_text)
    parsed = None if labels is None else (labels, _gpu_labels(labels))
    _cache_put(_LABEL_CACHE, label_text, parsed)
    return parsed


def _cache_put(cache: dict, label_text: str, value) -> None:
    """Keep ``value`` for ``label_text`` in one of the caches across pages, emptied first when it
    holds ``_LABEL_CACHE_MAX`` texts."""
    if len(cache) >= _LABEL_CACHE_MAX:
        cache.clear()
    cache[label_text] = value


def _single_pass(text: str, scrape_time_ms: int, default_hostname: str) -> ParseOutcome[GpuReading] | None:
    """The common case of ``gpu_readings_from_exposition``; None as soon as a line is unusual.

    The page is read a run at a time: the lines of one metric name that follow each other.
    dcgm-exporter writes one metric family after the other, each listing the GPUs in the same
    order, so on its page a run is a whole family and, after the first, holds only GPUs already
    seen; ``_PageReader.run_take`` checks and stores such a run with whole-run operations.
    """
    read = _single_pass_read(text, scrape_time_ms, default_hostname)
    if read is None:
        return None
    return ParseOutcome(records=read.reader.readings())


class _SinglePassRead(NamedTuple):
    """A page the single pass has read: its reader, and the label text and run of every line."""

    reader: "_PageReader"
    texts: list[str]  # each sample line's label text, in the page's order
    runs: list[tuple[tuple[int, float, float], int, int]]  # (kind, first line, end) of each run


def _single_pass_read(text: str, scrape_time_ms: int, default_hostname: str) -> _SinglePassRead | None:
    """``_single_pass`` before its readings are made."""
    # The first line is matched on its own with a '\n' in front, the others in the page itself:
    # '\n' + page copied the whole page, some 15 MB for 10,000 GPUs.
    first_end = text.find("\n")
    first = _LINE_RE.match("\n" + (text if first_end < 0 else text[:first_end]))
    lines = _LINE_RE.findall(text, max(first_end, 0))
    if first is not None:
        lines.insert(0, first.groups(""))
    names = list(map(itemgetter(0), lines))
    if "" in names:
        return None  # some sample line has another shape (a timestamp, a bad value, ...)
    texts = list(map(itemgetter(1), lines))
    reader = _PageReader(scrape_time_ms, default_hostname)
    kinds: dict[str, tuple[int, float, float]] = {}
    runs = []
    end = 0
    for name, run in groupby(names):
        start, end = end, end + len(list(run))
        kind = kinds.get(name) or _kind_learn(name, kinds)
        try:
            values = list(map(float, map(itemgetter(2), lines[start:end])))
        except ValueError:
            return None
        if not reader.run_take(kind, texts[start:end], values):
            return None
        runs.append((kind, start, end))
    return _SinglePassRead(reader, texts, runs)


# Positions in a row of the single pass: GpuReading's fields, in its order.
_ROW_FIELDS = [reading_field.name for reading_field in fields(GpuReading)]
_ROW_VALUES = _ROW_FIELDS.index("util_pct")  # the gauges follow in _GAUGES's order
_ROW_XID_LAST = _ROW_FIELDS.index("xid_last")
_ROW_XID_COUNTS = _ROW_FIELDS.index("xid_counts")
_ROW_EMPTY = (None,) * (_ROW_XID_COUNTS - _ROW_VALUES) + ((),)  # a new row after its GPU's fields


class _PageReader:
    """The single pass's readings of one page, and what it knows of each label text on it.

    A reading is kept as a list of GpuReading's fields, in its order (``_ROW_*``), and becomes
    one when the page is read: a draft object per GPU, then a reading made from it, was a
    measurable share of the pass.
    """

    def __init__(self, scrape_time_ms: int, default_hostname: str) -> None:
        self.scrape_time_ms = scrape_time_ms
        self.default_hostname = default_hostname
        self.rows: dict[tuple[str, int, str], list] = {}  # (hostname, gpu, MIG instance) → row
        # Label text → its GPU's row: every metric of a GPU repeats one text, so after the first
        # line of a GPU the others cost a dictionary look-up.
        self.row_of: dict[str, list] = {}
        self.checked: set[str] = set()  # label texts whose labels parse (those of rows too)
        self.xid_counted: list[list] = []  # rows whose Xid counts are a dict still
        # The texts of the last run stored whole, and their rows: dcgm-exporter lists every family's
        # GPUs in one order, so the next run's texts are usually equal to these, item by item (a
        # comparison, where looking each text up hashed it).
        self.run_texts: list[str] = []
        self.run_rows: list[list] = []

    def readings(self) -> list[GpuReading]:
        for row in self.xid_counted:
            row[_ROW_XID_COUNTS] = tuple(sorted(row[_ROW_XID_COUNTS].items()))
        return list(starmap(GpuReading, self.rows.values()))

    def run_take(self, kind: tuple[int, float, float], texts: list[str], values: list[float]) -> bool:
        """Take a run of samples of one metric; False when some line is not for the single pass.

        A run of GPUs all seen before on the page costs ``map``, ``min`` and ``max`` over its
        values and one short loop: checking each value on its own, in Python, was most of the
        pass. Any other run (new GPUs, Xid counts, labels never checked) goes line by line.
        """
        slot = kind[0]
        if slot == _IGNORED:
            # Not ours, but the general parser would still reject bad labels: check each text once.
            return self.checked.issuperset(texts) or self._lines_take(kind, texts, values)
        if slot == _XID_COUNT:
            return self._lines_take(kind, texts, values)
        if texts == self.run_texts:
            rows = self.run_rows
        else:
            rows = list(map(self.row_of.get, texts))
            if None in rows:
                # GPUs new on the page: all at once from earlier pages when the page has no rows
                # yet, else (or when that cannot be done) line by line.
                rows = None if self.row_of else self._rows_new(texts)
                if rows is None:
                    return self._lines_take(kind, texts, values)
        stored = _run_stored(kind, values)
        if stored is None:
            return False
        at = _ROW_XID_LAST if slot == _XID_LAST else _ROW_VALUES + slot
        for row, value in zip(rows, stored, strict=True):
            if row[at] is None:  # a GPU shared by several pods, listed once per pod: the first stands
                row[at] = value
        self.run_texts, self.run_rows = texts, rows
        return True

    def _rows_new(self, texts: list[str]) -> list[list] | None:
        """The rows of the page's first GPUs, all made at once from ``_ROW_CACHE``; None (and
        nothing made) unless every text is known there and each names a GPU of its own."""
        prototypes = list(map(_ROW_CACHE.get, texts))
        if None in prototypes:
            return None
        rows = list(map(list, map(itemgetter(1), prototypes)))
        by_key = dict(zip(map(itemgetter(0), prototypes), rows, strict=True))
        if len(by_key) != len(rows):
            return None  # one GPU under several texts (several pods): line by line, as the first stands
        scrape_time_ms = self.scrape_time_ms
        for row in rows:
            row[2] = scrape_time_ms
        self.rows.update(by_key)
        self.row_of.update(zip(texts, rows, strict=True))
        self.checked.update(texts)
        return rows

    def _lines_take(self, kind: tuple[int, float, float], texts: list[str], values: list[float]) -> bool:
        """``run_take`` one line at a time."""
        slot, factor, limit = kind
        row_get, checked = self.row_of.get, self.checked
        blank = DCGM_INT32_BLANK
        for label_text, value in zip(texts, values, strict=True):
            if slot == _IGNORED:
                if label_text not in checked:
                    if _labels_cached(label_text) is None:
                        return False
                    checked.add(label_text)
                continue
            row = row_get(label_text)
            if row is None:
                row = self._row_new(label_text)
                if row is None:
                    return False  # the general path rejects this sample: let it
            if not 0.0 <= value < blank:
                return False
            if slot >= 0:
                scaled = value * factor
                if scaled > limit:
                    return False
                if row[_ROW_VALUES + slot] is None:
                    row[_ROW_VALUES + slot] = scaled
            elif slot == _XID_COUNT:
                xid = _parse_labels_fast(label_text).get("xid", "")
                if not (xid.isascii() and xid.isdecimal()):
                    return False
                if not row[_ROW_XID_COUNTS]:
                    row[_ROW_XID_COUNTS] = {}
                    self.xid_counted.append(row)
                row[_ROW_XID_COUNTS].setdefault(int(xid), value)
            elif not value.is_integer():
                return False
            elif row[_ROW_XID_LAST] is None:
                row[_ROW_XID_LAST] = int(value)
        return True

    def _row_new(self, label_text: str) -> list | None:
        """The row of the GPU a label text new on this page names; None if it names none.

        As ``_draft_of_gpu`` does for the general path: a GPU's first label text makes its row,
        a later one (another pod's) fills the descriptive fields still empty.
        """
        parsed = _labels_cached(label_text)
        if parsed is None or isinstance(parsed[1], str):
            return None
        gpu = parsed[1]
        hostname = gpu.hostname or self.default_hostname
        if not hostname:
            return None
        key = (hostname, gpu.gpu_index, gpu.mig_instance)
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [hostname, gpu.gpu_index, self.scrape_time_ms, *gpu[2:], *_ROW_EMPTY]
            if gpu.hostname:
                _cache_put(_ROW_CACHE, label_text, (key, tuple(row)))
        else:
            for field_at in range(3, 8):  # uuid .. pod
                if not row[field_at]:
                    row[field_at] = gpu[field_at - 1]
        self.checked.add(label_text)
        self.row_of[label_text] = row
        return row


_IGNORED, _XID_COUNT, _XID_LAST = -1, -2, -3


def _run_stored(kind: tuple[int, float, float], values: list[float]) -> list | None:
    """A run's values of a metric we map as its readings keep them (Xid codes as integers, gauges
    in portal units, Xid counts as they are); None when one would send the page to the general
    path: NaN, negative, a DCGM blank, an Xid code that is not an integer, a percentage above 100.
    The line-by-line checks, over the whole run."""
    slot, factor, limit = kind
    # NaN fails every comparison, and min() and max() may pass over it: it is looked for first.
    if any(map(math.isnan, values)) or min(values) < 0.0 or max(values) >= DCGM_INT32_BLANK:
        return None
    if slot == _XID_LAST:
        return list(map(int, values)) if all(map(float.is_integer, values)) else None
    if slot == _XID_COUNT:
        return values
    stored = values if factor == 1.0 else [value * factor for value in values]
    return None if max(stored) > limit else stored


def _kind_learn(name: str, kinds: dict[str, tuple[int, float, float]]) -> tuple[int, float, float]:
    """What the single pass does with samples of ``name`` (see there), remembered in ``kinds``."""
    upper = name.upper()
    gauge = _GAUGES.get(upper)
    if gauge is not None:
        attribute, factor, is_percent = gauge
        kind = (_SLOT[attribute], factor, 100.0 if is_percent else math.inf)
    elif upper == XID_COUNT_METRIC:
        kind = (_XID_COUNT, 1.0, math.inf)
    elif upper == XID_LAST_METRIC:
        kind = (_XID_LAST, 1.0, math.inf)
    else:
        kind = (_IGNORED, 1.0, math.inf)
    kinds[name] = kind
    return kind


# --- Pages like the last one -----------------------------------------------------------------------
#
# An exporter serves the same page scrape after scrape with new values: the same families, GPUs,
# label texts and comments in the same order. Once the single pass has read a page, what it found
# there is kept as a template: the page's text between its values (the pieces), and which reading
# and field each value goes to. A later page that is the template's pieces with its own values put
# between them (found by one pattern, put together by one join, compared as one string) is the
# template's page with other values: its readings are the template's with those values, after the
# checks of the values the single pass makes, so they are the single pass's readings of it
# (tests/collectors/test_dcgm_single_pass.py). Nothing is done per line in Python but float().

# A value as the single pass takes it (see _LINE_RE): at the last '}' of its line, then one space,
# then up to the line's end. A match can only begin at a line's last '}' (the value holds no '}'
# and ends at a line's end), so it never splits a label text, and no match can lie inside a piece:
# a page made of the pieces and values that match is matched at the same places.
_VALUE_SPLIT = re.compile(rf"\}} ([^ \n}}_]{{1,{_MAX_VALUE_CHARS}}})(?=\n|\Z)")
# Templates kept, by origin (an exporter's URL) and default hostname, else by default hostname and
# the page's text up to its first '{' (the first metric and its comments). Together they hold at
# most _TEMPLATE_LINES_MAX lines (a 10,000-GPU page is some 80,000 lines and 20 MB) of at most
# _TEMPLATE_SLOTS_MAX pages. When that is full, a new page gets a template only when some page
# kept has not been read for two rounds of all the pages kept (then that one goes): a worker
# reading more pages than fit, in turn, keeps the templates of those it has and reads the others
# as before, where dropping the oldest would learn every page and keep none long enough to use.
_TEMPLATE_LINES_MAX = 200_000
_TEMPLATE_SLOTS_MAX = 20_000
_TEMPLATE_KEY_CHARS = 2_000
# A page that missed its template _TEMPLATE_MISSES_MAX times in a row (pods coming and going
# change it every scrape) is read without one for the next _TEMPLATE_REST pages: trying a page
# that matches nothing, then learning it, costs half its single pass.
_TEMPLATE_MISSES_MAX = 2
_TEMPLATE_REST = 8


@dataclass(slots=True)
class _Template:
    """What the single pass found on a page, for pages that differ from it only in values."""

    # The page's text between its values (_VALUE_SPLIT), in order, each but the last with the "} "
    # before the next value.
    pieces: list[str]
    runs: list[tuple[tuple[int, float, float], int, int]]  # (kind, first, end) of each metric's lines
    where: list[list]  # hostname, gpu_index: one list each, a reading's entry in its page's order
    what: list[list]  # uuid .. mig_instance: the same
    columns: list[list[int]]  # per gauge, then xid_last: the line whose value each reading takes
    xid_counts: dict[int, tuple[tuple[int, int], ...]]  # reading → (xid, line) of its first counts
    lines: int


@dataclass(slots=True)
class _TemplateSlot:
    """A page's template, and how it has matched lately."""

    template: _Template | None = None
    misses: int = 0  # pages in a row that did not match it
    resting: int = 0  # pages still to read without trying it
    last_read: int = 0  # the shelf's read count when the page was last read

    @property
    def lines(self) -> int:
        return self.template.lines if self.template is not None else 0


class _TemplateShelf(dict):
    """The templates kept, by page key, and the lines they hold together. Shared by threads: the
    dictionary changes under a lock; a slot's counters may race, which costs only time."""

    def __init__(self) -> None:
        super().__init__()
        self.lines = 0
        self.reads = 0
        self.lock = threading.Lock()

    def clear(self) -> None:
        with self.lock:
            super().clear()
            self.lines = 0

    def slot(self, key: tuple[str, str, str]) -> _TemplateSlot | None:
        """The page's slot, if it has one; counts the read."""
        self.reads += 1
        slot = self.get(key)
        if slot is not None:
            slot.last_read = self.reads
        return slot

    def room(self, key: tuple[str, str, str], lines: int) -> bool:
        """Whether a template of ``lines`` lines fits under ``key`` (in place of its own), once the
        templates of pages not read for two rounds of all the pages kept are dropped."""
        with self.lock:
            if not self._fits(key, lines):
                stale = self.reads - 2 * len(self)
                for old_key in [old for old, slot in self.items() if slot.last_read < stale and old != key]:
                    self._drop(old_key)
            return self._fits(key, lines)

    def keep(self, key: tuple[str, str, str], slot: _TemplateSlot) -> None:
        with self.lock:
            self._drop(key)
            self[key] = slot
            self.lines += slot.lines

    def _fits(self, key: tuple[str, str, str], lines: int) -> bool:
        own = self.get(key)
        if own is None and len(self) >= _TEMPLATE_SLOTS_MAX:
            return False
        return self.lines - (own.lines if own is not None else 0) + lines <= _TEMPLATE_LINES_MAX

    def _drop(self, key: tuple[str, str, str]) -> None:
        old = self.pop(key, None)
        if old is not None:
            self.lines -= old.lines


_TEMPLATES = _TemplateShelf()
_NO_LINE = -1  # a column's entry for a reading no line gives a value to


def _template_pass(
    text: str, scrape_time_ms: int, default_hostname: str, origin: str
) -> ParseOutcome[GpuReading] | None:
    """``_single_pass`` for a page like the one before from the same origin; else the single pass
    itself (None when that is not for the page), remembering the page as the next one's template."""
    key = (origin, default_hostname, "" if origin else text[: max(text.find("{", 0, _TEMPLATE_KEY_CHARS), 0)])
    slot = _TEMPLATES.slot(key)
    if slot is None:
        slot = _TemplateSlot(last_read=_TEMPLATES.reads)
    elif slot.resting:
        slot.resting -= 1
        if not slot.resting:
            slot.misses = _TEMPLATE_MISSES_MAX - 1  # one more miss, and it rests again
        return _single_pass(text, scrape_time_ms, default_hostname)
    template = slot.template
    if template is not None:
        texts = _VALUE_SPLIT.findall(text)
        if len(texts) == template.lines and _template_page(template, texts) == text:
            slot.misses = 0
            records = _template_read(template, texts, scrape_time_ms)
            if records is None:
                return None  # some value the single pass would refuse too: the general path
            return ParseOutcome(records=records)
        slot.misses += 1
        if slot.misses >= _TEMPLATE_MISSES_MAX:
            slot.misses, slot.resting = 0, _TEMPLATE_REST
    read = _single_pass_read(text, scrape_time_ms, default_hostname)
    if read is None:
        return None
    outcome = ParseOutcome(records=read.reader.readings())
    if _TEMPLATES.room(key, len(read.texts)):
        template = _template_learn(_VALUE_SPLIT.split(text), read, outcome.records)
        resting = _TEMPLATE_REST if template is None else slot.resting
        # A new slot: the shelf counts the lines of the one it replaces as they were.
        _TEMPLATES.keep(key, replace(slot, template=template, resting=resting))
    return outcome


def _template_learn(parts: list[str], read: _SinglePassRead, records: list[GpuReading]) -> _Template | None:
    """The template of a page the single pass has read (``read``, into ``records``); None when its
    pieces do not fit its lines."""
    lines = len(parts) // 2
    if lines != len(read.texts):
        return None  # a value split off inside a comment: the lines cannot be told by the pieces
    reader = read.reader
    row_at = {id(row): at for at, row in enumerate(reader.rows.values())}  # the order of ``records``
    columns = [[_NO_LINE] * len(records) for _ in range(len(_GAUGES) + 1)]
    xid_counts: dict[int, dict[int, int]] = defaultdict(dict)
    for (slot, _, _), start, end in read.runs:
        if slot == _IGNORED:
            continue
        texts = read.texts[start:end]
        rows = list(map(row_at.__getitem__, map(id, map(reader.row_of.__getitem__, texts))))
        if slot == _XID_COUNT:
            for row, label_text, line in zip(rows, texts, range(start, end), strict=True):
                xid_counts[row].setdefault(int(_parse_labels_fast(label_text)["xid"]), line)
            continue
        column = columns[len(_GAUGES) if slot == _XID_LAST else slot]
        for row, line in zip(rows, range(start, end), strict=True):
            if column[row] == _NO_LINE:  # the first line of a GPU stands
                column[row] = line
    where = [[r.hostname for r in records], [r.gpu_index for r in records]]
    what = [
        [getattr(r, name) for r in records]
        for name in ("uuid", "model", "pci_bus_id", "namespace", "pod", "mig_instance")
    ]
    counts = {row: tuple(sorted(by_xid.items())) for row, by_xid in xid_counts.items()}
    pieces = [piece + "} " for piece in parts[0 : 2 * lines : 2]]
    pieces.append(parts[-1])
    return _Template(pieces, read.runs, where, what, columns, counts, lines)


def _template_page(template: _Template, texts: list[str]) -> str:
    """The text of ``template``'s page with ``texts`` for its values."""
    page = [""] * (2 * template.lines + 1)
    page[0::2] = template.pieces
    page[1::2] = texts
    return "".join(page)


def _template_read(template: _Template, texts: list[str], scrape_time_ms: int) -> list[GpuReading] | None:
    """The readings of a page equal to ``template``'s but for its value ``texts``; None when some
    value would send the single pass to the general path."""
    try:
        values = list(map(float, texts))
    except ValueError:
        return None
    stored: list = [None] * (len(values) + 1)  # each line's value as its reading keeps it; None last
    for kind, start, end in template.runs:
        if kind[0] == _IGNORED:
            continue
        run = _run_stored(kind, values[start:end])
        if run is None:
            return None
        stored[start:end] = run
    columns = [list(map(stored.__getitem__, column)) for column in template.columns]
    counts: list = [()] * len(template.where[0])
    for row, by_xid in template.xid_counts.items():
        counts[row] = tuple((xid, stored[line]) for xid, line in by_xid)
    # Positional, in GpuReading's field order.
    return list(map(GpuReading, *template.where, repeat(scrape_time_ms), *template.what, *columns, counts))
