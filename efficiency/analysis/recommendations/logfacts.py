"""Read the facts a job's log lines establish: how NCCL moved data, which settings the training
script printed, and when it saved checkpoints. The tuning rules read these facts, never the lines.

**NCCL transport** is judged from the lines that say what carries data between two ranks:
``Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA`` (NCCL ≥ 2.7), ``Channel 00 : 1[1] ->
0[0] via NET/Socket/0`` (2.5-2.6), ``Ring 00 : 35 -> 34 [send] via NET/Socket/0`` (2.4), and within a
node ``via P2P/IPC/read``, ``via P2P/CUMEM``, ``via P2P/direct pointer``, ``via SHM/direct/direct``
or ``via direct shared memory`` (≤ 2.6). Set-up lines are facts of their own but never decide the
transport: every rank prints ``Bootstrap : Using eth0``, and NCCL ≤ 2.4 prints ``NET/Socket : Using
[0]ib0`` before ``NET/IB : Using [0]mlx5_0`` in runs that then use IB. ``NET/IB : Using [RO]; OOB``
(2.25) lists no device: it is not ``ib_devices``. Any net whose name starts with ``IB`` (``IB``,
``IBext``, ``IBext_v8``) counts as IB; ``Socket`` and ``FastSocket`` as sockets; the rest (AWS
``Libfabric``, ``OFI``, TCPX ...) go to ``net_other`` for the rules to weigh.

**Settings** come from argument dumps: Megatron's ``  bf16 ...... True``, Hugging Face's
``TrainingArguments(`` one ``key=value,`` per line, and argparse's ``Namespace(..., num_workers=0,
...)``. The first value printed for a key wins (every rank prints the same dump).

**Checkpoints**: Megatron's ``saving checkpoint at iteration N to ...`` (a ``successfully saved ...``
line counts only when its start line was not seen), Hugging Face's ``Saving model checkpoint to``;
the save cost from Megatron's ``save-checkpoint ....: (min, max)`` timer lines (milliseconds, the
max is kept: every rank waits for the slowest) or from a timestamped start/end pair. Timestamps
without a zone are read as UTC.

Lines are rejected with a handful of substring tests before any regex, so feeding a GB log costs
little more than reading it. Memory is bounded: three evidence lines per kind, 50 checkpoints.
Feeding lines in any chunking, or stopping, storing ``to_dict()`` and resuming with
``LogFactsBuilder.from_facts``, gives the same facts as one pass.
"""

import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from efficiency.analysis.recommendations.evidence import EvidenceLine

MAX_EVIDENCE = 3
MAX_CHECKPOINTS = 50
MAX_TEXT_CHARS = 1000

# A line must hold one of these to be looked at further.
_GATES = ("NCCL", "heckpoint", "num_workers", "pin_memory", "bf16", "fp16", "params_dtype", "for parameters")

_TRANSPORT = re.compile(r"\b(?:Channel|Ring) \d+(?:/\d+)? : .*? via (.+?)\s*$")
_NETWORK = re.compile(r"Using network (.+?)\s*$")
_ENV = re.compile(r"\b(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.*?)\s*$")
_VERSION = re.compile(r"NCCL version:? (\d+\.\d+\.\d+)")
_NNODES = re.compile(r"\bnNodes (\d+)")
_IB_USING = re.compile(r"NET/IB ?: Using \[\d")
# The prefix of the next message, left at the end of a part when messages share a line.
_NEXT_PREFIX = re.compile(r"\s+(?:[\w.-]+:\d+:\d+\s+)?\[\d+\]\s*$")

# Megatron prints "  name ........ value"; argparse and HF print "name=value".
_DOTTED = re.compile(r"\b(num_workers|bf16|fp16|params_dtype) \.{2,} (\S+)\s*$")
_ASSIGNED = re.compile(
    r"(?<![\w.])(dataloader_num_workers|num_workers|dataloader_pin_memory|pin_memory|bf16|fp16)"
    r"=(\d+|True|False|true|false)\b"
)
_PARAMS_DTYPE = re.compile(r"using (torch\.\w+) for parameters")
_DTYPES = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.half": "fp16"}

_SAVE_START = re.compile(r"saving checkpoint at iteration\s+(\d+)")
_SAVE_END = re.compile(r"successfully saved checkpoint (?:from|at) iteration\s+(\d+)")
_HF_SAVE = re.compile(r"Saving model checkpoint to \S")
_SAVE_TIMER = re.compile(r"save-checkpoint \.+: \(?([\d.]+)(?:, ([\d.]+))?\)?")
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
_US_STAMP = re.compile(r"\b(\d\d)/(\d\d)/(\d{4}) (\d\d):(\d\d):(\d\d)\b")


def _line_dict(line: EvidenceLine | None) -> dict | None:
    return None if line is None else line.as_dict()


def _line_from(data: dict | None) -> EvidenceLine | None:
    return None if data is None else EvidenceLine.from_dict(data)


def _pair_dict(pair: tuple | None) -> list | None:
    return None if pair is None else [pair[0], pair[1].as_dict()]


def _pair_from(data: list | None) -> tuple | None:
    return None if data is None else (data[0], EvidenceLine.from_dict(data[1]))


@dataclass
class LogFacts:
    """What a job's logs establish. Evidence lists hold the first lines seen, at most three."""

    net_socket: list[EvidenceLine] = field(default_factory=list)
    net_ib: list[EvidenceLine] = field(default_factory=list)
    gdrdma: list[EvidenceLine] = field(default_factory=list)
    net_other: list[EvidenceLine] = field(default_factory=list)
    p2p: list[EvidenceLine] = field(default_factory=list)
    shm: list[EvidenceLine] = field(default_factory=list)
    network_in_use: dict[str, EvidenceLine] = field(default_factory=dict)
    ib_devices: EvidenceLine | None = None
    ib_no_device: EvidenceLine | None = None
    # "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'" (NCCL ≥ 2.19 says why GDRDMA is off)
    gdr_disabled: EvidenceLine | None = None
    nnodes_max: int | None = None
    nccl_env: dict[str, tuple[str, EvidenceLine]] = field(default_factory=dict)
    nccl_version: str | None = None
    num_workers: tuple[int, EvidenceLine] | None = None
    pin_memory: tuple[bool, EvidenceLine] | None = None
    bf16: tuple[bool, EvidenceLine] | None = None
    fp16: tuple[bool, EvidenceLine] | None = None
    params_dtype: tuple[str, EvidenceLine] | None = None
    checkpoint_saves: list[tuple[float | None, EvidenceLine]] = field(default_factory=list)
    checkpoint_durations_s: list[float] = field(default_factory=list)
    # The last save whose start was seen, (iteration, unix time): pairs it with its end line
    # even when the end arrives in a later feed.
    open_save: tuple[int, float | None] | None = None

    @property
    def n_nodes(self) -> int | None:
        """Nodes in the largest communicator; at least 2 when data crossed a network."""
        if self.nnodes_max is not None:
            return self.nnodes_max
        if self.net_socket or self.net_ib or self.net_other:
            return 2
        return None

    @property
    def transport(self) -> str | None:
        """``ib``, ``socket``, ``mixed`` (both), ``other`` (another net), ``none`` (P2P/SHM only,
        no network carried data) or None (no channel lines at all)."""
        if self.net_ib and self.net_socket:
            return "mixed"
        if self.net_ib:
            return "ib"
        if self.net_socket:
            return "socket"
        if self.net_other:
            return "other"
        if self.p2p or self.shm:
            return "none"
        return None

    @property
    def precision(self) -> tuple[str, EvidenceLine] | None:
        """``bf16``, ``fp16`` or ``fp32`` with the line that decided: a flag printed True, else the
        parameter dtype, else fp32 when the dump shows both flags False."""
        for name, flag in (("bf16", self.bf16), ("fp16", self.fp16)):
            if flag is not None and flag[0]:
                return name, flag[1]
        if self.params_dtype is not None:
            return self.params_dtype
        if self.bf16 is not None and self.fp16 is not None:
            return "fp32", max(self.bf16[1], self.fp16[1], key=lambda line: (line.file, line.line))
        return None

    @property
    def checkpoint_cost_s(self) -> float | None:
        """Median seconds one checkpoint save took, when timer lines or timestamped start/end
        pairs show it."""
        return statistics.median(self.checkpoint_durations_s) if self.checkpoint_durations_s else None

    def to_dict(self) -> dict:
        """A JSON-able form; ``from_dict`` reads it back."""

        def lines(items: list[EvidenceLine]) -> list[dict]:
            return [line.as_dict() for line in items]

        return {
            "net_socket": lines(self.net_socket),
            "net_ib": lines(self.net_ib),
            "gdrdma": lines(self.gdrdma),
            "net_other": lines(self.net_other),
            "p2p": lines(self.p2p),
            "shm": lines(self.shm),
            "network_in_use": {name: line.as_dict() for name, line in self.network_in_use.items()},
            "ib_devices": _line_dict(self.ib_devices),
            "ib_no_device": _line_dict(self.ib_no_device),
            "gdr_disabled": _line_dict(self.gdr_disabled),
            "nnodes_max": self.nnodes_max,
            "nccl_env": {key: [value, line.as_dict()] for key, (value, line) in self.nccl_env.items()},
            "nccl_version": self.nccl_version,
            "num_workers": _pair_dict(self.num_workers),
            "pin_memory": _pair_dict(self.pin_memory),
            "bf16": _pair_dict(self.bf16),
            "fp16": _pair_dict(self.fp16),
            "params_dtype": _pair_dict(self.params_dtype),
            "checkpoint_saves": [[at, line.as_dict()] for at, line in self.checkpoint_saves],
            "checkpoint_durations_s": list(self.checkpoint_durations_s),
            "open_save": None if self.open_save is None else list(self.open_save),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "LogFacts":
        def lines(key: str) -> list[EvidenceLine]:
            return [EvidenceLine.from_dict(item) for item in data.get(key, [])]

        open_save = data.get("open_save")
        return cls(
            net_socket=lines("net_socket"),
            net_ib=lines("net_ib"),
            gdrdma=lines("gdrdma"),
            net_other=lines("net_other"),
            p2p=lines("p2p"),
            shm=lines("shm"),
            network_in_use={
                name: EvidenceLine.from_dict(item) for name, item in data.get("network_in_use", {}).items()
            },
            ib_devices=_line_from(data.get("ib_devices")),
            ib_no_device=_line_from(data.get("ib_no_device")),
            gdr_disabled=_line_from(data.get("gdr_disabled")),
            nnodes_max=data.get("nnodes_max"),
            nccl_env={
                key: (str(value), EvidenceLine.from_dict(line))
                for key, (value, line) in data.get("nccl_env", {}).items()
            },
            nccl_version=data.get("nccl_version"),
            num_workers=_pair_from(data.get("num_workers")),
            pin_memory=_pair_from(data.get("pin_memory")),
            bf16=_pair_from(data.get("bf16")),
            fp16=_pair_from(data.get("fp16")),
            params_dtype=_pair_from(data.get("params_dtype")),
            checkpoint_saves=[
                (at, EvidenceLine.from_dict(line)) for at, line in data.get("checkpoint_saves", [])
            ],
            checkpoint_durations_s=[float(value) for value in data.get("checkpoint_durations_s", [])],
            open_save=None if open_save is None else (int(open_save[0]), open_save[1]),
        )


def _clip(text: str, at: int) -> str:
    """The line, or a window of it around ``at`` when a progress bar made it long."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    start = max(0, min(at - MAX_TEXT_CHARS // 2, len(text) - MAX_TEXT_CHARS))
    return text[start : start + MAX_TEXT_CHARS]


def _unix_time(text: str) -> float | None:
    """The first ``YYYY-MM-DD HH:MM:SS[.frac]`` (or ``MM/DD/YYYY HH:MM:SS``) in the line, as UTC."""
    match = _STAMP.search(text)
    if match:
        year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
        fraction = float("0." + match[7]) if match[7] else 0.0
    else:
        match = _US_STAMP.search(text)
        if not match:
            return None
        month, day, year, hour, minute, second = (int(part) for part in match.groups())
        fraction = 0.0
    try:
        stamp = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None
    return stamp.timestamp() + fraction


# A count or a duration a log can really print: longer digit strings are junk (Python refuses to
# turn more than 4,300 digits into an int, and a float of 400 digits is inf, which JSON cannot hold).
_MAX_DIGITS = 18


def _count(raw: str) -> int | None:
    """A non-negative integer of at most 18 digits, else None."""
    raw = raw.strip()
    return int(raw) if raw.isdigit() and len(raw) <= _MAX_DIGITS else None


def _seconds(raw: str) -> float | None:
    """A finite decimal number of sane length (``1234.5``), else None (``.``, ``1.2.3``, 400 digits)."""
    raw = raw.strip()
    if len(raw) > _MAX_DIGITS + 1:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


class LogFactsBuilder:
    """Fed lines in order (possibly many files, in chunks across calls); ``facts()`` any time."""

    def __init__(self) -> None:
        self._facts = LogFacts()

    @classmethod
    def from_facts(cls, facts: LogFacts) -> "LogFactsBuilder":
        """Resume where a stored ``LogFacts`` left off."""
        builder = cls()
        builder._facts = LogFacts.from_dict(facts.to_dict())
        return builder

    def facts(self) -> LogFacts:
        """A copy of the facts so far; feeding on does not change it."""
        return LogFacts.from_dict(self._facts.to_dict())

    def feed_text(self, file: str, first_line_no: int, text: str) -> None:
        """Feed a chunk of complete lines; ``first_line_no`` is the 1-based number of its first."""
        if not any(gate in text for gate in _GATES):
            return
        for offset, line in enumerate(text.split("\n")):
            if line:
                self.feed(file, first_line_no + offset, line)

    def feed(self, file: str, line_no: int, text: str) -> None:
        """Feed one line (without its newline)."""
        if "NCCL" in text:
            self._nccl(file, line_no, text)
        if "heckpoint" in text:
            self._checkpoint(file, line_no, text)
        if (
            "num_workers" in text
            or "pin_memory" in text
            or "bf16" in text
            or "fp16" in text
            or "params_dtype" in text
            or "for parameters" in text
        ):
            self._settings(file, line_no, text)

    # NCCL ------------------------------------------------------------------------------------

    def _nccl(self, file: str, line_no: int, text: str) -> None:
        facts = self._facts
        text = text.rstrip("\r")
        # Some reports paste many messages onto one line ("[0] NCCL INFO a [0] NCCL INFO b").
        parts = [text]
        if text.count("NCCL INFO ") > 1:
            parts = [_NEXT_PREFIX.sub("", part) for part in text.split("NCCL INFO ")]
        for part in parts:
            if " via " in part:
                self._channel(file, line_no, text, part)
            elif "set " in part and "NCCL_" in part:
                match = _ENV.search(part)
                if match and match[1] not in facts.nccl_env:
                    value = match[2].removesuffix(".") if match[2] != "." else match[2]
                    line = EvidenceLine(file, line_no, _clip(text, text.find(match[1])))
                    facts.nccl_env[match[1]] = (value, line)
            elif "Using network" in part:
                match = _NETWORK.search(part)
                if match and match[1] not in facts.network_in_use:
                    facts.network_in_use[match[1]] = EvidenceLine(file, line_no, _clip(text, 0))
            elif "NET/IB" in part:
                if facts.ib_no_device is None and "No device found" in part:
                    facts.ib_no_device = EvidenceLine(file, line_no, _clip(text, 0))
                elif facts.gdr_disabled is None and "GPU Direct RDMA Disabled" in part:
                    facts.gdr_disabled = EvidenceLine(file, line_no, _clip(text, 0))
                elif facts.ib_devices is None and _IB_USING.search(part):
                    facts.ib_devices = EvidenceLine(file, line_no, _clip(text, 0))
            elif "nNodes" in part:
                match = _NNODES.search(part)
                if match:
                    nodes = _count(match[1])
                    if nodes is not None:
                        facts.nnodes_max = max(nodes, facts.nnodes_max or 0)
            if facts.nccl_version is None and "version" in part:
                match = _VERSION.search(part)
                if match:
                    facts.nccl_version = match[1]

    def _channel(self, file: str, line_no: int, text: str, part: str) -> None:
        match = _TRANSPORT.search(part)
        if not match:
            return
        facts = self._facts
        carrier = match[1]
        line = EvidenceLine(file, line_no, _clip(text, text.find(" via ")))

        def keep(kind: list[EvidenceLine]) -> None:
            if len(kind) < MAX_EVIDENCE:
                kind.append(line)

        if carrier.startswith("NET/"):
            name = carrier[4:].split("/", 1)[0]
            if name.startswith("IB"):
                keep(facts.net_ib)
            elif "Socket" in name:
                keep(facts.net_socket)
            else:
                keep(facts.net_other)
            if "/GDRDMA" in carrier:
                keep(facts.gdrdma)
        elif carrier.startswith("P2P"):
            keep(facts.p2p)
        elif carrier.startswith(("SHM", "direct shared memory")):
            keep(facts.shm)

    # Settings --------------------------------------------------------------------------------

    def _settings(self, file: str, line_no: int, text: str) -> None:
        facts = self._facts
        text = text.rstrip("\r")
        found: list[tuple[str, str, int]] = []
        match = _DOTTED.search(text)
        if match:
            found.append((match[1], match[2], match.start(1)))
        found.extend((m[1], m[2], m.start(1)) for m in _ASSIGNED.finditer(text))
        if "for parameters" in text:
            match = _PARAMS_DTYPE.search(text)
            if match:
                found.append(("params_dtype", match[1], match.start(1)))
        for key, raw, at in found:
            line = EvidenceLine(file, line_no, _clip(text, at))
            if key.endswith("num_workers"):
                if facts.num_workers is None and (workers := _count(raw)) is not None:
                    facts.num_workers = (workers, line)
            elif key.endswith("pin_memory"):
                if facts.pin_memory is None and raw.lower() in ("true", "false"):
                    facts.pin_memory = (raw.lower() == "true", line)
            elif key == "params_dtype":
                if facts.params_dtype is None and raw in _DTYPES:
                    facts.params_dtype = (_DTYPES[raw], line)
            elif raw.lower() in ("true", "false"):
                if key == "bf16" and facts.bf16 is None:
                    facts.bf16 = (raw.lower() == "true", line)
                elif key == "fp16" and facts.fp16 is None:
                    facts.fp16 = (raw.lower() == "true", line)

    # Checkpoints -----------------------------------------------------------------------------

    def _checkpoint(self, file: str, line_no: int, text: str) -> None:
        facts = self._facts
        text = text.rstrip("\r")
        if "save-checkpoint" in text:
            match = _SAVE_TIMER.search(text)
            if match and len(facts.checkpoint_durations_s) < MAX_CHECKPOINTS:
                slowest_ms = _seconds(match[2] or match[1])
                if slowest_ms is not None:
                    facts.checkpoint_durations_s.append(slowest_ms / 1000)
            return
        start = _SAVE_START.search(text)
        end = None if start else _SAVE_END.search(text)
        hf = None if start or end else _HF_SAVE.search(text)
        if not (start or end or hf):
            return
        at = _unix_time(text)
        if end:
            iteration = _count(end[1])
            if facts.open_save is not None and facts.open_save[0] == iteration:
                started = facts.open_save[1]
                facts.open_save = None
                paired = started is not None and at is not None and at >= started
                if paired and len(facts.checkpoint_durations_s) < MAX_CHECKPOINTS:
                    facts.checkpoint_durations_s.append(at - started)
                return
        elif start:
            iteration = _count(start[1])
            if iteration is None:
                return
            facts.open_save = (iteration, at)
        match = start or end or hf
        if len(facts.checkpoint_saves) < MAX_CHECKPOINTS:
            facts.checkpoint_saves.append((at, EvidenceLine(file, line_no, _clip(text, match.start()))))


def log_facts(lines: Iterable[tuple[str, int, str]]) -> LogFacts:
    """The facts of ``(file, line_no, text)`` lines, in one pass."""
    builder = LogFactsBuilder()
    for file, line_no, text in lines:
        builder.feed(file, line_no, text)
    return builder.facts()
