"""The catalog of fault signatures: what a log line that shows a known GPU-cluster fault looks like.

One ``Signature`` per fault a single line can prove: an NVIDIA Xid in a node's kernel log, a CUDA
error, an NCCL watchdog timeout or RDMA completion error, a CUDA out-of-memory, a NaN/Inf loss,
a storage or rendezvous error. Each carries its root-cause category, severity, the code it
stands for (Xid number, NCCL error, ...), and the action an operator should take.

**Order matters.** A line matched by several signatures is reported as the first one in
``SIGNATURES``, so the specific ones come first: every Xid by its code before the catch-all
``xid-other`` (a line ``Xid 45 ... caused by previous Xid 149`` is Xid 45), hardware before the
CUDA errors that follow it, ``nccl-remote-error`` before the generic ``nccl-error``, the
rendezvous errors before a bare ``Connection reset by peer``, the NCCL and RDMA network errors
before the watchdog timeouts they cause, the model's signatures last (a NaN loss first among them).

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


# ``NVRM`` rather than ``Xid``: one anchor finds the Xid lines and the driver's other messages (GSP,
# NVLink, RmInitAdapter); the device plugin's ``XidCriticalError`` is found through ``rror``.
_XID_LITERALS = ("NVRM", "rror")


def _xid(code: int, category: str, severity: str, title: str, action: str) -> Signature:
    return Signature(
        id=f"xid-{code}",
        category=category,
        severity=severity,
        code=str(code),
        title=f"Xid {code}: {title}",
        action=action,
        literals=_XID_LITERALS,
        pattern=_re(rf"{XID_PREFIX}{code}(?![0-9])"),
    )


_RESET_GPU = gettext_noop("Drain the node and reset the GPU; replace it if the Xid recurs")
_NVLINK_ACTION = gettext_noop(
    "Drain the node, reset its GPUs and check the NVLink/NVSwitch fabric (nvidia-smi nvlink -e, "
    "fabric manager); replace the part if it recurs"
)
# NVLink Xids of NVIDIA's catalog: 74, 137 (NVLINK_FLA_PRIV_ERR), 144-150 (NVLINK_*_ERROR).
_NVLINK_XIDS = r"(?:74|137|14[4-9]|150)"

# ``Xid 45 ... caused by previous Xid 149``: the cleanup of channels after an earlier fault, whose
# category it takes. Only the NVLink codes have been seen this way so far; others stay Xid 45.
XID_CAUSED_BY = (
    Signature(
        id="xid-after-nvlink",
        category="nvlink",
        severity="critical",
        code=None,
        title="Xid 43/45 caused by a previous NVLink Xid",
        action=_NVLINK_ACTION,
        literals=_XID_LITERALS,
        pattern=_re(
            rf"{XID_PREFIX}(?:43|45)(?![0-9]).*?caused by previous Xid (?P<code>{_NVLINK_XIDS})(?![0-9])"
        ),
    ),
)

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
    _xid(137, "nvlink", "critical", "NVLink FLA privilege error (NVLINK_FLA_PRIV_ERR)", _NVLINK_ACTION),
    _xid(140, "hardware_memory_ecc", "critical", "unrecovered ECC error", _RESET_GPU),
    _xid(144, "nvlink", "warning", "NVLink SAW error (NVLINK_SAW_ERROR)", _NVLINK_ACTION),
    Signature(
        id="xid-nvlink",
        category="nvlink",
        severity="critical",
        code=None,
        title="NVLink error (Xid 145-150: NVLINK_RLW/TLW/TREX/NVLPW_CTRL/NETIR/MSE_ERROR)",
        action=_NVLINK_ACTION,
        literals=_XID_LITERALS,
        pattern=_re(rf"{XID_PREFIX}(?P<code>14[5-9]|150)(?![0-9])"),
    ),
    # The driver's record of what the GPU now needs (reset, reboot, drain): the cause is the Xid
    # before it, like Xid 45's.
    _xid(154, "software_error", "warning", "GPU recovery action changed",
         gettext_noop("Act on the Xid that preceded it on the same GPU and carry out the recovery action "
         "the line names (GPU reset, node reboot, drain)")),
    _xid(171, "hardware_memory_ecc", "critical", "uncorrectable DRAM error", _RESET_GPU),
)  # fmt: skip

XID_OTHER = Signature(
    id="xid-other",
    category="hardware_gpu",
    severity="warning",
    code=None,
    title="Xid not in the catalog",
    action=gettext_noop("Look the code up in NVIDIA's Xid catalog; run DCGM diagnostics if it repeats"),
    literals=_XID_LITERALS,
    pattern=_re(rf"{XID_PREFIX}(?P<code>[0-9]+)"),
)

# Short literals shared by many signatures. Each literal without one of the scanner's preferred
# anchors becomes an anchor of its own, and each anchor or ``chunk_pattern`` is one more pass of the
# pure-Python engine over every block (at most 16 in all, a test checks it; the Hyperscan engine
# makes one pass whatever the catalog). So messages are found through a few words they have in
# common: ``ailed`` (failed / Failed), ``atchdog``, ``handle``, ``loss scale``, ``NVRM``, ``: nan``,
# ``of memory`` and ``llegal``, besides the scanner's ``rror``, ``NCCL WARN`` and ``Socket``; rarer
# messages of one category that share no word go in one signature with a ``chunk_pattern``
# (``storage-unreachable``, ``nvlink-fabric-down``, ``collective-stall``, ``rdma-completion-failure``).
# None should fill healthy logs: an anchor on every ``NCCL INFO`` line or on a word of every
# iteration line (``nan`` of Megatron's ``number of nan iterations``) would make each of them a
# candidate, matched in Python.
_FAILED = "ailed"
_WATCHDOG = "atchdog"  # Watchdog / watchdog
# ``loss scale``: the fp16 scalers' messages (DeepSpeed's ``OVERFLOW! ... Attempted loss scale: 1,
# reducing to 1``) and Megatron's iteration lines (``| loss scale: 1.0 |``, where a lost ``lm loss``
# shows). It makes each Megatron iteration line a candidate of the Python engine: one line per
# logging interval, cheap beside the pass a separate anchor would cost.
_LOSS_SCALE = "loss scale"
# ``: nan``: a metric printed as NaN (``grad norm: nan``, ``'grad_norm': nan``, ``grad_norm: nan``).
_COLON_NAN = ": nan"
# ``out of memory`` / ``Out of memory`` in the wordings without an error word (CuPy, old NCCL).
_OF_MEMORY = "of memory"
# ``an illegal memory access`` without an error word, and a process killed by SIGILL.
_ILLEGAL = "llegal"
# The verbs that set up or use a connection; ``ibv_open_device`` failing means no usable HCA, which
# NCCL answers by falling back to sockets (``nccl-socket-fallback``).
_IBV_VERBS = (
    r"ibv_(?:create_qp|modify_qp|reg_mr[a-z_0-9]*|reg_dmabuf_mr|poll_cq|post_send|post_recv"
    r"|get_async_event|create_cq|alloc_pd)"
)
_LOSS_ACTION = gettext_noop(
    "Stop the run and restart from the last good checkpoint with a lower learning rate, bf16 "
    "instead of fp16, or without the offending batch; if it repeats on one node, suspect its GPUs"
)


OTHER_SIGNATURES = (
    # --- the GPU as the driver and nvidia-smi report it without an Xid --------------------------
    Signature(
        id="nvrm-gpu-lost",
        category="hardware_gpu",
        severity="critical",
        code=None,
        title="NVIDIA driver: GPU lost from the bus or needs a reset",
        action=gettext_noop(
            "Drain the node and power-cycle it; check the GPU's PCIe seating and power and replace "
            "it if it recurs"
        ),
        literals=("NVRM", _FAILED),
        # ``Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST]``, ``Check failed: Reset
        # required [NV_ERR_RESET_REQUIRED]``, and the probe's ``... has fallen off the bus and is
        # not responding to commands.`` (a bare ``GPU has fallen off the bus.`` follows an Xid 79).
        pattern=_re(
            r"[Ff]ailed: (?:GPU lost from the bus|Reset required) \[NV_ERR_"
            r"|NVRM: .*?fallen off the bus and is not responding to commands"
        ),
    ),
    Signature(
        id="nvrm-rminit-failed",
        category="hardware_gpu",
        severity="critical",
        code=None,
        title="NVIDIA driver cannot initialise the GPU (RmInitAdapter failed)",
        action=gettext_noop(
            "Drain the node and reset or power-cycle the GPU; if it keeps failing after a cold "
            "boot, check the driver/firmware versions and replace the GPU"
        ),
        literals=(_FAILED, "rror"),
        pattern=_re(
            r"NVRM: .*?(?:RmInitAdapter failed|rm_init_adapter failed"
            r"|GSP-FMC reported an error while attempting to boot GSP)"
        ),
    ),
    Signature(
        id="nvrm-gsp-failure",
        category="hardware_gpu",
        severity="critical",
        code=None,
        title="NVIDIA driver: GSP firmware stopped responding (heartbeat timeout, crash report)",
        action=gettext_noop(
            "Drain the node and reset the GPU (or reboot); update driver and firmware if it recurs"
        ),
        literals=("NVRM",),
        # The GSP's heartbeat and crash reports, which come without an Xid 119/120 on some drivers.
        pattern=_re(r"NVRM: .*?(?:GSP RM heartbeat timed out|: Heartbeat timed out|GSP-CrashCat Report)"),
    ),
    Signature(
        id="nvidia-smi-gpu-lost",
        category="hardware_gpu",
        severity="critical",
        code=None,
        title="nvidia-smi cannot reach the GPU (Unknown Error / GPU is lost)",
        action=gettext_noop(
            "Drain the node and reboot it; look for Xid 79 or PCIe errors in the kernel log and "
            "replace the GPU if it recurs"
        ),
        literals=("handle",),
        pattern=_re(
            r"Unable to determine the device handle for GPU ?[0-9A-Fa-f:.]+: (?:Unknown Error|GPU is lost)"
        ),
    ),
    Signature(
        id="nvidia-smi-uncorrectable-remapped-rows",
        category="hardware_memory_ecc",
        severity="critical",
        code=None,
        title="nvidia-smi -q: rows remapped for uncorrectable errors",
        action=gettext_noop(
            "Drain the node and reset the GPU so the pending remap takes effect; replace it if "
            "remapping fails or the count keeps rising"
        ),
        literals=("rror",),
        # The ``Remapped Rows`` section's ``Uncorrectable Error : 4``; a zero count is healthy.
        pattern=_re(r"(?<![A-Za-z])Uncorrectable Error[ \t]*: [1-9]"),
    ),
    Signature(
        id="nvidia-smi-ecc-uncorrectable",
        category="hardware_memory_ecc",
        severity="critical",
        code=None,
        title="nvidia-smi -q: uncorrectable ECC errors counted, or a row remap pending",
        action=gettext_noop(
            "Drain the node and reset the GPU so the pending remap takes effect; replace it if "
            "remapping fails or the count keeps rising"
        ),
        literals=("Uncorrectable", "Pending"),
        # The ``ECC Errors`` section's ``SRAM Uncorrectable : 1`` (also ``DRAM``, ``Parity``,
        # ``SEC-DED``) and the ``Remapped Rows`` / ``Retired Pages`` sections' ``Pending : Yes``;
        # zero, ``N/A`` and ``No`` are healthy, and ``Pending : Enabled`` is a mode, not a remap.
        pattern=_re(
            r"[SD]RAM Uncorrectable(?: Parity| SEC-DED)?[ \t]*: [1-9]"
            r"|(?<![A-Za-z])Pending(?: Page Blacklist| Page Retirement)?[ \t]*: Yes"
        ),
    ),
    # --- NVLink and the fabric without an Xid --------------------------------------------------
    Signature(
        id="nvlink-driver-error",
        category="nvlink",
        severity="critical",
        code=None,
        title="NVIDIA driver: NVLink discovery or link failure",
        action=_NVLINK_ACTION,
        literals=("NVRM",),
        pattern=_re(r"NVRM: (?:GPU[0-9]+ )?knvlink[A-Za-z0-9_]*: .*?[Ff]ailed"),
    ),
    Signature(
        id="nvlink-fabric-down",
        category="nvlink",
        severity="error",
        code=None,
        title="NVSwitch error or NVLink fabric not usable (SXid, fabric manager not running, links inactive)",
        action=gettext_noop(
            "Install and start the fabric manager of exactly the driver's version (NVL5+ systems "
            "need ib_umad loaded), check the NVLinks (nvidia-smi nvlink -s, -e) and NVSwitches; "
            "drain the node until the fabric is up"
        ),
        literals=("SXid", "abric", "nactive", "nActive", "Insufficient Resources"),
        # The NVSwitch driver's ``nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007, ...`` (each
        # SXid, fatal or not, with its ``Data {...}`` line), nv-fabricmanager's ``fabric manager
        # NVIDIA GPU driver interface version X don't match with driver version Y`` and its start
        # script's ``..., fabric manager cannot be started``;
        # ``nvidia-smi nvlink -s`` ``Link 3: <inactive>``, NVML's ``Unable to retrieve NVLink
        # information as all links are inActive``; ``nvidia-smi -q`` ``Fabric`` ``Status :
        # Insufficient Resources`` (the GPU did not join an NVLink domain).
        pattern=_re(
            r"nvswitch[0-9]*: SXid \([^)]*\): (?P<code>[0-9]+)"
            r"|[Ff]abric [Mm]anager NVIDIA GPU driver interface version \S+ don't match with driver version"
            r"|[Ff]abric [Mm]anager cannot be started"
            r"|Link [0-9]+: <inactive>|all links are in[Aa]ctive"
            r"|(?<![A-Za-z])Status[ \t]*: Insufficient Resources"
        ),
        # One pass for all: none of their words is in the scanner's anchors.
        chunk_pattern=re.compile(
            rb"nvswitch[0-9]*: SXid \([^)]*\): [0-9]+"
            rb"|abric [Mm]anager (?:NVIDIA GPU driver interface version \S+ don't match with driver version"
            rb"|cannot be started)"
            rb"|Link [0-9]+: <inactive>|all links are in[Aa]ctive"
            rb"|Status[ \t]*: Insufficient Resources"
        ),
    ),
    Signature(
        id="nvls-fabric-failure",
        category="nvlink",
        severity="error",
        code=None,
        title="NCCL: NVLink SHARP (NVLS) setup failed (fabric manager / NVSwitch)",
        action=gettext_noop(
            "Check the node's fabric manager (systemctl status nvidia-fabricmanager, version equal "
            "to the driver's) and NVSwitches; restart it or drain the node; NCCL_NVLS_ENABLE=0 "
            "avoids NVLS meanwhile"
        ),
        literals=(_FAILED, "NCCL WARN"),
        pattern=_re(
            r"Failed to bind NVLink SHARP \(NVLS\) Multicast"
            r"|nvls\.cc:[0-9]+ NCCL WARN Cuda failure (?:[0-9]+ )?'(?:invalid argument"
            r"|the operation cannot be performed in the present state)'"
        ),
    ),
    Signature(
        id="cuda-system-not-ready",
        category="nvlink",
        severity="error",
        code=None,
        title="CUDA: system not yet initialized (error 802, fabric manager not running)",
        action=gettext_noop(
            "Start the node's fabric manager (its version must equal the driver's) and check the "
            "NVSwitches; drain the node until CUDA initialises"
        ),
        literals=("rror",),
        pattern=_re(r"rror \(?802\)? ?: system not yet initialized|cudaErrorSystemNotReady"),
    ),
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
        id="nccl-ib-completion-error",
        category="network_rdma",
        severity="error",
        code=None,
        title="NCCL: RDMA completion error (InfiniBand/RoCE)",
        action=gettext_noop(
            "Check the HCA port, cable and switch port of both peers (ibstat, port error "
            "counters); drain the node if the errors follow it"
        ),
        literals=("NCCL WARN", "rror"),
        # ``NCCL WARN NET/IB : Got completion from peer ... with status=12`` and the IB plugin's
        # ``NET/IBext``/``NET/IBP``; ``... with error 12`` (NCCL 2.3-2.x, also quoted as the
        # ``Last error:`` of an ``ncclRemoteError``).
        pattern=_re(
            r"(?:NCCL WARN NET/IB[A-Za-z0-9]* ?: ?Got completion (?:from peer \S+ )?with status="
            r"|NET/IB[A-Za-z0-9]* ?: ?Got completion (?:from peer \S+ )?with error )(?P<code>[0-9]+)"
            r"|NCCL WARN NET/IB[A-Za-z0-9]* ?:.*?remote (?:access|operation) error"
            r"|NCCL WARN Call to ibv_poll_cq"
        ),
    ),
    Signature(
        id="nccl-net-failure",
        category="network_rdma",
        severity="error",
        code=None,
        title="NCCL: network transport failure (IB verbs call, async event, socket to a peer)",
        action=gettext_noop(
            "Check the network between the nodes the line names: HCA port and cable (ibstat, port "
            "counters), RoCE GID/routing, firewall and NCCL_SOCKET_IFNAME; drain the node if the "
            "errors follow it"
        ),
        literals=("NCCL WARN", _FAILED),
        # A failed ``ibv_*`` verb of a connection (``ibv_open_device`` failing is the socket
        # fallback's cause, see there), an IB async event, the socket layer losing a peer
        # (``socketProgress: Connection closed by remote peer``, ``Call to recv ... failed``),
        # an OFI (EFA) request completing with an error; NCCL 2.3 wrote ``WARN`` without ``NCCL``.
        pattern=_re(
            rf"NCCL WARN (?:Call to (?:{_IBV_VERBS}|recv|send|connect)[ (]"
            r"|NET/IB[A-Za-z0-9]* ?: ?Got async event"
            r"|socket[A-Za-z]*:? (?:Connect|Connection closed|Call to|poll\(\) returned)"
            r"|Socket recv failed|NET/OFI .*?completed with error)"
            rf"|WARN Call to (?:{_IBV_VERBS}|recv|send|connect) failed"
        ),
    ),
    Signature(
        id="rdma-transport-retry-exceeded",
        category="network_rdma",
        severity="error",
        code=None,
        title="RDMA: transport retry exceeded, verbs or device failure (UCX, NVSHMEM, EFA)",
        action=gettext_noop(
            "Check the HCA port, cable and switch port of both peers (ibstat, port error "
            "counters) or the EFA security group; drain the node if the errors follow it"
        ),
        literals=("rror", _FAILED),
        pattern=_re(
            r"rror.*?Transport retry count exceeded"
            rf"|{_IBV_VERBS} failed|Failed to modify QP to R[TS][RS]"
            r"|libfabric:\S*:efa:\S*error\(\)"
            r"|infiniband \S+: Failed to"
        ),
    ),
    Signature(
        id="rdma-completion-failure",
        category="network_rdma",
        severity="error",
        code=None,
        title="RDMA: work request completed with an error status (transport retry exceeded)",
        action=gettext_noop(
            "Check the HCA port, cable and switch port of both peers (ibstat, port error "
            "counters); drain the node if the errors follow it"
        ),
        literals=("Transport retry count exceeded", "Got completion"),
        # Without an error word: UCX's ``ib_mlx5_log.c:136  Transport retry count exceeded on
        # mlx5_1:1/IB`` (IBV_WC_RETRY_EXC_ERR), the NCCL IB plugin's ``NET/IBP:Got completion from
        # peer X with status=12 ...`` printed on its own.
        pattern=_re(
            r"Transport retry count exceeded on \S+"
            r"|NET/IB[A-Za-z0-9]* ?: ?Got completion from peer \S+ with status=(?P<code>[0-9]+)"
        ),
        # One pass for both: none of their words is in the scanner's anchors.
        chunk_pattern=re.compile(
            rb"Transport retry count exceeded on \S+|Got completion from peer \S+ with status="
        ),
    ),
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
        literals=(_WATCHDOG,),
        pattern=_re(r"Watchdog caught collective operation timeout"),
    ),
    Signature(
        id="nccl-watchdog-abort",
        category="nccl_timeout_hang",
        severity="error",
        code=None,
        title="NCCL collective failed or timed out: ProcessGroupNCCL takes the process down",
        action=gettext_noop(
            "Find the rank that never joined the collective (no timeout of its own, or its own "
            "error first) and its node; restart from the last checkpoint without that node"
        ),
        literals=(_WATCHDOG, _FAILED),
        # PyTorch's ProcessGroupNCCL in its wordings since 1.x: the abort after a timeout, the
        # watchdog itself stuck (what the heartbeat monitor reports), ``failure detected by
        # watchdog``.
        pattern=_re(
            r"Some NCCL operations have failed or timed out"
            r"|ProcessGroupNCCL's watchdog got stuck for|failure detected by watchdog"
            r"|First PG on this rank that detected no heartbeat of its watchdog"
        ),
    ),
    Signature(
        id="collective-stall",
        category="nccl_timeout_hang",
        severity="error",
        code=None,
        title="Ranks stalled in a collective (heartbeat monitor, Horovod stall inspector, vLLM broadcast)",
        action=gettext_noop(
            "Find the rank that never joined the collective (no timeout of its own, or its own "
            "error first) and its node; restart from the last checkpoint without that node"
        ),
        literals=("Heartbeat monitor", "subset of ranks", "shared memory broadcast block"),
        # PyTorch's ProcessGroupNCCL heartbeat monitor (``Heartbeat monitor timed out! Process will
        # be terminated after dumping debug info.``), Horovod's stall inspector (``One or more
        # tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are
        # waiting for remainder of ranks``), vLLM's ``No available shared memory broadcast block
        # found in 60 seconds`` (a worker stuck).
        pattern=_re(
            r"Heartbeat monitor timed out"
            r"|submitted to be reduced, gathered or broadcasted by subset of ranks"
            r"|No available shared memory broadcast block found in"
        ),
        # One pass for the three: none of their words is in the scanner's anchors.
        chunk_pattern=re.compile(
            rb"Heartbeat monitor timed out"
            rb"|submitted to be reduced, gathered or broadcasted by subset of ranks"
            rb"|No available shared memory broadcast block found in"
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
        literals=("rror", "NCCL WARN", _FAILED, _OF_MEMORY),
        # PyTorch (``CUDA out of memory``, 0.x ``cuda runtime error (2) : out of memory``,
        # ``THCudaCheck FAIL ... error=2 : out of memory``), CuPy, TensorFlow (``ResourceExhaustedError
        # ... OOM when allocating``, ``CUDA_ERROR_OUT_OF_MEMORY``), JAX/XLA ``RESOURCE_EXHAUSTED: Out
        # of memory``, cuBLAS failing to allocate its handle, vLLM without memory for the KV cache;
        # NCCL before 2.4 wrote ``WARN Cuda failure 'out of memory'`` without ``NCCL``; CuPy's own
        # message (``Out of memory allocating N bytes (allocated so far: N bytes)``, ``out of memory
        # to allocate N bytes (total N bytes)``) as Chainer's training loop prints it.
        pattern=_re(
            r"(?:OutOfMemoryError|RuntimeError): ?CUDA out of memory|CUDA error: out of memory"
            r"|WARN Cuda failure (?:2 )?'out of memory'|cudaErrorMemoryAllocation"
            r"|error \(2\) : out of memory|error=2 : out of memory"
            r"|OutOfMemoryError: out of memory to allocate"
            r"|[Oo]ut of memory (?:to allocate|allocating) [0-9,]+ bytes \((?:total|allocated so far:) "
            r"|ResourceExhaustedError: [0-9]+ root error\(s\) found"
            r"|ResourceExhaustedError\S*(?: \(see above for traceback\))?: OOM when allocating"
            r"|(?:rror|ailed).*?CUDA_ERROR_OUT_OF_MEMORY"
            r"|rror: RESOURCE_EXHAUSTED: Out of memory"
            r"|CUDA error: CUBLAS_STATUS_ALLOC_FAILED"
            r"|rror: No available memory for the cache blocks"
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
        literals=("rror", "NCCL WARN", _FAILED, _ILLEGAL),
        # The CUDA runtime's and driver's names and messages (``an illegal memory access was
        # encountered``, ``CUDA_ERROR_ILLEGAL_ADDRESS``, ``misaligned address``, error 700/716) on a
        # line that reports an error or failure: PyTorch 0.x ``cuda runtime error (77)``, JAX/XLA,
        # TensorFlow, Triton, CUB/Thrust, Caffe, NCCL ``Cuda failure 700 '...'``, nccl-tests
        # ``Test CUDA failure common.cu:334 '...'``, PyTorch's ``CUDA warning: ...`` from a destructor.
        pattern=_re(
            r"CUDA (?:error|warning): (?:an illegal memory access|an illegal instruction|misaligned address)"
            r"|CUDA failure \S+ 'an illegal memory access"
            r"|NCCL WARN Cuda failure (?:[0-9]+ )?'an illegal memory access|cudaErrorIllegalAddress"
            r"|(?:rror|ailed).*?(?:an illegal memory access was encountered"
            r"|an illegal instruction was encountered|misaligned address"
            r"|CUDA_ERROR_(?:ILLEGAL_ADDRESS|ILLEGAL_INSTRUCTION|MISALIGNED_ADDRESS)"
            r"|ErrorIllegalAddress|cudaErrorMisalignedAddress)"
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
        literals=(
            "NCCL error",
            "ncclUnhandledCudaError",
            "ncclSystemError",
            "ncclInternalError",
            "NCCL WARN",
        ),
        pattern=_re(
            r"NCCL error(?![A-Za-z0-9_])|(?P<code>nccl(?:UnhandledCuda|System|Internal)Error)"
            r"|NCCL WARN Duplicate GPU detected"
        ),
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
        literals=("Socket", _FAILED),
        # ``Using network Socket`` (``Using internal Network Socket`` before NCCL 2.4), channels
        # ``via NET/Socket/0``, NCCL failing to load the verbs library or to open the HCA.
        # ``NET/Socket : Using [0]ib0`` alone proves nothing: NCCL 2.4+ prints it in healthy IB
        # runs too.
        pattern=_re(
            r"NCCL INFO (?:Using (?:network|internal Network) Socket|Channel .*? via NET/Socket/)"
            r"|(?:NCCL INFO|WARN) Failed to open libibverbs\.so"
            r"|WARN Call to ibv_open_device failed"
        ),
    ),
    Signature(
        id="nccl-socket-fallback-no-ib",
        category="nccl_socket_fallback",
        severity="warning",
        code=None,
        title="NCCL found no InfiniBand device and uses TCP sockets",
        action=gettext_noop(
            "Give the job's container the NCCL RDMA settings (NCCL_IB_HCA, no NCCL_IB_DISABLE=1) "
            "or move it to RDMA nodes; check 'Using network' says IB"
        ),
        literals=("Socket",),
        # ``NET/Socket : Using [0]eth0:...`` is printed in healthy IB runs too (NCCL 2.4); after
        # ``NET/IB : No device found`` in the same log it is the transport NCCL fell back to.
        pattern=_re(r"NCCL INFO NET/Socket ?: ?Using"),
        after="NET/IB : No device found",
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
        literals=("rror", "handle", _FAILED),
        # EIO as programs print it, the kernel's block-layer and ext4 errors, a FUSE mount whose
        # daemon went away (``Transport endpoint is not connected``, errno 107, on a line that
        # reports an error; without one see ``storage-unreachable``), stale NFS handles, Lustre
        # evictions and failed requests.
        pattern=_re(
            r"[Ii]nput/output error|Stale file handle|(?:rror|ailed).*?Transport endpoint is not connected"
            r"|Transport endpoint is not connected \(os error 107\)"
            r"|I/O error, dev \S+, sector|Buffer I/O error on dev"
            r"|EXT4-fs error \(device"
            r"|LustreError.*?(?:evict|failed: rc = -[0-9])"
        ),
    ),
    Signature(
        id="storage-unreachable",
        category="storage_io",
        severity="error",
        code=None,
        title=(
            "Storage server or mount unreachable (NFS not responding, Lustre connection lost, "
            "FUSE mount gone)"
        ),
        action=gettext_noop(
            "Check the file server and the network path to it from the node (dmesg, mount state, "
            "the FUSE daemon); the job's I/O hangs or fails until it is back"
        ),
        literals=("Transport endpoint", "not responding", "was lost"),
        # A FUSE mount whose daemon went away as ``ls``, ``df``, Python or the daemon print it
        # (``...: Transport endpoint is not connected``, errno 107), the kernel's ``nfs: server X
        # not responding, still trying`` (``..., timed out`` on soft mounts) and Lustre's
        # ``Connection to X (at NID) was lost; in progress operations using this service will wait
        # for recovery to complete``.
        pattern=_re(
            r"Transport endpoint is not connected|nfs: server \S+ not responding"
            r"|Connection to \S+ \(at \S+\) was lost"
        ),
        # One pass for the three: none of their words is in the scanner's anchors.
        chunk_pattern=re.compile(
            rb"Transport endpoint is not connected|nfs: server \S+ not responding"
            rb"|Connection to \S+ \(at \S+\) was lost"
        ),
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
        literals=("rror", _FAILED),
        # torchelastic's rendezvous errors and the c10d TCPStore in its wordings: a client that
        # cannot connect (``The client socket has timed out``, ``connect() timed out``; a single
        # ``failed to connect to [host]:port`` warning is a retry while the master starts), a
        # server port already in use (errno 98; a failed IPv6 bind alone is no error), workers
        # that never joined, the NCCL unique id never fetched from the store.
        pattern=_re(
            r"(?P<code>Rendezvous(?:Timeout|Connection|Closed)Error|DistNetworkError|DistStoreError)"
            r"|rror: The client socket has timed out after"
            r"|The client socket has failed to connect to any network address"
            r"|TCP client failed to connect/validate to host"
            r"|The server socket has failed to (?:listen|bind to \S+ \(errno: 98 )"
            r"|rror: connect\(\) timed out"
            r"|c10d key-value store by key \S+ but store->get\(\S+\) got error"
        ),
    ),
    Signature(
        id="cuda-driver-too-old",
        category="software_error",
        severity="error",
        code=None,
        title="CUDA driver older than the CUDA runtime / NCCL library mismatch",
        action=gettext_noop(
            "Match the software to the node: a driver new enough for the CUDA runtime the job "
            "uses, one NCCL library that the framework was built against"
        ),
        literals=("rror",),
        pattern=_re(
            r"rror.*?(?:CUDA driver version is insufficient for CUDA runtime version"
            r"|The NVIDIA driver on your system is too old"
            r"|libtorch_cuda\.so: undefined symbol: nccl)"
            r"|cudaErrorInsufficientDriver"
        ),
    ),
    Signature(
        id="illegal-cpu-instruction",
        category="software_error",
        severity="error",
        code=None,
        title="Process killed by SIGILL: illegal CPU instruction",
        action=gettext_noop(
            "Install a build of the program for the node's CPU (AVX, AVX-512 support) or run it on "
            "nodes whose CPUs have the instructions it was built for"
        ),
        literals=(_ILLEGAL,),
        # The shell's report of a process killed by SIGILL.
        pattern=_re(r"Illegal instruction \(core dumped\)"),
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
        literals=("rror", _FAILED),
        pattern=_re(r"(?:rror|ailed).*?Connection reset by peer"),
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
        literals=("loss", "Loss", "ppl", "PPL", "Cost", "xent"),
        # Megatron ``lm loss: nan |``, Trainer ``{'loss': nan, ...}``, ``loss=tensor(nan, ...)``,
        # ``Loss = inf``, ``train_epoch_loss=nan``, ``Loss is nan, stopping training``; never a
        # finite value, never ``grad norm: nan`` or ``number of nan iterations``. A loss term
        # (mmdetection ``loss_cls: nan``, ``loss_net: nan``, never ``loss_scale``), ``[Loss] nan``,
        # and what the translation toolkits print instead of the loss: OpenNMT ``ppl:   nan; xent:
        # nan``, ``PPL nan``, Marian ``Cost nan``.
        pattern=_re(
            r"(?<![A-Za-z])(?:[Ll]oss(?:_[a-rt-z][A-Za-z]*)?|ppl|PPL|Cost|xent)(?:['\"]|\])?"
            r"(?:[ \t]*[:=][ \t]*|[ \t]+is[ \t]+|[ \t]+)(?:tensor\()?"
            r"(?P<value>[-+]?(?:nan|NaN|inf|Infinity))(?![A-Za-z0-9_])"
        ),
        # Any run of separators: a looser test, and possessive so the many finite losses of a
        # healthy log fail fast.
        chunk_pattern=re.compile(
            rb"(?:oss(?:_[a-rt-z][A-Za-z]*)?|ppl|PPL|Cost|xent)['\"\]]?[ \t:=](?>[ \t:=]|is[ \t])*+"
            rb"(?:tensor\()?[-+]?(?:nan|NaN|inf|Infinity)"
            rb"(?![A-Za-z0-9_])"
        ),
    ),
    Signature(
        id="loss-scale-floor",
        category="loss_nan_inf",
        severity="error",
        code=None,
        title="fp16 loss scale at its floor: gradients overflow at every step",
        action=_LOSS_ACTION,
        literals=(_LOSS_SCALE,),
        # DeepSpeed's fused optimizer ``Reducing dynamic loss scale from 1 to 1`` and its ZeRO
        # optimizers' ``OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1``,
        # apex ``reducing loss scale to 5e-324``, fairseq ``overflow detected, setting loss scale
        # to: 0.0001``. An overflow now and then at a large scale is how dynamic scaling works (healthy runs
        # overflow at scales of hundreds to billions); one that pushes the scale to 2 or below
        # means gradients near fp16's limit (65504) or Inf/NaN. The number is read by the pattern
        # (2, 0 to 1.x, or a negative power of ten), so no ``accept`` is needed.
        pattern=_re(
            r"(?:reducing loss scale to|setting loss scale to:|Reducing dynamic loss scale from \S+ to"
            r"|OVERFLOW! .*?Attempted loss scale: \S+ reducing to) ?"
            r"(?P<scale>2(?:\.0+)?(?![0-9eE.])|[01](?:\.[0-9]+)?(?![0-9eE.])|[0-9]+(?:\.[0-9]+)?[eE]-[0-9]+)"
        ),
    ),
    Signature(
        id="loss-scale-minimum",
        category="loss_nan_inf",
        severity="error",
        code=None,
        title="fp16 loss scale reached its minimum: training stopped",
        action=_LOSS_ACTION,
        literals=(_LOSS_SCALE,),
        # DeepSpeed ``Current loss scale already at minimum - cannot decrease scale anymore``
        # (any case), fairseq ``FloatingPointError: Minimum loss scale reached (0.0001)``.
        pattern=_re(r"[Cc]urrent loss scale already at minimum|Minimum loss scale reached"),
    ),
    Signature(
        id="lm-loss-missing",
        category="loss_nan_inf",
        severity="error",
        code=None,
        title="Megatron stopped reporting the loss (NaN): iteration line without lm loss",
        action=_LOSS_ACTION,
        literals=(_LOSS_SCALE,),
        # Megatron prints each loss only when its average is > 0, which a NaN is not: an iteration
        # line that goes from ``global batch size: N |`` straight to ``loss scale:`` while no
        # iteration was skipped (an fp16 overflow skips the step and drops the loss too) is a NaN
        # loss, once earlier lines of the log had one.
        pattern=_re(r"global batch size: *[0-9]+ \| loss scale: .*?number of skipped iterations: *0 \|"),
        after="lm loss:",
    ),
    Signature(
        id="grad-norm-nan-check",
        category="loss_nan_inf",
        severity="error",
        code=None,
        title="Megatron's NaN check: NaN in the local gradient norm",
        action=_LOSS_ACTION,
        literals=("rror",),
        # ``AssertionError: Rank 3: found NaN in local grad norm in backwards pass`` and
        # ``RuntimeError: Rank 2, ...: Unexpected result nan (message='found NaN in local grad norm``
        pattern=_re(r"rror: .*?found NaN in local grad norm"),
    ),
)


def _grad_norm_nan(id_: str, title: str, key: str, pattern: str) -> Signature:
    """A NaN gradient norm, counted only after a line of the same log that printed ``key``: the
    first logging interval of fp16 training may overflow harmlessly while the scale settles."""
    return Signature(
        id=id_,
        category="loss_nan_inf",
        severity="error",
        code=None,
        title=title,
        action=_LOSS_ACTION,
        literals=(_COLON_NAN,),
        pattern=_re(pattern),
        after=key,
    )


GRAD_NORM_SIGNATURES = (
    # Megatron ``| grad norm: nan |``.
    _grad_norm_nan(
        "grad-norm-nan-megatron",
        "Gradient norm is NaN (Megatron)",
        "grad norm:",
        r"(?<![A-Za-z_])grad norm: nan(?![A-Za-z0-9_])",
    ),
    # Hugging Face Trainer ``{'loss': 0.0, 'grad_norm': nan, ...}``.
    _grad_norm_nan(
        "grad-norm-nan-trainer",
        "Gradient norm is NaN (Hugging Face Trainer)",
        "'grad_norm':",
        r"'grad_norm': nan(?![A-Za-z0-9_])",
    ),
    # mmengine / mmcv ``loss: 2.5128  grad_norm: nan``.
    _grad_norm_nan(
        "grad-norm-nan-mmengine",
        "Gradient norm is NaN (mmengine)",
        "grad_norm:",
        r"(?<![A-Za-z_'])grad_norm: nan(?![A-Za-z0-9_])",
    ),
)

SIGNATURES: tuple[Signature, ...] = (
    *XID_CAUSED_BY,
    *XID_SIGNATURES,
    XID_OTHER,
    *OTHER_SIGNATURES,
    *GRAD_NORM_SIGNATURES,
)

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
