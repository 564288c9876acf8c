"""The catalog of fault signatures: what a log line that shows a known GPU-cluster fault looks like.

One ``Signature`` per fault a single line can prove: an NVIDIA Xid in a node's kernel log, a CUDA
error, an NCCL watchdog timeout or RDMA completion error, a CUDA out-of-memory, a NaN/Inf loss,
a storage or rendezvous error. Each carries its root-cause category, severity, the code it
stands for (Xid number, NCCL error, ...), and the action an operator should take.

**Order matters.** A line matched by several signatures is reported as the first one in
``SIGNATURES``, so the specific ones come first: every Xid by its code before the catch-all
``xid-other`` (a line ``Xid 45 ... caused by previous Xid 149`` is Xid 45), hardware before the
CUDA errors that follow it, ``nccl-remote-error`` before the generic ``nccl-error``, the
rendezvous errors before a bare ``Connection reset by peer``, the loss last.

**Xid meanings and actions** follow NVIDIA's Xid catalog
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) and the resolution bucket
NVIDIA's own NVSentinel assigns each code (``RESTART_APP``, ``RESET_GPU``, ``RESTART_BM``,
``WORKFLOW_XID_48``, ``WORKFLOW_NVLINK_ERR``, ``IGNORE``): codes whose bucket resets the GPU or
reboots the node are ``critical``, codes the application recovers from by restarting are
``error``, codes NVIDIA says to ignore or only watch are ``warning``.

**Rules every pattern keeps** (the scanner relies on them, tests check them):

- ``literals``: plain substrings, at least one of which occurs in every line the pattern
  matches. The scanner finds candidate lines by searching whole blocks for these (or for shorter
  strings they contain) and runs patterns only on those lines.
- Patterns are ASCII (``re.ASCII``), never match across a newline and have no counted
  repetition of ``.`` or negated classes, so they match the same lines on raw bytes as on the
  decoded text; ``chunk_pattern`` relies on it.
- ``chunk_pattern``: for a signature whose literals fill healthy logs (the word ``loss`` is on
  every iteration line), a bytes pattern starting with a literal that matches wherever
  ``pattern`` does; the scanner runs it over whole blocks instead of using the literals.
- Named groups the scanner reads: ``code`` (the finding's code when the signature has none of its
  own) and ``value`` (the loss).
- ``accept``: for a fact a pattern cannot state (a loss scale below 1), a check of the match; a
  line whose first match fails it is not this signature's (the next signature is tried).
- ``after``: a literal that must occur in an *earlier* line of the same log for the signature to
  count (a Megatron iteration line without ``lm loss`` is a lost loss only after lines that had
  one: see ``context.StreamContext``).
"""

import re
from collections.abc import Callable
from dataclasses import dataclass


def gettext_noop(message: str) -> str:
    """Marks a catalog text for translation (the portal shows it translated); no Django here."""
    return message


CATEGORIES = (
    "hardware_gpu",
    "hardware_memory_ecc",
    "nvlink",
    "network_rdma",
    "nccl_timeout_hang",
    "nccl_socket_fallback",
    "cuda_oom",
    "cuda_illegal_access",
    "loss_nan_inf",
    "slowdown",
    "storage_io",
    "software_error",
)
SEVERITIES = ("critical", "error", "warning")


@dataclass(frozen=True, slots=True)
class Signature:
    """One known fault as a single log line shows it; see the module docstring for the rules."""

    id: str
    category: str
    severity: str
    code: str | None
    title: str
    action: str
    literals: tuple[str, ...]
    pattern: re.Pattern[str]
    chunk_pattern: re.Pattern[bytes] | None = None
    accept: Callable[[re.Match[str]], bool] | None = None
    after: str | None = None

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"{self.id}: unknown category {self.category!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"{self.id}: unknown severity {self.severity!r}")
        if not self.literals or not all(self.literals):
            raise ValueError(f"{self.id}: needs at least one non-empty literal")


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.ASCII)


# ``NVRM: Xid (PCI:0000:18:00): 79, ...`` (also ``(0000:3b:00)`` from older drivers and
# ``(PCI:0000:01:00 GPU-I:05)`` under MIG), and the k8s device plugin's ``XidCriticalError: Xid=79``.
XID_PREFIX = r"(?:NVRM: Xid \([^)]*\): |XidCriticalError: Xid=)"


def _xid(code: int, category: str, severity: str, title: str, action: str) -> Signature:
    return Signature(
        id=f"xid-{code}",
        category=category,
        severity=severity,
        code=str(code),
        title=f"Xid {code}: {title}",
        action=action,
        literals=("Xid",),
        pattern=_re(rf"{XID_PREFIX}{code}(?![0-9])"),
    )


_RESET_GPU = gettext_noop("Drain the node and reset the GPU; replace it if the Xid recurs")

XID_SIGNATURES = (
    _xid(13, "software_error", "error", "graphics engine exception",
         gettext_noop("Restart the job; if it recurs on the same GPU with other code, run DCGM diagnostics "
         "(dcgmi diag -r 3) on it")),
    _xid(31, "cuda_illegal_access", "error", "GPU memory page fault (MMU fault)",
         gettext_noop("Debug the application's memory access; if the fault follows the GPU rather than the "
         "code, run DCGM diagnostics on it")),
    _xid(43, "software_error", "warning", "GPU stopped processing (application fault)",
         gettext_noop("Restart the job; the node needs no action")),
    _xid(45, "software_error", "warning", "preemptive cleanup after previous errors",
         gettext_noop("Act on the Xid that preceded it on the same GPU; this one only records the cleanup")),
    _xid(46, "hardware_gpu", "critical", "GPU stopped processing (GPU timeout)", _RESET_GPU),
    _xid(48, "hardware_memory_ecc", "critical", "double-bit ECC error (DBE)",
         gettext_noop("Drain the node and reset the GPU to retire the page or remap the row; replace the GPU "
         "if DBEs recur")),
    _xid(62, "hardware_gpu", "critical", "internal micro-controller halt", _RESET_GPU),
    _xid(63, "hardware_memory_ecc", "warning", "ECC page retirement or row remapping recorded",
         gettext_noop("Reset the GPU when the node is idle so the remapped row takes effect")),
    _xid(64, "hardware_memory_ecc", "critical", "ECC page retirement or row remapping failed",
         gettext_noop("Drain the node and reset the GPU; replace it if remapping fails again")),
    _xid(74, "nvlink", "critical", "NVLink error",
         gettext_noop("Drain the node, reset its GPUs and check the NVLink/NVSwitch fabric (nvidia-smi "
         "nvlink "
         "-e, fabric manager); replace the part if it recurs")),
    _xid(79, "hardware_gpu", "critical", "GPU has fallen off the bus",
         gettext_noop("Drain the node and power-cycle it; check the GPU's PCIe seating and power and replace "
         "it if it recurs")),
    _xid(92, "hardware_memory_ecc", "warning", "high single-bit ECC error rate",
         gettext_noop("Watch the GPU's ECC counters; schedule a reset or replacement if the rate keeps "
         "rising")),
    _xid(94, "hardware_memory_ecc", "error", "contained ECC error",
         gettext_noop("Restart the affected job; reset the GPU when convenient so the row remap takes "
         "effect")),
    _xid(95, "hardware_memory_ecc", "critical", "uncontained ECC error",
         gettext_noop("Drain the node and reset the GPU now: every process on it may have read corrupt "
         "data")),
    _xid(119, "hardware_gpu", "critical", "GSP RPC timeout",
         gettext_noop("Drain the node and reset the GPU (or reboot); update driver and firmware if it "
         "recurs")),
    _xid(120, "hardware_gpu", "critical", "GSP error",
         gettext_noop("Drain the node and reset the GPU (or reboot); update driver and firmware if it "
         "recurs")),
    _xid(140, "hardware_memory_ecc", "critical", "unrecovered ECC error", _RESET_GPU),
)  # fmt: skip

XID_OTHER = Signature(
    id="xid-other",
    category="hardware_gpu",
    severity="warning",
    code=None,
    title="Xid not in the catalog",
    action=gettext_noop("Look the code up in NVIDIA's Xid catalog; run DCGM diagnostics if it repeats"),
    literals=("Xid",),
    pattern=_re(rf"{XID_PREFIX}(?P<code>[0-9]+)"),
)

OTHER_SIGNATURES = (
    # --- the GPU as CUDA reports it (the Xid is in the node's kernel log) ----------------------
    Signature(
        id="cuda-ecc-uncorrectable",
        category="hardware_memory_ecc",
        severity="critical",
        code=None,
        title="CUDA: uncorrectable ECC error",
        action=gettext_noop(
            "Drain the node and reset the GPU; find its Xid 48/94/95 in the kernel log and "
            "replace the GPU if it recurs"
        ),
        literals=("uncorrectable ECC error encountered", "cudaErrorECCUncorrectable"),
        pattern=_re(r"uncorrectable ECC error encountered|cudaErrorECCUncorrectable"),
    ),
    Signature(
        id="cuda-nvlink-uncorrectable",
        category="nvlink",
        severity="critical",
        code=None,
        title="CUDA: uncorrectable NVLink error",
        action=gettext_noop(
            "Drain the node, reset its GPUs and check the NVLink/NVSwitch fabric (Xid 74 in "
            "the kernel log, nvidia-smi nvlink -e)"
        ),
        literals=("uncorrectable NVLink error", "cudaErrorNvlinkUncorrectable"),
        pattern=_re(r"uncorrectable NVLink error|cudaErrorNvlinkUncorrectable"),
    ),
    Signature(
        id="cuda-launch-failure",
        category="hardware_gpu",
        severity="error",
        code=None,
        title="CUDA: unspecified launch failure",
        action=gettext_noop(
            "Look for an Xid on the node at the same time (79: GPU fell off the bus); drain the "
            "node if there is one, otherwise debug the failing kernel"
        ),
        literals=("CUDA error: unspecified launch failure", "cudaErrorLaunchFailure"),
        pattern=_re(r"CUDA error: unspecified launch failure|cudaErrorLaunchFailure"),
    ),
    # --- NCCL and the fabric ------------------------------------------------------------------
    Signature(
        id="nccl-watchdog-timeout",
        category="nccl_timeout_hang",
        severity="error",
        code=None,
        title="NCCL collective timed out (watchdog)",
        action=gettext_noop(
            "Find the rank that never joined the collective (no timeout of its own, or its own "
            "error first) and its node; restart from the last checkpoint without that node"
        ),
        literals=("Watchdog caught collective operation timeout",),
        pattern=_re(r"Watchdog caught collective operation timeout"),
    ),
    Signature(
        id="nccl-ib-completion-error",
        category="network_rdma",
        severity="error",
        code=None,
        title="NCCL: RDMA completion error (InfiniBand/RoCE)",
        action=gettext_noop(
            "Check the HCA port, cable and switch port of both peers (ibstat, port error "
            "counters); drain the node if the errors follow it"
        ),
        literals=("NCCL WARN",),
        pattern=_re(
            r"NCCL WARN NET/IB[A-Za-z0-9]* ?: ?Got completion (?:from peer \S+ )?with "
            r"(?:error |status=)(?P<code>[0-9]+)"
            r"|NCCL WARN NET/IB[A-Za-z0-9]* ?:.*?remote (?:access|operation) error"
            r"|NCCL WARN Call to ibv_poll_cq"
        ),
    ),
    Signature(
        id="cuda-oom",
        category="cuda_oom",
        severity="error",
        code=None,
        title="CUDA out of memory",
        action=gettext_noop(
            "Lower the micro-batch size or sequence length, or enable activation checkpointing "
            "or more model parallelism; check the GPU for other processes"
        ),
        literals=(
            "OutOfMemoryError",
            "RuntimeError:",
            "CUDA error: out of memory",
            "NCCL WARN Cuda failure",
            "cudaErrorMemoryAllocation",
        ),
        pattern=_re(
            r"(?:OutOfMemoryError|RuntimeError): ?CUDA out of memory|CUDA error: out of memory"
            r"|NCCL WARN Cuda failure 'out of memory'|cudaErrorMemoryAllocation"
        ),
    ),
    Signature(
        id="cuda-illegal-access",
        category="cuda_illegal_access",
        severity="error",
        code=None,
        title="CUDA: illegal memory access",
        action=gettext_noop(
            "Debug the application (CUDA_LAUNCH_BLOCKING=1, compute-sanitizer); if it follows "
            "one GPU across jobs, run DCGM diagnostics on it"
        ),
        literals=("CUDA error: ", "NCCL WARN Cuda failure", "cudaErrorIllegalAddress"),
        pattern=_re(
            r"CUDA error: (?:an illegal memory access|an illegal instruction|misaligned address)"
            r"|NCCL WARN Cuda failure 'an illegal memory access|cudaErrorIllegalAddress"
        ),
    ),
    Signature(
        id="nccl-remote-error",
        category="network_rdma",
        severity="error",
        code="ncclRemoteError",
        title="NCCL: peer lost (remote process exited or network error)",
        action=gettext_noop(
            "Find the first failure on the other ranks and their nodes (Xid, OOM, watchdog): "
            "this rank only saw its peer go away"
        ),
        literals=("there was a network error", "ncclRemoteError"),
        pattern=_re(r"remote process exited or there was a network error|ncclRemoteError"),
    ),
    Signature(
        id="nccl-error",
        category="software_error",
        severity="error",
        code=None,
        title="NCCL error",
        action=gettext_noop(
            "Rerun with NCCL_DEBUG=INFO and read the first NCCL WARN line of the failing rank"
        ),
        literals=("NCCL error", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError"),
        pattern=_re(r"NCCL error(?![A-Za-z0-9_])|(?P<code>nccl(?:UnhandledCuda|System|Internal)Error)"),
    ),
    Signature(
        id="nccl-socket-fallback",
        category="nccl_socket_fallback",
        severity="warning",
        code=None,
        title="NCCL uses TCP sockets, not RDMA",
        action=gettext_noop(
            "Give the job's container the NCCL RDMA settings (NCCL_IB_HCA, no NCCL_IB_DISABLE=1) "
            "or move it to RDMA nodes; check 'Using network' says IB"
        ),
        literals=("NET/Socket", "network Socket", "Network Socket"),
        pattern=_re(r"NET/Socket ?: ?Using|Using (?:network|internal Network) Socket"),
    ),
    # --- storage and the launcher -------------------------------------------------------------
    Signature(
        id="storage-io-error",
        category="storage_io",
        severity="error",
        code=None,
        title="Storage I/O error (EIO, stale NFS handle, Lustre eviction)",
        action=gettext_noop(
            "Check the mount and the file server from the node (dmesg, mount state); move the "
            "job off the node if only it is affected and restart from the last checkpoint"
        ),
        literals=("Input/output error", "Stale file handle", "LustreError"),
        pattern=_re(r"Input/output error|Stale file handle|LustreError.*?evicted"),
    ),
    Signature(
        id="rendezvous-failure",
        category="software_error",
        severity="error",
        code=None,
        title="torch.distributed rendezvous / store failure",
        action=gettext_noop(
            "Check that every node reaches the rendezvous endpoint (MASTER_ADDR and port, all "
            "pods scheduled) and that no worker died first; restart the job"
        ),
        literals=(
            "RendezvousTimeoutError",
            "RendezvousConnectionError",
            "RendezvousClosedError",
            "DistNetworkError",
        ),
        pattern=_re(r"(?P<code>Rendezvous(?:Timeout|Connection|Closed)Error|DistNetworkError)"),
    ),
    Signature(
        id="connection-reset",
        category="software_error",
        severity="error",
        code=None,
        title="Connection reset by peer",
        action=gettext_noop(
            "Find the peer process that exited first (its own error, an Xid or OOM on its "
            "node); this side only lost the connection"
        ),
        literals=("Connection reset by peer",),
        pattern=_re(r"Connection reset by peer"),
    ),
    # --- the model ----------------------------------------------------------------------------
    Signature(
        id="loss-nan-inf",
        category="loss_nan_inf",
        severity="error",
        code=None,
        title="Training loss is NaN or Inf",
        action=gettext_noop(
            "Stop the run and restart from the last good checkpoint with a lower learning rate "
            "or without the offending batch; if it repeats on one node, suspect its GPUs"
        ),
        literals=("loss", "Loss"),
        # Megatron ``lm loss: nan |``, Trainer ``{'loss': nan, ...}``, ``loss=tensor(nan, ...)``,
        # ``Loss = inf``, ``train_epoch_loss=nan``, ``Loss is nan, stopping training``; never a
        # finite value, never ``grad norm: nan`` or ``number of nan iterations``.
        pattern=_re(
            r"(?<![A-Za-z])[Ll]oss['\"]?(?:[ \t]*[:=][ \t]*|[ \t]+is[ \t]+|[ \t]+)(?:tensor\()?"
            r"(?P<value>[-+]?(?:nan|NaN|inf|Infinity))(?![A-Za-z0-9_])"
        ),
        # Any run of separators: a looser test, and possessive so the many finite losses of a
        # healthy log fail fast.
        chunk_pattern=re.compile(
            rb"oss['\"]?[ \t:=](?>[ \t:=]|is[ \t])*+(?:tensor\()?[-+]?(?:nan|NaN|inf|Infinity)"
            rb"(?![A-Za-z0-9_])"
        ),
    ),
)

SIGNATURES: tuple[Signature, ...] = (*XID_SIGNATURES, XID_OTHER, *OTHER_SIGNATURES)

# Not a line's: reported where a log's own throughput drops (``context.ThroughputTracker``).
THROUGHPUT_DROP = Signature(
    id="throughput-drop",
    category="slowdown",
    severity="warning",
    code=None,
    title="Throughput dropped against the log's own baseline",
    action=gettext_noop(
        "Compare the job's nodes (GPU activity, clocks, temperatures, NCCL transport): a drop "
        "that one node causes is a straggler; drain it and restart from the last checkpoint"
    ),
    literals=("/s",),
    pattern=_re(r"(?!)"),
)
SIGNATURES_BY_ID = {signature.id: signature for signature in (*SIGNATURES, THROUGHPUT_DROP)}
