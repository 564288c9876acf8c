import os
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.collectors.logfiles import (
    FileCursor,
    TailResult,
    _list_log_files,
    parse_log_path,
    tail_directory,
)

KiB = 1024
MiB = 1024 * KiB


def write(path: Path, data: bytes | str, mode: str = "ab") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode) as handle:
        handle.write(data.encode() if isinstance(data, str) else data)


def lines_of(result: TailResult) -> list[str]:
    return [line for chunk in result.chunks for line in chunk.text.splitlines()]


def identities(result: TailResult) -> list[tuple[str, str, int]]:
    return [(chunk.stream, chunk.file_id, chunk.start_offset) for chunk in result.chunks]


def test_lines_appended_across_calls_are_each_read_once(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, "step 1\nstep 2\n")
    first = tail_directory(tmp_path, {})
    write(log, "step 3\n")
    second = tail_directory(tmp_path, first.cursors)
    third = tail_directory(tmp_path, second.cursors)

    assert lines_of(first) == ["step 1", "step 2"]
    assert lines_of(second) == ["step 3"]
    assert third.chunks == []
    chunk = second.chunks[0]
    assert (chunk.start_offset, chunk.end_offset, chunk.line_count) == (14, 21, 1)
    assert (chunk.job_external_id, chunk.node, chunk.rank) == ("8812", "", 0)
    st = log.stat()
    assert chunk.file_id == f"{st.st_dev}:{st.st_ino}"
    assert second.cursors["8812/rank-0.log"]["offset"] == 21


def test_partial_last_line_waits_for_its_newline(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, "complete\nhalf a li")
    first = tail_directory(tmp_path, {})
    write(log, "ne\n")
    second = tail_directory(tmp_path, first.cursors)

    assert lines_of(first) == ["complete"]
    assert first.cursors["8812/rank-0.log"]["offset"] == len("complete\n")
    assert lines_of(second) == ["half a line"]


def test_rotation_by_rename_reads_the_old_generation_to_its_end_then_the_new_file(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, "a\nb\n")
    first = tail_directory(tmp_path, {})
    write(log, "c\nunterminated")
    log.rename(log.with_name("rank-0.log.1"))
    write(log, "d\ne\n")
    second = tail_directory(tmp_path, first.cursors)
    third = tail_directory(tmp_path, second.cursors)

    assert lines_of(first) + lines_of(second) == ["a", "b", "c", "unterminated", "d", "e"]
    assert third.chunks == []
    old, new = second.chunks
    assert old.file_id == first.chunks[0].file_id
    assert old.start_offset == 4
    assert new.start_offset == 0
    assert new.file_id != old.file_id
    assert new.file_id.endswith("#1")
    assert second.rejected == []


def test_a_rotated_generation_bigger_than_the_budget_is_finished_before_the_new_file(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, "a\n")
    first = tail_directory(tmp_path, {}, max_bytes_per_file=10)
    write(log, "".join(f"old {n}\n" for n in range(10)))  # 6 bytes a line
    log.rename(log.with_name("rank-0.log.1"))
    write(log, "new\n")
    results = [first]
    for _ in range(10):
        results.append(tail_directory(tmp_path, results[-1].cursors, max_bytes_per_file=10))

    read = [line for result in results for line in lines_of(result)]
    assert read == ["a"] + [f"old {n}" for n in range(10)] + ["new"]


def test_rotation_by_rename_without_a_new_file_keeps_following_the_old_generation(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, "a\n")
    first = tail_directory(tmp_path, {})
    write(log, "b\npartial")
    rotated = log.with_name("rank-0.log.1")
    log.rename(rotated)
    second = tail_directory(tmp_path, first.cursors)
    write(rotated, " line\n")  # the writer still holds the renamed file open
    write(log, "new\n")
    third = tail_directory(tmp_path, second.cursors)

    assert lines_of(second) == ["b"]
    assert "8812/rank-0.log" in second.cursors
    assert lines_of(third) == ["partial line", "new"]


def test_rotation_where_the_old_file_was_deleted_starts_the_new_file_from_zero(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, "old 1\nold 2\n")
    first = tail_directory(tmp_path, {})
    log.unlink()
    write(log, "new 1\nnew 2\nnew 3\n")
    second = tail_directory(tmp_path, first.cursors)

    # The filesystem may give the new file the old inode; either way it is a new generation.
    assert lines_of(second) == ["new 1", "new 2", "new 3"]
    assert second.chunks[0].start_offset == 0
    assert second.chunks[0].file_id != first.chunks[0].file_id


def test_copytruncate_restarts_at_zero_as_a_new_generation_and_says_so(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, "line one\nline two\n")
    first = tail_directory(tmp_path, {})
    os.truncate(log, 0)
    write(log, "again\n")
    second = tail_directory(tmp_path, first.cursors)

    assert lines_of(second) == ["again"]
    assert second.chunks[0].start_offset == 0
    assert second.chunks[0].file_id == first.chunks[0].file_id + "#1"
    assert [r.reason for r in second.rejected] == [
        "8812/rank-0.log: file truncated from 18 to 6 bytes; re-reading from start"
    ]


def test_content_replaced_in_place_beyond_the_old_offset_is_read_from_zero(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, "first run\n")
    first = tail_directory(tmp_path, {})
    write(log, "second run, much longer\nand more\n", mode="wb")  # same inode, grown past 10
    second = tail_directory(tmp_path, first.cursors)

    assert lines_of(second) == ["second run, much longer", "and more"]
    assert second.chunks[0].file_id != first.chunks[0].file_id
    assert "content replaced" in second.rejected[0].reason


def test_invalid_utf8_and_nul_bytes_are_replaced_so_postgres_can_store_the_text(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, b"loss \xff\xfe 2.5\nnul\x00here\nok\n")
    result = tail_directory(tmp_path, {})

    assert lines_of(result) == ["loss \ufffd\ufffd 2.5", "nul\ufffdhere", "ok"]
    assert "\x00" not in result.chunks[0].text
    assert result.rejected == []


def test_binary_garbage_lines_are_reported_left_out_and_passed_over(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    garbage = bytes(range(128, 256)) + b"\x00" * 20
    write(log, b"before\n" + garbage + b"\nafter\n")
    first = tail_directory(tmp_path, {})
    second = tail_directory(tmp_path, first.cursors)

    assert lines_of(first) == ["before", "after"]
    assert first.chunks[0].end_offset == log.stat().st_size
    assert len(first.rejected) == 1
    assert "binary garbage" in first.rejected[0].reason
    assert second.chunks == []


def test_a_binary_file_reports_a_bounded_number_of_problems(tmp_path):
    write(tmp_path / "8812" / "core.log", (b"\xff" * 50 + b"\n") * 5000)
    result = tail_directory(tmp_path, {})

    assert result.chunks == []
    assert result.cursors["8812/core.log"]["offset"] == 51 * 5000
    assert len(result.rejected) == 21
    assert result.rejected[-1].reason == "8812/core.log: 4980 more problems not listed"


def test_a_10_mb_single_line_is_truncated_skipped_and_read_in_bounded_memory(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, b"x" * (10 * MiB))
    tracemalloc.start()
    try:
        first = tail_directory(tmp_path, {}, max_line_bytes=256 * KiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    write(log, b"\nnext line\n")
    second = tail_directory(tmp_path, first.cursors, max_line_bytes=256 * KiB)
    third = tail_directory(tmp_path, second.cursors, max_line_bytes=256 * KiB)

    assert peak < 2 * MiB
    assert [chunk.text for chunk in first.chunks] == ["x" * (256 * KiB) + "\n"]
    assert "line longer than 262144 bytes truncated" in first.rejected[0].reason
    assert first.cursors["8812/rank-0.log"]["skipping"] is True
    # The first call stopped 8 MiB into the line; the second skips its rest and reads on.
    assert first.cursors["8812/rank-0.log"]["offset"] == 8 * MiB
    assert lines_of(second) == ["next line"]
    assert second.cursors["8812/rank-0.log"]["skipping"] is False
    assert third.chunks == []


def test_a_long_line_is_cut_on_a_character_boundary(tmp_path):
    write(tmp_path / "8812" / "rank-0.log", "é" * 10 + "\n")
    result = tail_directory(tmp_path, {}, max_line_bytes=5)

    assert lines_of(result) == ["éé"]


def test_replaying_a_cursor_that_was_not_persisted_gives_identical_chunk_identities(tmp_path):
    for rank in range(3):
        write(tmp_path / "8812" / f"rank-{rank}.log", f"rank {rank} step 1\n")
    saved = tail_directory(tmp_path, {}).cursors
    for rank in range(3):
        write(tmp_path / "8812" / f"rank-{rank}.log", f"rank {rank} step 2\n")

    crashed = tail_directory(tmp_path, saved)
    replayed = tail_directory(tmp_path, saved)

    assert identities(replayed) == identities(crashed)
    assert replayed.chunks == crashed.chunks
    assert replayed.cursors == crashed.cursors


def test_replaying_after_more_was_written_gives_the_same_identity_with_a_longer_chunk(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, "a\n")
    saved = tail_directory(tmp_path, {}).cursors
    write(log, "b\n")
    crashed = tail_directory(tmp_path, saved)
    write(log, "c\n")
    replayed = tail_directory(tmp_path, saved)

    assert identities(replayed) == identities(crashed)
    assert replayed.chunks[0].text.startswith(crashed.chunks[0].text)
    assert replayed.chunks[0].end_offset > crashed.chunks[0].end_offset


def test_a_file_that_vanishes_loses_its_cursor(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    write(log, "a\n")
    write(tmp_path / "8812" / "rank-1.log", "b\n")
    first = tail_directory(tmp_path, {})
    log.unlink()
    second = tail_directory(tmp_path, first.cursors)

    assert set(first.cursors) == {"8812/rank-0.log", "8812/rank-1.log"}
    assert set(second.cursors) == {"8812/rank-1.log"}
    assert second.chunks == []
    assert second.rejected == []


def test_a_whole_job_directory_that_vanishes_loses_its_cursors(tmp_path):
    write(tmp_path / "8812" / "rank-0.log", "a\n")
    first = tail_directory(tmp_path, {})
    (tmp_path / "8812" / "rank-0.log").unlink()
    (tmp_path / "8812").rmdir()

    assert tail_directory(tmp_path, first.cursors).cursors == {}


def test_a_missing_watched_directory_keeps_every_cursor(tmp_path):
    cursors = {"8812/rank-0.log": FileCursor("8812/rank-0.log", "1:2", 10).to_state()}
    result = tail_directory(tmp_path / "unmounted", cursors)

    assert result.cursors == cursors
    assert "missing" in result.rejected[0].reason


def test_max_bytes_per_file_splits_a_big_file_over_calls_on_line_boundaries(tmp_path):
    log = tmp_path / "8812" / "rank-0.log"
    lines = [f"line {n:04d}" for n in range(1000)]  # 9 bytes + newline each
    write(log, "".join(line + "\n" for line in lines))
    write(tmp_path / "8813" / "rank-0.log", "other job\n")

    results = [tail_directory(tmp_path, {}, max_bytes_per_file=4000)]
    while results[-1].chunks:
        results.append(tail_directory(tmp_path, results[-1].cursors, max_bytes_per_file=4000))

    big = [chunk for result in results for chunk in result.chunks if chunk.stream == "8812/rank-0.log"]
    assert [line for chunk in big for line in chunk.text.splitlines()] == lines
    assert [chunk.start_offset for chunk in big] == [0, 4000, 8000]
    assert all(chunk.end_offset - chunk.start_offset <= 4000 + 10 for chunk in big)
    assert [c.text for c in results[0].chunks if c.stream == "8813/rank-0.log"] == ["other job\n"]


def test_an_empty_file_gives_no_chunk_but_a_cursor_at_zero(tmp_path):
    write(tmp_path / "8812" / "rank-0.log", b"")
    result = tail_directory(tmp_path, {})

    assert result.chunks == []
    assert result.cursors["8812/rank-0.log"]["offset"] == 0
    assert result.rejected == []


def test_a_directory_with_200_files_reads_every_one(tmp_path):
    for job in range(20):
        for rank in range(10):
            write(tmp_path / f"job{job}" / f"node{rank // 4}" / f"rank{rank}.log", f"{job}/{rank}\n")
    result = tail_directory(tmp_path, {})

    assert len(result.chunks) == 200
    assert len(result.cursors) == 200
    assert {(c.job_external_id, c.rank) for c in result.chunks} == {
        (f"job{job}", rank) for job in range(20) for rank in range(10)
    }
    assert tail_directory(tmp_path, result.cursors).chunks == []


def test_symlinks_are_not_followed_out_of_the_watched_directory(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("password\n")
    root = tmp_path / "logs"
    (root / "8812").mkdir(parents=True)
    (root / "8812" / "rank-0.log").symlink_to(secret)
    (root / "8813").symlink_to(tmp_path, target_is_directory=True)

    result = tail_directory(root, {}, pattern="*/*")

    assert result.chunks == []


def _listed_file_by_file(root: Path, pattern: str) -> dict[str, Path]:
    """The listing as it was first written: one realpath per file (the reference)."""
    root_real = os.path.realpath(root)
    found = {}
    for path in root.glob(pattern):
        regular = not path.is_symlink() and path.is_file()
        if regular and os.path.commonpath([root_real, os.path.realpath(path)]) == root_real:
            found[path.relative_to(root).as_posix()] = path
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    layout=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "a/c", "b/d", "link-in", "link-out", "link-in/e", "link-out/f"]),
            st.sampled_from(["rank0.log", "rank1.log", ".hidden.log", "x.txt", "file-link.log"]),
        ),
        max_size=12,
    ),
    pattern=st.sampled_from(["**/*.log", "**/rank*.log", "**/*", "*/*.log", "*/*/*.log", "*/*"]),
)
def test_the_listing_equals_pathlib_glob_with_a_realpath_per_file(tmp_path_factory, layout, pattern):
    base = tmp_path_factory.mktemp("tree")
    root, outside = base / "logs", base / "outside"
    for folder in ("a/c", "b/d"):
        (root / folder).mkdir(parents=True)
    (outside / "f").mkdir(parents=True)
    (root / "link-in").symlink_to(root / "a", target_is_directory=True)
    (root / "link-out").symlink_to(outside, target_is_directory=True)
    for folder, name in layout:
        path = root / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name == "file-link.log":
            if not path.exists() and not path.is_symlink():
                path.symlink_to(outside / "secret.txt")
        else:
            path.write_text("line\n")
    (outside / "secret.txt").write_text("password\n")

    assert _list_log_files(root, pattern) == _listed_file_by_file(root, pattern)


def test_a_fifo_named_like_a_log_is_ignored_rather_than_blocking(tmp_path):
    (tmp_path / "8812").mkdir()
    os.mkfifo(tmp_path / "8812" / "rank-0.log")
    write(tmp_path / "8812" / "rank-1.log", "a\n")

    assert lines_of(tail_directory(tmp_path, {})) == ["a"]


def test_a_file_name_that_is_not_utf8_is_reported_not_tailed(tmp_path):
    (tmp_path / "8812").mkdir()
    bad = os.path.join(os.fsencode(tmp_path), b"8812", b"rank-\xff.log")
    with open(bad, "wb") as handle:
        handle.write(b"a\n")
    result = tail_directory(tmp_path, {})

    assert result.chunks == []
    assert result.cursors == {}
    assert "not printable UTF-8" in result.rejected[0].reason


def test_an_unreadable_cursor_state_restarts_the_file_and_says_so(tmp_path):
    write(tmp_path / "8812" / "rank-0.log", "a\n")
    result = tail_directory(tmp_path, {"8812/rank-0.log": {"offset": "ten"}})

    assert lines_of(result) == ["a"]
    assert "cursor state unreadable" in result.rejected[0].reason


def test_cursor_state_round_trips_through_json_types(tmp_path):
    cursor = FileCursor("8812/rank-0.log", "2049:131#2", 4096, skipping=True)

    assert FileCursor.from_state(cursor.path, cursor.to_state()) == cursor
    assert (cursor.device, cursor.inode, cursor.generation) == (2049, 131, 2)


@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("8812/rank-3.log", {"job_external_id": "8812", "rank": 3}),
        ("8812/rank_3.log", {"job_external_id": "8812", "rank": 3}),
        ("8812/gpu-a01/rank3.log", {"job_external_id": "8812", "node": "gpu-a01", "rank": 3}),
        ("kern/gpu-a01.log", {"node": "gpu-a01"}),
        ("8812/launcher.log", {"job_external_id": "8812"}),
        ("a/b/c/d.log", {}),
    ],
)
def test_default_path_parser_reads_job_node_and_rank_from_the_layout(relative, expected):
    assert parse_log_path(Path(relative)) == expected


def test_kernel_logs_carry_the_node_and_no_job(tmp_path):
    write(tmp_path / "kern" / "gpu-a01.log", "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus\n")
    chunk = tail_directory(tmp_path, {}).chunks[0]

    assert (chunk.stream, chunk.node, chunk.job_external_id, chunk.rank) == (
        "kern/gpu-a01.log",
        "gpu-a01",
        "",
        None,
    )


def test_a_custom_path_parser_supplies_the_metadata(tmp_path):
    write(tmp_path / "any" / "where.log", "x\n")
    result = tail_directory(tmp_path, {}, path_parser=lambda path: {"job_external_id": path.stem})

    assert result.chunks[0].job_external_id == "where"
