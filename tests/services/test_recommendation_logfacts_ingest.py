"""Log chunks → ``job_log_facts_update()``, the way they really arrive: through the ingest
(``log_chunks_ingest``, and the NDJSON push parser in front of it), in pieces, late, twice, out of
order, for jobs the portal does not know, with hostile text, and after retention pruned some.

What must hold: the stored evidence names each line by its real line number in its stream;
running the worker after every delivery gives the facts one run over all chunks gives; a chunk is
stored once however often it is delivered; chunks of unknown jobs are not read; and the worker
never raises, whatever the text (a raise stops the engine for every job, every run after).
"""

import json
import random
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.analysis.recommendations.logfacts import log_facts
from efficiency.collectors.logpush import parse_ndjson_push
from efficiency.collectors.records import LogLines
from efficiency.models import JobLogFacts, LogChunk, Recommendation
from efficiency.selectors.recommendations import recommendation_evidence
from efficiency.services.ingest import log_chunks_ingest
from efficiency.services.partitions import partitions_for_rows
from efficiency.services.recommendations import job_log_facts_update, recommendations_refresh
from efficiency.services.recommendations.logfacts import PENDING_GRACE
from efficiency.services.rollups import retention_prune
from tests.factories import DataSourceFactory, JobFactory, JobHourFactory, NodeFactory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "recommendations"
SOCKET_LOG = (FIXTURES / "nccl-952-socket-channels.log").read_text()
STEP = "iteration 10/1000 | lm loss: 2.31 | grad norm: 0.41"


def _lines(text: str) -> list[str]:
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def pieces(
    job_id: str, lines: list[str], sizes: list[int], *, stream: str = "rank-0.log", file_id: str = "f1"
) -> list[LogLines]:
    """The lines cut into consecutive chunks of ``sizes`` lines (the last size repeats), with the
    byte offsets a shipper would give them."""
    chunks, offset, at, index = [], 0, 0, 0
    while at < len(lines):
        size = sizes[min(index, len(sizes) - 1)]
        part = lines[at : at + size]
        text = "".join(line + "\n" for line in part)
        end = offset + len(text.encode())
        chunks.append(LogLines(stream, file_id, offset, end, text, len(part), job_external_id=job_id))
        offset, at, index = end, at + size, index + 1
    return chunks


def facts_of(job) -> dict:
    return JobLogFacts.objects.get(job=job).facts


def evidence_lines(facts) -> list[dict]:
    """Every evidence line anywhere in the stored facts."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            if {"file", "line", "text"} <= value.keys():
                found.append(value)
            else:
                for item in value.values():
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(facts)
    return found


def assert_real_line_numbers(facts: dict, streams: dict[str, list[str]]) -> None:
    rows = evidence_lines(facts)
    assert rows, "no evidence at all"
    for row in rows:
        real = streams[row["file"]][row["line"] - 1].rstrip("\r")
        assert row["text"] == real or (len(real) > 1000 and row["text"] in real), row


@pytest.fixture
def world(org):
    org.twin_source = DataSourceFactory(cluster=org.cluster, name="push-twin")
    org.job = JobFactory(cluster=org.cluster, department=org.dept_a, external_id="7001")
    org.twin = JobFactory(cluster=org.cluster, department=org.dept_a, external_id="7002")
    return org


def ingest(org, chunks, *, source=None, now=None):
    return log_chunks_ingest(source=source or org.source, chunks=chunks, now=now)


# --- Line numbers and chunking -----------------------------------------------------------------


def test_evidence_names_each_line_by_its_line_number_in_its_stream(world):
    rank0 = [STEP] * 7 + _lines(SOCKET_LOG)
    rank1 = [STEP] * 2 + ["NCCL INFO NCCL_IB_DISABLE set by environment to 1."] + _lines(SOCKET_LOG)
    ingest(world, pieces("7001", rank0, [4]) + pieces("7001", rank1, [3, 1, 5], stream="rank-1.log"))
    assert job_log_facts_update() == {world.job.pk}
    facts = facts_of(world.job)
    assert_real_line_numbers(facts, {"rank-0.log": rank0, "rank-1.log": rank1})
    assert facts["net_socket"][0]["file"] == "rank-0.log"  # streams in name order
    assert facts["nccl_env"]["NCCL_IB_DISABLE"][1] == {"file": "rank-1.log", "line": 3, "text": rank1[2]}


@pytest.mark.parametrize(
    "name",
    [
        "nccl-952-socket-channels.log",
        "llamafactory-6111-one-line-socket.log",
        "nccl-1453-h100-nnodes-3-cross-nic.log",
        "megatron-91-num-workers-2-fp16-params.log",
        "megatron-511-fp16-params-bf16-false.log",
        "transformers-36076-hf-save-timestamped.log",
        "ezpz-hf-trainer-bf16.log",
    ],
)
@pytest.mark.parametrize("size", [1, 3, 40])
def test_a_run_after_every_delivery_gives_the_facts_of_one_pass_over_the_stream(world, name, size):
    lines = [STEP] * 3 + _lines((FIXTURES / name).read_text())
    one_by_one = pieces("7001", lines, [size])
    for chunk in one_by_one:
        ingest(world, [chunk])
        job_log_facts_update()
    ingest(world, pieces("7002", lines, [size]), source=world.twin_source)
    job_log_facts_update()
    assert facts_of(world.job) == facts_of(world.twin)
    # ... and both what one pass of the analysis over the whole stream reads, however it was cut.
    one_pass = log_facts(("rank-0.log", number, line) for number, line in enumerate(lines, 1))
    assert facts_of(world.job) == one_pass.to_dict()
    assert_real_line_numbers(facts_of(world.job), {"rank-0.log": lines})
    newest = LogChunk.objects.filter(job=world.job).latest("pk").pk
    assert JobLogFacts.objects.get(job=world.job).last_chunk_id >= newest


def test_chunks_arriving_out_of_order_keep_their_real_line_numbers(world):
    lines = [STEP] * 6 + _lines(SOCKET_LOG)
    first, second = pieces("7001", lines, [6])[:1], pieces("7001", lines, [6])[1:]
    ingest(world, second)  # the later offsets first (a shipper's retry of an earlier batch is late)
    job_log_facts_update()
    ingest(world, first)
    job_log_facts_update()
    ingest(world, pieces("7002", lines, [6]), source=world.twin_source)
    job_log_facts_update()
    assert_real_line_numbers(facts_of(world.job), {"rank-0.log": lines})
    assert facts_of(world.job) == facts_of(world.twin)


def test_chunks_arriving_out_of_order_in_one_delivery_are_read_in_offset_order(world):
    lines = [STEP] * 6 + _lines(SOCKET_LOG)
    ingest(world, list(reversed(pieces("7001", lines, [5]))))
    job_log_facts_update()
    assert_real_line_numbers(facts_of(world.job), {"rank-0.log": lines})


# --- Deliveries --------------------------------------------------------------------------------


def test_a_chunk_delivered_twice_is_stored_once_and_read_once(world):
    lines = [STEP] * 2 + _lines(SOCKET_LOG)
    chunks = pieces("7001", lines, [10])
    first = ingest(world, chunks)
    job_log_facts_update()
    facts = facts_of(world.job)
    again = ingest(world, chunks)  # a shipper's retry after a lost answer
    assert (first.stored, again.stored, again.duplicates) == (len(chunks), 0, len(chunks))
    assert LogChunk.objects.filter(job=world.job).count() == len(chunks)
    assert job_log_facts_update() == set()  # nothing new to read
    assert facts_of(world.job) == facts
    # Two deliveries of the same chunk at the same moment: tests/services/test_partitions.py.
    # The same chunk pushed twice in one body, and over the push endpoint's parser.
    body = "\n".join(
        json.dumps({"stream": "rank-9.log", "offset": 0, "line": line, "job": "7002"}) for line in ("a", "a")
    ).encode()
    parsed = parse_ndjson_push(body)
    assert [chunk.line_count for chunk in parsed.records] == [1]


def test_a_longer_replay_of_a_chunk_already_read_is_read(world):
    head = [STEP] * 5
    ingest(world, pieces("7001", head, [5]))
    job_log_facts_update()
    assert facts_of(world.job)["net_socket"] == []
    # The shipper crashed and replays from the same offset a chunk that has grown since.
    grown = pieces("7001", head + _lines(SOCKET_LOG), [10_000])
    assert ingest(world, grown).stored == 1
    job_log_facts_update()
    assert facts_of(world.job)["net_socket"]


@pytest.mark.django_db(transaction=True)
def test_a_source_that_commits_after_another_with_lower_ids_is_still_read(world):
    """Two sources store chunks at once: the first takes lower ids but commits last. A cursor over
    all chunks would pass its ids while they were invisible and never read them."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite takes one writer at a time")
    partitions_for_rows("efficiency_logchunk", [timezone.now()])  # made and committed up front
    stored, release = threading.Event(), threading.Event()

    def slow_writer():
        try:
            with transaction.atomic():
                ingest(world, pieces("7002", _lines(SOCKET_LOG), [5]), source=world.twin_source)
                stored.set()
                release.wait(30)
        finally:
            connection.close()

    writer = threading.Thread(target=slow_writer)
    writer.start()
    try:
        assert stored.wait(30)
        ingest(world, pieces("7001", _lines(SOCKET_LOG), [5]))  # higher ids, committed first
        assert job_log_facts_update() == {world.job.pk}
    finally:
        release.set()
        writer.join()
    assert (
        LogChunk.objects.filter(job=world.twin).order_by("pk").first().pk
        < LogChunk.objects.filter(job=world.job).order_by("pk").first().pk
    )
    assert job_log_facts_update() == {world.twin.pk}
    assert facts_of(world.twin)["net_socket"] == facts_of(world.job)["net_socket"]


def test_chunks_of_jobs_the_portal_does_not_know_are_not_read(world):
    ingest(world, pieces("no-such-job", _lines(SOCKET_LOG), [20]))
    assert LogChunk.objects.filter(job__isnull=True).count() > 0
    assert job_log_facts_update() == set()
    assert not JobLogFacts.objects.exists()
    # A known job's chunk after them is read, and only its own lines count.
    ingest(world, pieces("7001", [STEP] * 3, [3], stream="rank-1.log"))
    assert job_log_facts_update() == {world.job.pk}
    assert evidence_lines(facts_of(world.job)) == []


def test_a_run_reads_at_most_max_chunks_and_the_next_run_goes_on(world):
    lines = [STEP] * 4 + _lines(SOCKET_LOG)
    ingest(world, pieces("7001", lines, [1]))
    ingest(world, pieces("7002", lines, [100_000]), source=world.twin_source)
    while job_log_facts_update(max_chunks=3):
        pass
    assert facts_of(world.job) == facts_of(world.twin)


# --- Hostile text ------------------------------------------------------------------------------


def test_nul_bytes_are_replaced_at_ingest_and_the_rest_of_the_line_is_read(world):
    line = "NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\x00\x00"
    ingest(world, [LogLines("rank-0.log", "f1", 0, len(line) + 1, line + "\n", 1, job_external_id="7001")])
    stored = LogChunk.objects.get(job=world.job).text
    assert "\x00" not in stored
    assert "\N{REPLACEMENT CHARACTER}" in stored
    job_log_facts_update()
    assert facts_of(world.job)["net_socket"][0]["line"] == 1


def _junk() -> str:
    rng = random.Random(7)
    raw = bytes(rng.randrange(256) for _ in range(20_000))
    # A chunk holds complete lines: its "\n" bytes would make it more lines than it says.
    return raw.decode("utf-8", errors="replace").replace("\n", " ")


HOSTILE = {
    "huge-line": "x" * 2_000_000 + " NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
    "binary-junk": _junk() + "NCCL" + _junk(),
    "junk-with-nccl-words": "NCCL \ufffd\ufffd via NET/\x01\x02 bf16=\x7f num_workers=-1 pin_memory=maybe",
    "absurd-nnodes": "NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 99999999999999999999999999999 localRanks 8",
    "absurd-channel": "NCCL INFO Channel 99999999999/9999 : -1[-1] -> 99999999[zz] via NET/Socket/-5",
    "absurd-env": "NCCL INFO NCCL_IB_DISABLE set by environment to " + "1" * 100_000,
    "absurd-version": "NCCL version 99999999999999.0.0+cuda-1",
    "absurd-stamp": "2026-13-45 99:99:99 saving checkpoint at iteration 5 to /ckpt",
    "only-separators": "\r\r\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
    "surrogate-lookalikes": "NCCL INFO Channel 00 : 0[0] -> 1[1] via NET/Socket/0 \udcff".encode(
        "utf-8", "surrogatepass"
    ).decode("utf-8", "replace"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_worker_reads_hostile_text_without_raising(world, name):
    text = HOSTILE[name] + "\n" + "NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"
    ingest(world, [LogLines("rank-0.log", "f1", 0, len(text.encode()), text, 2, job_external_id="7001")])
    assert job_log_facts_update() == {world.job.pk}
    facts = facts_of(world.job)
    for row in evidence_lines(facts):
        assert len(row["text"]) <= 1000  # a huge line is kept as a window around the match
    assert facts["net_socket"]  # the good line after it is read, with its number
    assert facts["net_socket"][-1]["line"] == 2
    json.dumps(facts, allow_nan=False)  # storable as strict JSON (PostgreSQL's jsonb)


CRASHERS = {
    "nnodes-5000-digits": "NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes " + "9" * 5000 + " localRanks 8",
    "iteration-5000-digits": "saving checkpoint at iteration " + "9" * 5000 + " to /ckpt",
    "num-workers-5000-digits": "num_workers=" + "9" * 5000,
    "save-timer-dot": "    save-checkpoint ..........................: (3.2, .)",
    "save-timer-version": "    save-checkpoint ..........................: (1.2.3)",
    "save-timer-inf": "    save-checkpoint ..........................: (" + "9" * 400 + ")",
}


@pytest.mark.parametrize("name", sorted(CRASHERS))
def test_the_worker_never_raises_on_numbers_it_cannot_hold(world, name):
    text = CRASHERS[name] + "\n"
    ingest(world, [LogLines("rank-0.log", "f1", 0, len(text.encode()), text, 1, job_external_id="7001")])
    job_log_facts_update()
    json.dumps(facts_of(world.job), allow_nan=False)


WORDS = st.sampled_from(
    [
        "NCCL INFO ", "Channel 00/0 : 0[0] -> 1[1] [send] via ", "NET/Socket/0", "NET/IB/0/GDRDMA",
        "P2P/IPC/read", "SHM/direct/direct", "Ring 00 : 1 -> 2 via ", "nNodes ", "nNodes -3",
        "NCCL_IB_DISABLE set by environment to ", "NCCL_NET set to ", "Using network ", "NET/IB : Using [0]",
        "No device found", "GPU Direct RDMA Disabled", "NCCL version ", "num_workers=", "pin_memory=",
        "bf16=", "fp16 ...... ", "True", "False", "using torch.bfloat16 for parameters",
        "saving checkpoint at iteration ",
        "successfully saved checkpoint from iteration ", "Saving model checkpoint to /x",
        "save-checkpoint ....: (", ")", "2026-11-02 08:00:00", "11/02/2026 08:00:00", " ", "\r", "\t",
        "\x0c", "\u2028", "\ufffd", "中文", ",", "[", "]",
    ]
)  # fmt: skip
# Numbers the builder can hold.
NUMBERS = st.integers(-(10**30), 10**30).map(str)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.lists(st.one_of(WORDS, NUMBERS), max_size=12).map("".join), min_size=1, max_size=25))
def test_the_worker_never_raises_on_lines_made_of_log_fragments(world, lines):
    with transaction.atomic():
        ingest(world, pieces("7001", lines, [4]))
        job_log_facts_update()
        json.dumps(facts_of(world.job), allow_nan=False)
        transaction.set_rollback(True)


# --- Retention ---------------------------------------------------------------------------------


def test_a_chunk_pruned_before_the_run_leaves_the_worker_reading_the_rest(world, settings):
    now = timezone.now()
    old = now - timedelta(days=settings.PORTAL_RAW_RETENTION_DAYS + 1)
    lines = [STEP] * 6 + _lines(SOCKET_LOG)
    first, rest = pieces("7001", lines, [6])[:1], pieces("7001", lines, [6])[1:]
    ingest(world, first, now=old)
    ingest(world, rest, now=now)
    retention_prune(now=now)
    assert sorted(LogChunk.objects.values_list("start_offset", flat=True)) == [c.start_offset for c in rest]
    # What was pruned is no gap to wait for: the rest is read at once.
    assert job_log_facts_update(now=now) == {world.job.pk}
    assert facts_of(world.job)["net_socket"]
    # A replay of the pruned part (a shipper's cursor reset) is known, not stored again.
    assert ingest(world, first, now=now).duplicates == 1


def test_a_chunk_never_delivered_leaves_the_rest_waiting_then_read(world):
    now = timezone.now()
    lines = [STEP] * 6 + _lines(SOCKET_LOG)
    ingest(world, pieces("7001", lines, [6])[1:], now=now)  # the first piece was lost on the way
    # The rest waits for the earlier part a while (a shipper's late batch), then is read anyway.
    assert job_log_facts_update(now=now) == {world.job.pk}
    assert not facts_of(world.job).get("net_socket")
    assert job_log_facts_update(now=now + PENDING_GRACE + timedelta(minutes=1)) == {world.job.pk}
    assert facts_of(world.job)["net_socket"]  # read, numbered from the first piece that came


def test_a_chunk_pruned_before_the_run_does_not_shift_the_line_numbers(world, settings):
    now = timezone.now()
    old = now - timedelta(days=settings.PORTAL_RAW_RETENTION_DAYS + 1)
    lines = [STEP] * 6 + _lines(SOCKET_LOG)
    first, rest = pieces("7001", lines, [6])[:1], pieces("7001", lines, [6])[1:]
    ingest(world, first, now=old)
    ingest(world, rest, now=now)
    retention_prune(now=now)
    job_log_facts_update()
    assert_real_line_numbers(facts_of(world.job), {"rank-0.log": lines})


# --- The evidence on the page ------------------------------------------------------------------


@pytest.fixture
def socket_family(world):
    """A two-node vision job on RDMA nodes with NCCL_IB_DISABLE=1, hours in the window."""
    job = world.job
    job.nodes.add(
        world.node_a, NodeFactory(hostname="gpu-a02", cluster=world.cluster, owner_department=world.dept_a)
    )
    job.node_count, job.gpu_count, job.config = 2, 16, {"env": {"NCCL_IB_DISABLE": "1"}}
    job.save()
    now = timezone.now()
    for hours_ago in (1, 2, 3):
        JobHourFactory(
            job=job, hour=(now - timedelta(hours=hours_ago)).replace(minute=0, second=0, microsecond=0)
        )
    return job


def _page_rows(world) -> list[dict]:
    recommendations_refresh(full=True)
    rec = Recommendation.objects.get(rule="network.nccl-socket-on-rdma")
    rows = recommendation_evidence(user=world.admin, recommendation=rec)
    assert rows
    return rows


def test_the_page_shows_each_evidence_line_in_its_context(world, socket_family):
    lines = [STEP] * 6 + _lines(SOCKET_LOG)
    ingest(world, pieces("7001", lines, [5]))
    for row in _page_rows(world):
        hits = [(number, text) for number, text, hit in row["context"] if hit]
        assert hits == [(row["line"], lines[row["line"] - 1])]
        assert all(text == lines[number - 1] for number, text, _hit in row["context"])


def test_the_page_context_matches_the_evidence_after_progress_bar_carriage_returns(world, socket_family):
    bar = "\r".join(f" {p}%|{'#' * (p // 10)}| {p}/100" for p in range(0, 101, 20))
    lines = [STEP, bar, bar, *_lines(SOCKET_LOG)]
    ingest(world, pieces("7001", lines, [100]))
    for row in _page_rows(world):
        hits = [(number, text) for number, text, hit in row["context"] if hit]
        assert hits == [(row["line"], lines[row["line"] - 1])]


def test_the_page_context_matches_the_evidence_after_retention_pruned_earlier_chunks(
    world, socket_family, settings
):
    lines = [STEP] * 6 + _lines(SOCKET_LOG)
    first, rest = pieces("7001", lines, [3])[:1], pieces("7001", lines, [3])[1:]
    now = timezone.now()
    ingest(world, first, now=now - timedelta(days=settings.PORTAL_RAW_RETENTION_DAYS + 1))
    ingest(world, rest, now=now)
    recommendations_refresh(full=True)  # the facts are read while every chunk is stored
    retention_prune(now=now)
    for row in _page_rows(world):
        hits = [(number, text) for number, text, hit in row["context"] if hit]
        assert hits in ([], [(row["line"], lines[row["line"] - 1])])  # gone, or the right line
