import gzip
import io
import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from efficiency.collectors.logpush import (
    DRAIN_FACTOR,
    PushRefused,
    parse_ndjson_push,
    push_body_decode,
    push_body_read,
)

MiB = 1024 * 1024


def ndjson(*records: object) -> bytes:
    return b"".join(json.dumps(record).encode() + b"\n" for record in records)


def line(offset: int, text: str, **extra: object) -> dict[str, object]:
    return {"stream": "/logs/8812/rank-0.log", "offset": offset, "line": text, **extra}


def test_contiguous_lines_of_one_stream_merge_into_one_chunk():
    body = ndjson(
        line(0, "step 1", job="8812", node="gpu-a01", rank=0, ts="2024-05-01T08:00:00Z"),
        line(7, "step 2", job="8812", node="gpu-a01", rank=0, ts=1714550400.5),
    )
    outcome = parse_ndjson_push(body)

    assert outcome.rejected == []
    [chunk] = outcome.records
    assert chunk.text == "step 1\nstep 2\n"
    assert (chunk.start_offset, chunk.end_offset, chunk.line_count) == (0, 14, 2)
    assert (chunk.stream, chunk.file_id) == ("/logs/8812/rank-0.log", "push")
    assert (chunk.job_external_id, chunk.node, chunk.rank) == ("8812", "gpu-a01", 0)


def test_a_gap_in_offsets_or_another_stream_starts_a_new_chunk():
    body = ndjson(
        line(0, "a"),
        {"stream": "/logs/8812/rank-1.log", "offset": 0, "line": "other"},
        line(2, "b"),
        line(10, "after a gap"),
    )
    outcome = parse_ndjson_push(body)

    assert [(c.stream, c.start_offset, c.text) for c in outcome.records] == [
        ("/logs/8812/rank-0.log", 0, "a\nb\n"),
        ("/logs/8812/rank-1.log", 0, "other\n"),
        ("/logs/8812/rank-0.log", 10, "after a gap\n"),
    ]


def test_offsets_count_utf8_bytes_and_a_trailing_newline_once():
    outcome = parse_ndjson_push(ndjson(line(0, "损失 2.5\n"), line(11, "next")))

    [chunk] = outcome.records
    assert chunk.text == "损失 2.5\nnext\n"
    assert chunk.end_offset == 16


def test_a_line_delivered_twice_in_one_body_is_kept_once():
    outcome = parse_ndjson_push(ndjson(line(0, "a"), line(2, "b"), line(2, "b"), line(0, "a")))

    assert [c.text for c in outcome.records] == ["a\nb\n"]
    assert outcome.rejected == []


def test_bad_lines_are_rejected_with_their_line_number_and_the_rest_kept():
    body = b"\n".join(
        [
            json.dumps(line(0, "good")).encode(),
            b"{not json",
            b"[1, 2]",
            json.dumps({"offset": 0, "line": "x"}).encode(),
            json.dumps(line(-1, "negative")).encode(),
            json.dumps(line(True, "bool offset")).encode(),
            json.dumps(line(1.5, "float offset")).encode(),
            json.dumps({"stream": "s", "offset": 0}).encode(),
            json.dumps(line(0, "x", rank="0")).encode(),
            json.dumps(line(0, "x", job=8812)).encode(),
            json.dumps(line(0, "x", ts="yesterday")).encode(),
            json.dumps(line(0, "x", stream="s" * 501)).encode(),
            b'{"stream": "s", "offset": 0, "line": "x", "ts": NaN}',
            json.dumps(line(50, "also good")).encode(),
        ]
    )
    outcome = parse_ndjson_push(body)

    assert [c.text for c in outcome.records] == ["good\n", "also good\n"]
    assert [r.line_no for r in outcome.rejected] == list(range(2, 14))
    reasons = [r.reason for r in outcome.rejected]
    assert reasons[0].startswith("invalid JSON")
    assert reasons[1] == "not a JSON object but list"
    assert reasons[2] == "'stream' is missing or not a string"
    assert reasons[3] == "'offset' out of range 0..9223372036854775807"
    assert reasons[4] == reasons[5] == "'offset' is missing or not an integer"
    assert reasons[6] == "'line' is missing or not a string"
    assert reasons[7] == "'rank' is missing or not an integer"
    assert reasons[8] == "'job' is missing or not a string"
    assert reasons[9] == "'ts' is neither an ISO 8601 time nor epoch seconds"
    assert reasons[10] == "'stream' longer than 500 characters"
    assert "NaN" in reasons[11]
    assert outcome.rejected[0].excerpt == "{not json"


def test_invalid_utf8_lines_are_rejected_and_the_others_kept():
    body = (
        ndjson(line(0, "ok")) + b'{"stream": "s", "offset": 0, "line": "\xff\xfe"}\n' + ndjson(line(3, "ok2"))
    )
    outcome = parse_ndjson_push(body)

    assert [c.text for c in outcome.records] == ["ok\nok2\n"]
    assert [(r.line_no, r.reason) for r in outcome.rejected] == [(2, "not valid UTF-8 at byte 38")]
    assert "\ufffd" in outcome.rejected[0].excerpt


def test_a_body_of_too_many_lines_is_refused_whole_with_413_not_cut_short():
    body = ndjson(*(line(2 * n, "x") for n in range(10)))

    with pytest.raises(PushRefused) as refused:
        parse_ndjson_push(body, max_records=4)

    assert refused.value.status == 413
    assert refused.value.reason == "10 lines in one body, at most 4: nothing stored; send smaller batches"


def test_a_body_of_exactly_the_most_lines_is_taken_whole():
    outcome = parse_ndjson_push(ndjson(*(line(2 * n, "x") for n in range(4))) + b"\n\n", max_records=4)

    assert [c.line_count for c in outcome.records] == [4]


def test_rejections_past_the_limit_are_counted_not_listed():
    outcome = parse_ndjson_push(b"nope\n" * 50, max_rejected=10)

    assert len(outcome.rejected) == 11
    assert outcome.rejected[-1].reason == "40 more rejected lines not listed"


def test_deeply_nested_json_is_rejected_without_crashing():
    body = b"[" * 100_000 + b"\n" + b'{"a":' * 100_000 + b"\n" + ndjson(line(0, "survivor"))
    outcome = parse_ndjson_push(body)

    assert [c.text for c in outcome.records] == ["survivor\n"]
    assert [r.line_no for r in outcome.rejected] == [1, 2]
    assert (
        outcome.rejected[0].reason in {"JSON nested too deeply"}
        or "invalid JSON" in outcome.rejected[0].reason
    )


def test_huge_numbers_are_rejected_not_stored():
    body = b"\n".join(
        [
            b'{"stream": "s", "offset": ' + b"9" * 5000 + b', "line": "x"}',
            b'{"stream": "s", "offset": 99999999999999999999, "line": "x"}',
            b'{"stream": "s", "offset": 0, "line": "x", "rank": 4294967296}',
            b'{"stream": "s", "offset": 0, "line": "x", "ts": 1e308}',
            b'{"stream": "s", "offset": 0, "line": "x", "ts": 1e999}',
        ]
    )
    outcome = parse_ndjson_push(body)

    assert outcome.records == []
    assert [r.line_no for r in outcome.rejected] == [1, 2, 3, 4, 5]
    assert outcome.rejected[0].reason.startswith("invalid JSON")
    assert outcome.rejected[1].reason.startswith("'offset' out of range")
    assert outcome.rejected[2].reason.startswith("'rank' out of range")


def test_nul_and_lone_surrogates_in_a_line_become_replacement_characters():
    outcome = parse_ndjson_push(b'{"stream": "s\\u0000", "offset": 0, "line": "a\\u0000b\\ud800c"}\n')

    [chunk] = outcome.records
    assert chunk.text == "a\ufffdb\ufffdc\n"
    assert chunk.stream == "s\ufffd"
    assert chunk.end_offset == len("a\x00b") + 3 + len("c") + 1
    chunk.text.encode("utf-8")  # storable: no lone surrogate left


def test_a_10_mb_line_is_truncated_and_kept_with_its_full_offsets():
    body = ndjson(line(0, "x" * (10 * MiB)), line(10 * MiB + 1, "next"))
    outcome = parse_ndjson_push(body)

    [chunk] = outcome.records
    assert chunk.text == "x" * MiB + "\nnext\n"
    assert chunk.end_offset == 10 * MiB + 1 + 5
    assert [(r.line_no, r.reason) for r in outcome.rejected] == [
        (1, f"line longer than {MiB} bytes truncated")
    ]


def test_a_truncated_line_is_cut_on_a_character_boundary():
    outcome = parse_ndjson_push(ndjson(line(0, "é" * 10)), max_line_bytes=5)

    assert outcome.records[0].text == "éé\n"


def test_an_empty_body_gives_nothing():
    outcome = parse_ndjson_push(b"")

    assert (outcome.records, outcome.rejected) == ([], [])


def test_a_body_of_only_whitespace_gives_nothing():
    outcome = parse_ndjson_push(b" \n\r\n\t\n\n   ")

    assert (outcome.records, outcome.rejected) == ([], [])


def test_a_byte_order_mark_and_crlf_line_ends_are_accepted():
    body = b"\xef\xbb\xbf" + ndjson(line(0, "a")).replace(b"\n", b"\r\n") + ndjson(line(2, "b"))
    outcome = parse_ndjson_push(body)

    assert [c.text for c in outcome.records] == ["a\nb\n"]
    assert outcome.rejected == []


def test_file_id_and_null_optional_fields_are_honoured():
    outcome = parse_ndjson_push(ndjson(line(0, "a", file_id="2049:131", job=None, rank=None, node=None)))

    [chunk] = outcome.records
    assert (chunk.file_id, chunk.job_external_id, chunk.node, chunk.rank) == ("2049:131", "", "", None)


# --- The body as it comes over HTTP: read bounded, inflated bounded ------------------------------


def test_a_body_of_unknown_length_is_read_to_its_end():
    body = ndjson(*(line(2 * n, "x") for n in range(5000)))

    assert push_body_read(io.BytesIO(body), max_bytes=len(body)) == body


def test_a_body_of_unknown_length_past_the_limit_is_413_and_read_no_further_than_its_drain():
    # A body over the limit is refused; what follows is read and dropped up to DRAIN_FACTOR times
    # the limit (so the client gets to read the 413), and not a byte further.
    stream = io.BytesIO(b"x" * 10_000_000)

    with pytest.raises(PushRefused) as refused:
        push_body_read(stream, max_bytes=1000)

    assert refused.value.status == 413
    assert "larger than 1000 bytes" in refused.value.reason
    assert stream.tell() == 1001 + DRAIN_FACTOR * 1000


def test_a_body_a_little_over_the_limit_is_read_to_its_end_before_the_413():
    # The rest of a refused body within the drain is read: the server answers only once the
    # client has sent everything, so the client reads the answer instead of a reset connection.
    stream = io.BytesIO(b"x" * 3500)

    with pytest.raises(PushRefused):
        push_body_read(stream, max_bytes=1000)

    assert stream.tell() == 3500


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "GZIP", "gzip, identity"])
def test_a_gzip_body_is_inflated(encoding):
    body = ndjson(line(0, "损失 2.5"), line(11, "step 2"))

    assert push_body_decode(gzip.compress(body), encoding) == body


def test_a_deflate_body_and_an_identity_body_are_read():
    body = ndjson(line(0, "a"))

    assert push_body_decode(zlib.compress(body), "deflate") == body
    assert push_body_decode(body, "identity") == push_body_decode(body, "") == body


def test_concatenated_gzip_members_are_all_read():
    first, second = ndjson(line(0, "a")), ndjson(line(2, "b"))

    assert push_body_decode(gzip.compress(first) + gzip.compress(second), "gzip") == first + second


def test_a_gzip_bomb_is_413_without_inflating_it():
    bomb = gzip.compress(b"\n" * (64 * MiB), compresslevel=9)  # 64 KiB on the wire
    assert len(bomb) < 100_000

    with pytest.raises(PushRefused) as refused:
        push_body_decode(bomb, "gzip", max_decoded_bytes=MiB)

    assert refused.value.status == 413
    assert f"more than {MiB} bytes" in refused.value.reason


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not gzip at all", "not valid gzip"),
        (gzip.compress(b"x" * 1000, mtime=0)[:-12], "truncated"),
    ],
)
def test_a_corrupt_or_truncated_gzip_body_is_400_with_the_reason(body, reason):
    with pytest.raises(PushRefused) as refused:
        push_body_decode(body, "gzip")

    assert refused.value.status == 400
    assert reason in refused.value.reason


def test_an_encoding_we_do_not_inflate_is_415_naming_what_we_take():
    with pytest.raises(PushRefused) as refused:
        push_body_decode(b"(\xb5/\xfd", "zstd")

    assert refused.value.status == 415
    assert "gzip, deflate" in refused.value.reason


@given(st.binary(max_size=4096), st.integers(min_value=1, max_value=4096))
def test_inflating_never_returns_more_than_the_limit(payload, limit):
    if len(payload) <= limit:
        assert push_body_decode(gzip.compress(payload), "gzip", max_decoded_bytes=limit) == payload
    else:
        with pytest.raises(PushRefused, match="inflates to more than"):
            push_body_decode(gzip.compress(payload), "gzip", max_decoded_bytes=limit)
