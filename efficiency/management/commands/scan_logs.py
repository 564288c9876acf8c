import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from efficiency.analysis.faults.root_cause import log_root
from efficiency.analysis.faults.scanner import ENGINES, Finding, LogFileError, scan_file

# The log collector's layout (efficiency.collectors.logfiles): ``kern/<host>.log`` is a node's
# kernel log, ``<job>/rank-<N>.log`` (also ``rank_N``, ``rankN``) one rank of a job.
_RANK_FILE_RE = re.compile(r"rank[-_]?([0-9]{1,9})\.log")


class Command(BaseCommand):
    help = (
        "Scan log files, or directories of them, for known fault lines (Xid, CUDA, NCCL, OOM, "
        "NaN loss, storage, throughput drops) and print one line per finding, or with --root one "
        "line per file: its root cause. Exit status 1 if a path could not be read."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")
        parser.add_argument("--format", choices=("text", "json"), default="text")
        parser.add_argument(
            "--year",
            type=int,
            help="Year of syslog and glog times, which carry none (default: the current year, UTC).",
        )
        parser.add_argument(
            "--root",
            action="store_true",
            help="One line per file with findings: the root cause (the most fundamental finding); "
            "the others are its symptoms.",
        )
        parser.add_argument(
            "--engine",
            choices=ENGINES,
            help="Hyperscan (the default where installed) or the pure-Python scanner.",
        )

    def handle(
        self,
        *args,
        paths: list[Path],
        format: str,
        year: int | None,
        root: bool,
        engine: str | None,
        **options,
    ):
        year = year or datetime.now(UTC).year
        failed = 0
        for top in paths:
            for path, error in log_files(top):
                if error is not None:
                    self.stderr.write(error)
                    failed += 1
                    continue
                try:
                    found = _Root()
                    for finding in scan_file(path, year=year, engine=engine):
                        if root:
                            found.add(finding)
                        else:
                            self.stdout.write(_render(path, finding, format))
                    if root and found.finding is not None:
                        self.stdout.write(_render_root(path, found, format))
                except LogFileError as exc:
                    self.stderr.write(str(exc))
                    failed += 1
                except OSError as exc:  # the file went away or broke while being read
                    self.stderr.write(f"cannot read {path}: {exc.strerror or exc}")
                    failed += 1
        if failed:
            raise CommandError(f"{failed} path(s) could not be read", returncode=1)


class _Root:
    """A file's root cause (``root_cause.log_root``), kept as its findings stream by."""

    def __init__(self) -> None:
        self.finding: Finding | None = None
        self.count = 0
        self.categories: set[str] = set()

    def add(self, finding: Finding) -> None:
        self.count += 1
        self.categories.add(finding.category)
        # The root so far first: on a tie the earlier finding stays, as log_root keeps the first.
        self.finding = log_root([self.finding, finding] if self.finding is not None else [finding])


def _render_root(path: Path, root: _Root, format: str) -> str:
    finding = root.finding
    others = sorted(root.categories - {finding.category})
    if format == "json":
        return json.dumps(
            {
                "file": str(path),
                "root": finding.category,
                "signature": finding.signature_id,
                "line": finding.line_no,
                "code": finding.code,
                "severity": finding.severity,
                "findings": root.count,
                "other_categories": others,
                "message": finding.text,
            },
            ensure_ascii=False,
        )
    code = f" {finding.code}" if finding.code else ""
    rest = root.count - 1
    symptoms = f"; {rest} more finding(s){' in ' + ', '.join(others) if others else ''}" if rest else ""
    return (
        f"{path}:{finding.line_no}: root cause {finding.category}{code} [{finding.signature_id}]"
        f"{symptoms}: {finding.text}"
    )


def log_files(root: Path):
    """``(file, None)`` for each file under ``root`` in sorted order, ``(path, message)`` on errors."""
    if not root.is_dir():
        yield root, None  # a missing or unreadable file is reported by scan_file
        return
    errors: list[OSError] = []
    for directory, subdirectories, names in os.walk(root, onerror=errors.append):
        while errors:
            error = errors.pop()
            yield Path(error.filename or directory), f"cannot read {error.filename}: {error.strerror}"
        subdirectories.sort()
        for name in sorted(names):
            path = Path(directory) / name
            if path.is_file():  # sockets, FIFOs and broken links in a log directory are not logs
                yield path, None
    for error in errors:
        yield Path(error.filename or root), f"cannot read {error.filename}: {error.strerror}"


def _render(path: Path, finding: Finding, format: str) -> str:
    node = finding.node or _node_of(path)
    rank = finding.rank if finding.rank is not None else _rank_of(path)
    if format == "json":
        return json.dumps(
            {
                "file": str(path),
                "line": finding.line_no,
                "category": finding.category,
                "code": finding.code,
                "severity": finding.severity,
                "node": node,
                "rank": rank,
                "message": finding.text,
            },
            ensure_ascii=False,
        )
    where = ", ".join(
        part for part in (f"node {node}" if node else "", f"rank {rank}" if rank is not None else "") if part
    )
    code = f" {finding.code}" if finding.code else ""
    located = f" ({where})" if where else ""
    return (
        f"{path}:{finding.line_no}: {finding.severity} {finding.category}{code} "
        f"[{finding.signature_id}]{located}: {finding.text}"
    )


def _node_of(path: Path) -> str | None:
    if path.parent.name == "kern" and path.suffix == ".log":
        return path.stem
    return None


def _rank_of(path: Path) -> int | None:
    match = _RANK_FILE_RE.fullmatch(path.name)
    return int(match[1]) if match else None
