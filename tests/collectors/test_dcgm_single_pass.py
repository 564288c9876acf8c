"""The single-pass dcgm reader must give exactly what parse_exposition + gpu_readings_from_samples give."""

from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

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
