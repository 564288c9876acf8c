"""Secrets out of job config snapshots, before they are stored (plain Python, no Django).

A job's environment, command and arguments are written by its user, and users put credentials
there: ``DB_PASS``, a DSN with a password, ``AUTH=bearer ...``, ``--hf-token=...``. The portal
needs only what the config audit compares with the ideal, so the rule is an allow list:

- an environment variable keeps its value when its name is one the audit or a launcher reads
  (``NCCL_*``, ``CUDA_*``, ``NVIDIA_*``, ``TORCH_*``, ``OMP_*``, ``MASTER_ADDR``, ``WORLD_SIZE``,
  ... see ``KEPT_ENV_PREFIXES`` and ``KEPT_ENV_NAMES``) and no credential word is in the name;
  every other value becomes ``<redacted>`` (the name stays: that a variable is set is evidence);
- in every kept value, command and argument, URL credentials (``postgres://u:<redacted>@h``),
  ``Authorization``/``Bearer``/``Basic`` credentials, the value of any flag or ``key=value`` whose
  name has a credential word (``--password=``, ``--hf-token x``, ``db.password=``) and the value
  of any ``UPPER_CASE=`` assignment not on the allow list are redacted.

Redacting twice changes nothing, so stored snapshots can be redacted again when the list grows.
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"

KEPT_ENV_PREFIXES = (
    "NCCL_",
    "CUDA_",
    "NVIDIA_",
    "CUBLAS_",
    "CUDNN_",
    "NVTE_",  # Transformer Engine
    "NVSHMEM_",
    "TORCH_",
    "TORCHELASTIC_",
    "PYTORCH_",
    "OMP_",
    "KMP_",
    "MKL_",
    "GLOO_",
    "UCX_",
    "FI_",  # libfabric (EFA)
    "OMPI_",
    "PMIX_",
    "I_MPI_",
    "HOROVOD_",
    "DEEPSPEED_",
    "DS_",
    "MEGATRON_",
    "XLA_",
    "TF_",
    "SLURM_",
)
KEPT_ENV_NAMES = frozenset(
    {
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "NODE_RANK",
        "GROUP_RANK",
        "LOCAL_WORLD_SIZE",
        "TOKENIZERS_PARALLELISM",
        "PYTHONUNBUFFERED",
        "PYTHONHASHSEED",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "PATH",
        "TZ",
        "LANG",
        "LC_ALL",
    }
)

# A credential word is a whole part of a name split on "_", "-" or ".": HF_TOKEN and --db-pass
# are credentials, TOKENIZERS_PARALLELISM and --tokenizer-type are not.
_CREDENTIAL_WORD = re.compile(
    r"(?:^|[_.-])(?:PASSWORD|PASSWD|PASS|PWD|SECRET|TOKEN|KEY|APIKEY|API[_-]?KEY|ACCESS[_-]?KEY|"
    r"PRIVATE[_-]?KEY|SECRET[_-]?KEY|CREDENTIALS?|AUTH|AUTHORIZATION|DSN|COOKIE)(?:$|[_.-])",
    re.IGNORECASE,
)
# A reference to where a value comes from (Kubernetes valueFrom), not the value: kept.
_REFERENCE = re.compile(r"<from \w+>")
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^@/\s?#]+)@")
_AUTH_SCHEME = re.compile(
    r"(?P<scheme>\b(?:bearer|basic|token|digest)\s+)(?P<credential>(?!<redacted>)[^\s'\",;]+)", re.IGNORECASE
)
_HEADER = re.compile(
    r"(?P<name>\b[A-Za-z][\w-]*)(?P<colon>\s*:\s*)(?P<value>(?!<redacted>)[^\s'\",;]+)", re.IGNORECASE
)
_ASSIGNMENT = re.compile(r"(?P<name>(?<![\w.-])-{0,2}[A-Za-z_][\w.-]*)=(?P<value>[^\s'\";&|]*)")
_FLAG_THEN_VALUE = re.compile(
    r"(?P<flag>(?<![\w-])--?[A-Za-z][\w.-]*)(?P<space>\s+)(?P<value>[^\s'\"-][^\s'\"]*)"
)
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def is_credential_name(name: str) -> bool:
    """Whether a variable, flag, key or header name says its value is a credential."""
    return bool(_CREDENTIAL_WORD.search(name.lstrip("-")))


def env_value_kept(name: str) -> bool:
    """Whether the config audit may keep this environment variable's value."""
    if is_credential_name(name):
        return False
    return name in KEPT_ENV_NAMES or name.startswith(KEPT_ENV_PREFIXES)


def env_redact(env: Mapping[str, object]) -> dict[str, str]:
    """The environment with every value not on the allow list replaced by ``<redacted>``."""
    redacted = {}
    for name, value in env.items():
        text = value if isinstance(value, str) else str(value)
        if _REFERENCE.fullmatch(text) or text == REDACTED:
            redacted[name] = text
        elif env_value_kept(name):
            redacted[name] = text_redact(text)
        else:
            redacted[name] = REDACTED
    return redacted


def text_redact(text: str) -> str:
    """A command line, argument or value with its credentials replaced by ``<redacted>``."""
    text = _URL_USERINFO.sub(_userinfo_sub, text)
    text = _AUTH_SCHEME.sub(lambda m: m["scheme"] + REDACTED, text)
    text = _HEADER.sub(_header_sub, text)
    text = _ASSIGNMENT.sub(_assignment_sub, text)
    return _FLAG_THEN_VALUE.sub(_flag_sub, text)


def args_redact(args: Sequence[object]) -> list[str]:
    """An argv with its credentials redacted, ``["--password", "x"]`` included."""
    redacted: list[str] = []
    secret_next = False
    for arg in args:
        text = arg if isinstance(arg, str) else str(arg)
        if secret_next and not text.startswith("-"):
            redacted.append(REDACTED)
            secret_next = False
            continue
        redacted.append(text_redact(text))
        secret_next = text.startswith("-") and "=" not in text and is_credential_name(text)
    return redacted


def config_redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """A job's config snapshot with secrets redacted: ``env``, containers' ``command``/``args``,
    ``launcher_args`` and any other ``command``/``args`` list or string."""
    return _walk(config)


def _walk(value: Any, key: str = "") -> Any:
    if isinstance(value, Mapping):
        out = {}
        for name, item in value.items():
            if name == "env" and isinstance(item, Mapping):
                out[name] = env_redact(item)
            elif isinstance(item, str) and is_credential_name(str(name)):
                out[name] = REDACTED
            else:
                out[name] = _walk(item, str(name))
        return out
    if isinstance(value, list):
        if key in {"command", "args", "launcher_args", "argv"}:
            return args_redact(value)
        return [_walk(item, key) for item in value]
    if isinstance(value, str):
        return text_redact(value)
    return value


def _userinfo_sub(match: re.Match) -> str:
    user, colon, password = match["userinfo"].partition(":")
    if colon:
        return f"{match['scheme']}{user}:{REDACTED if password != REDACTED else password}@"
    # A user name alone (https://ghp_xxx@github.com) is often a token: redact it all.
    return f"{match['scheme']}{REDACTED}@"


def _header_sub(match: re.Match) -> str:
    if match["value"].lower() in {"bearer", "basic", "token", "digest"}:
        return match[0]  # the scheme word; _AUTH_SCHEME has redacted the credential after it
    if match["name"].lower() in {"authorization", "proxy-authorization"} or is_credential_name(match["name"]):
        return f"{match['name']}{match['colon']}{REDACTED}"
    return match[0]


def _assignment_sub(match: re.Match) -> str:
    name, value = match["name"], match["value"]
    if not value or value == REDACTED:
        return match[0]
    bare = name.lstrip("-")
    if is_credential_name(bare) or (
        not name.startswith("-") and _ENV_NAME.fullmatch(bare) and not env_value_kept(bare)
    ):
        return f"{name}={REDACTED}"
    return match[0]


def _flag_sub(match: re.Match) -> str:
    if is_credential_name(match["flag"]) and match["value"] != REDACTED:
        return f"{match['flag']}{match['space']}{REDACTED}"
    return match[0]
