"""Training progress from one log line: iteration, iteration time, loss, throughput and time.

Recognised formats (real lines of each are in ``tests/analysis/faults/test_progress.py``):

- **Megatron-LM / Megatron-DeepSpeed** ``training_log``: ``[2024-04-06 02:59:36] iteration  43/  100 |
  consumed samples: ... | elapsed time per iteration (ms): 5444.9 | ... | lm loss: 1.825991E+00 |``.
  Newer Megatron-LM prints the timestamp, older versions and forks do not; Megatron-DeepSpeed
  writes ``lm_loss`` and ``samples per second``. The loss is an average over the logging interval.
- **DeepSpeed**: the engine's ``[Rank 0] step=40, skipped=2, lr=[...], mom=[...]`` (a step without a
  loss), its timer's ``epoch=0/micro_step=34/global_step=34, ..., CurrSamplesPerSec=8.0`` (older:
  ``0/40, SamplesPerSec=83.4``) and the pipeline engine's ``steps: 200 loss: 5.5508 iter time (s):
  0.936 samples/sec: 136.706``.
- **Hugging Face Trainer**: ``{'loss': 2.3456, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.5}``.
  The Trainer prints no step number, so ``iteration`` stays None and ``epoch`` is set; evaluation
  (``eval_loss``) and end-of-training summaries (``train_loss``) are not progress lines.
- **Plain scripts**: ``step 100 loss: 2.34``, ``Epoch 1 Step 100 loss=2.34``, ``Step [100/1000], Loss: 2.3``.
  Both a step and a training loss are required, so ``Loading checkpoint from step 500`` or
  ``val loss: 2.1`` are not taken for progress.

A leading ``YYYY-MM-DD HH:MM:SS`` (bracketed, as Megatron and Python logging print it, or at the
start of the line) becomes ``timestamp``; one without a zone is read in ``timezone`` (UTC by
default: container clocks are UTC).
"""

import math
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo

MEGATRON = "megatron"
DEEPSPEED = "deepspeed"
HUGGINGFACE = "huggingface"
PLAIN = "plain"

_NUMBER = r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)"

_STAMP = re.compile(
    r"(?:^\s*\[?|\[)(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,6}))?\s*(Z|[+-]\d{2}:?\d{2})?\]?"
)

_MEGATRON = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_MEGATRON_LOSS_KEYS = ("lm loss", "lm_loss", "loss")

_DS_PIPELINE = re.compile(rf"\bsteps?:\s*(\d+)(?:\s*/\s*(\d+))?\s+loss:\s*({_NUMBER})", re.IGNORECASE)
_DS_ITER_TIME = re.compile(rf"\biter time \(s\):\s*({_NUMBER})")
_DS_SAMPLES = re.compile(rf"samples/sec:\s*({_NUMBER})")
_DS_ENGINE = re.compile(r"\[Rank\s+\d+\]\s+step=(\d+),\s*skipped=\d+")
_DS_LOSS = re.compile(rf"\bloss=({_NUMBER})", re.IGNORECASE)
_DS_TIMER = re.compile(rf"\bglobal_step=(\d+),.*?\bCurrSamplesPerSec=({_NUMBER})")
_DS_TIMER_OLD = re.compile(rf"\]\s*\d+/(\d+),\s*SamplesPerSec=({_NUMBER})")

_HF_LOSS = re.compile(rf"""\{{.*?['"]loss['"]:\s*({_NUMBER})""", re.IGNORECASE)
_HF_EPOCH = re.compile(rf"""['"]epoch['"]:\s*({_NUMBER})""")
_HF_STEP = re.compile(r"""['"](?:global_)?step['"]:\s*(\d+)""")

_PLAIN_EPOCH = re.compile(r"\bepoch\b\s*[:=#]?\s*\[?\s*(\d+)", re.IGNORECASE)
_PLAIN_STEP = re.compile(
    r"\b(?:step|iter|iteration)\b\s*[:=#]?\s*\[?\s*(\d+)(?:\s*/\s*(\d+))?", re.IGNORECASE
)
# A training loss: not ``val_loss`` (a word character before it) nor ``val loss`` / ``eval loss``.
_PLAIN_LOSS = re.compile(
    rf"(?<![\w-])(?<!val )(?<!eval )(?<!test )(?<!valid )(?<!validation )loss\b\s*[:=]?\s*({_NUMBER})",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Progress:
    """What one progress line says; a field the format does not print is None.

    ``loss`` keeps ``nan`` and ``inf`` as floats: they are the evidence of a diverged run.
    ``timestamp`` is timezone-aware UTC.
    """

    iteration: int | None
    iteration_time_s: float | None
    loss: float | None
    timestamp: datetime | None
    total_iterations: int | None = None
    epoch: float | None = None
    samples_per_s: float | None = None
    log_format: str = ""  # MEGATRON | DEEPSPEED | HUGGINGFACE | PLAIN


def parse_progress(line: str, *, timezone: tzinfo = UTC) -> Progress | None:
    """The training progress one log line reports, or None for a line that reports none."""
    for parse in (_megatron, _deepspeed, _huggingface, _plain):
        found = parse(line)
        if found is not None:
            return _with_timestamp(found, line, timezone)
    return None


def _with_timestamp(found: Progress, line: str, timezone: tzinfo) -> Progress:
    match = _STAMP.search(line)
    if match is None:
        return found
    day, clock, fraction, zone = match.groups()
    text = f"{day}T{clock}.{(fraction or '0').ljust(6, '0')}"
    if zone:
        text += "+00:00" if zone == "Z" else zone
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return found
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone)
    return replace(found, timestamp=moment.astimezone(UTC))


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _megatron(line: str) -> Progress | None:
    match = _MEGATRON.search(line)
    if match is None:
        return None
    fields = {}
    for part in line.split("|"):
        key, colon, value = part.partition(":")
        if colon:
            words = value.split()
            fields[" ".join(key.lower().split())] = words[0] if words else ""
    loss = next((_number(fields[key]) for key in _MEGATRON_LOSS_KEYS if key in fields), None)
    elapsed_ms = _finite(_number(fields.get("elapsed time per iteration (ms)")))
    samples = fields.get("samples per second", fields.get("samples/sec"))
    return Progress(
        iteration=int(match.group(1)),
        iteration_time_s=None if elapsed_ms is None else elapsed_ms / 1000,
        loss=loss,
        timestamp=None,
        total_iterations=int(match.group(2)),
        samples_per_s=_finite(_number(samples)),
        log_format=MEGATRON,
    )


def _deepspeed(line: str) -> Progress | None:
    if match := _DS_PIPELINE.search(line):
        iter_time = _DS_ITER_TIME.search(line)
        samples = _DS_SAMPLES.search(line)
        return Progress(
            iteration=int(match.group(1)),
            iteration_time_s=_finite(_number(iter_time.group(1))) if iter_time else None,
            loss=_number(match.group(3)),
            timestamp=None,
            total_iterations=int(match.group(2)) if match.group(2) else None,
            samples_per_s=_finite(_number(samples.group(1))) if samples else None,
            log_format=DEEPSPEED,
        )
    if match := _DS_ENGINE.search(line):
        loss = _DS_LOSS.search(line)
        return Progress(
            iteration=int(match.group(1)),
            iteration_time_s=None,
            loss=_number(loss.group(1)) if loss else None,
            timestamp=None,
            log_format=DEEPSPEED,
        )
    if match := _DS_TIMER.search(line) or _DS_TIMER_OLD.search(line):
        return Progress(
            iteration=int(match.group(1)),
            iteration_time_s=None,
            loss=None,
            timestamp=None,
            samples_per_s=_finite(_number(match.group(2))),
            log_format=DEEPSPEED,
        )
    return None


def _huggingface(line: str) -> Progress | None:
    match = _HF_LOSS.search(line)
    if match is None:
        return None
    epoch = _HF_EPOCH.search(line)
    step = _HF_STEP.search(line)
    return Progress(
        iteration=int(step.group(1)) if step else None,
        iteration_time_s=None,
        loss=_number(match.group(1)),
        timestamp=None,
        epoch=_finite(_number(epoch.group(1))) if epoch else None,
        log_format=HUGGINGFACE,
    )


def _plain(line: str) -> Progress | None:
    step = _PLAIN_STEP.search(line)
    loss = _PLAIN_LOSS.search(line)
    if step is None or loss is None:
        return None
    epoch = _PLAIN_EPOCH.search(line)
    return Progress(
        iteration=int(step.group(1)),
        iteration_time_s=None,
        loss=_number(loss.group(1)),
        timestamp=None,
        total_iterations=int(step.group(2)) if step.group(2) else None,
        epoch=float(epoch.group(1)) if epoch else None,
        log_format=PLAIN,
    )
