"""The fault signature catalog and the prefiltered scanner.

Example lines come from tests/fixtures/logs/examples.tsv (sources in its README). The scanner
is checked against the naive reference it must equal: every line decoded and matched against
every signature in catalog order.
"""

import importlib.util
import itertools
import json
import math
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.analysis.faults import scanner
from efficiency.analysis.faults.context import METRICS, StreamContext, metric_value
from efficiency.analysis.faults.scanner import (
    LogFileError,
    line_timestamp,
    scan_bytes,
    scan_file,
)
from efficiency.analysis.faults.signatures import CATEGORIES, SIGNATURES, SIGNATURES_BY_ID, THROUGHPUT_DROP
from tests.simulator.conftest import START, make_simulator

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "logs"


def scan_text(text: str, *, year: int | None = None) -> list:
    """Findings in a string, offsets in its UTF-8 encoding (the portal scans bytes)."""
    return scan_bytes(text.encode("utf-8", "surrogatepass"), year=year)


def _examples() -> list[tuple[str, str, str]]:
    rows = []
    for row in (FIXTURES / "examples.tsv").read_text(encoding="utf-8").splitlines():
        if row and not row.startswith("#"):
            signature, source, line = row.split("\t", 2)
            rows.append((signature, source, line))
    return rows


EXAMPLES = _examples()
# No captured log line could be found for these; their example follows NVIDIA's documented format.
NO_CAPTURED_LINE = {"xid-92"}
FAULT_LINES = [line for signature, _, line in EXAMPLES if signature != "-"]
QUIET_LINES = [line for signature, _, line in EXAMPLES if signature == "-"]


def reference(data: bytes, *, edge: int | None = None) -> list[tuple[int, int, str]]:
    """(line number, offset, signature) of every matching line, found the slow, obvious way.

    Line by line: a signature counts when its pattern matches (and ``accept`` passes) and its
    ``after`` literal occurred in an earlier line; then each metric value of the line, in the
    order they stand, goes to its series' tracker, and a line that completes a drop and matches no
    signature is a throughput drop. A line longer than two edges is matched on its edges and gives
    no context.
    """
    edge = edge or scanner.LINE_EDGE_BYTES
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    context = StreamContext()
    found, offset = [], 0
    for number, raw in enumerate(lines, 1):
        huge = len(raw) > 2 * edge
        if not huge:
            parts = [raw.decode("utf-8", "replace")]
        else:
            parts = [raw[:edge].decode("utf-8", "replace"), raw[-edge:].decode("utf-8", "replace")]
        matched = None
        for signature in SIGNATURES:
            if signature.after is not None and signature.after not in context.seen:
                continue
            matches = [m for m in (signature.pattern.search(part) for part in parts) if m]
            if any(signature.accept is None or signature.accept(m) for m in matches):
                matched = signature.id
                break
        drop = False
        if not huge:
            values = sorted(
                (at, index)
                for index, metric in enumerate(METRICS)
                for at in _occurrences(raw, metric.literal)
            )
            for at, index in values:
                value = metric_value(raw, METRICS[index], at, 0)
                if value is not None and context.tracker(METRICS[index]).add(value) is not None:
                    drop = True
            context.seen.update(s.after for s in SIGNATURES if s.after and s.after.encode() in raw)
        if matched or drop:
            found.append((number, offset, matched or "throughput-drop"))
        offset += len(raw) + 1
    return found


def _occurrences(raw: bytes, literal: bytes) -> list[int]:
    found, at = [], raw.find(literal)
    while at != -1:
        found.append(at)
        at = raw.find(literal, at + 1)
    return found


def _keys(findings) -> list[tuple[int, int, str]]:
    return [(f.line_no, f.offset, f.signature_id) for f in findings]


# ------------------------------------------------------------------------------------------------
# The catalog


def test_the_catalog_covers_the_xids_a_gpu_cluster_must_act_on():
    codes = {s.code for s in SIGNATURES if s.id.startswith("xid-") and s.code}
    required = {13, 31, 43, 45, 46, 48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140}
    assert {str(code) for code in required} <= codes
    assert SIGNATURES_BY_ID["xid-79"].category == "hardware_gpu"
    assert SIGNATURES_BY_ID["xid-79"].severity == "critical"
    assert SIGNATURES_BY_ID["xid-48"].category == "hardware_memory_ecc"
    assert SIGNATURES_BY_ID["xid-74"].category == "nvlink"
    assert SIGNATURES_BY_ID["xid-45"].severity == "warning"
    assert SIGNATURES_BY_ID["nccl-socket-fallback"].severity == "warning"


def test_signature_ids_are_unique_and_fields_are_filled():
    assert len(SIGNATURES_BY_ID) == len(SIGNATURES) + 1  # and the throughput drop
    for signature in (*SIGNATURES, THROUGHPUT_DROP):
        assert signature.category in CATEGORIES
        assert signature.title
        assert signature.action
        assert signature.literals


def test_every_signature_has_an_example_line_from_outside_this_project():
    sources = {}
    for signature, source, _ in EXAMPLES:
        sources.setdefault(signature, set()).add(source)
    for signature in SIGNATURES:
        if signature.after is not None:
            continue  # shown by a log of several lines: MULTI_LINE_EXAMPLES
        real = {s for s in sources.get(signature.id, ()) if not s.startswith("composed-")}
        assert real or signature.id in NO_CAPTURED_LINE, f"{signature.id} has no real example line"
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    corpus = {path.stem for path in (FIXTURES / "realworld").glob("*/*.log")}
    for source in {source for _, source, _ in EXAMPLES}:
        if source.startswith("realworld:"):
            assert source.removeprefix("realworld:") in corpus, f"{source} is not in the real-world corpus"
        else:
            assert f"`{source}`" in readme, f"source {source} is not described in README.md"


# Signatures that count only after an earlier line (``after``), each shown by a real excerpt.
MULTI_LINE_EXAMPLES = {
    "nccl-socket-fallback-no-ib": "nccl-software/lightning-2771-horovod-no-ib-socket-lo.log",
    "lm-loss-missing": "loss-slowdown/bigscience-tr8-lm-loss-vanishes.log",
    "grad-norm-nan-megatron": "loss-slowdown/mds-396-grad-norm-nan-no-lm-loss.log",
    "grad-norm-nan-trainer": "loss-slowdown/modernbert-233-gradnorm-nan.log",
    "grad-norm-nan-mmengine": "loss-slowdown/xtuner-187-gradnorm-nan.log",
}


def test_every_multi_line_signature_has_a_real_log_that_needs_its_earlier_lines():
    assert set(MULTI_LINE_EXAMPLES) == {s.id for s in SIGNATURES if s.after is not None}
    for signature_id, name in MULTI_LINE_EXAMPLES.items():
        data = (FIXTURES / "realworld" / name).read_bytes()
        found = [f for f in scan_bytes(data) if f.signature_id == signature_id]
        assert found, f"{name} does not show {signature_id}"
        line = data.split(b"\n")[found[0].line_no - 1]
        assert signature_id not in {f.signature_id for f in scan_bytes(line)}, (
            "alone, the line must not count"
        )


@pytest.mark.parametrize(("expected", "source", "line"), EXAMPLES)
def test_each_example_line_is_reported_as_its_signature(expected, source, line):
    findings = scan_text(line, year=2024)
    assert [f.signature_id for f in findings] == ([] if expected == "-" else [expected])


@pytest.mark.parametrize(("expected", "source", "line"), EXAMPLES)
def test_an_example_matched_by_a_signature_contains_one_of_its_literals(expected, source, line):
    for signature in SIGNATURES:
        if signature.pattern.search(line):
            assert any(literal in line for literal in signature.literals), signature.id


def test_every_literal_is_found_by_an_anchor_or_its_chunk_pattern():
    for signature in SIGNATURES:
        if signature.chunk_pattern is not None:
            continue
        for literal in signature.literals:
            assert any(anchor in literal.encode() for anchor in scanner.ANCHORS), literal


def test_the_python_engine_s_passes_stay_few():
    # Each anchor or chunk pattern is one more pass of the pure-Python engine (the fallback; the
    # Hyperscan engine makes one pass whatever the catalog): keep them few.
    assert len(scanner.ANCHORS) + len(scanner.CHUNK_PATTERNS) <= 20


_LOSS_KEYS = st.sampled_from(["loss", "Loss", "lm loss", "train_epoch_loss", "closs", "loss_scale"])
_LOSS_VALUES = st.sampled_from(
    ["nan", "NaN", "inf", "-inf", "+inf", "Infinity", "1.5", "nanoseconds", "INF", "infer", "5.8E+00"]
)


@given(
    key=_LOSS_KEYS,
    quote=st.sampled_from(["", "'", '"']),
    separator=st.sampled_from([": ", ":", "=", " = ", " is ", " ", "\t", "", " :: ", " is is "]),
    tensor=st.sampled_from(["", "tensor("]),
    value=_LOSS_VALUES,
    tail=st.sampled_from(["", " |", ",", "x", "_1", "}", ", device='cuda:0')"]),
)
def test_the_loss_chunk_pattern_matches_wherever_the_loss_pattern_does(
    key, quote, separator, tensor, value, tail
):
    loss = SIGNATURES_BY_ID["loss-nan-inf"]
    text = f"step 3 | {key}{quote}{separator}{tensor}{value}{tail} | x"
    if loss.pattern.search(text):
        assert loss.chunk_pattern.search(text.encode())


# ------------------------------------------------------------------------------------------------
# What a finding says


def test_a_finite_loss_is_no_finding_and_nan_elsewhere_neither():
    assert scan_text(" iteration 10/ 20 | lm loss: 5.820096E+00 | number of nan iterations:   0 |") == []
    assert scan_text("{'loss': 0.2051, 'grad_norm': nan, 'learning_rate': 9.7e-06}") == []
    assert scan_text("elapsed 12 nanoseconds; banana; loss: nanana") == []


@pytest.mark.parametrize(
    ("line", "value"),
    [
        (" [2026-11-30 12:34:56] iteration 100/ 200 | lm loss: nan | loss scale: 1.0 |", math.nan),
        ("{'loss': inf, 'grad_norm': inf, 'learning_rate': 1e-05, 'epoch': 0.26}", math.inf),
        ("[Rank 0] step=1200, loss=-inf, lr=[2.9e-05]", -math.inf),
        ("loss=tensor(nan, device='cuda:0')", math.nan),
        ("Loss = Infinity", math.inf),
    ],
)
def test_the_loss_value_is_parsed(line, value):
    (finding,) = scan_text(line)
    assert finding.signature_id == "loss-nan-inf"
    if math.isnan(value):
        assert math.isnan(finding.loss)
    else:
        assert finding.loss == value


def test_an_xid_finding_carries_node_pci_code_and_time():
    line = (
        "Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 48, "
        "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected"
    )
    (finding,) = scan_text(line, year=2024)
    assert (finding.signature_id, finding.code, finding.severity) == ("xid-48", "48", "critical")
    assert finding.node == "worker4"
    assert finding.pci == "0000:07:00"
    assert finding.timestamp == datetime(2024, 12, 2, 11, 38, 47)
    assert finding.rank is None


@pytest.mark.parametrize(
    ("line", "pci"),
    [
        ("NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel", "0000:01:00"),
        ("NVRM: Xid (0000:3b:00): 13, 0005 00000000 0000502d", "0000:3b:00"),
        ("NVRM: Xid (PCI:0000:00:08.0): 145, RLW_REMAP Nonfatal XC1 i0 Link 10", "0000:00:08.0"),
    ],
)
def test_the_pci_address_of_an_xid_is_read_in_every_format(line, pci):
    assert scan_text(line)[0].pci == pci


def test_an_xid_not_in_the_catalog_keeps_its_own_code():
    (finding,) = scan_text("NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 08")
    assert (finding.signature_id, finding.code, finding.category) == ("xid-other", "109", "hardware_gpu")


def test_a_cleanup_xid_that_names_its_cause_is_reported_as_the_cause():
    # Xid 45 records the cleanup after another Xid; the root is the one it names (149: NVLink).
    line = "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, caused by previous Xid 149"
    (finding,) = scan_text(line)
    assert (finding.category, finding.code) == ("nvlink", "149")
    assert scan_text(line.replace("caused by previous Xid 149", "Ch 00000001"))[0].signature_id == "xid-45"


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        ("[rank3]:[E1130 12:34:56.789012 9 x.cpp:616] Watchdog caught collective operation timeout", 3),
        ("[PG 0 (default_pg) Rank 11] Watchdog caught collective operation timeout", 11),
        ("[rank: 3] OSError: [Errno 5] Input/output error: '/app/x'", 3),
        ("gpu-1:1:2 [0] NCCL WARN Call to ibv_poll_cq() returned -2 comm 0x1 rank 7 nranks 8", 7),
        ("local_rank: 0 nranks 16 RuntimeError: CUDA error: an illegal memory access was encountered", None),
    ],
)
def test_the_rank_is_read_from_the_line(line, rank):
    assert scan_text(line)[0].rank == rank


def test_nccl_and_rendezvous_findings_keep_their_error_codes():
    ib = "h:1:2 [4] NCCL WARN NET/IB : Got completion from peer 10.0.0.1<5> with status=12 opcode=0"
    assert scan_text(ib)[0].code == "12"
    assert scan_text("ncclSystemError: System call (socket, malloc, munmap, etc) failed.")[0].code == (
        "ncclSystemError"
    )
    remote = "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting"
    assert scan_text(remote)[0].code == "ncclRemoteError"
    rendezvous = "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection"
    assert scan_text(rendezvous)[0].code == "RendezvousConnectionError"


# ------------------------------------------------------------------------------------------------
# Time stamps


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Nov 30 12:34:56 gpu-7 kernel: NVRM: Xid", datetime(2026, 11, 30, 12, 34, 56)),
        ("Nov  3 01:02:03 gpu-7 kernel: x", datetime(2026, 11, 3, 1, 2, 3)),
        ("May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79", datetime(2026, 5, 18, 19, 2, 39)),
        ("[Fri Mar  3 04:27:08 2023] NVRM: Xid (PCI:0000:61:00): 119", datetime(2023, 3, 3, 4, 27, 8)),
        (" [2024-05-07 17:57:06] iteration     1400/    8741 |", datetime(2024, 5, 7, 17, 57, 6)),
        ("2022-10-20 15:54:22,595 - worker_process - INFO", datetime(2022, 10, 20, 15, 54, 22, 595000)),
        (
            "[rank3]:[E1130 12:34:56.789123456 1 ProcessGroupNCCL.cpp:616]",
            datetime(2026, 11, 30, 12, 34, 56, 789123),
        ),
        (
            "[rank1]:[W520 21:12:22.801158701 TCPStore.cpp:115] [c10d]",
            datetime(2026, 5, 20, 21, 12, 22, 801158),
        ),
        (
            "E0213 12:07:20.086000 870572 torch/distributed/elastic/multiprocessing/api.py:869]",
            datetime(2026, 2, 13, 12, 7, 20, 86000),
        ),
        ("just a line", None),
        ("Feb 30 12:00:00 gpu-7 kernel: impossible date", None),
    ],
)
def test_line_timestamp_reads_the_formats_of_training_and_kernel_logs(text, expected):
    assert line_timestamp(text, year=2026) == expected


def test_times_without_a_year_need_one_and_offsets_make_them_aware():
    assert line_timestamp("Nov 30 12:34:56 gpu-7 kernel: x") is None
    assert line_timestamp("[E1130 12:34:56.789 1 x]") is None
    aware = line_timestamp("2026-11-30T12:34:56.5+08:00 gpu-7 kernel: x")
    assert aware == datetime(2026, 11, 30, 4, 34, 56, 500000, tzinfo=UTC)
    assert line_timestamp("2026-11-30T12:34:56Z x").tzinfo == UTC
    shanghai = timezone(timedelta(hours=8))
    assert line_timestamp("Nov 30 12:34:56 gpu-7 kernel: x", year=2026, tz=shanghai) == datetime(
        2026, 11, 30, 12, 34, 56, tzinfo=shanghai
    )


# ------------------------------------------------------------------------------------------------
# Lines as files hold them


def test_offsets_and_line_numbers_count_from_the_given_start():
    data = b"healthy\nNVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\nok\n"
    (finding,) = scan_bytes(data, start_offset=1000, start_line=41)
    assert (finding.line_no, finding.offset) == (42, 1008)


def test_an_unterminated_last_line_is_scanned_as_a_line():
    data = b"ok\nRuntimeError: CUDA error: an illegal memory access was encountered"
    assert _keys(scan_bytes(data)) == [(2, 3, "cuda-illegal-access")]


def test_binary_garbage_nul_and_invalid_utf8_do_not_hide_a_fault():
    garbage = bytes(range(256)) * 40
    data = (
        garbage
        + b"\n\x00\xff\xfe NCCL WARN NET/IB : Got completion with error 12, opcode 1\x00\r\n"
        + garbage
    )
    (finding,) = scan_bytes(data)
    assert finding.signature_id == "nccl-ib-completion-error"
    assert "\x00" not in finding.text
    assert not finding.text.endswith("\r")
    assert "\N{REPLACEMENT CHARACTER}" in finding.text


def test_a_huge_line_is_matched_on_its_first_and_last_64_kib_only():
    edge = scanner.LINE_EDGE_BYTES
    fault = b"RuntimeError: CUDA error: uncorrectable ECC error encountered"
    filler = b"x" * (3 * edge)
    head, middle, tail = fault + filler, filler + fault + filler, filler + fault
    data = b"\n".join([head, middle, tail]) + b"\n"
    assert [f.line_no for f in scan_bytes(data)] == [1, 3]
    assert reference(data) == _keys(scan_bytes(data))
    (_, last) = scan_bytes(data)
    assert last.text.startswith("…")
    assert "uncorrectable ECC error" in last.text
    assert len(last.text) == scanner.MAX_TEXT_CHARS


def test_the_text_is_cut_to_1000_characters():
    line = "torch.OutOfMemoryError: CUDA out of memory. " + "y" * 5000
    (finding,) = scan_text(line)
    assert finding.text == line[:1000]


def test_the_fixture_logs_give_what_the_reference_gives():
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            assert _keys(scan_bytes(data)) == reference(data), path
            assert _keys(scan_file(path, chunk_bytes=97)) == reference(data), path


_NOISE = st.sampled_from(
    [
        *QUIET_LINES,
        " [2024-05-07 17:41:08] iteration 1340/8741 | lm loss: 5.820096E+00 | loss scale: 1.0 |",
        "gpu-035:2521115:2521176 [7] NCCL INFO Using network IB",
        "{'loss': 1.2345, 'grad_norm': 0.87, 'learning_rate': 1.9e-05, 'epoch': 0.12}",
        "",
        "\r",
    ]
)
_FAULT = st.sampled_from(FAULT_LINES)
# Throughput lines whose values drop and recover (tqdm switches to s/it when slow).
_RATE = st.sampled_from(["100", "98.5", "101", "40", "35.2", "0.5", "007", "1e3", "12.", ".5", "99"])
_METRIC_LINE = st.builds(
    lambda template, value: template.format(value),
    st.sampled_from(
        [
            "Epoch 1:  3%|#  | 30/1000 [00:10<05:00, {}it/s, loss=2.1]",
            "Epoch 1:  3%|#  | 30/1000 [00:10<05:00, {}s/it, loss=2.1]",
            " iteration 10/ 99 | elapsed time per iteration (ms): {} | lm loss: 2.1E+00 |",
            " iteration 11/ 99 | elapsed time per iteration (ms): {} |"
            " global batch size: 8 | loss scale: 1.0 |",
            "INFO:root:Epoch[6] Batch [420]  Speed: {} samples/sec  accuracy=0.47",
            "Epoch: [11][1/48]\tTime {} (1.206)\tData 0.076 (0.004)",
            "{0} tokens/s, {0}it/s",
        ]
    ),
    _RATE,
)


@st.composite
def _log(draw):
    pieces = []
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(
            st.sampled_from(["fault", "noise", "noise", "binary", "long", "mixed", "metric", "metric"])
        )
        if kind == "fault":
            pieces.append(draw(_FAULT).encode())
        elif kind == "metric":
            pieces.append(draw(_METRIC_LINE).encode())
        elif kind == "noise":
            pieces.append(draw(_NOISE).encode())
        elif kind == "binary":
            pieces.append(draw(st.binary(max_size=120)))
        elif kind == "long":  # past the (patched, small) line edge, the fault anywhere in it
            filler = draw(st.binary(min_size=100, max_size=900).filter(lambda b: b"\n" not in b))
            at = draw(st.integers(0, len(filler)))
            pieces.append(filler[:at] + draw(_FAULT).encode() + filler[at:])
        else:
            text = draw(st.text(max_size=40)) + draw(_FAULT) + draw(st.text(max_size=40))
            pieces.append(text.encode("utf-8", "surrogatepass"))
    data = b"\n".join(pieces)
    if pieces and draw(st.booleans()):
        data += b"\n"
    return data


ENGINES = [engine for engine in scanner.ENGINES if engine != "hyperscan" or scanner.hyperscan is not None]


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_log(), probe_rate=st.sampled_from([0.0, scanner.PROBE_MAX_RATE, 1.0]))
def test_the_prefiltered_scanner_equals_matching_every_line(engine, data, probe_rate):
    # Small edges, blocks and samples, so that huge lines, block ends and both ways of finding
    # anchors (rare byte or whole anchor) all happen in logs of a few kilobytes.
    with (
        mock.patch.object(scanner, "LINE_EDGE_BYTES", 96),
        mock.patch.object(scanner, "BLOCK_BYTES", 512),
        mock.patch.object(scanner, "HS_BLOCK_BYTES", 700),
        mock.patch.object(scanner, "SAMPLE_BYTES", 256),
        mock.patch.object(scanner, "PROBE_MAX_RATE", probe_rate),
    ):
        assert _keys(scan_bytes(data, engine=engine)) == reference(data, edge=96)


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_log(), chunk_bytes=st.sampled_from([1, 7, 64, 333, 4096, 1 << 20]))
def test_scanning_a_file_in_chunks_equals_scanning_it_whole(tmp_path_factory, engine, data, chunk_bytes):
    path = tmp_path_factory.mktemp("logs") / "rank-0.log"
    path.write_bytes(data)
    with (
        mock.patch.object(scanner, "LINE_EDGE_BYTES", 96),
        mock.patch.object(scanner, "BLOCK_BYTES", 512),
        mock.patch.object(scanner, "HS_BLOCK_BYTES", 700),
    ):
        whole = scan_bytes(data, year=2024, engine=engine)
        streamed = list(scan_file(path, year=2024, chunk_bytes=chunk_bytes, engine=engine))
    assert _keys(streamed) == _keys(whole)
    assert [(f.text, f.rank, f.node, f.pci) for f in streamed] == [
        (f.text, f.rank, f.node, f.pci) for f in whole
    ]


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_log(), cuts=st.lists(st.integers(0, 4000), max_size=6))
def test_a_log_scanned_piece_by_piece_with_a_stored_context_gives_what_it_gives_whole(engine, data, cuts):
    # The portal scans each stream as its pieces arrive, keeping the context as JSON in between.
    lines = data.split(b"\n")
    bounds = sorted({min(cut, len(lines)) for cut in cuts} | {0, len(lines)})
    stored, findings, offset, line_no = None, [], 0, 1
    with (
        mock.patch.object(scanner, "LINE_EDGE_BYTES", 96),
        mock.patch.object(scanner, "BLOCK_BYTES", 512),
        mock.patch.object(scanner, "HS_BLOCK_BYTES", 700),
    ):
        for first, last in itertools.pairwise(bounds):
            piece = b"\n".join(lines[first:last]) + (b"\n" if last < len(lines) else b"")
            context = StreamContext.from_json(json.loads(json.dumps(stored)) if stored else None)
            findings += scan_bytes(
                piece, start_offset=offset, start_line=line_no, context=context, engine=engine
            )
            stored = context.as_json()
            offset += len(piece)
            line_no += last - first
        assert _keys(findings) == _keys(scan_bytes(data, engine=engine))


def test_the_engines_agree_on_every_fixture_log():
    if len(ENGINES) < 2:
        pytest.skip("needs the hyperscan package")
    for path in sorted(FIXTURES.rglob("*.log")):
        data = path.read_bytes()
        assert _keys(scan_bytes(data, engine="hyperscan")) == _keys(scan_bytes(data, engine="python")), path


def test_a_missing_unreadable_or_special_file_raises_a_clear_error_at_once(tmp_path):
    with pytest.raises(LogFileError, match=r"cannot read .*nope\.log: No such file"):
        scan_file(tmp_path / "nope.log")
    with pytest.raises(LogFileError, match=r"Is a directory|not a regular file"):
        scan_file(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(LogFileError, match="not a regular file"):
        scan_file(fifo)


def test_a_file_of_binary_garbage_and_a_10_mb_line_scans_in_bounded_memory(tmp_path):
    path = tmp_path / "garbage.log"
    fault = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    with path.open("wb") as handle:
        handle.write(os.urandom(300_000).replace(b"\n", b"\x00"))
        handle.write(b"\n" + b"\r" * 10_000_000 + fault + b"\n")
        handle.write(fault)  # and a truncated last line
    findings = list(scan_file(path, chunk_bytes=1 << 20))
    assert [(f.line_no, f.signature_id) for f in findings] == [(2, "cuda-oom"), (3, "cuda-oom")]
    assert findings[0].offset == 300_001
    assert findings[1].offset == 300_001 + 10_000_000 + len(fault) + 1


# ------------------------------------------------------------------------------------------------
# The simulator's fault lines


@pytest.fixture(scope="module")
def faulty_logs():
    """A week of the reference scenario with six faults a day: faults and the lines they wrote."""
    sim = make_simulator(fault_rate_per_day=6.0)
    day = timedelta(days=1)
    faults = sim.faults(START, START + 7 * day)

    def job_findings(job_id, rank):
        lines = sim.job_log_lines(job_id, rank, START - 3 * day, START + 8 * day)
        return {f.signature_id for f in scan_text("\n".join(lines), year=START.year)}

    return sim, faults, job_findings


def test_every_fault_the_simulator_writes_is_detected(faulty_logs):
    sim, faults, job_findings = faulty_logs
    seen_kinds, seen_nan_shapes = set(), set()
    for fault in faults:
        job = sim.sim_job(fault.job_external_id)
        ranks = range(job.gpu_count)
        found = {rank: job_findings(job.job_id, rank) for rank in ranks}
        if fault.xid is not None:
            kernel = sim.kernel_log_lines(
                fault.node, fault.occurred_at, fault.occurred_at + timedelta(seconds=1)
            )
            (xid,) = scan_text("\n".join(kernel), year=START.year)
            assert (xid.signature_id, xid.node) == (f"xid-{fault.xid}", fault.node)
            assert xid.pci == sim.pci_address(fault.node, fault.gpu)
            after = {79: "cuda-launch-failure", 48: "cuda-ecc-uncorrectable", 74: "cuda-nvlink-uncorrectable"}
            assert after[fault.xid] in found[fault.rank]
            if job.gpu_count > 1:
                peer = next(rank for rank in ranks if rank != fault.rank)
                assert "nccl-remote-error" in found[peer]
        elif fault.kind == "nccl_timeout":
            for rank in ranks:
                assert ("nccl-watchdog-timeout" in found[rank]) == (rank != fault.rank)
        elif fault.kind == "loss_nan":
            # ``lm loss: nan``, or (Megatron's real shape) the ``lm loss`` field gone.
            categories = {SIGNATURES_BY_ID[s].category for s in found[job.gpu_count - 1]}
            assert "loss_nan_inf" in categories
            seen_nan_shapes.update(found[job.gpu_count - 1] & {"loss-nan-inf", "megatron-lm-loss-missing"})
        elif fault.kind == "straggler":
            # One slow node slows every step: the iteration lines' own times show the drop.
            assert "throughput-drop" in found[job.gpu_count - 1]
        elif fault.kind == "cuda_oom":
            assert "cuda-oom" in found[fault.rank]
        seen_kinds.add(fault.kind)
    assert {"xid79", "xid48", "xid74", "nccl_timeout", "loss_nan", "cuda_oom", "straggler"} <= seen_kinds
    if "megatron-lm-loss-missing" in SIGNATURES_BY_ID:
        assert seen_nan_shapes == {"loss-nan-inf", "megatron-lm-loss-missing"}


def test_healthy_simulated_jobs_report_nothing_but_the_socket_fallback(faulty_logs):
    sim, _, job_findings = faulty_logs
    jobs = [
        job
        for job in sim.sim_jobs(START, START + timedelta(days=2))
        if job.fault is None and job.final_state == "COMPLETED" and job.kind != "interactive"
    ][:20]
    assert jobs
    for job in jobs:
        uses_ib = job.rdma and "NCCL_IB_HCA" in job.config["env"]
        for rank in range(job.gpu_count):
            expected = set() if uses_ib else {"nccl-socket-fallback", "nccl-socket-fallback-no-ib"}
            assert job_findings(job.job_id, rank) <= expected


# ------------------------------------------------------------------------------------------------
# The benchmark's grep patterns


def _bench():
    spec = importlib.util.spec_from_file_location("bench_scan_logs", ROOT / "bench" / "scan_logs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("grep") is None, reason="needs GNU grep")
def test_the_posix_ere_of_each_signature_matches_the_same_lines_as_its_python_pattern(tmp_path):
    bench = _bench()
    lines = [line for _, _, line in EXAMPLES] + [
        "loss: nanoseconds",
        "Loss is nan, stopping training",
        "xloss: nan",
        "NVRM: Xid (PCI:0000:18:00): 790, not 79",
        "NCCL errors are fun",
        "NCCL error",
    ]
    sample = tmp_path / "lines.txt"
    sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for signature in SIGNATURES:
        result = subprocess.run(
            ["grep", "-n", "-E", "-e", bench.posix_ere(signature), str(sample)],
            capture_output=True,
            text=True,
            env={**os.environ, "LC_ALL": "C"},
            check=False,
        )
        assert result.returncode in (0, 1), result.stderr
        grep_lines = {int(row.split(":", 1)[0]) for row in result.stdout.splitlines()}
        python_lines = {n for n, line in enumerate(lines, 1) if signature.pattern.search(line)}
        assert grep_lines == python_lines, signature.id


def test_the_readme_lists_every_signature_in_catalog_order():
    # scripts/catalog_readme.py writes the table; this keeps it from going stale.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- families -->")[1].split("<!-- /families -->")[0]
    listed = [row.split("`")[1] for row in table.splitlines() if row.startswith("| `")]
    assert listed == [s.id for s in (*SIGNATURES, THROUGHPUT_DROP)]
