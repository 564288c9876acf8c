"""dcgm-exporter samples of one scrape → one ``GpuReading`` per GPU (or MIG instance).

The exporter's label set drifted over the years (see tests/fixtures/dcgm/README.md): ``UUID`` or
``uuid``, ``pod``/``namespace`` or ``pod_name``/``pod_namespace``, ``Hostname`` missing in older
versions and sometimes the exporter *pod* name rather than the node, lower-case metric names in
some deployments, pod labels absent on idle MIG slices. This module absorbs that drift and the
unit differences (profiling fields are ratios 0-1, ``GPU_UTIL`` is a percent).

A reading exists for every (hostname, gpu, MIG instance) that has at least one sample of a metric
we map; samples of other metrics are ignored without being looked at.
"""

import gc
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from efficiency.collectors.exposition import (
    MAX_LINE_CHARS,
    _parse_labels_fast,
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

    def take_labels(self, labels: Mapping[str, str]) -> None:
        """Fill descriptive fields still empty: idle MIG slices carry no pod labels at all."""
        if not self.uuid:
            self.uuid = labels.get("UUID") or labels.get("uuid", "")
        if not self.model:
            self.model = labels.get("modelName", "")
        if not self.pci_bus_id:
            self.pci_bus_id = labels.get("pci_bus_id", "")
        if not self.namespace:
            self.namespace = labels.get("namespace") or labels.get("pod_namespace", "")
        if not self.pod:
            self.pod = labels.get("pod") or labels.get("pod_name", "")

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
    gpu = labels.get("gpu")
    if gpu is None:
        return "no gpu label"
    # isdecimal() alone admits non-ASCII digits; int() alone admits signs, spaces and '_'.
    if not (gpu.isascii() and gpu.isdecimal()):
        return "gpu label is not an integer"
    hostname = labels.get("Hostname") or default_hostname
    if not hostname:
        return "no Hostname label and no default hostname"
    key = (hostname, int(gpu), labels.get("GPU_I_ID", ""))
    draft = drafts.get(key)
    if draft is None:
        draft = drafts[key] = _Draft(hostname=key[0], gpu_index=key[1], mig_instance=key[2])
    draft.take_labels(labels)
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
    text: str, *, scrape_time_ms: int, default_hostname: str = ""
) -> ParseOutcome[GpuReading]:
    """``parse_exposition`` then ``gpu_readings_from_samples``, in one pass where that is safe.

    The collectors' hot path: a dcgm-exporter page is thousands of lines of one shape, so the
    common case is handled in a single loop that never builds ``Sample`` objects. The first line
    that is in any way unusual (a timestamp, an escape, a bad or blank value, an unknown GPU, a
    line that would be rejected) abandons the single pass and the whole text goes through the two
    general steps instead, so the result is always exactly theirs (tests/collectors prove it on
    generated pages). Rejections of both steps come back together, parse ones first.
    """
    collector_was_enabled = gc.isenabled()
    gc.disable()  # as in parse_exposition: the drafts are acyclic, see there
    try:
        fast = _single_pass(text, scrape_time_ms, default_hostname)
    finally:
        if collector_was_enabled:
            gc.enable()
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
# Each match starts at the newline before its line ('\n' + page is searched, so the first line has
# one too): a pattern that begins with a literal is found by a fast scan, where '^' with
# MULTILINE is tried at every character.
_COMMON_LINE_RE = re.compile(
    rf"\n([a-zA-Z_:][a-zA-Z0-9_:]{{0,{_MAX_NAME_CHARS - 1}}})"  # the name
    r"\{([^\n]*)\} "  # the labels, up to the last '}'
    rf"([^ \n}}_]{{1,{_MAX_VALUE_CHARS}}})(?=\n|\Z)"  # the value
)
# The start of every line that is neither empty nor a comment (in '\n' + page): the page takes
# the single pass only if each of those lines is one the pattern above matched.
_SAMPLE_LINE_START_RE = re.compile(r"\n[^#\n]")
# Label text → its parsed labels (None: not for the fast path), kept across pages: an exporter
# repeats each GPU's label text scrape after scrape, and parsing it was a fifth of the pass.
# Parsing is a pure function of the text, so a shared cache (threads included) changes nothing
# but the time; it is emptied at _LABEL_CACHE_MAX texts (twice a 10,000-GPU fleet, some 30 MB).
_LABEL_CACHE: dict[str, Mapping[str, str] | None] = {}
_LABEL_CACHE_MAX = 20_000


def _labels_cached(label_text: str) -> Mapping[str, str] | None:
    """``_parse_labels_fast`` through ``_LABEL_CACHE``; None also for a text too long for the pass."""
    try:
        return _LABEL_CACHE[label_text]
    except KeyError:
        pass
    labels = None if len(label_text) > _MAX_LABEL_TEXT_CHARS else _parse_labels_fast(label_text)
    if len(_LABEL_CACHE) >= _LABEL_CACHE_MAX:
        _LABEL_CACHE.clear()
    _LABEL_CACHE[label_text] = labels
    return labels


def _single_pass(text: str, scrape_time_ms: int, default_hostname: str) -> ParseOutcome[GpuReading] | None:
    """The common case of ``gpu_readings_from_exposition``; None as soon as a line is unusual."""
    page = "\n" + text
    lines = _COMMON_LINE_RE.findall(page)
    if len(lines) != len(_SAMPLE_LINE_START_RE.findall(page)):
        return None  # some sample line has another shape (a timestamp, a bad value, ...)
    drafts: dict[tuple[str, int, str], _Draft] = {}
    # Label text → its GPU's draft and that draft's value list: every metric of a GPU repeats one
    # text, so after the first line of a GPU the others cost two dictionary look-ups.
    draft_of: dict[str, _Draft] = {}
    slots_of: dict[str, list[float | None]] = {}
    checked: set[str] = set()  # label texts seen only on metrics we do not map (checked, no draft)
    # Metric name as written → (value slot, factor, upper bound), the slot negative for the Xid
    # metrics (_XID_COUNT, _XID_LAST) and for metrics we do not map (_IGNORED).
    kinds: dict[str, tuple[int, float, float]] = {}
    kind_of, slots_get = kinds.get, slots_of.get
    blank = DCGM_INT32_BLANK
    for name, label_text, value_text in lines:
        try:
            value = float(value_text)
        except ValueError:
            return None
        kind = kind_of(name) or _kind_learn(name, kinds)
        slot, factor, limit = kind
        slots = slots_get(label_text)
        if slots is not None and slot >= 0:  # the hot path: a gauge of a GPU already seen
            if not 0.0 <= value < blank:
                return None
            scaled = value * factor
            if scaled > limit:
                return None
            if slots[slot] is None:
                slots[slot] = scaled
            continue
        if slot == _IGNORED:
            # Not ours, but the general parser would still reject bad labels: check them once.
            if slots is None and label_text not in checked:
                if _labels_cached(label_text) is None:
                    return None
                checked.add(label_text)
            continue
        if slots is None:
            labels = _labels_cached(label_text)
            if labels is None:
                return None
            draft = _gpu_draft(labels, drafts, default_hostname)
            if isinstance(draft, str):
                return None  # the general path rejects this sample: let it
            draft_of[label_text] = draft
            slots = slots_of[label_text] = draft.values
        if not 0.0 <= value < blank:
            return None
        if slot >= 0:
            scaled = value * factor
            if scaled > limit:
                return None
            if slots[slot] is None:
                slots[slot] = scaled
        elif slot == _XID_COUNT:
            xid = _parse_labels_fast(label_text).get("xid", "")
            if not (xid.isascii() and xid.isdecimal()):
                return None
            draft_of[label_text].xid_counts.setdefault(int(xid), value)
        elif not value.is_integer():
            return None
        elif draft_of[label_text].xid_last is None:
            draft_of[label_text].xid_last = int(value)
    outcome: ParseOutcome[GpuReading] = ParseOutcome()
    outcome.records.extend(draft.reading(scrape_time_ms) for draft in drafts.values())
    return outcome


_IGNORED, _XID_COUNT, _XID_LAST = -1, -2, -3


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
