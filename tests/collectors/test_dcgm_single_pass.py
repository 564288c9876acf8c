"""The single-pass dcgm reader must give exactly what parse_exposition + gpu_readings_from_samples give."""

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from efficiency.collectors import dcgm
from efficiency.collectors.dcgm import _single_pass, gpu_readings_from_exposition, gpu_readings_from_samples
from efficiency.collectors.exposition import parse_exposition
from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "dcgm"
SCRAPE_MS = 1_764_489_600_000

METRICS = [
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_EXP_XID_ERRORS_COUNT",
    "DCGM_FI_DEV_SM_CLOCK",  # not mapped
    "dcgm_fi_dev_gpu_util",  # lower-case deployments
]
VALUES = st.one_of(
    st.integers(0, 100).map(str),
    st.floats(0, 1.2, allow_nan=False).map(repr),
    st.sampled_from(
        ["NaN", "+Inf", "-1", "9223372036854775794", "2147483647", "79", "79.5", "1e3", "0x10", "1_0"]
    ),
)


def _slow(text: str, default_hostname: str, scrape_time_ms: int = SCRAPE_MS):
    parsed = parse_exposition(text)
    outcome = gpu_readings_from_samples(
        parsed.records, scrape_time_ms=scrape_time_ms, default_hostname=default_hostname
    )
    return outcome.records, [*parsed.rejected, *outcome.rejected]


def _clean_value(metric: str):
    if "PROF" in metric:  # ratios 0-1
        return st.floats(0, 1, allow_nan=False).map(repr)
    return st.one_of(st.integers(0, 100).map(str), st.floats(0, 100, allow_nan=False).map(repr))


@st.composite
def clean_pages(draw):
    """Pages as exporters really serve them: every line takes the single pass."""
    lines = []
    for _ in range(draw(st.integers(1, 40))):
        metric = draw(st.sampled_from([m for m in METRICS if "XID" not in m.upper()]))
        host, gpu = draw(st.sampled_from(["gpu-001", "gpu-002"])), draw(st.integers(0, 7))
        pod = draw(st.sampled_from(["", "train-1"]))
        value = draw(_clean_value(metric))
        lines.append(f'{metric}{{gpu="{gpu}",UUID="GPU-{gpu}",Hostname="{host}",pod="{pod}"}} {value}')
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(text=clean_pages())
def test_single_pass_on_clean_pages_is_taken_and_equal(text):
    fast = _single_pass(text, SCRAPE_MS, "")
    assert fast is not None
    records, rejected = _slow(text, "")
    assert (fast.records, fast.rejected) == (records, rejected)


@st.composite
def pages(draw):
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for _ in range(draw(st.integers(1, 25))):
        labels = {}
        if draw(st.booleans()) or True:
            labels["gpu"] = draw(st.sampled_from(["0", "1", "7", "x", "-1"]))
        labels["UUID"] = draw(st.sampled_from(["GPU-a", "GPU-b"]))
        if draw(st.integers(0, 4)):
            labels["Hostname"] = draw(st.sampled_from(["gpu-001", "gpu-002"]))
        if draw(st.booleans()):
            labels["pod"] = draw(st.sampled_from(["", "train-1", "train-2"]))
            labels["namespace"] = draw(st.sampled_from(["", "team-bev"]))
        if not draw(st.integers(0, 6)):
            labels["GPU_I_ID"] = draw(st.sampled_from(["1", "2"]))
        metric = draw(st.sampled_from(METRICS))
        if metric == "DCGM_EXP_XID_ERRORS_COUNT":
            labels["xid"] = draw(st.sampled_from(["79", "48", "x"]))
        if not draw(st.integers(0, 10)):
            labels.pop("gpu", None)
        text = ",".join(f'{k}="{v}"' for k, v in labels.items())
        line = f"{metric}{{{text}}} {draw(VALUES)}"
        if not draw(st.integers(0, 12)):
            line += " 1764489600123"
        if not draw(st.integers(0, 15)):
            line = draw(
                st.sampled_from([line[:-3], line.replace("}", ""), line.replace('"', "", 1), "garbage \x00"])
            )
        lines.append(line)
    return "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None)
@given(text=pages(), default_hostname=st.sampled_from(["", "node-from-target"]))
def test_single_pass_equals_parse_then_map(text, default_hostname):
    fast = gpu_readings_from_exposition(text, scrape_time_ms=SCRAPE_MS, default_hostname=default_hostname)
    records, rejected = _slow(text, default_hostname)
    assert fast.records == records
    assert fast.rejected == rejected


def test_every_real_exporter_fixture_reads_the_same_both_ways():
    for path in sorted(FIXTURES.glob("*.txt")):
        text = path.read_text()
        fast = gpu_readings_from_exposition(text, scrape_time_ms=SCRAPE_MS, default_hostname="host")
        assert (fast.records, fast.rejected) == _slow(text, "host"), path.name


def test_a_clean_exporter_page_takes_the_single_pass():
    sim = ClusterSimulator(reference_nodes(), seed=3, start=datetime(2026, 11, 1, tzinfo=UTC))
    text = sim.exposition(datetime(2026, 11, 2, 9, 30, tzinfo=UTC))
    fast = _single_pass(text, SCRAPE_MS, "")
    assert fast is not None, "the simulator's page should not need the general path"
    assert len(fast.records) == 64 * 8
    assert fast.records == _slow(text, "")[0]


# --- real and exporter-shaped pages with one odd line here and there ---------------------------


def _exporter_page(gpus: int = 16) -> list[str]:
    """A page in dcgm-exporter's layout: families one after another, one label text per GPU."""
    lines = []
    for metric in ["DCGM_FI_DEV_SM_CLOCK", *METRICS[:7]]:
        lines += [f"# HELP {metric} {metric}.", f"# TYPE {metric} gauge"]
        for gpu in range(gpus):
            labels = (
                f'gpu="{gpu % 8}",UUID="GPU-{gpu:04d}",device="nvidia{gpu % 8}",'
                f'modelName="NVIDIA H100 80GB HBM3",Hostname="node-{gpu // 8}",'
                'container="",namespace="",pod=""'
            )
            value = "0.5" if "PROF" in metric else str(gpu * 3 % 100)
            lines.append(f"{metric}{{{labels}}} {value}")
    return lines


def _mutated(line: str, mutation: str, draw) -> str:
    brace, close = line.find("{"), line.rfind("}")
    match mutation:
        case "crlf":
            return line + "\r"
        case "brace in a value":
            return line.replace('pod=""', 'pod="a}b{"', 1) if brace > 0 else line
        case "value":
            return line[: close + 2] + draw(VALUES) if close > 0 else line
        case "timestamp":
            return line + " 1764489600123"
        case "two spaces":
            return line.replace("} ", "}  ", 1)
        case "comma space":
            return line.replace('",', '", ')
        case "trailing comma":
            return line.replace("} ", ",} ", 1)
        case "escape":
            return line.replace('pod=""', 'pod="a\\"b"', 1)
        case "duplicate label":
            return line.replace("{", '{gpu="3",', 1)
        case "long name":
            return "DCGM_" + "X" * 1200 + line[brace:] if brace > 0 else line
        case "no labels":
            return line[:brace] + line[close + 1 :] if brace > 0 else line
        case "leading space":
            return " " + line
        case "underscore value":
            return line[: close + 2] + "1_0" if close > 0 else line
        case "garbage":
            return draw(st.sampled_from(["garbage", "{}", "x{", '{a="1"} 2', "\x00", "}", "# odd {"]))
    return line


MUTATIONS = [
    "crlf",
    "brace in a value",
    "value",
    "timestamp",
    "two spaces",
    "comma space",
    "trailing comma",
    "escape",
    "duplicate label",
    "long name",
    "no labels",
    "leading space",
    "underscore value",
    "garbage",
    "blank line",
]
REAL_PAGES = [path.read_text().split("\n") for path in sorted(FIXTURES.glob("*.txt"))]


@st.composite
def odd_pages(draw):
    """An exporter-shaped or real fixture page with a few lines changed, added or dropped."""
    lines = list(draw(st.sampled_from([_exporter_page(), *REAL_PAGES])))
    for _ in range(draw(st.integers(0, 4))):
        if not lines:
            break
        at = draw(st.integers(0, len(lines) - 1))
        mutation = draw(st.sampled_from([*MUTATIONS, "drop", "repeat"]))
        if mutation == "blank line":
            lines.insert(at, "")
        elif mutation == "drop":
            del lines[at]
        elif mutation == "repeat":
            lines.insert(at, lines[at])
        else:
            lines[at] = _mutated(lines[at], mutation, draw)
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=400, deadline=None)
@given(text=odd_pages(), default_hostname=st.sampled_from(["", "node-from-target"]))
def test_single_pass_equals_parse_then_map_on_real_pages_with_odd_lines(text, default_hostname):
    fast = gpu_readings_from_exposition(text, scrape_time_ms=SCRAPE_MS, default_hostname=default_hostname)
    assert (fast.records, fast.rejected) == _slow(text, default_hostname)


def test_an_exporter_page_with_crlf_line_ends_takes_the_single_pass():
    text = "\r\n".join(_exporter_page()) + "\r\n"
    fast = _single_pass(text, SCRAPE_MS, "")
    assert fast is not None
    assert len(fast.records) == 16
    assert (fast.records, fast.rejected) == _slow(text, "")


def test_a_line_past_the_length_limit_is_rejected_as_before():
    lines = _exporter_page()
    lines[5] = lines[5].replace('pod=""', f'pod="{"x" * 70_000}"')
    text = "\n".join(lines)
    fast = gpu_readings_from_exposition(text, scrape_time_ms=SCRAPE_MS)
    assert (fast.records, fast.rejected) == _slow(text, "")
    assert [r.reason for r in fast.rejected] == ["line longer than 65536 characters"]


def test_the_label_cache_across_pages_changes_no_reading(monkeypatch):
    # Parsed label texts and the rows they make are kept across pages (and emptied when full): a
    # page read with warm, cold and overflowing caches gives the same readings as the general path.
    from efficiency.collectors import dcgm

    text = "\n".join(_exporter_page()) + "\n"
    expected = _slow(text, "")
    warm = _single_pass(text, SCRAPE_MS, "")
    dcgm._LABEL_CACHE.clear()
    dcgm._ROW_CACHE.clear()
    cold = _single_pass(text, SCRAPE_MS, "")
    assert dcgm._ROW_CACHE  # the page's GPUs are known for the next page
    later = _single_pass(text, SCRAPE_MS + 15_000, "")
    dcgm._LABEL_CACHE.clear()
    dcgm._ROW_CACHE.clear()
    monkeypatch.setattr(dcgm, "_LABEL_CACHE_MAX", 5)
    overflowing = _single_pass(text, SCRAPE_MS, "")
    assert len(dcgm._LABEL_CACHE) <= 5
    assert len(dcgm._ROW_CACHE) <= 5
    for outcome in (warm, cold, overflowing):
        assert (outcome.records, outcome.rejected) == expected
    # The next scrape's rows are made from the cached ones: same GPUs, its own instant, and no row
    # shared with the page before.
    assert (later.records, later.rejected) == _slow(text, "", SCRAPE_MS + 15_000)
    assert not {id(reading) for reading in later.records} & {id(reading) for reading in cold.records}


def test_a_known_gpu_listed_under_a_second_pod_on_a_later_page_reads_as_the_general_path():
    # The first page lists each GPU once; the next lists GPU 0 also under a second pod's text,
    # first in the family: the rows cannot all be made from the cache at once (two texts, one GPU).
    lines = _exporter_page()
    text = "\n".join(lines) + "\n"
    _single_pass(text, SCRAPE_MS, "")
    second_pod = next(line for line in lines if line.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    second_pod = second_pod.replace('pod=""', 'pod="train-2"').replace('namespace=""', 'namespace="ml"')
    at = lines.index(next(line for line in lines if line.startswith("DCGM_FI_DEV_GPU_UTIL{")))
    changed = "\n".join([*lines[:at], second_pod, *lines[at:]]) + "\n"
    for _ in range(2):  # the second time, every text of the page is known from the first
        outcome = gpu_readings_from_exposition(changed, scrape_time_ms=SCRAPE_MS)
        assert (outcome.records, outcome.rejected) == _slow(changed, "")


# --- exporter-shaped pages, family by family -----------------------------------------------------
#
# The single pass stores a run of one metric's lines with whole-run operations when every line of
# it names a GPU already seen on the page. These pages are made of such runs: each family lists
# some of the GPUs (in any order, some more than once, some under a second pod's label text), and
# a few values are odd ones, so that a run can fail its checks anywhere, not only on its first line.

FAMILY_METRICS = [*METRICS, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_PROF_SM_ACTIVE"]


def _family_labels(gpu: int, pod: str) -> str:
    return (
        f'gpu="{gpu % 8}",UUID="GPU-{gpu:04d}",device="nvidia{gpu % 8}",modelName="H100",'
        f'Hostname="node-{gpu // 8}",namespace="{"ml" if pod else ""}",pod="{pod}"'
    )


@st.composite
def family_pages(draw, odd_values: bool = True):
    gpus = draw(st.integers(1, 12))
    label_texts = [_family_labels(gpu, "") for gpu in range(gpus)]
    label_texts += [_family_labels(gpu, "train-1") for gpu in draw(st.sets(st.integers(0, gpus - 1)))]
    odd = odd_values and draw(st.integers(0, 3))
    lines = []
    for metric in draw(st.lists(st.sampled_from(FAMILY_METRICS), min_size=1, max_size=8)):
        lines += [f"# HELP {metric} {metric}.", f"# TYPE {metric} gauge"]
        listed = draw(
            st.one_of(
                st.just(label_texts),
                st.permutations(label_texts),
                st.lists(st.sampled_from(label_texts), min_size=1),
            )
        )
        for labels in listed:
            if "XID_ERRORS_COUNT" in metric:
                labels += f',xid="{draw(st.sampled_from(["79", "48", "x"]))}"'
            if odd and not draw(st.integers(0, 20)):
                value = draw(VALUES)
            elif "XID" in metric:
                value = draw(st.sampled_from(["0", "79", "13"]))
            else:
                value = draw(_clean_value(metric))
            lines.append(f"{metric}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None)
@given(text=family_pages(), default_hostname=st.sampled_from(["", "node-from-target"]))
def test_single_pass_equals_parse_then_map_on_exporter_families(text, default_hostname):
    fast = gpu_readings_from_exposition(text, scrape_time_ms=SCRAPE_MS, default_hostname=default_hostname)
    assert (fast.records, fast.rejected) == _slow(text, default_hostname)


@settings(max_examples=200, deadline=None)
@given(text=family_pages(odd_values=False))
def test_clean_exporter_families_take_the_single_pass(text):
    fast = _single_pass(text, SCRAPE_MS, "")
    records, rejected = _slow(text, "")
    if rejected:  # an xid label that is not a number
        assert fast is None
    else:
        assert fast is not None, "a clean page of families should not need the general path"
        assert fast.records == records


# --- pages like the last one: the template --------------------------------------------------------
#
# After the single pass has read a page, a page that differs from it only in its values is read
# from a template of the first (collectors.dcgm._template_pass). Each test reads a first page, then
# a second one, and holds the second to the general path's readings and rejections.


@pytest.fixture(autouse=True)
def _no_templates():
    dcgm._TEMPLATES.clear()
    yield
    # The shelf's count of the lines it holds stays true whatever was learned, replaced or dropped.
    assert dcgm._TEMPLATES.lines == sum(slot.lines for slot in dcgm._TEMPLATES.values())
    dcgm._TEMPLATES.clear()


def _read(text: str, default_hostname: str = "", scrape_time_ms: int = SCRAPE_MS, origin: str = ""):
    outcome = gpu_readings_from_exposition(
        text, scrape_time_ms=scrape_time_ms, default_hostname=default_hostname, origin=origin
    )
    return outcome.records, outcome.rejected


def _single_pass_refused(monkeypatch):
    """From here on, a page the template does not read fails the test."""

    def refused(*args):
        raise AssertionError("the single pass ran for a page like the last one")

    monkeypatch.setattr(dcgm, "_single_pass_read", refused)


@st.composite
def page_pairs(draw):
    """Two pages with the same lines but for their values: the first clean (it teaches the
    template), the second with odd values here and there (a value the single pass refuses, a DCGM
    blank, NaN, a percentage above 100, an Xid code that is not an integer)."""
    structure = draw(family_pages(odd_values=False))
    lines = structure.split("\n")
    second = []
    odd = draw(st.integers(0, 3))
    for line in lines:
        if not line or line.startswith("#"):
            second.append(line)
            continue
        head = line.rsplit(" ", 1)[0]
        metric = head.split("{", 1)[0]
        if odd and not draw(st.integers(0, 15)):
            value = draw(VALUES)
        elif "XID" in metric:
            value = draw(st.sampled_from(["0", "79", "13", "31.0"]))
        else:
            value = draw(_clean_value(metric))
        second.append(f"{head} {value}")
    return structure, "\n".join(second)


@settings(max_examples=400, deadline=None)
@given(pair=page_pairs(), default_hostname=st.sampled_from(["", "node-from-target"]))
def test_a_page_like_the_last_one_reads_as_the_general_path(pair, default_hostname):
    dcgm._TEMPLATES.clear()
    first, second = pair
    assert _read(first, default_hostname) == _slow(first, default_hostname)
    later = SCRAPE_MS + 15_000
    assert _read(second, default_hostname, later) == _slow(second, default_hostname, later)


def test_a_page_like_the_last_one_is_read_from_its_template_alone(monkeypatch):
    lines = _exporter_page()
    first = "\n".join(lines) + "\n"
    second = first.replace("} 0\n", "} 42\n").replace("} 0.5\n", "} 0.25\n")
    assert second != first
    _read(first)
    _single_pass_refused(monkeypatch)
    records, rejected = _read(second, scrape_time_ms=SCRAPE_MS + 15_000)
    assert (records, rejected) == _slow(second, "", SCRAPE_MS + 15_000)
    assert records[0].util_pct == 42  # the new values, not the template's page's
    assert records[0].sm_active_pct == 25
    assert {record.timestamp_ms for record in records} == {SCRAPE_MS + 15_000}


@pytest.mark.parametrize(
    "change",
    [
        lambda text: text.replace('pod=""', 'pod="train-9"', 1),  # a pod came
        lambda text: text.replace('UUID="GPU-0003"', 'UUID="GPU-0099"'),  # a GPU was swapped
        lambda text: text.replace("# HELP DCGM_FI_DEV_GPU_UTIL", "# HELP DCGM_FI_DEV_GPU_UTIL now", 1),
        lambda text: text.replace("} 45\n", "} 45 1764489600123\n", 1),  # a timestamp
        lambda text: text.replace("} 45\n", "}  45\n", 1),  # two spaces: not the common shape
        lambda text: text.rsplit("\n", 2)[0] + "\n",  # a line less
        lambda text: text + 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-0000",Hostname="node-0"} 5\n',
        lambda text: text.replace("} 45\n", "} 45\n\n", 1),  # an empty line
        lambda text: text.replace("\n", "\r\n"),
        lambda text: text[:-1],  # no newline at the end
    ],
)
def test_a_page_that_changed_in_more_than_values_reads_as_the_general_path(change):
    first = "\n".join(_exporter_page()) + "\n"
    _read(first)
    second = change(first)
    assert second != first
    assert _read(second, scrape_time_ms=SCRAPE_MS + 15_000) == _slow(second, "", SCRAPE_MS + 15_000)


def test_a_value_split_off_inside_a_comment_gives_no_template():
    # "# HELP ... {x} 5" ends like a sample: the pieces would not tell the lines apart, so the page
    # is read by the single pass every time.
    lines = _exporter_page()
    lines.insert(0, "# HELP DCGM_FI_DEV_GPU_UTIL utilisation {in %} 100")
    first = "\n".join(lines) + "\n"
    _read(first)
    assert all(slot.template is None for slot in dcgm._TEMPLATES.values())
    second = first.replace("} 45\n", "} 12\n")
    assert _read(second) == _slow(second, "")


def test_xid_counts_and_shared_gpus_on_a_page_like_the_last_one(monkeypatch):
    # GPU 1 is listed under a second pod (its values: the first listing stands; its pod: the first
    # that is not empty) and has Xid counts, one of them listed twice (the first stands).
    def page(util: str, count: str) -> str:
        return "\n".join(
            [
                f"DCGM_FI_DEV_GPU_UTIL{{{_family_labels(0, '')}}} {util}",
                f"DCGM_FI_DEV_GPU_UTIL{{{_family_labels(1, '')}}} 10",
                f"DCGM_FI_DEV_GPU_UTIL{{{_family_labels(1, 'train-1')}}} 20",
                f'DCGM_EXP_XID_ERRORS_COUNT{{{_family_labels(1, "")},xid="79"}} {count}',
                f'DCGM_EXP_XID_ERRORS_COUNT{{{_family_labels(1, "")},xid="48"}} 1',
                f'DCGM_EXP_XID_ERRORS_COUNT{{{_family_labels(1, "train-1")},xid="79"}} 7',
                f"DCGM_FI_DEV_XID_ERRORS{{{_family_labels(0, '')}}} 0",
                f"DCGM_FI_DEV_XID_ERRORS{{{_family_labels(1, '')}}} 79",
            ]
        )

    _read(page("50", "2"))
    _single_pass_refused(monkeypatch)
    records, rejected = _read(page("60", "3"))
    assert (records, rejected) == _slow(page("60", "3"), "")
    gpu1 = next(record for record in records if record.gpu_index == 1)
    expected = (10.0, ((48, 1.0), (79, 3.0)), 79, "train-1")
    assert (gpu1.util_pct, gpu1.xid_counts, gpu1.xid_last, gpu1.pod) == expected


def test_a_page_that_keeps_changing_rests_from_its_template(monkeypatch):
    # Pods change the page every scrape: after two misses in a row it is not tried against a
    # template for _TEMPLATE_REST pages, and every page still reads as the general path.
    tried = []
    pattern = dcgm._VALUE_SPLIT

    class Counting:
        def findall(self, text):
            tried.append(1)
            return pattern.findall(text)

        def split(self, text):
            return pattern.split(text)

    monkeypatch.setattr(dcgm, "_VALUE_SPLIT", Counting())
    base = "\n".join(_exporter_page()) + "\n"
    pages = [base.replace('pod=""', f'pod="job-{n}"', 1) for n in range(14)]
    for text in pages:
        assert _read(text, origin="http://node-0:9400/metrics") == _slow(text, "")
    # Page 0 teaches; 1 and 2 miss (tried); 3-10 rest; 11 is tried again and misses; 12-13 rest.
    assert len(tried) == 3


def test_templates_are_bounded_and_pages_read_in_turn_keep_theirs(monkeypatch):
    # Room for one page's template: three pages read in turn keep the first one's (dropping it
    # for the next would learn each page and use none), and read the same with or without.
    monkeypatch.setattr(dcgm, "_TEMPLATE_LINES_MAX", 200)
    base = "\n".join(_exporter_page()) + "\n"  # 16 GPUs x 8 families: 128 lines
    pages = {host: base.replace("Hostname=", f'site="{host}",Hostname=') for host in ("a", "b", "c")}
    for round_ in range(3):
        for host, text in pages.items():
            text = text.replace("} 45\n", "} " + str(45 - round_) + "\n")
            assert _read(text, host, origin=host) == _slow(text, host)
        assert list(dcgm._TEMPLATES) == [("a", "a", "")]
        assert dcgm._TEMPLATES.lines == 128


def test_a_page_no_longer_read_makes_room(monkeypatch):
    monkeypatch.setattr(dcgm, "_TEMPLATE_LINES_MAX", 200)
    base = "\n".join(_exporter_page()) + "\n"
    first, second = (base.replace("Hostname=", f'site="{host}",Hostname=') for host in ("a", "b"))
    _read(first, origin="a")
    for _ in range(4):  # "a" is not read for two rounds of the one page kept, then "b" takes its place
        assert _read(second, origin="b") == _slow(second, "")
    assert [key[0] for key in dcgm._TEMPLATES] == ["b"]
    _single_pass_refused(monkeypatch)
    again = second.replace("} 45\n", "} 44\n")
    assert _read(again, origin="b") == _slow(again, "")


def test_every_real_exporter_fixture_reads_the_same_from_its_template():
    for path in sorted(FIXTURES.glob("*.txt")):
        text = path.read_text()
        _read(text, "host")
        assert _read(text, "host", SCRAPE_MS + 15_000) == _slow(text, "host", SCRAPE_MS + 15_000), path.name
