"""MB/s of the fault scanner beside ``grep -E -c`` with the same patterns, on the same log.

Writes a seeded log of realistic training, NCCL and kernel noise (default 512 MB) with about one
fault line per 10,000, taken from the catalog's real example lines
(tests/fixtures/logs/examples.tsv), to a temporary file. Then times ``scan_file`` over it (the
Hyperscan engine, and the pure-Python fallback) and ``grep -E -c -f patterns.txt`` with the same
patterns: every signature's pattern converted to POSIX ERE (``posix_ere``), plus the words of every
throughput metric and every ``after`` literal, which the scanner looks for too (written next to the
log). The noise's throughput is steady, so the scanner reports exactly the fault lines written;
a second, untimed grep with the signatures alone must count the same lines. Each tool runs
``--repeat`` times from the page cache; the best time counts. grep runs with ``LC_ALL=C``, its
fastest locale. No database needed:

    .venv/bin/python bench/scan_logs.py [--mb 512] [--seed 1] [--keep DIR] [--engines hyperscan,python]
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a script from the repository root or from bench/: make the project importable.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from efficiency.analysis.faults.context import METRICS  # noqa: E402
from efficiency.analysis.faults.scanner import AFTER_LITERALS, ENGINES, engine_for, scan_file  # noqa: E402
from efficiency.analysis.faults.signatures import SIGNATURES, Signature  # noqa: E402

EXAMPLES = ROOT / "tests" / "fixtures" / "logs" / "examples.tsv"
FAULT_EVERY_LINES = 10_000
POOL_LINES = 200_000


# ------------------------------------------------------------------------------------------------
# Python regex → POSIX ERE


def posix_ere(signature: Signature) -> str:
    """The signature's pattern as a POSIX ERE matching the same *lines* (GNU grep, C locale).

    Handles the subset the catalog uses: ``(?:``/``(?P<name>`` groups become plain groups, lazy
    quantifiers greedy ones, ``\\S`` a bracket expression, and a lookahead or lookbehind over one
    bracket expression the character it forbids or the line's edge: ``x(?![0-9])`` becomes
    ``x([^0-9]|$)``, ``(?<![A-Za-z])x`` becomes ``(^|[^A-Za-z])x``. Those change where a match
    ends, never which lines match. Anything else raises ``ValueError``.
    """
    return _ere(signature.pattern.pattern)


def _ere(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("(?:", i):
            out.append("(")
            i += 3
        elif pattern.startswith("(?P<", i):
            out.append("(")
            i = pattern.index(">", i) + 1
        elif pattern.startswith(("(?!", "(?<!"), i):
            behind = pattern.startswith("(?<!", i)
            start = i + (4 if behind else 3)
            if pattern[start] != "[":
                raise ValueError(f"unsupported lookaround at {i} in {pattern!r}")
            members, end = _class_members(pattern, start)
            if pattern[end] != ")":
                raise ValueError(f"unsupported lookaround at {i} in {pattern!r}")
            negated = f"[^{members}]"
            out.append(f"(^|{negated})" if behind else f"({negated}|$)")
            i = end + 1
        elif char == "(" and pattern.startswith("(?", i):
            raise ValueError(f"unsupported group at {i} in {pattern!r}")
        elif char == "[":
            members, end = _class_members(pattern, i)
            out.append(f"[{members}]")
            i = end
        elif char in "*+?" and pattern.startswith("?", i + 1):
            out.append(char)  # lazy and greedy match the same lines
            i += 2
        elif char == "\\":
            escaped = pattern[i + 1]
            if escaped == "S":
                out.append("[^[:space:]]")
            elif escaped == "t":
                out.append("\t")
            elif escaped in "()[].*+?|{}^$\\/":
                out.append("\\" + escaped)
            elif escaped in "'\"":
                out.append(escaped)
            else:
                raise ValueError(f"unsupported escape \\{escaped} in {pattern!r}")
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def literal_ere(literal: str) -> str:
    """A plain substring as a POSIX ERE."""
    return "".join("\\" + char if char in "()[].*+?|{}^$\\" else char for char in literal)


def grep_patterns() -> list[str]:
    """What the scanner searches for, as EREs: the signatures, the metrics' words, the after literals."""
    words = [metric.literal.decode() for metric in METRICS] + list(AFTER_LITERALS)
    return [posix_ere(s) for s in SIGNATURES] + [literal_ere(word) for word in dict.fromkeys(words)]


def _class_members(pattern: str, start: int) -> tuple[str, int]:
    """The members of the bracket expression at ``start`` (ERE spelling) and the index after it."""
    i = start + 1
    members = ""
    if pattern[i] == "^":
        members, i = "^", i + 1
    while pattern[i] != "]":
        if pattern[i] == "\\":
            escaped = pattern[i + 1]
            replacement = {"t": "\t", '"': '"', "'": "'", "-": "-"}.get(escaped)
            if replacement is None:
                raise ValueError(f"unsupported escape \\{escaped} in a class of {pattern!r}")
            members += replacement
            i += 2
        else:
            members += pattern[i]
            i += 1
    return members, i + 1


# ------------------------------------------------------------------------------------------------
# The log


def example_lines(*, faults: bool) -> list[str]:
    """The catalog's example lines: fault lines, or (``faults=False``) lines that match nothing."""
    lines = []
    for row in EXAMPLES.read_text(encoding="utf-8").splitlines():
        if not row or row.startswith("#"):
            continue
        signature, _, line = row.split("\t", 2)
        if (signature != "-") == faults:
            lines.append(line)
    return lines


def noise_pool(rng: random.Random, size: int) -> list[str]:
    """Healthy log lines as training jobs, NCCL, launchers and kernels write them."""
    hosts = [f"gpu-node-{n:05d}" for n in range(64)]
    months = ("Nov", "Dec")
    lines = []
    for n in range(size):
        host = rng.choice(hosts)
        pid = rng.randrange(10_000, 3_000_000)
        gpu = rng.randrange(8)
        day, hour, minute, second = (
            rng.randrange(1, 29),
            rng.randrange(24),
            rng.randrange(60),
            rng.randrange(60),
        )
        stamp = f"2026-11-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
        iteration = rng.randrange(1, 250_000)
        kind = rng.random()
        if kind < 0.30:
            loss = 1.7 + 8.8 * (1 + iteration / 300) ** -0.45
            # A healthy run's step time is steady (within a few percent).
            lines.append(
                f" [{stamp}] iteration {iteration:8d}/  250000 | consumed samples: {iteration * 1024:12d} |"
                f" elapsed time per iteration (ms): {rng.uniform(12600, 13400):.1f} |"
                f" learning rate: {rng.uniform(1e-5, 3e-4):.3E} | global batch size:  1024 |"
                f" lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {rng.uniform(0.2, 2):.3f} |"
                " number of skipped iterations:   0 | number of nan iterations:   0 |"
            )
        elif kind < 0.50:
            peer = rng.randrange(8)
            lines.append(
                f"{host}:{pid}:{pid + 61} [{gpu}] NCCL INFO Channel {rng.randrange(32):02d}/0 : "
                f"{gpu}[{gpu}] -> {peer}[{peer}] via P2P/IPC/read"
            )
        elif kind < 0.55:
            lines.append(
                f"{host}:{pid}:{pid + 61} [{gpu}] NCCL INFO comm 0x{rng.getrandbits(48):x} rank {gpu} "
                f"nranks 64 cudaDev {gpu} nvmlDev {gpu} busId {0x18 + gpu * 16:x}000 commId "
                f"0x{rng.getrandbits(64):x} - Init COMPLETE"
            )
        elif kind < 0.58:
            lines.append(
                f"{host}:{pid}:{pid + 61} [{gpu}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB "
                f"[1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:10.16.0.{gpu + 2}<0>"
            )
        elif kind < 0.68:
            uptime = rng.uniform(1, 4e6)
            message = rng.choice(
                (
                    f"mlx5_core 0000:{rng.randrange(16, 250):02x}:00.0: mlx5_pcie_event:301:(pid 0): "
                    "PCIe slot advertised sufficient power (27W).",
                    "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
                    "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, "
                    "skipping further processing",
                    f"CPU{rng.randrange(96)}: Core temperature above threshold, cpu clock throttled",
                    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08  "
                    "Tue Mar  5 22:42:46 UTC 2024",
                )
            )
            lines.append(
                f"{rng.choice(months)} {day:2d} {hour:02d}:{minute:02d}:{second:02d} {host} kernel: "
                f"[{uptime:12.6f}] {message}"
            )
        elif kind < 0.76:
            lines.append(
                f"{{'loss': {rng.uniform(0.5, 3):.4f}, 'grad_norm': {rng.uniform(0.1, 5):.4f}, "
                f"'learning_rate': {rng.uniform(1e-6, 2e-5):.4e}, 'epoch': {rng.uniform(0, 3):.2f}}}"
            )
        elif kind < 0.84:
            done = rng.randrange(500_150)
            lines.append(
                f"Epoch {rng.randrange(4)}:  {done * 100 // 500_150:2d}%|██        | {done}/500150 "
                f"[6:28:43<94:39:17,  1.37it/s, loss={rng.uniform(1, 3):.3g}, v_num=95nc]"
            )
        elif kind < 0.90:
            lines.append(
                f"[{stamp},{rng.randrange(1000):03d}] [INFO] [logging.py:96:log_dist] [Rank 0] "
                f"step={iteration}, skipped=0, lr=[{rng.uniform(1e-6, 3e-5):.6e}], mom=[(0.9, 0.95)]"
            )
        elif kind < 0.95:
            lines.append(
                f"I1130 {hour:02d}:{minute:02d}:{second:02d}.{rng.randrange(10**6):06d} {pid} "
                "torch/distributed/elastic/agent/server/api.py:879] [default] worker group "
                "successfully finished. Waiting 300 seconds for other agents to finish."
            )
        elif kind < 0.999:
            lines.append(
                rng.choice(
                    (
                        "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: "
                        "UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be "
                        "passed explicitly.",
                        f"loading shard /mnt/pfs/datasets/pile/shard-{rng.randrange(99999):05d}.tar "
                        f"({rng.randrange(512, 2048)} samples)",
                        f"saving checkpoint at iteration {iteration:8d} to /mnt/pfs/ckpt/run-17",
                        f"  successfully saved checkpoint at iteration {iteration:8d} to /mnt/pfs/ckpt",
                    )
                )
            )
        else:  # rare healthy lines that contain a prefilter anchor
            lines.append(
                rng.choice(
                    (
                        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/'
                        'multiprocessing/errors/__init__.py", line 346, in wrapper',
                        f"{host}:{pid}:{pid + 61} [{gpu}] NCCL INFO NET/Socket : GPU Direct RDMA "
                        "Disabled for HCA 0 'eth0'",
                        f"{host}:{pid}:{pid + 61} [{gpu}] NCCL INFO NCCL_SOCKET_IFNAME set by "
                        "environment to eth0",
                    )
                )
            )
        if n and n % 50_000 == 0:
            rng.shuffle(hosts)
    return lines


def write_log(path: Path, *, megabytes: int, seed: int) -> tuple[int, int]:
    """Write the benchmark log; return (lines, fault lines)."""
    rng = random.Random(seed)
    pool = noise_pool(rng, POOL_LINES)
    faults = example_lines(faults=True)
    leaked = [line for line in pool if any(s.pattern.search(line) for s in SIGNATURES)]
    if leaked:
        raise SystemExit(f"noise line matches a signature: {leaked[0]!r}")
    target = megabytes * 1_000_000
    written = lines = fault_lines = 0
    with path.open("wb") as handle:
        while written < target:
            batch = rng.choices(pool, k=20_000)
            for index in range(len(batch)):
                if rng.randrange(FAULT_EVERY_LINES) == 0:
                    batch[index] = rng.choice(faults)
                    fault_lines += 1
            data = ("\n".join(batch) + "\n").encode("utf-8")
            handle.write(data)
            written += len(data)
            lines += len(batch)
    return lines, fault_lines


# ------------------------------------------------------------------------------------------------
# Timing


def time_scanner(path: Path, repeat: int, engine: str) -> tuple[int, float]:
    best = float("inf")
    count = 0
    for _ in range(repeat):
        started = time.perf_counter()
        count = sum(1 for _ in scan_file(path, engine=engine))
        best = min(best, time.perf_counter() - started)
    return count, best


def time_grep(path: Path, patterns: Path, repeat: int) -> tuple[int, float]:
    env = {**os.environ, "LC_ALL": "C"}
    best = float("inf")
    count = 0
    for _ in range(repeat):
        started = time.perf_counter()
        result = subprocess.run(
            ["grep", "-E", "-c", "-f", str(patterns), str(path)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        best = min(best, time.perf_counter() - started)
        if result.returncode not in (0, 1):
            raise SystemExit(f"grep failed: {result.stderr.strip()}")
        count = int(result.stdout)
    return count, best


def main() -> None:
    """Write the log, time both scanners over it and print both rates, their ratio and counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=512, help="size of the log in MB (10^6 bytes)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="write the log and patterns here and keep them")
    parser.add_argument(
        "--engines",
        default="hyperscan,python",
        help=f"comma-separated scanner engines to time (of {', '.join(ENGINES)}; the first is compared)",
    )
    args = parser.parse_args()
    engines = [engine_for(name) for name in args.engines.split(",")]

    if shutil.which("grep") is None:
        raise SystemExit("grep not found")
    folder = args.keep or Path(tempfile.mkdtemp(prefix="scan-logs-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    log, patterns = folder / "bench.log", folder / "patterns.txt"
    signatures = folder / "signatures.txt"
    try:
        patterns.write_text("".join(p + "\n" for p in grep_patterns()), encoding="utf-8")
        signatures.write_text("".join(posix_ere(s) + "\n" for s in SIGNATURES), encoding="utf-8")
        started = time.perf_counter()
        lines, fault_lines = write_log(log, megabytes=args.mb, seed=args.seed)
        size = log.stat().st_size
        print(
            f"log: {size / 1e6:.1f} MB, {lines:,} lines, {fault_lines:,} fault lines "
            f"(seed {args.seed}, written in {time.perf_counter() - started:.1f} s)"
        )
        results = {engine: time_scanner(log, args.repeat, engine) for engine in engines}
        matched, grep_s = time_grep(log, patterns, args.repeat)
        fault_matched, _ = time_grep(log, signatures, 1)
        grep_rate = size / grep_s / 1e6
        for engine, (found, seconds) in results.items():
            rate = size / seconds / 1e6
            label = f"scan_file ({engine}):"
            print(f"{label:<26} {found:>9,} findings       in {seconds:6.2f} s = {rate:7.1f} MB/s")
        label = "grep -E -c (same patterns):"
        print(f"{label:<26} {matched:>9,} matching lines in {grep_s:6.2f} s = {grep_rate:7.1f} MB/s")
        for engine, (_, seconds) in results.items():
            print(f"ratio ({engine}): {size / seconds / 1e6 / grep_rate:.2f} of grep")
        counts = {found for found, _ in results.values()}
        agree = counts == {fault_lines} and fault_matched == fault_lines
        print(
            f"counts agree: {agree} (scanner {', '.join(f'{n:,}' for n in sorted(counts))}, "
            f"grep with the signatures alone {fault_matched:,}, written {fault_lines:,})"
        )
        if not agree:
            raise SystemExit(1)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
