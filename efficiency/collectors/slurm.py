"""Slurm job records: ``sacct --parsable2`` for job history, ``squeue`` for pending work; and the
node list (``scontrol show nodes``, ``sinfo``) for inventory discovery.

Slurm prints times in the cluster's local time without a zone, so both parsers take the
cluster's ``tzinfo`` (a ``zoneinfo.ZoneInfo``) and return timezone-aware UTC datetimes.

sacct rows are read by the names in their header line, never by position, so a site that adds
columns to the format still parses. Job steps (``123.batch``, ``123.extern``, ``123.0``) are
skipped: the portal counts jobs, and a step's resources are already part of its job's
allocation.

squeue has no header in the form the portal runs it (``squeue_command()``)::

    squeue -h -t PENDING -o "%i|%j|%a|%u|%T|%V|%b|%D|%r"

that is ``jobid|name|account|user|state|submit_time|tres_per_node|nodes|reason``. ``%b`` is
the per-node request (``gres/gpu:8``, ``gres:gpu:h100:8``, ``N/A``), so the job's GPU demand is
that times ``%D``. A job that asked for GPUs per job (``--gpus=16``) instead of per node shows
``N/A`` there and counts as 0 GPUs: squeue's short format has no field for the per-job request.
"""

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, tzinfo

from efficiency.collectors.nodes import MAX_GPUS_PER_NODE, ObservedGpu, ObservedNode, clip_labels
from efficiency.collectors.records import JobRecord, ParseOutcome
from efficiency.redaction import config_redact

# The fields the portal asks sacct for; parse_sacct reads whatever header comes back, so this
# list can grow without touching the parser.
SACCT_FORMAT = ",".join(
    (
        "JobID",
        "JobName",
        "Account",
        "User",
        "Partition",
        "State",
        "Submit",
        "Start",
        "End",
        "Elapsed",
        "NNodes",
        "AllocTRES",
        "ReqTRES",
        "NodeList",
        "ExitCode",
    )
)

SQUEUE_FORMAT = "%i|%j|%a|%u|%T|%V|%b|%D|%r"
SQUEUE_FIELD_COUNT = 9

# Larger expansions are refused: a typo such as ``gpu-[1-9999999]`` must not exhaust memory.
MAX_HOSTLIST_HOSTS = 100_000

REQUIRED_SACCT_FIELDS = ("jobid", "state", "submit")
# Columns whose value a user writes freely, so it may contain the "|" sacct separates fields
# with. A job name with "|" is recovered when JobName is the only such column in the output.
FREE_TEXT_SACCT_FIELDS = frozenset(
    {"jobname", "comment", "admincomment", "systemcomment", "workdir", "submitline", "constraints", "wckey"}
)
_SACCT_DISPLAY = {"jobid": "JobID", "state": "State", "submit": "Submit"}

# Slurm job states (``squeue --help``, ``sacct --helpstate``) to efficiency.choices.JobState.
SLURM_STATES: Mapping[str, str] = {
    "PENDING": "pending",
    "REQUEUED": "pending",  # back in the queue; it will run again under the same id
    "RUNNING": "running",
    "SUSPENDED": "running",  # still holds its allocation, so it still occupies its GPUs
    "COMPLETED": "completed",
    "FAILED": "failed",
    "OUT_OF_MEMORY": "failed",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "PREEMPTED": "preempted",
    "NODE_FAIL": "node_fail",
    "BOOT_FAIL": "node_fail",
}

# 123, 123_4 (array task), 123_[5-9%2] (pending array tasks), 123+0 (het job component).
_JOB_ID = re.compile(r"(?P<job>\d+)(?:_(?P<task>\d+|\[[^\[\]]+\]))?(?:\+(?P<het>\d+))?")
_NO_TIME = frozenset({"", "unknown", "none", "n/a"})
_NO_NODES = frozenset({"", "none assigned", "(null)", "n/a"})
_RANGE = re.compile(r"(?P<low>\d+)(?:-(?P<high>\d+))?")
_ELAPSED = re.compile(r"(?:(?P<days>\d+)-)?(?:(?P<hours>\d+):)?(?P<minutes>\d+):(?P<seconds>\d+)(?:\.\d+)?")


class _BadRow(ValueError):
    """A row that cannot become a record; the message is the rejection reason."""


def sacct_command(since: datetime, until: datetime, *, timezone: tzinfo) -> list[str]:
    """The sacct argv that lists the jobs of the window ``[since, until)``, with a header.

    sacct reads ``-S``/``-E`` in the cluster's local time and accepts no offset, so the
    timezone-aware bounds are converted to ``timezone`` and printed without one. ``--truncate``
    is left out on purpose: it would clip Start/End to the window and distort job durations.
    """
    if since.tzinfo is None or until.tzinfo is None:
        raise ValueError("sacct_command needs timezone-aware since/until")
    return [
        "sacct",
        "--parsable2",
        "--allusers",
        "--allocations",
        "-S",
        _slurm_time_text(since, timezone),
        "-E",
        _slurm_time_text(until, timezone),
        f"--format={SACCT_FORMAT}",
    ]


def squeue_command() -> list[str]:
    """The squeue argv whose output ``parse_squeue`` reads: pending jobs, no header."""
    return ["squeue", "-h", "-t", "PENDING", "-o", SQUEUE_FORMAT]


def parse_sacct(text: str, *, timezone: tzinfo) -> ParseOutcome[JobRecord]:
    """Turn ``sacct --parsable2`` output (header line first) into job records.

    Required header fields: JobID, State, Submit. Used when present: JobName, Account, User,
    Partition, Start, End, Elapsed, NNodes/AllocNodes, AllocTRES (ReqTRES when AllocTRES is
    empty, as for a pending job), NodeList, ExitCode, Reason (kept as a pending job's
    ``pending_reason``, as squeue's); other columns are ignored. Output of the
    older ``--parsable`` (a ``|`` after the last field) is read too. A job name holding ``|``
    (sacct does not escape it) is put back together when JobName is the only free-text column.
    """
    outcome = ParseOutcome[JobRecord]()
    lines = _lines(text)
    header_index = next((i for i, line in enumerate(lines) if line.strip()), None)
    if header_index is None:
        return outcome
    header_line = lines[header_index].lstrip("\ufeff")
    trailing_bar = header_line.endswith("|")
    names = [name.strip().lower() for name in _split_fields(header_line, trailing_bar)]
    missing = [field for field in REQUIRED_SACCT_FIELDS if field not in names]
    if missing:
        outcome.reject(
            "sacct header lacks required field(s) " + ", ".join(_SACCT_DISPLAY[f] for f in missing),
            header_line,
            header_index + 1,
        )
        return outcome
    free_text = [name for name in names if name in FREE_TEXT_SACCT_FIELDS]
    for index in range(header_index + 1, len(lines)):
        line = lines[index]
        line_no = index + 1
        if not line.strip():
            continue
        if "\x00" in line:
            # PostgreSQL text cannot hold NUL; such a row would fail the whole ingest later.
            outcome.reject("row contains a NUL character", line, line_no)
            continue
        fields = _split_fields(line, trailing_bar)
        if len(fields) > len(names) and free_text == ["jobname"]:
            # parsable2 does not escape "|": the extra fields belong to the job name, the only
            # column that holds free text, as in parse_squeue.
            at, extra = names.index("jobname"), len(fields) - len(names)
            fields[at : at + extra + 1] = ["|".join(fields[at : at + extra + 1])]
        if len(fields) != len(names):
            where = (
                f" ({', '.join(_display(n) for n in free_text)} may hold '|')"
                if free_text and len(fields) > len(names)
                else ""
            )
            outcome.reject(
                f"expected {len(names)} fields as in the header, got {len(fields)}{where}", line, line_no
            )
            continue
        row = dict(zip(names, fields, strict=True))
        if "." in row["jobid"]:
            continue  # a job step, not a job
        try:
            outcome.records.append(_sacct_record(row, timezone))
        except _BadRow as error:
            outcome.reject(str(error), line, line_no)
    return outcome


def parse_squeue(text: str, *, timezone: tzinfo) -> ParseOutcome[JobRecord]:
    """Turn the output of ``squeue_command()`` into pending job records.

    Each record's config holds ``pending_reason`` (``Priority``, ``Resources``, ...). A job name
    containing ``|`` is recovered: the name is the only free-text field, so the fields around it
    are fixed.
    """
    outcome = ParseOutcome[JobRecord]()
    for index, line in enumerate(_lines(text)):
        line_no = index + 1
        if not line.strip():
            continue
        if "\x00" in line:
            outcome.reject("row contains a NUL character", line, line_no)
            continue
        fields = line.split("|")
        if index == 0 and fields[0].strip().upper() == "JOBID":
            continue  # run without -h: a header, not a job
        if len(fields) < SQUEUE_FIELD_COUNT:
            outcome.reject(
                f"expected {SQUEUE_FIELD_COUNT} fields ({SQUEUE_FORMAT}), got {len(fields)}", line, line_no
            )
            continue
        # Fields after the name are fixed, so extra fields belong to the name.
        tail = len(fields) - (SQUEUE_FIELD_COUNT - 2)
        job_id, name = fields[0].strip(), "|".join(fields[1:tail])
        account, user, state, submit, tres, nodes, reason = fields[tail:]
        try:
            record = _squeue_record(job_id, name, account, user, state, submit, tres, nodes, reason, timezone)
        except _BadRow as error:
            outcome.reject(str(error), line, line_no)
            continue
        outcome.records.append(record)
    return outcome


def expand_hostlist(expression: str) -> tuple[str, ...]:
    """Expand a Slurm hostlist (``gpu-[001-004,007]``, ``node[1-3]-ib``, ``a,b``) to hostnames.

    Zero padding follows the low end of each range, as in Slurm: ``[08-10]`` gives 08, 09, 10
    and ``[8-10]`` gives 8, 9, 10. Several bracket groups in one name multiply out
    (``r[1-2]n[1-2]`` gives r1n1, r1n2, r2n1, r2n2). ``None assigned`` and "" give no hosts.
    Raises ``ValueError`` for a malformed expression or one of more than ``MAX_HOSTLIST_HOSTS``.
    """
    if expression.strip().lower() in _NO_NODES:
        return ()
    hosts: list[str] = []
    for pattern in _split_top_level(expression.strip()):
        hosts.extend(_expand_pattern(pattern, MAX_HOSTLIST_HOSTS - len(hosts)))
    return tuple(hosts)


def _display(name: str) -> str:
    return {"jobname": "JobName", "workdir": "WorkDir", "submitline": "SubmitLine"}.get(name, name.title())


def _lines(text: str) -> list[str]:
    # Not str.splitlines(): it also splits on U+2028, U+0085 and friends, which may sit inside
    # a non-ASCII job name; Slurm ends rows with "\n" only.
    return [line.removesuffix("\r") for line in text.split("\n")]


# What a site's job_submit plugin may record about a job's setup in AdminComment, as a JSON object
# (sites already keep JSON there: Princeton's jobstats writes its summary to AdminComment): the
# container image, environment, mounts, dataset cache mode and command line the config audit reads.
ADMIN_COMMENT_KEYS = ("image", "env", "mounts", "storage_cache_mode", "launcher_args")
MAX_ADMIN_COMMENT_CHARS = 64_000


def _admin_comment_config(text: str) -> dict[str, object]:
    """The config snapshot keys of a JSON AdminComment, redacted; anything else (free text, other
    JSON, a value of the wrong type, an oversized comment) contributes nothing."""
    text = text.strip()
    if not text.startswith("{") or len(text) > MAX_ADMIN_COMMENT_CHARS:
        return {}
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's limit
        return {}
    if not isinstance(data, dict):
        return {}
    kinds = {"image": str, "env": dict, "mounts": list, "storage_cache_mode": str, "launcher_args": list}
    picked = {key: data[key] for key in ADMIN_COMMENT_KEYS if isinstance(data.get(key), kinds[key])}
    if isinstance(picked.get("env"), dict):
        picked["env"] = {str(k): str(v) for k, v in picked["env"].items() if isinstance(v, str | int | float)}
    for key in ("mounts", "launcher_args"):
        if key in picked:
            picked[key] = [str(item) for item in picked[key] if isinstance(item, str | int | float)]
    picked = config_redact(picked)
    try:  # a lone surrogate ("\ud800") is text the database cannot store: the comment counts for nothing
        json.dumps(picked, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return {}
    return picked


def _no_constant(name: str):
    """NaN and Infinity are not JSON: a comment holding them counts for nothing."""
    raise ValueError(f"{name} is not a JSON value")


def _split_fields(line: str, trailing_bar: bool) -> list[str]:
    if trailing_bar and line.endswith("|"):
        line = line[:-1]
    return line.split("|")


def _sacct_record(row: Mapping[str, str], timezone: tzinfo) -> JobRecord:
    job_id = row["jobid"].strip()
    config: dict[str, object] = _job_id_config(job_id)
    state = _slurm_state(row["state"], "State")
    submitted = _slurm_time(row["submit"], timezone, "Submit")
    if submitted is None:
        raise _BadRow(f"Submit is {row['submit']!r}, a job needs a submit time")
    tres_column = "AllocTRES"
    tres = row.get("alloctres", "").strip()
    if not tres:
        tres_column, tres = "ReqTRES", row.get("reqtres", "").strip()
    gpu_count, gpu_model = _gpus_from_tres(tres, tres_column)
    node_list = row.get("nodelist", "")
    try:
        node_names = expand_hostlist(node_list)
    except ValueError as error:
        raise _BadRow(f"NodeList {node_list!r}: {error}") from error
    node_count = _node_count(row, len(node_names))
    if partition := row.get("partition", "").strip():
        config["partition"] = partition
    elapsed_s = _elapsed_s(row.get("elapsed", ""))
    if elapsed_s is not None:
        config["elapsed_s"] = elapsed_s
    config.update(_admin_comment_config(row.get("admincomment", "")))
    # Reason is the last reason the job was blocked: only a waiting job's is current.
    if state == "pending" and (reason := row.get("reason", "").strip()):
        config["pending_reason"] = reason
    started_at = _slurm_time(row.get("start", ""), timezone, "Start")
    # Slurm 22.05 stamps a job cancelled in the queue with Start = End = the cancel time (Elapsed
    # 00:00:00, NodeList "None assigned"): it never ran, so it has no start.
    if state == "cancelled" and not node_names:
        started_at = None
    return JobRecord(
        source="slurm",
        external_id=job_id,
        account=row.get("account", "").strip(),
        user_name=row.get("user", "").strip(),
        name=row.get("jobname", ""),
        state=state,
        gpu_count=gpu_count,
        submitted_at=submitted,
        started_at=started_at,
        ended_at=_slurm_time(row.get("end", ""), timezone, "End"),
        gpu_model=gpu_model,
        node_count=node_count,
        node_names=node_names,
        config=config,
        exit_code=row.get("exitcode", "").strip(),
    )


def _squeue_record(
    job_id: str,
    name: str,
    account: str,
    user: str,
    state_text: str,
    submit: str,
    tres: str,
    nodes: str,
    reason: str,
    timezone: tzinfo,
) -> JobRecord:
    config: dict[str, object] = _job_id_config(job_id)
    state = _slurm_state(state_text, "state (%T)")
    if state != "pending":
        raise _BadRow(f"state (%T) is {state_text.strip()!r}; only PENDING jobs are read from squeue")
    submitted = _slurm_time(submit, timezone, "submit time (%V)")
    if submitted is None:
        raise _BadRow(f"submit time (%V) is {submit!r}, a job needs a submit time")
    per_node_gpus, gpu_model = _gpus_from_tres_per_node(tres)
    try:
        node_count = int(nodes.strip())
    except ValueError:
        raise _BadRow(f"nodes (%D) {nodes!r} is not a whole number") from None
    config["pending_reason"] = reason.strip()
    return JobRecord(
        source="slurm",
        external_id=job_id,
        account=account.strip(),
        user_name=user.strip(),
        name=name,
        state=state,
        gpu_count=per_node_gpus * node_count,
        submitted_at=submitted,
        gpu_model=gpu_model,
        node_count=node_count,
        config=config,
    )


def _job_id_config(job_id: str) -> dict[str, object]:
    """Validate a job id and describe its array or het-job parts for grouping later."""
    match = _JOB_ID.fullmatch(job_id)
    if match is None:
        raise _BadRow(f"JobID {job_id!r} is not a Slurm job id (123, 123_4, 123_[5-9], 123+0)")
    config: dict[str, object] = {}
    if match["task"] is not None:
        config["array_job_id"] = match["job"]
        config["array_task"] = match["task"]
    if match["het"] is not None:
        config["het_job_id"] = match["job"]
        config["het_offset"] = int(match["het"])
    return config


def _slurm_state(text: str, column: str) -> str:
    # "CANCELLED by 1000" names who cancelled; a trailing "+" marks a state sacct truncated.
    words = text.split()
    word = words[0].rstrip("+").upper() if words else ""
    state = SLURM_STATES.get(word)
    if state is None:
        raise _BadRow(f"unknown Slurm state {text.strip()!r} in {column}")
    return state


def _slurm_time(text: str, timezone: tzinfo, column: str) -> datetime | None:
    value = text.strip()
    if value.lower() in _NO_TIME:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _BadRow(f"{column} {value!r} is not a Slurm time (YYYY-MM-DDTHH:MM:SS)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # year 1 east of UTC, year 9999 west of it
        raise _BadRow(f"{column} {value!r} is out of range in UTC") from None


def _slurm_time_text(moment: datetime, timezone: tzinfo) -> str:
    return moment.astimezone(timezone).replace(tzinfo=None).isoformat(timespec="seconds")


def _gpus_from_tres(tres: str, column: str) -> tuple[int, str]:
    """GPU count and model from ``billing=8,cpu=64,gres/gpu:h100=8,gres/gpu=8,mem=500G,node=1``.

    Slurm usually lists the untyped total and each typed count, so the untyped total wins and
    the typed counts are summed only when it is absent. ``gres/gpumem`` and ``gres/gpuutil``
    are other TRES, not GPUs.
    """
    total: int | None = None
    typed: dict[str, int] = {}
    for item in tres.split(","):
        key, _, value = item.strip().partition("=")
        if key != "gres/gpu" and not key.startswith("gres/gpu:"):
            continue
        try:
            count = int(value)
        except ValueError:
            raise _BadRow(f"{column} {key}={value!r} is not a whole number of GPUs") from None
        if key == "gres/gpu":
            total = count
        else:
            gpu_type = key.removeprefix("gres/gpu:")
            typed[gpu_type] = typed.get(gpu_type, 0) + count
    count = total if total is not None else sum(typed.values())
    return count, ",".join(sorted(typed))


def _gpus_from_tres_per_node(tres: str) -> tuple[int, str]:
    """Per-node GPUs and model from squeue ``%b``: ``gres/gpu:8``, ``gres:gpu:h100:8``, ``N/A``."""
    count = 0
    models: set[str] = set()
    for item in tres.split(","):
        # Slurm 23.02+ writes "gres/gpu:8", older releases "gres:gpu:8"; a bound job may carry
        # an index suffix such as "(IDX:0-7)".
        spec = item.strip().split("(", 1)[0]
        spec = spec.removeprefix("gres/").removeprefix("gres:")
        parts = spec.replace("=", ":").split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) > 1 and parts[-1].isdigit():
            count += int(parts.pop())
        else:
            count += 1  # "gpu" or "gpu:h100" without a count asks for one GPU
        if len(parts) > 2:
            raise _BadRow(f"tres_per_node (%b) {tres!r} is not a GPU request such as gres/gpu:8")
        if len(parts) == 2:
            models.add(parts[1])
    return count, ",".join(sorted(models))


def _node_count(row: Mapping[str, str], listed: int) -> int:
    for column, key in (("NNodes", "nnodes"), ("AllocNodes", "allocnodes")):
        value = row.get(key, "").strip()
        if not value:
            continue
        # A pending job that asked for a range of nodes shows "2-4": count the minimum.
        match = _RANGE.fullmatch(value)
        if match is None:
            raise _BadRow(f"{column} {value!r} is not a node count")
        count = int(match["low"])
        # AllocNodes is 0 for a job that never started; NNodes still shows what it asked for.
        if count or key == "nnodes":
            return count
    return listed


def _elapsed_s(text: str) -> int | None:
    match = _ELAPSED.fullmatch(text.strip())
    if match is None:
        return None
    days, hours = int(match["days"] or 0), int(match["hours"] or 0)
    return ((days * 24 + hours) * 60 + int(match["minutes"])) * 60 + int(match["seconds"])


def _split_top_level(expression: str) -> list[str]:
    """Split a hostlist on the commas outside brackets."""
    parts: list[str] = []
    depth = 0
    start = 0
    for position, char in enumerate(expression):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError("nested brackets")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("']' without '['")
        elif char == "," and depth == 0:
            parts.append(expression[start:position])
            start = position + 1
    if depth:
        raise ValueError("'[' without ']'")
    parts.append(expression[start:])
    for part in parts:
        if not part or any(char.isspace() for char in part):
            raise ValueError(f"bad host name {part!r}")
    return parts


def _expand_pattern(pattern: str, room: int) -> list[str]:
    """Expand one host pattern such as ``rack[1-2]-gpu[01-08]`` (at most ``room`` hosts)."""
    # re.split with a capture group alternates literal text and bracket contents.
    pieces = re.split(r"\[([^\[\]]*)\]", pattern)
    choices: list[list[str]] = []
    size = 1
    for position, piece in enumerate(pieces):
        if position % 2 == 0:
            choices.append([piece])
            continue
        numbers = _expand_ranges(piece, room)
        size *= len(numbers)
        if size > room:
            raise ValueError(f"expands to more than {MAX_HOSTLIST_HOSTS} hosts")
        choices.append(numbers)
    return ["".join(parts) for parts in itertools.product(*choices)]


def _expand_ranges(ranges: str, room: int) -> list[str]:
    numbers: list[str] = []
    for item in ranges.split(","):
        match = _RANGE.fullmatch(item.strip())
        if match is None:
            raise ValueError(f"bad range {item!r}")
        low_text = match["low"]
        low = int(low_text)
        high = int(match["high"]) if match["high"] is not None else low
        if high < low:
            raise ValueError(f"range {item!r} runs backwards")
        if len(numbers) + high - low + 1 > room:
            raise ValueError(f"expands to more than {MAX_HOSTLIST_HOSTS} hosts")
        numbers.extend(str(number).zfill(len(low_text)) for number in range(low, high + 1))
    return numbers


# --- Node lists: scontrol show nodes, sinfo ------------------------------------------------------
#
# ``scontrol show nodes --oneliner`` prints one node a line as ``Key=Value`` pairs; without
# ``--oneliner`` the same pairs wrap over indented lines, a block per node. Values may hold
# spaces (``OS=Linux 6.1 #1 SMP ...``), so a value runs up to the next `` Key=``; ``Reason`` is
# free text and runs to the end of its line. Both forms are read by ``parse_scontrol_nodes``.

SINFO_NODES_FORMAT = "%N|%G|%P|%T|%E"  # node, GRES, partition, state, reason
_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_]*)=")
_REASON = re.compile(r"(?:^|(?<=\s))Reason=(?P<reason>[^\n]*)", re.MULTILINE)
_REASON_STAMP = re.compile(r"\s*\[[^\[\]]*@[^\[\]]*\]\s*$")  # "[root@2026-12-02T07:52:36]"
_NULL = frozenset({"", "(null)", "n/a", "none"})


def scontrol_nodes_command() -> list[str]:
    """The argv whose output ``parse_scontrol_nodes`` reads: every node, one a line."""
    return ["scontrol", "show", "nodes", "--oneliner"]


def sinfo_nodes_command() -> list[str]:
    """The argv whose output ``parse_sinfo_nodes`` reads: a line per node and partition."""
    return ["sinfo", "-N", "-h", "-o", SINFO_NODES_FORMAT]


def parse_slurm_nodes(text: str) -> ParseOutcome[ObservedNode]:
    """A Slurm node list, whichever of the two forms it is: ``scontrol show nodes`` (its first
    line starts with ``NodeName=``) or ``sinfo_nodes_command()`` output (``|``-separated).

    Anything else (sinfo's default table, an error message) is refused with the forms it reads:
    a node list that is not blank never gives no node without a reason.
    """
    first = next(((index + 1, line) for index, line in enumerate(_lines(text)) if line.strip()), None)
    if first is None:
        return ParseOutcome[ObservedNode]()
    line_no, line = first
    if line.lstrip().startswith("NodeName="):
        outcome = parse_scontrol_nodes(text)
    elif line.count("|") >= SINFO_NODES_FORMAT.count("|"):
        outcome = parse_sinfo_nodes(text)
    else:
        outcome = ParseOutcome[ObservedNode]()
        outcome.reject(NOT_A_NODE_LIST, line, line_no)
        return outcome
    if not outcome.records and not outcome.rejected:
        outcome.reject("the node list names no node", line, line_no)
    return outcome


NOT_A_NODE_LIST = (
    "not a node list: expected `scontrol show nodes --oneliner` output "
    f"or `sinfo -N -h -o '{SINFO_NODES_FORMAT}'`"
)


def parse_scontrol_nodes(text: str) -> ParseOutcome[ObservedNode]:
    """Turn ``scontrol show nodes`` output (``--oneliner`` or blocks) into observed nodes.

    Read: ``NodeName``; ``Gres`` (``gpu:h100:8``, ``gpu:8``, ``gpu:a100:4(S:0-1)``, several
    comma-separated, ``shard``/``mps`` ignored) for the GPU count and model (the GRES type, e.g.
    ``h100``: Slurm's name, not NVML's); ``State`` (``MIXED+DRAIN``, ``DOWN*``) and ``Reason``
    as the source's state and reason; ``Partitions``, ``ActiveFeatures`` and ``NodeHostName`` as
    labels. A node whose GRES cannot be read is rejected with the reason; the others are kept.
    """
    outcome = ParseOutcome[ObservedNode]()
    records, strays = _node_records(text)
    for line_no, line in strays:
        outcome.reject("expected `scontrol show nodes --oneliner` output", line, line_no)
    for line_no, record in records:
        fields = _key_values(record)
        hostname = fields.get("NodeName", "")
        try:
            count, model = gres_gpus(fields.get("Gres", ""))
        except ValueError as error:
            outcome.reject(f"node {hostname or '?'}: {error}", record, line_no)
            continue
        labels = {
            "partitions": _null_to_empty(fields.get("Partitions", "")),
            "features": _null_to_empty(fields.get("ActiveFeatures", "")),
            "node_hostname": _null_to_empty(fields.get("NodeHostName", "")),
        }
        outcome.records.append(
            ObservedNode(
                hostname=hostname,
                gpu_model=model,
                gpu_count=count,
                gpus=_indexed_gpus(count, model),
                state=fields.get("State", ""),
                reason=_REASON_STAMP.sub("", fields.get("Reason", "")),
                labels=clip_labels({key: value for key, value in labels.items() if value}),
            )
        )
    return outcome


def parse_sinfo_nodes(text: str) -> ParseOutcome[ObservedNode]:
    """Turn the output of ``sinfo_nodes_command()`` into observed nodes.

    sinfo prints a node once per partition: the lines of one node are merged, partitions
    joined (the default partition's ``*`` dropped). ``%N`` may be a hostlist (sinfo without
    ``-N``): it is expanded. ``%T`` is the long state (``drained``, ``mixed``), ``%E`` the reason.
    """
    outcome = ParseOutcome[ObservedNode]()
    merged: dict[str, tuple[ObservedNode, list[str]]] = {}
    for index, line in enumerate(_lines(text)):
        line_no = index + 1
        if not line.strip():
            continue
        fields = line.split("|", 4)
        if len(fields) < 5:
            outcome.reject(f"expected 5 fields ({SINFO_NODES_FORMAT}), got {len(fields)}", line, line_no)
            continue
        names, gres, partition, state, reason = (field.strip() for field in fields)
        if index == 0 and names.upper() == "NODELIST":
            continue  # run without -h: a header
        try:
            hosts = expand_hostlist(names)
            count, model = gres_gpus(gres)
        except ValueError as error:
            outcome.reject(f"{names or '?'}: {error}", line, line_no)
            continue
        for host in hosts:
            if host in merged:
                merged[host][1].append(partition.rstrip("*"))
                continue
            node = ObservedNode(
                hostname=host,
                gpu_model=model,
                gpu_count=count,
                gpus=_indexed_gpus(count, model),
                state=state,
                reason="" if reason.lower() in _NULL else reason,
            )
            merged[host] = (node, [partition.rstrip("*")])
    for node, partitions in merged.values():
        listed = ",".join(p for p in dict.fromkeys(partitions) if p and p.lower() not in _NULL)
        outcome.records.append(replace(node, labels={"partitions": listed} if listed else {}))
    return outcome


def gres_gpus(gres: str) -> tuple[int, str]:
    """GPUs and their type in a node's ``Gres``: ``gpu:h100:8`` → (8, "h100"), ``(null)`` → (0, "").

    Several GPU entries add up; several types are joined with ``+`` (``a100+v100``).
    Raises ``ValueError`` for an entry whose count is not a whole number.
    """
    total, types = 0, []
    if gres.strip().lower() in _NULL:
        return 0, ""
    for item in re.split(r",(?![^()]*\))", gres):
        item = re.sub(r"\(.*\)$", "", item.strip())  # "(S:0-1)": socket affinity
        parts = item.split(":")
        if parts[0] != "gpu":
            continue  # shard, mps, a site's own GRES
        if len(parts) == 2:
            gpu_type, count_text = "", parts[1]
        elif len(parts) == 3:
            gpu_type, count_text = parts[1], parts[2]
        else:
            raise ValueError(f"GRES {item!r} is not gpu[:type]:count")
        if not count_text.isdigit():
            raise ValueError(f"GRES {item!r}: count {count_text!r} is not a whole number")
        total += int(count_text)
        if gpu_type and gpu_type not in types:
            types.append(gpu_type)
    return total, "+".join(types)


def _node_records(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(first line number, text) of each node: a ``NodeName=`` line and its indented lines;
    then (line number, line) of the lines before the first node, which are no node's."""
    records: list[tuple[int, list[str]]] = []
    strays: list[tuple[int, str]] = []
    for index, line in enumerate(_lines(text)):
        if line.startswith("NodeName="):
            records.append((index + 1, [line]))
        elif records and line.strip():
            records[-1][1].append(line)
        elif line.strip():
            strays.append((index + 1, line))
    return [(line_no, "\n".join(lines)) for line_no, lines in records], strays


def _key_values(record: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    reason = _REASON.search(record)
    if reason is not None:
        fields["Reason"] = reason["reason"].strip()
        record = record[: reason.start()] + record[reason.end() :]
    keys = list(_KEY.finditer(record))
    for position, match in enumerate(keys):
        end = keys[position + 1].start() if position + 1 < len(keys) else len(record)
        fields.setdefault(match[1], record[match.end() : end].strip())
    return fields


def _null_to_empty(value: str) -> str:
    return "" if value.strip().lower() in _NULL else value.strip()


def _indexed_gpus(count: int, model: str) -> tuple[ObservedGpu, ...]:
    # Past the limit the node is rejected by observed_node_problem: build no GPUs for it.
    if not 0 < count <= MAX_GPUS_PER_NODE:
        return ()
    return tuple(ObservedGpu(index=index, model=model) for index in range(count))
