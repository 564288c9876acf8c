"""Job and kernel log files under a watched directory, tailed by byte offset.

Training jobs write one file per job and rank; the kernel log is kept per node. The default
``parse_log_path`` reads job, node and rank from the path relative to the watched root:

==============================  ===============================================================
``kern/<host>.log``             kernel log of one node: node=<host>, no job
``<job>/rank-<N>.log``          one rank of a job: job=<job>, rank=N (``rank_N``, ``rankN`` too)
``<job>/<node>/rank<N>.log``    one rank of a job on one node: job, node and rank
``<job>/<name>.log``            a job-level log (launcher, scheduler): job only
anything else                   tailed all the same, without job, node or rank
==============================  ===============================================================

``kern`` is therefore not usable as a job id. Rotated generations must not match ``pattern``
(logrotate's ``rank-0.log.1`` does not match ``**/*.log``), or they would be read a second time
as streams of their own.

Each call reads what is new since the cursors it is given and returns the cursors to persist,
keyed by the path relative to the root (see ``FileCursor.to_state`` for the JSON shape):

- A chunk's identity is (stream = relative path, ``file_id``, ``start_offset``), offsets in bytes
  within one generation of the file. Replaying a cursor (a crash before it was persisted) gives
  the same identities; if the file grew meanwhile, the replayed chunk with a given identity may
  end later than the stored one and is then a superset of it (keep the longer one).
- ``file_id`` is ``"<st_dev>:<st_ino>"`` for the first generation of a path and
  ``"<st_dev>:<st_ino>#<n>"`` for the n-th one after it (rotation, truncation), so content that
  restarts at offset 0 never collides with what an earlier generation stored there.
- Rotation (the path now has another inode): the old generation is looked up by inode in the
  same directory and read to its end first, including an unterminated last line, since its
  writer has moved to the new file; then the new file is read from 0. A generation rotated away
  *and* deleted between two calls, or rotated more than once, is lost: only the generation a
  cursor points at can be found again.
- Truncation (``copytruncate``: same inode, shorter than the cursor) and content replaced in
  place (the first bytes no longer match their fingerprint, e.g. a job restarted with ``open(...,
  "w")`` that already wrote past the old offset) restart at 0 as a new generation, with an
  informational ``Rejected``.
- Only complete lines are read; an unterminated last line waits for its newline. A line longer
  than ``max_line_bytes`` is cut to that length, reported, and the rest of it skipped (the cursor
  remembers it is skipping), so a runaway ``\\r`` progress bar cannot stall the stream or fill
  memory: files are read in blocks, never whole.
- Text is UTF-8 decoded with replacement, and NUL becomes U+FFFD (PostgreSQL text refuses NUL).
  A line that is mostly replacement characters is binary garbage: reported and left out of the
  chunk's text, but its bytes are still passed over.
- Symbolic links and non-regular files are ignored, so a job cannot make the portal read files
  outside the watched root through its own log directory.
"""

import errno
import fnmatch
import hashlib
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self, TypeGuard

from efficiency.collectors.records import LogLines, Rejected, excerpt

MiB = 1024 * 1024
READ_BLOCK_BYTES = 64 * 1024
# How much of a file's beginning fingerprints one generation of it.
HEAD_BYTES = 1024
# A line with more replacement characters than this share of its characters is binary garbage.
GARBAGE_RATIO = 0.3
# A binary file can hold millions of "lines"; listing each would drown the Data sources page.
MAX_REJECTED_PER_FILE = 20
# Enough bytes for an excerpt (records.EXCERPT_CHARS) without decoding a whole megabyte line.
EXCERPT_BYTES = 800
REPLACEMENT = "\N{REPLACEMENT CHARACTER}"

# Column sizes of efficiency.models.LogChunk (the stored row): longer values could not be stored.
STREAM_MAX_CHARS = 500
FILE_ID_MAX_CHARS = 100
JOB_ID_MAX_CHARS = 200
NODE_MAX_CHARS = 255
RANK_MAX = 2**31 - 1

_FILE_ID_RE = re.compile(r"(\d+):(\d+)(?:#(\d+))?")
_RANK_FILE_RE = re.compile(r"rank[-_]?(\d{1,9})\.log")

PathParser = Callable[[Path], Mapping[str, object]]


@dataclass(slots=True)
class FileCursor:
    """How far one path has been read: the generation (``file_id``) and the byte offset in it.

    ``skipping`` means the offset is inside an over-long line whose rest is being skipped;
    ``head_len``/``head_digest`` fingerprint the generation's first bytes, to notice a file
    replaced in place by one that reuses the inode.
    """

    path: str
    file_id: str
    offset: int
    skipping: bool = False
    head_len: int = 0
    head_digest: str = ""

    @property
    def device(self) -> int:
        """``st_dev`` of the generation when it was first seen."""
        return int(self._id_parts()[0])

    @property
    def inode(self) -> int:
        """``st_ino`` of the generation."""
        return int(self._id_parts()[1])

    @property
    def generation(self) -> int:
        """0 for the first generation of this path, then counting up at each rotation or truncation."""
        return int(self._id_parts()[2] or 0)

    def _id_parts(self) -> tuple[str, str, str | None]:
        match = _FILE_ID_RE.fullmatch(self.file_id)
        if match is None:
            raise ValueError(f"malformed file_id {self.file_id!r}")
        return match[1], match[2], match[3]

    def to_state(self) -> dict[str, object]:
        """The JSON-serialisable form the caller persists between calls."""
        return {
            "file_id": self.file_id,
            "offset": self.offset,
            "skipping": self.skipping,
            "head_len": self.head_len,
            "head_digest": self.head_digest,
        }

    @classmethod
    def from_state(cls, path: str, state: Mapping[str, object]) -> Self:
        """Rebuild a cursor from ``to_state()`` output; ``ValueError`` if it is malformed."""
        file_id = state.get("file_id")
        offset = state.get("offset")
        skipping = state.get("skipping", False)
        head_len = state.get("head_len", 0)
        head_digest = state.get("head_digest", "")
        if not isinstance(file_id, str) or _FILE_ID_RE.fullmatch(file_id) is None:
            raise ValueError("file_id is not '<dev>:<ino>[#<generation>]'")
        if not _is_int(offset) or offset < 0:
            raise ValueError("offset is not a non-negative integer")
        if not isinstance(skipping, bool):
            raise ValueError("skipping is not a boolean")
        if not _is_int(head_len) or not 0 <= head_len <= HEAD_BYTES or not isinstance(head_digest, str):
            raise ValueError("head fingerprint is malformed")
        return cls(path, file_id, offset, skipping, head_len, head_digest)


@dataclass(slots=True)
class TailResult:
    """What one pass over a directory read: chunks to store, cursors to persist, problems seen."""

    chunks: list[LogLines] = field(default_factory=list)
    cursors: dict[str, dict[str, object]] = field(default_factory=dict)
    rejected: list[Rejected] = field(default_factory=list)


def parse_log_path(relative: Path) -> dict[str, object]:
    """Job external id, node and rank from a log file's path under the root (module docstring)."""
    parts = relative.parts
    name = parts[-1] if parts else ""
    if len(parts) == 2 and parts[0] == "kern":
        return {"node": name.removesuffix(".log")}
    rank = _RANK_FILE_RE.fullmatch(name)
    if len(parts) == 2:
        if rank is None:
            return {"job_external_id": parts[0]}
        return {"job_external_id": parts[0], "rank": int(rank[1])}
    if len(parts) == 3 and rank is not None:
        return {"job_external_id": parts[0], "node": parts[1], "rank": int(rank[1])}
    return {}


def tail_directory(
    root: Path,
    cursors: Mapping[str, Mapping[str, object]],
    *,
    pattern: str = "**/*.log",
    max_bytes_per_file: int = 8 * MiB,
    max_line_bytes: int = MiB,
    path_parser: PathParser | None = None,
) -> TailResult:
    """Read the new complete lines of every file under ``root`` matching ``pattern``.

    ``cursors`` is the ``TailResult.cursors`` of the previous call (``{}`` the first time). Each
    file advances by at most ``max_bytes_per_file`` per call (plus the rest of a line under way),
    so one huge file cannot starve the others; the next call continues it. A file that can no
    longer be found, under its name or as a rotated generation, loses its cursor. If ``root``
    itself is missing (an unmounted share), nothing is read and the cursors are kept as they are.
    """
    if max_bytes_per_file < 1 or max_line_bytes < 1:
        raise ValueError("max_bytes_per_file and max_line_bytes must be positive")
    result = TailResult()
    if not root.is_dir():
        result.cursors = {rel: dict(state) for rel, state in cursors.items()}
        result.rejected.append(Rejected(reason=f"watched directory {root} is missing; cursors kept"))
        return result
    parser = path_parser or parse_log_path
    present = _list_log_files(root, pattern)
    for rel in sorted(present.keys() | cursors.keys()):
        state = cursors.get(rel)
        try:
            metadata = _chunk_metadata(rel, parser(Path(rel)))
        except ValueError as exc:
            result.rejected.append(Rejected(reason=f"{excerpt(rel)}: not tailed: {exc}"))
            if state is not None:
                result.cursors[rel] = dict(state)
            continue
        previous = None
        if state is not None:
            try:
                previous = FileCursor.from_state(rel, state)
            except ValueError as exc:
                result.rejected.append(
                    Rejected(reason=f"{rel}: cursor state unreadable ({exc}); re-reading from start")
                )
        tailer = _FileTailer(
            root=root,
            rel=rel,
            metadata=metadata,
            max_bytes=max_bytes_per_file,
            max_line_bytes=max_line_bytes,
        )
        try:
            cursor = tailer.tail(present.get(rel), previous)
        except OSError as exc:
            # Keep the old cursor and drop what this file gave so far: the next call replays it
            # with the same chunk identities.
            result.rejected.append(Rejected(reason=f"{rel}: cannot read: {exc.strerror or exc}"))
            if state is not None:
                result.cursors[rel] = dict(state)
            continue
        result.chunks.extend(tailer.chunks)
        result.rejected.extend(tailer.rejects.finish(rel))
        if cursor is not None:
            result.cursors[rel] = cursor.to_state()
    return result


@dataclass(frozen=True, slots=True)
class _Metadata:
    job_external_id: str
    node: str
    rank: int | None


def _chunk_metadata(rel: str, parsed: Mapping[str, object]) -> _Metadata:
    """Check a path parser's answer; ``ValueError`` when it cannot be stored, ``TypeError`` on a bug."""
    job = parsed.get("job_external_id", "")
    node = parsed.get("node", "")
    rank = parsed.get("rank")
    if not isinstance(job, str) or not isinstance(node, str) or not (rank is None or _is_int(rank)):
        raise TypeError(f"path parser gave {parsed!r} for {rel!r}: expected str job/node, int rank")
    if not rel.isprintable():
        # File names are bytes; one that is not UTF-8 comes back with (unprintable) surrogate escapes.
        raise ValueError("path is not printable UTF-8")
    if len(rel) > STREAM_MAX_CHARS:
        raise ValueError(f"path longer than {STREAM_MAX_CHARS} characters")
    if len(job) > JOB_ID_MAX_CHARS or len(node) > NODE_MAX_CHARS:
        raise ValueError("job id or node name too long")
    if rank is not None and not 0 <= rank <= RANK_MAX:
        raise ValueError(f"rank {rank} out of range")
    return _Metadata(job_external_id=job, node=node, rank=rank)


def _is_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass, but True is no offset.
    return isinstance(value, int) and not isinstance(value, bool)


def _list_log_files(root: Path, pattern: str) -> dict[str, Path]:
    """Regular files matching ``pattern`` under ``root``, by relative POSIX path."""
    name_pattern = pattern.removeprefix("**/")
    if pattern.startswith("**/") and "/" not in name_pattern and "**" not in name_pattern:
        return _walk_log_files(root, name_pattern)
    root_real = os.path.realpath(root)
    found: dict[str, Path] = {}
    # Where each directory really is: a regular file is where its directory really is, so one
    # realpath per directory (not per file) decides whether a symlinked directory on the way
    # leads outside the root.
    inside: dict[Path, bool] = {}
    for path in root.glob(pattern):
        try:
            mode = path.lstat().st_mode
        except OSError:
            continue  # vanished between listing and looking
        if not stat.S_ISREG(mode):
            continue
        parent = path.parent
        if parent not in inside:
            real = os.path.realpath(parent)
            inside[parent] = os.path.commonpath([root_real, real]) == root_real
        if not inside[parent]:
            continue
        found[path.relative_to(root).as_posix()] = path
    return found


def _walk_log_files(root: Path, name_pattern: str) -> dict[str, Path]:
    """``**/<name_pattern>`` without pathlib's glob: a watched root holds thousands of files and
    is listed every few seconds. Like the glob, it never descends into a symlinked directory
    (so nothing it finds can lie outside the root) and takes regular files only, hidden ones
    too; proven equal to the glob in tests/collectors/test_logfiles.py."""
    found: dict[str, Path] = {}
    pending = [(str(root), "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # vanished or unreadable, as the glob skips it
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, f"{prefix}{entry.name}/"))
                elif entry.is_file(follow_symlinks=False) and fnmatch.fnmatchcase(entry.name, name_pattern):
                    found[prefix + entry.name] = root / (prefix + entry.name)
            except OSError:
                continue
    return found


class _OpenFile:
    """A regular file opened without following symlinks or blocking on a FIFO."""

    def __init__(self, fd: int, st: os.stat_result) -> None:
        self.fd = fd
        self.st = st

    @classmethod
    def open(cls, path: Path | str) -> Self | None:
        """The open file, or ``None`` if it is gone or not a regular file."""
        # O_NONBLOCK: opening a FIFO named like a log must not hang the whole pass.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(path, flags)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            # ELOOP from O_NOFOLLOW: the name was swapped for a symlink since it was listed.
            if exc.errno == errno.ELOOP:
                return None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return None
        return cls(fd, st)

    def close(self) -> None:
        """Release the file descriptor."""
        os.close(self.fd)

    def head_matches(self, cursor: FileCursor) -> bool:
        """Whether this file starts with the bytes the cursor's generation started with."""
        if cursor.head_len == 0:
            return True
        head = os.pread(self.fd, cursor.head_len, 0)
        return len(head) == cursor.head_len and _digest(head) == cursor.head_digest

    def is_generation_of(self, cursor: FileCursor) -> bool:
        """Whether this file is the generation the cursor points at (by inode and fingerprint).

        The device number is not trusted alone: an NFS share can come back from a remount with a
        new one, and then the inode plus the first bytes decide.
        """
        if self.st.st_ino != cursor.inode:
            return False
        return self.st.st_dev == cursor.device or self.head_matches(cursor)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _file_id(st: os.stat_result, generation: int) -> str:
    base = f"{st.st_dev}:{st.st_ino}"
    return base if generation == 0 else f"{base}#{generation}"


class _RejectLog:
    """Rejected entries of one file in one call, capped so binary junk cannot flood the list."""

    def __init__(self) -> None:
        self.items: list[Rejected] = []
        self.suppressed = 0

    def add(self, reason: str, raw: bytes = b"") -> None:
        if len(self.items) < MAX_REJECTED_PER_FILE:
            self.items.append(Rejected(reason=reason, excerpt=excerpt(raw[:EXCERPT_BYTES])))
        else:
            self.suppressed += 1

    def finish(self, rel: str) -> list[Rejected]:
        if self.suppressed:
            self.items.append(Rejected(reason=f"{rel}: {self.suppressed} more problems not listed"))
        return self.items


class _FileTailer:
    """Reads one relative path for one call: its generations, lines, chunks and problems."""

    def __init__(
        self, *, root: Path, rel: str, metadata: _Metadata, max_bytes: int, max_line_bytes: int
    ) -> None:
        self.root = root
        self.rel = rel
        self.metadata = metadata
        self.budget = max_bytes
        self.max_line_bytes = max_line_bytes
        self.chunks: list[LogLines] = []
        self.rejects = _RejectLog()

    def tail(self, path: Path | None, previous: FileCursor | None) -> FileCursor | None:
        """Read what is new on this path; the cursor to persist, ``None`` to forget the path."""
        current = _OpenFile.open(path) if path is not None else None
        try:
            if previous is None:
                if current is None:
                    return None
                cursor = FileCursor(self.rel, _file_id(current.st, 0), 0)
                self._read(current, cursor, flush_tail=False)
                return cursor
            if current is not None and current.is_generation_of(previous):
                cursor = self._same_inode_generation(current, previous)
                self._read(current, cursor, flush_tail=False)
                return cursor
            if not self._finish_old_generation(previous, writer_moved_on=current is not None):
                return previous
            if current is None:
                return None  # neither the path nor its inode can be found: the file is gone
            cursor = FileCursor(self.rel, _file_id(current.st, previous.generation + 1), 0)
            self._read(current, cursor, flush_tail=False)
            return cursor
        finally:
            if current is not None:
                current.close()

    def _same_inode_generation(self, current: _OpenFile, previous: FileCursor) -> FileCursor:
        """The cursor to continue with when the path still has the cursor's inode."""
        size = current.st.st_size
        if size < previous.offset:
            reason = f"file truncated from {previous.offset} to {size} bytes; re-reading from start"
        elif not current.head_matches(previous):
            reason = "file content replaced in place; re-reading from start"
        else:
            return previous
        self.rejects.add(f"{self.rel}: {reason}")
        return FileCursor(self.rel, _file_id(current.st, previous.generation + 1), 0)

    def _finish_old_generation(self, previous: FileCursor, *, writer_moved_on: bool) -> bool:
        """Read the rest of a rotated generation; whether it is done (or gone) and can be left.

        With no new file at the path yet, the writer may still append to the renamed one, so
        its unterminated last line is left for later, and the cursor stays on it.
        """
        old = self._find_by_inode(previous)
        if old is None:
            return True
        try:
            at_eof = self._read(old, previous, flush_tail=writer_moved_on)
        finally:
            old.close()
        return at_eof and writer_moved_on

    def _find_by_inode(self, previous: FileCursor) -> _OpenFile | None:
        """The cursor's generation under another name in the same directory (rotated), if any."""
        directory = (self.root / self.rel).parent
        try:
            with os.scandir(directory) as entries:
                candidates = [entry.path for entry in entries if entry.inode() == previous.inode]
        except (FileNotFoundError, NotADirectoryError):
            return None
        for candidate in candidates:
            opened = _OpenFile.open(candidate)
            if opened is None:
                continue
            if opened.is_generation_of(previous) and opened.head_matches(previous):
                return opened
            opened.close()
        return None

    def _read(self, opened: _OpenFile, cursor: FileCursor, *, flush_tail: bool) -> bool:
        """Read complete lines from ``cursor.offset`` into one chunk; whether the end was reached.

        Advances the cursor and spends this path's byte budget. ``flush_tail`` also takes an
        unterminated last line, for a generation nobody writes to any more.
        """
        start = cursor.offset
        consumed = start  # every byte before this is accounted for
        position = start  # next byte to read
        pending = bytearray()  # an unterminated line beginning at ``consumed``
        skipping = cursor.skipping
        lines: list[str] = []
        at_eof = False
        while consumed - start < self.budget:
            block = os.pread(opened.fd, READ_BLOCK_BYTES, position)
            if not block:
                at_eof = True
                break
            position += len(block)
            index = 0
            while index < len(block) and consumed - start < self.budget:
                newline = block.find(b"\n", index)
                if skipping:
                    end = len(block) if newline == -1 else newline + 1
                    consumed += end - index
                    index = end
                    skipping = newline == -1
                    continue
                if newline == -1:
                    pending += block[index:]
                    index = len(block)
                    if len(pending) > self.max_line_bytes:
                        self._add_line(lines, bytes(pending[: self.max_line_bytes + 4]), consumed)
                        consumed += len(pending)
                        pending.clear()
                        skipping = True
                    continue
                raw = bytes(pending + block[index:newline]) if pending else block[index:newline]
                pending.clear()
                self._add_line(lines, raw, consumed)
                consumed += len(raw) + 1
                index = newline + 1
        if at_eof and flush_tail:
            if pending:
                self._add_line(lines, bytes(pending), consumed)
                consumed += len(pending)
            skipping = False
        self.budget -= consumed - start
        if lines:
            self.chunks.append(
                LogLines(
                    stream=self.rel,
                    file_id=cursor.file_id,
                    start_offset=start,
                    end_offset=consumed,
                    text="".join(line + "\n" for line in lines),
                    line_count=len(lines),
                    job_external_id=self.metadata.job_external_id,
                    node=self.metadata.node,
                    rank=self.metadata.rank,
                )
            )
        cursor.offset = consumed
        cursor.skipping = skipping
        if cursor.head_len < HEAD_BYTES and consumed > cursor.head_len:
            head = os.pread(opened.fd, min(consumed, HEAD_BYTES), 0)
            cursor.head_len = len(head)
            cursor.head_digest = _digest(head)
        return at_eof

    def _add_line(self, lines: list[str], raw: bytes, line_start: int) -> None:
        """Decode one line (cut to ``max_line_bytes``) and keep it unless it is binary garbage."""
        if len(raw) > self.max_line_bytes:
            self.rejects.add(
                f"{self.rel} at byte {line_start}: line longer than {self.max_line_bytes} bytes truncated",
                raw,
            )
            raw = _cut_utf8(raw, self.max_line_bytes)
        text = raw.decode("utf-8", errors="replace").replace("\x00", REPLACEMENT)
        if text.count(REPLACEMENT) > GARBAGE_RATIO * len(text):
            self.rejects.add(f"{self.rel} at byte {line_start}: binary garbage skipped", raw)
            return
        lines.append(text)


def _cut_utf8(data: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes of ``data``, shortened so no UTF-8 character is split."""
    cut = limit
    # A UTF-8 character has at most three continuation bytes (10xxxxxx) after its lead byte.
    for _ in range(3):
        if cut <= 0 or cut >= len(data) or data[cut] & 0xC0 != 0x80:
            break
        cut -= 1
    return data[:cut]
