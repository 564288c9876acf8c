"""Log facts: the real-world corpus in tests/fixtures/recommendations, the formats it lacks, and
incremental feeding."""

import csv
import json
import re
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from efficiency.analysis.recommendations.logfacts import LogFacts, LogFactsBuilder, log_facts

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "recommendations"
# "env:NCCL_SOCKET_IFNAME=bond1,bond0,eth0" holds commas: a new assertion starts at ",key=".
_SPLIT = re.compile(r",(?=[\w:]+(?:>=|=))")


def _cases() -> list[dict]:
    with (CORPUS / "cases.tsv").open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def _facts_of(path: Path) -> LogFacts:
    builder = LogFactsBuilder()
    builder.feed_text(path.name, 1, path.read_text(encoding="utf-8"))
    return builder.facts()


def _yes(value: object) -> str:
    return "yes" if value else "no"


def _found(facts: LogFacts, key: str) -> str:
    """What the facts say for one assertion key, in the assertion's own words."""
    if key.startswith("env:"):
        entry = facts.nccl_env.get(key[4:])
        return "unset" if entry is None else entry[0]
    if key == "transport":
        return facts.transport or "unknown"
    if key == "multi_node":
        return "unknown" if facts.n_nodes is None else _yes(facts.n_nodes >= 2)
    if key == "nodes":
        return str(facts.n_nodes)
    if key == "network":
        return ",".join(facts.network_in_use) or "none"
    if key in ("gdrdma", "p2p", "shm"):
        return _yes(getattr(facts, key))
    if key in ("ib_devices", "ib_no_device", "gdr_disabled"):
        return _yes(getattr(facts, key) is not None)
    if key == "nccl_version":
        return str(facts.nccl_version)
    if key == "num_workers":
        return "unset" if facts.num_workers is None else str(facts.num_workers[0])
    if key == "pin_memory":
        return "unset" if facts.pin_memory is None else _yes(facts.pin_memory[0])
    if key == "precision":
        return "unset" if facts.precision is None else facts.precision[0]
    if key == "checkpoint_times":
        saves = facts.checkpoint_saves
        return _yes(saves and all(at is not None for at, _ in saves))
    raise AssertionError(f"unknown assertion key {key!r}")


@pytest.mark.parametrize("case", _cases(), ids=lambda case: case["file"])
def test_corpus_case_holds_every_assertion(case):
    facts = _facts_of(CORPUS / case["file"])
    failures = []
    for assertion in _SPLIT.split(case["expect"]):
        if ">=" in assertion:
            key, wanted = assertion.split(">=", 1)
            assert key == "checkpoints", assertion
            found = len(facts.checkpoint_saves)
            ok = found >= int(wanted)
        else:
            key, wanted = assertion.split("=", 1)
            found = len(facts.checkpoint_saves) if key == "checkpoints" else _found(facts, key)
            ok = str(found) == wanted
        if not ok:
            failures.append(f"{case['file']}: {assertion} — found {found!r}")
    assert not failures, "\n".join(failures)


def test_corpus_rows_name_every_log_and_a_public_source():
    cases = _cases()
    assert {case["file"] for case in cases} == {path.name for path in CORPUS.glob("*.log")}
    assert all(case["source"].startswith("https://") for case in cases)
    assert len(cases) >= 25


def test_env_files_are_key_value_lines():
    for path in CORPUS.glob("*.env"):
        assert (CORPUS / (path.stem + ".log")).exists()
        for line in path.read_text().splitlines():
            assert re.match(r"[A-Z_][A-Z0-9_]*=", line), line


def _one(*lines: str) -> LogFacts:
    return log_facts(("job.log", number, text) for number, text in enumerate(lines, 1))


# NCCL ----------------------------------------------------------------------------------------


def test_channel_with_net_device_index_in_parentheses_counts_as_ib_with_gdrdma():
    # The newer form the brief quotes: "Channel 00/0 : 15[7] -> 0[0] [send] via NET/IB/0(7)/GDRDMA".
    facts = _one("h:1:2 [7] NCCL INFO Channel 00/0 : 15[7] -> 0[0] [send] via NET/IB/0(7)/GDRDMA")
    assert facts.transport == "ib"
    assert len(facts.gdrdma) == 1
    assert facts.n_nodes == 2


def test_older_channel_form_without_send_receive_counts_as_socket():
    # "Channel 00 : 1[1] -> 0[0] via NET/Socket/0", the pre-2.7 form without the /0 channel part.
    facts = _one("h:1:2 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via NET/Socket/0")
    assert facts.transport == "socket"


def test_bootstrap_and_plugin_probe_lines_decide_no_transport():
    # From nccl#1536 and nccl-tests#29: every rank prints these whatever carries the data.
    facts = _one(
        "hostname-0:29:29 [0] NCCL INFO Bootstrap : Using eth0:10.252.129.107<0>",
        "server1:117953:117953 [7] NCCL INFO NET/Socket : Using [0]enp41s0f1:<0>",
        "server1:117953:117953 [7] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).",
        "hostname-0:29:65 [0] NCCL INFO Using network IB",
        "H20-GPU-05:1789224:1789735 [0] NCCL INFO Ring 02 : 2 -> 0 -> 1",
        "my_machine_name:22473:22473 [0] NCCL INFO Connected all rings",
    )
    assert facts.transport is None
    assert not facts.net_socket
    assert list(facts.network_in_use) == ["IB"]


def test_ib_disable_zero_is_recorded_as_zero():
    facts = _one("master_node:20:289 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.")
    assert facts.nccl_env["NCCL_IB_DISABLE"][0] == "0"


def test_algo_and_proto_overrides_are_recorded_as_printed():
    # NCCL's tuning.cc: INFO(NCCL_ENV, "NCCL_PROTO set by environment to %s", protoStr), same for ALGO;
    # no period after the value, unlike the "%d." of integer parameters.
    facts = _one(
        "n:53:323 [0] NCCL INFO NCCL_PROTO set by environment to simple",
        "n:53:323 [0] NCCL INFO NCCL_ALGO set by environment to ring,tree",
        "n:53:323 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 8388608.",
    )
    assert facts.nccl_env["NCCL_PROTO"][0] == "simple"
    assert facts.nccl_env["NCCL_ALGO"][0] == "ring,tree"
    assert facts.nccl_env["NCCL_BUFFSIZE"][0] == "8388608"


def test_mpirun_and_slurm_prefixes_do_not_hide_lines():
    # "[1,2]<stdout>:" from nccl#1713 (mpirun --tag-output), "0: " from srun --label.
    facts = _one(
        "[1,0]<stdout>:translation-1:1746:1951 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.",
        "[1,0]<stdout>:NCCL version 2.4.8+cuda10.1",
        "0: node1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
    )
    assert facts.nccl_env["NCCL_IB_DISABLE"][0] == "0"
    assert facts.nccl_version == "2.4.8"
    assert facts.transport == "ib"


def test_libfabric_and_cumem_variants():
    # "NET/Libfabric/0/GDRDMA" is how aws-ofi-nccl's EFA channels read; "P2P/CUMEM/CE" as nccl 2.19+.
    facts = _one(
        "n:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Libfabric/0/GDRDMA",
        "n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/CE",
    )
    assert facts.transport == "other"
    assert len(facts.gdrdma) == 1
    assert len(facts.p2p) == 1


def test_ib_and_socket_channels_in_one_log_are_mixed():
    facts = _one(
        "a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0",
        "b:1:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via NET/Socket/0",
    )
    assert facts.transport == "mixed"


def test_evidence_keeps_the_first_three_lines_of_a_kind():
    lines = [
        f"n:1:2 [0] NCCL INFO Channel {c:02d}/0 : 0[0] -> 8[0] [send] via NET/Socket/0" for c in range(10)
    ]
    facts = _one(*lines)
    assert [line.line for line in facts.net_socket] == [1, 2, 3]


def test_nnodes_keeps_the_largest_communicator():
    facts = _one(
        "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0",
        "h:1:2 [0] NCCL INFO comm 0x2 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
    )
    assert facts.n_nodes == 2


# Settings ------------------------------------------------------------------------------------


def test_fp32_needs_both_flags_false_and_keeps_the_deciding_line():
    # HF TrainingArguments prints one "key=value," per line.
    facts = _one(
        "TrainingArguments(", "bf16=False,", "bf16_full_eval=False,", "fp16=False,", "fp16_backend=auto,"
    )
    assert facts.precision is not None
    assert facts.precision[0] == "fp32"
    assert facts.precision[1].line == 4
    assert _one("bf16=False,").precision is None


def test_params_dtype_float32_means_fp32():
    # Megatron: "  params_dtype .................................... torch.float16" (Megatron-LM#91).
    facts = _one("  params_dtype .................................... torch.float32")
    assert facts.precision[0] == "fp32"


def test_argparse_namespace_gives_num_workers_and_pin_memory():
    facts = _one("Namespace(batch_size=32, num_workers=0, pin_memory=False, lr=0.1)")
    assert facts.num_workers[0] == 0
    assert facts.pin_memory[0] is False


def test_dataloader_num_workers_is_not_read_twice_and_first_value_wins():
    facts = _one("dataloader_num_workers=4,", "dataloader_num_workers=0,", "  num_workers ..... 2")
    assert facts.num_workers[0] == 4


# Checkpoints ---------------------------------------------------------------------------------


def test_megatron_save_with_timestamps_counts_once_and_gives_its_duration():
    # print_rank_0 formats of Megatron-LM's checkpointing.py, with the "[YYYY-MM-DD HH:MM:SS]" prefix.
    facts = _one(
        "[2024-03-01 10:00:00] saving checkpoint at iteration     500 to /ckpt",
        "[2024-03-01 10:01:30]   successfully saved checkpoint from iteration     500 to /ckpt",
    )
    assert len(facts.checkpoint_saves) == 1
    assert facts.checkpoint_saves[0][0] == 1709287200.0
    assert facts.checkpoint_cost_s == 90.0


def test_end_line_without_its_start_still_counts_as_a_save():
    facts = _one("  successfully saved checkpoint at iteration       1 to ./checkpoints/gpt-2")
    assert len(facts.checkpoint_saves) == 1
    assert facts.checkpoint_saves[0][0] is None


def test_save_timer_lines_give_the_median_of_the_slowest_rank():
    # Two-line and one-line timer forms seen in Megatron logs:
    # "(min, max) time across ranks (ms):" / "    save-checkpoint ....: (21027.08, 21027.08)"
    facts = _one(
        "    save-checkpoint ................................: (21027.08, 21027.08)",
        "(min, max) time across ranks (ms):save-checkpoint ........: (1658.80, 1658.85)",
        "    save-checkpoint ................................: 18512.90",
    )
    assert facts.checkpoint_cost_s == pytest.approx(18.5129)
    assert facts.checkpoint_saves == []


def test_hf_save_behind_a_progress_bar_keeps_the_match_in_its_evidence():
    bar = "#" * 5000
    facts = _one(
        f"{bar}| 40/4500 [07:21<4:45:21,  3.84s/it][INFO|trainer.py:3850] 2025-02-07 15:29:09,695 >> "
        "Saving model checkpoint to data/checkpoint-40"
    )
    ((at, line),) = facts.checkpoint_saves
    assert "Saving model checkpoint" in line.text
    assert len(line.text) <= 1000
    assert at is not None


# Incremental feeding -------------------------------------------------------------------------


def _corpus_text() -> str:
    return "".join(path.read_text(encoding="utf-8") for path in sorted(CORPUS.glob("*.log")))


CORPUS_LINES = _corpus_text().split("\n")


def _one_pass() -> dict:
    builder = LogFactsBuilder()
    builder.feed_text("all.log", 1, "\n".join(CORPUS_LINES))
    return builder.facts().to_dict()


ONE_PASS = _one_pass()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(CORPUS_LINES)), max_size=12))
def test_any_chunking_gives_the_facts_of_one_pass(cuts):
    bounds = [0, *sorted(set(cuts)), len(CORPUS_LINES)]
    builder = LogFactsBuilder()
    for start, end in pairwise(bounds):
        if end > start:
            builder.feed_text("all.log", start + 1, "\n".join(CORPUS_LINES[start:end]))
    assert builder.facts().to_dict() == ONE_PASS


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(CORPUS_LINES)), max_size=6))
def test_resuming_from_stored_facts_gives_the_facts_of_one_pass(cuts):
    bounds = [0, *sorted(set(cuts)), len(CORPUS_LINES)]
    stored = LogFacts().to_dict()
    for start, end in pairwise(bounds):
        builder = LogFactsBuilder.from_facts(LogFacts.from_dict(json.loads(json.dumps(stored))))
        if end > start:
            builder.feed_text("all.log", start + 1, "\n".join(CORPUS_LINES[start:end]))
        stored = builder.facts().to_dict()
    assert stored == ONE_PASS


def test_to_dict_round_trips_through_json():
    facts = LogFacts.from_dict(json.loads(json.dumps(ONE_PASS)))
    assert facts.to_dict() == ONE_PASS
    assert facts.transport == "mixed"


def test_resume_pairs_a_save_start_with_its_end_fed_later():
    first = LogFactsBuilder()
    first.feed("a.log", 1, "[2024-03-01 10:00:00] saving checkpoint at iteration     500 to /ckpt")
    resumed = LogFactsBuilder.from_facts(LogFacts.from_dict(json.loads(json.dumps(first.facts().to_dict()))))
    resumed.feed(
        "a.log", 2, "[2024-03-01 10:00:42]   successfully saved checkpoint from iteration     500 to /ckpt"
    )
    assert resumed.facts().checkpoint_cost_s == 42.0
    assert len(resumed.facts().checkpoint_saves) == 1
