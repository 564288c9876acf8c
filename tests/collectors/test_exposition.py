"""Prometheus text exposition parser: same answers as prometheus_client, bad lines one by one."""

import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from efficiency.collectors.exposition import MAX_LINE_CHARS, _parse_labels_fast, parse_exposition

FIXTURES = sorted((Path(__file__).parent.parent / "fixtures" / "dcgm").glob("*.txt"))

GOOD_BEFORE = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",Hostname="n1"} 44'
GOOD_AFTER = 'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-2",Hostname="n1"} 55'


def _value_key(value: float) -> object:
    # NaN != NaN; compare it as a marker so that "both NaN" counts as equal.
    return "NaN" if math.isnan(value) else value


def _as_float(value: float) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _reference_ms(timestamp_s: float | None) -> int | None:
    # prometheus_client divides the millisecond timestamp by 1000; undo it.
    return None if timestamp_s is None else round(float(timestamp_s) * 1000)


def reference_samples(text: str) -> list[tuple]:
    """prometheus_client's reading of a whole text, as (name, labels, value, timestamp_ms)."""
    return [
        (s.name, dict(s.labels), _value_key(_as_float(s.value)), _reference_ms(s.timestamp))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def our_samples(text: str) -> list[tuple]:
    outcome = parse_exposition(text)
    return [(s.name, dict(s.labels), _value_key(s.value), s.timestamp_ms) for s in outcome.records]


def reference_line(line: str) -> tuple | None:
    """prometheus_client's reading of one line: a sample tuple, or None when it refuses it."""
    try:
        (family,) = text_string_to_metric_families(line)
    except Exception:
        return None
    (s,) = family.samples
    if s.timestamp is not None and not math.isfinite(s.timestamp):
        return None  # we reject a timestamp that is not a number of milliseconds
    return (s.name, dict(s.labels), _value_key(_as_float(s.value)), _reference_ms(s.timestamp))


def is_sample_line(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


# --- generated exposition text ---------------------------------------------------------------

metric_names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True)
plain_label_names = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,10}", fullmatch=True)
# UTF-8 label names are written quoted; the reference refuses the reserved "__" prefix.
quoted_label_names = st.text(min_size=1, max_size=8).filter(lambda name: not name.startswith("__"))
label_values = st.one_of(
    st.text(max_size=12),
    st.text(alphabet='\\"\n{},= #', max_size=8),
    st.sampled_from(["", "GPU-6bf47ca9-ad3e-15db-beed-1079a7d74116", "NVIDIA H100 80GB HBM3", "}", ","]),
)
values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:e}"),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:f}"),
    st.sampled_from(["NaN", "nan", "+Inf", "-Inf", "Inf", "1e3", "1.5E-7", "+5", "9223372036854775794"]),
)
timestamps = st.one_of(st.none(), st.integers(min_value=-(2**62), max_value=2**62))


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def sample_lines(draw: st.DrawFn, name: str | None = None) -> str:
    name = name if name is not None else draw(metric_names)
    plain = draw(st.dictionaries(plain_label_names, label_values, max_size=5))
    quoted = draw(st.dictionaries(quoted_label_names, label_values, max_size=2))
    labels = [f'{key}="{_escape(value)}"' for key, value in plain.items()]
    labels += [f'"{_escape(key)}"="{_escape(value)}"' for key, value in quoted.items() if key not in plain]
    labels = draw(st.permutations(labels))
    separator = draw(st.sampled_from([",", ",", ", "]))
    label_part = "{" + separator.join(labels) + "}" if labels or draw(st.booleans()) else ""
    gap = draw(st.sampled_from([" ", " ", " ", "  ", "\t"]))
    line = f"{name}{label_part}{gap}{draw(values)}"
    timestamp = draw(timestamps)
    if timestamp is not None:
        line += f" {timestamp}"
    if draw(st.integers(0, 9)) == 0:
        line = draw(st.sampled_from([" ", "\t"])) + line + draw(st.sampled_from([" ", "\r", "\t"]))
    return line


@st.composite
def exposition_texts(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        family = draw(metric_names)
        kind = draw(st.sampled_from(["gauge", "untyped", "summary", "histogram", "counter", None]))
        if kind == "counter":
            # prometheus_client renames the samples of a counter not named *_total (see
            # test_counter_sample_names_are_kept_as_written); a *_total family is left alone.
            family += "_total"
        if draw(st.booleans()):
            lines.append(f"# HELP {family} {draw(st.from_regex(r'[a-zA-Z0-9 ().%]{0,30}', fullmatch=True))}")
        if kind is not None:
            lines.append(f"# TYPE {family} {kind}")
        for _ in range(draw(st.integers(0, 4))):
            same_family = draw(st.booleans())
            lines.append(draw(sample_lines(family if same_family else None)))
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(["", "# a comment", "#", "   "])))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exposition_texts())
def test_valid_text_parses_exactly_like_prometheus_client(text):
    assert our_samples(text) == reference_samples(text)
    assert parse_exposition(text).rejected == []


def _mutate(line: str, position: int, insert: str, delete: int) -> str:
    position = position % (len(line) + 1)
    return line[:position] + insert + line[position + delete :]


odd_lines = st.one_of(
    st.text(alphabet=st.characters(exclude_characters="\n"), max_size=40),
    st.builds(
        _mutate,
        sample_lines(),
        st.integers(0, 200),
        st.text(alphabet=st.characters(exclude_characters="\n"), max_size=3)
        | st.sampled_from(['"', "\\", "{", "}", " ", ",", "=", "_", "\r"]),
        st.integers(0, 2),
    ),
)


@settings(max_examples=600, deadline=None)
@given(odd_lines)
def test_any_single_line_gives_prometheus_clients_result_or_a_rejection(line):
    line = line.replace("\n", "")
    outcome = parse_exposition(line)
    if not is_sample_line(line):
        assert outcome.records == []
        assert outcome.rejected == []
        return
    expected = reference_line(line)
    if expected is None:
        assert outcome.records == []
        assert [r.line_no for r in outcome.rejected] == [1]
    else:
        assert outcome.rejected == []
        assert our_samples(line) == [expected]


@settings(max_examples=200, deadline=None)
@given(st.lists(odd_lines, max_size=8))
def test_every_sample_line_ends_as_a_record_or_a_rejection(lines):
    text = "\n".join(line.replace("\n", "") for line in lines)
    outcome = parse_exposition(text)
    sample_line_count = sum(is_sample_line(line) for line in text.split("\n"))
    assert len(outcome.records) + len(outcome.rejected) == sample_line_count


# --- real dcgm-exporter pages ----------------------------------------------------------------


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_dcgm_fixture_agrees_with_prometheus_client_line_by_line(path):
    text = path.read_text()
    outcome = parse_exposition(text)

    expected, refused = [], []
    for line_no, line in enumerate(text.split("\n"), start=1):
        if is_sample_line(line):
            reading = reference_line(line)
            if reading is None:
                refused.append(line_no)
            else:
                expected.append(reading)
    assert our_samples(text) == expected
    assert [r.line_no for r in outcome.rejected] == refused


def test_dcgm_fixtures_without_bad_lines_agree_with_prometheus_client_as_a_whole():
    clean = [p for p in FIXTURES if not parse_exposition(p.read_text()).rejected]
    assert len(clean) >= 10
    for path in clean:
        text = path.read_text()
        assert our_samples(text) == reference_samples(text), path.name


def test_quickstart_sample_keeps_its_lines_and_rejects_the_readme_elisions():
    outcome = parse_exposition((FIXTURES[0].parent / "dcgm_exporter_readme_quickstart.txt").read_text())

    assert [(s.name, s.value) for s in outcome.records] == [
        ("DCGM_FI_DEV_SM_CLOCK", 139.0),
        ("DCGM_FI_DEV_MEM_CLOCK", 405.0),
        ("DCGM_FI_DEV_MEMORY_TEMP", 9223372036854775794.0),
    ]
    assert dict(outcome.records[0].labels) == {"gpu": "0", "UUID": "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"}
    assert [(r.line_no, r.excerpt) for r in outcome.rejected] == [(7, "..."), (11, "...")]


def test_prometheus_view_without_values_is_rejected_as_missing_value():
    path = FIXTURES[0].parent / "dcgm_exporter_issue277_prometheus_view.txt"
    outcome = parse_exposition(path.read_text())

    assert outcome.records == []
    assert [(r.reason, r.line_no) for r in outcome.rejected] == [("missing value", 1)]


# --- malformed lines among good ones -----------------------------------------------------------


def _between_good_lines(bad: str) -> str:
    return "\n".join([GOOD_BEFORE, bad, GOOD_AFTER]) + "\n"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ('DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-3"}', "missing value"),
        ('DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-3" 7', "unclosed label brace"),
        ('DCGM_FI_DEV_GPU_UTIL{gpu="2,UUID="GPU-3"} 7', "unterminated quoted label value"),
        ('DCGM_FI_DEV_GPU_UTIL{gpu="2"} seven', "invalid value or timestamp"),
        ('DCGM_FI_DEV_GPU_UTIL{gpu="2"} 7 1700000000000x', "invalid value or timestamp"),
        ('DCGM_FI_DEV_GPU_UTIL{2gpu="2"} 7', "invalid labels"),
        ("DCGM_FI_DEV_GPU_UTIL", "missing value"),
        ("DCGM-FI-DEV-GPU-UTIL 7", "invalid metric name"),
    ],
)
def test_malformed_line_is_rejected_and_its_neighbours_kept(bad, reason):
    outcome = parse_exposition(_between_good_lines(bad))

    assert [(s.labels["gpu"], s.value) for s in outcome.records] == [("0", 44.0), ("1", 55.0)]
    assert len(outcome.rejected) == 1
    assert outcome.rejected[0].reason == reason
    assert outcome.rejected[0].line_no == 2
    assert outcome.rejected[0].excerpt == bad


def test_garbage_bytes_decoded_with_replacement_characters_are_rejected():
    raw = (GOOD_BEFORE + "\n").encode() + b"\xff\xfe\x00garbage\x9c{\n" + (GOOD_AFTER + "\n").encode()
    outcome = parse_exposition(raw.decode("utf-8", errors="replace"))

    assert len(outcome.records) == 2
    assert len(outcome.rejected) == 1
    assert outcome.rejected[0].line_no == 2
    assert outcome.rejected[0].excerpt.startswith("\N{REPLACEMENT CHARACTER}\N{REPLACEMENT CHARACTER}")


def test_ten_megabyte_line_is_rejected_without_parsing_it():
    huge = 'DCGM_FI_DEV_GPU_UTIL{gpu="2",pod="' + "x" * 10_000_000 + '"} 7'
    outcome = parse_exposition(_between_good_lines(huge))

    assert len(outcome.records) == 2
    assert len(outcome.rejected) == 1
    assert outcome.rejected[0].reason == f"line longer than {MAX_LINE_CHARS} characters"
    assert outcome.rejected[0].line_no == 2
    assert len(outcome.rejected[0].excerpt) <= 200


def test_many_bad_lines_are_each_counted():
    text = "\n".join([GOOD_BEFORE, "}", '{"', "x{", GOOD_AFTER, "???", ""])
    outcome = parse_exposition(text)

    assert len(outcome.records) == 2
    assert [r.line_no for r in outcome.rejected] == [2, 3, 4, 6]


# --- details of the format ---------------------------------------------------------------------


def test_special_values_and_exponents_are_floats():
    text = "a NaN\nb +Inf\nc -Inf\nd 1.5e-3\ne 9223372036854775794\n"
    values = [s.value for s in parse_exposition(text).records]

    assert math.isnan(values[0])
    assert values[1:] == [math.inf, -math.inf, 0.0015, 9223372036854775794.0]
    assert all(isinstance(v, float) for v in values)


def test_timestamp_is_integer_milliseconds():
    (sample,) = parse_exposition('a{gpu="0"} 1 1700000000123\n').records

    assert sample.timestamp_ms == 1700000000123


def test_escaped_label_values_are_unescaped():
    (sample,) = parse_exposition('a{pod="say \\"hi\\"\\n\\\\",b="}"} 1\n').records

    assert dict(sample.labels) == {"pod": 'say "hi"\n\\', "b": "}"}


def test_crlf_line_endings_and_comma_space_separators_are_accepted():
    text = '# TYPE a gauge\r\na{gpu="0", UUID="GPU-1"} 139\r\n\r\nb 2\r\n'
    outcome = parse_exposition(text)

    assert [(s.name, dict(s.labels), s.value) for s in outcome.records] == [
        ("a", {"gpu": "0", "UUID": "GPU-1"}, 139.0),
        ("b", {}, 2.0),
    ]
    assert outcome.rejected == []


def test_counter_sample_names_are_kept_as_written():
    text = "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION 43\n"

    # prometheus_client renames the sample to *_total; the exporter's name is what we map.
    assert reference_samples(text)[0][0] == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total"
    assert [s.name for s in parse_exposition(text).records] == ["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]


def test_malformed_type_line_is_skipped_not_fatal():
    outcome = parse_exposition("# TYPE\n  # TYPE x\na 1\n")

    assert [s.name for s in outcome.records] == ["a"]
    assert outcome.rejected == []


def test_samples_with_the_same_label_string_share_one_read_only_mapping():
    records = parse_exposition(GOOD_BEFORE + "\n" + GOOD_BEFORE.replace(" 44", " 45")).records

    assert records[0].labels is records[1].labels
    with pytest.raises(TypeError):
        records[0].labels["gpu"] = "9"  # type: ignore[index]


def test_parsing_leaves_the_garbage_collector_as_it_was():
    import gc

    gc.disable()
    try:
        parse_exposition(GOOD_BEFORE)
        assert not gc.isenabled()
    finally:
        gc.enable()
    parse_exposition(GOOD_BEFORE)
    assert gc.isenabled()


# --- the label parser of the fast path, against the loop it replaced --------------------------


def _labels_loop(label_text: str) -> dict | None:
    """The fast path's label parser as it was written before the compiled patterns (reference)."""
    if "\\" in label_text:
        return None
    labels: dict[str, str] = {}
    end = len(label_text)
    pos = 0
    while pos < end:
        equals = label_text.find('="', pos)
        if equals < 0:
            return None
        name = label_text[pos:equals]
        if re.match(r"(?!__)[a-zA-Z_][a-zA-Z0-9_]*\Z", name) is None or name in labels:
            return None
        quote = label_text.find('"', equals + 2)
        if quote < 0:
            return None
        labels[name] = label_text[equals + 2 : quote]
        pos = quote + 1
        if pos == end:
            break
        if label_text[pos] != ",":
            return None
        pos += 1
        if pos < end and label_text[pos] == " ":
            pos += 1
    return labels


@st.composite
def label_texts(draw: st.DrawFn) -> str:
    """Label strings near the edge of what the fast path takes: odd names, separators, quotes."""
    names = st.one_of(
        plain_label_names,
        st.sampled_from(["gpu", "gpu", "UUID", "__name", "_x", "a:b", "1a", "", "x y", 'a"', "é"]),
    )
    values = st.one_of(label_values, st.text(alphabet='a"\\,= {}\t', max_size=6))
    pairs = draw(st.lists(st.tuples(names, values), max_size=5))
    separators = st.sampled_from([",", ",", ", ", ",  ", " ,", "", ";"])
    text = "".join(f'{name}="{value}"' + draw(separators) for name, value in pairs)
    if pairs and draw(st.booleans()):
        text = text.rstrip(",; ")  # no trailing separator
    return text


@settings(max_examples=1500, deadline=None)
@given(st.one_of(label_texts(), st.text(alphabet='ab_:1="\\, {}', max_size=24)))
def test_fast_label_parse_equals_the_loop_it_replaced(label_text):
    ours = _parse_labels_fast(label_text)
    reference = _labels_loop(label_text)
    assert (None if ours is None else list(ours.items())) == (
        None if reference is None else list(reference.items())
    )


def test_fast_label_parse_takes_what_dcgm_exporter_writes():
    text = 'gpu="0",UUID="GPU-1",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",pod=""'
    assert dict(_parse_labels_fast(text))["modelName"] == "NVIDIA H100 80GB HBM3"
    assert dict(_parse_labels_fast('a="1", b="}{=,"')) == {"a": "1", "b": "}{=,"}
    assert _parse_labels_fast('a="1",a="2"') is None  # a duplicate name takes the reference route
