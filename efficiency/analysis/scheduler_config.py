"""Scheduler configuration from an approved quota plan: Kueue, Volcano and Slurm.

Each cycle the committee approves, per department and GPU model, a number of *guaranteed* GPUs.
What is left of the capacity is the *shared pool*, which departments borrow from on demand, each
up to an optional borrowing limit. Guaranteed GPUs are never lent to another department, so no
scheduler ever has to preempt a job to give a department back what it was promised.

How each scheduler expresses that:

- **Kueue**: one ClusterQueue per department, with ``nominalQuota`` = guaranteed and
  ``lendingLimit: 0``, plus one ClusterQueue holding the shared pool with ``borrowingLimit: 0``;
  all in one cohort, so departments borrow only from the pool. The ClusterQueues cover
  ``nvidia.com/gpu`` only: workloads that also request CPU or memory need Kueue's configuration
  to leave those out of quota (``resources.excludeResourcePrefixes``).
- **Volcano**: one Queue per department (and model, where the cluster has several) with the
  guarantee as ``guarantee`` and ``deserved``, the ceiling as ``capability``, not reclaimable.
  Volcano's ``nvidia.com/gpu`` does not say which model: the model is in an annotation and the
  jobs' node selectors must pin it.
- **Slurm**: one QOS per department with ``GrpTRES`` set to the department's *ceiling*
  (guaranteed + borrowing limit, or + the whole shared pool when it has none). Slurm cannot hold
  GPUs for an account without preemption, so the guarantee itself is not exported; only the
  ceiling is enforced.

A borrowing limit larger than the shared pool cannot be reached: the ceilings use the pool size
instead. A model missing from a department's quotas counts as 0 guaranteed with no borrowing
limit. Names are derived from department codes and sanitized (Kubernetes DNS-1123 labels, Slurm
QOS names); two codes that end up with the same name are an error, never silently merged.
Everything that reaches the shell script is quoted with ``shlex.quote``.
"""

import hashlib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml

GPU_RESOURCE = "nvidia.com/gpu"
# Label set on each node by NVIDIA GPU feature discovery: the product name, spaces as dashes.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta1"
VOLCANO_API_VERSION = "scheduling.volcano.sh/v1beta1"
GENERATOR = "gpu-efficiency-portal"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
CYCLE_ANNOTATION = f"{GENERATOR}/cycle"
DEPARTMENT_LABEL = f"{GENERATOR}/department"
DEPARTMENT_CODE_ANNOTATION = f"{GENERATOR}/department-code"
GPU_MODEL_ANNOTATION = f"{GENERATOR}/gpu-model"
# Volcano creates these queues itself; a department queue must not overwrite them.
VOLCANO_RESERVED_QUEUES = frozenset({"default", "root"})

DNS_LABEL_MAX = 63
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
# Department slugs stay short so that "<dept>-<type>" still fits in a DNS-1123 label.
_DEPARTMENT_SLUG_MAX = 40
_VENDOR_WORDS = frozenset({"nvidia", "tesla", "geforce", "quadro", "amd", "radeon", "instinct", "intel"})
_FORM_FACTOR_RE = re.compile(r"^(sxm\d*|pcie\d*|hbm\d*[a-z]?|nvl\d*|gen\d+)$")
_GPU_NAME_RE = re.compile(r"^[a-z]+\d+[a-z]*$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class QueueQuota:
    """One department's approved quota for one GPU model."""

    department_code: str
    gpu_model: str  # as the inventory spells it
    guaranteed_gpus: int
    borrowing_limit_gpus: int | None = None  # None: may borrow the whole shared pool
    namespaces: tuple[str, ...] = ()
    slurm_accounts: tuple[str, ...] = ()


@dataclass(frozen=True)
class QuotaPlan:
    """The quotas approved for one cluster and cycle."""

    cluster: str  # cluster slug
    cycle_label: str  # goes into comments and annotations only
    capacity: dict[str, int]  # GPUs per gpu_model
    quotas: Sequence[QueueQuota]


@dataclass
class _Department:
    code: str
    slug: str
    guaranteed: dict[str, int] = field(default_factory=dict)
    borrowing_limit: dict[str, int | None] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)
    slurm_accounts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Resolved:
    """A validated plan: models in a stable order, their types, pool sizes, departments by slug."""

    cluster: str
    cycle_label: str
    models: list[str]
    types: dict[str, str]
    pool: dict[str, int]
    departments: list[_Department]

    def ceiling(self, department: _Department, model: str) -> int:
        guaranteed = department.guaranteed.get(model, 0)
        limit = department.borrowing_limit.get(model)
        pool = self.pool[model]
        return guaranteed + (pool if limit is None else min(limit, pool))


def gpu_type(gpu_model: str) -> str:
    """Short GPU type for a model name, as Slurm GRES types and flavor names use it.

    "NVIDIA H100 80GB HBM3" -> "h100", "NVIDIA A100-SXM4-80GB" -> "a100", "Tesla V100-SXM2-32GB"
    -> "v100": the first word that looks like a product name (letters then digits), skipping the
    vendor, form factor and memory size. Anything else becomes a sanitized slug of the whole name.
    """
    words = [word for word in re.split(r"[^a-z0-9]+", gpu_model.lower()) if word]
    for word in words:
        if word in _VENDOR_WORDS or _FORM_FACTOR_RE.match(word):
            continue
        if _GPU_NAME_RE.match(word):
            return word
    return _dns_label(gpu_model)


def shared_pool(plan: QuotaPlan) -> dict[str, int]:
    """GPUs per model left for borrowing: capacity minus everything guaranteed.

    Raises ``ValueError`` naming the model when the guarantees exceed its capacity, or when a
    quota names a model the cluster does not have.
    """
    guaranteed = dict.fromkeys(plan.capacity, 0)
    for quota in plan.quotas:
        if quota.gpu_model not in plan.capacity:
            raise ValueError(
                f"{quota.department_code!r} has a quota for {quota.gpu_model!r}, "
                f"which cluster {plan.cluster!r} does not have"
            )
        if quota.guaranteed_gpus < 0:
            raise ValueError(
                f"{quota.department_code!r}: guaranteed GPUs of {quota.gpu_model!r} are negative"
            )
        guaranteed[quota.gpu_model] += quota.guaranteed_gpus
    pool = {}
    for model, capacity in plan.capacity.items():
        if capacity < 0:
            raise ValueError(f"capacity of {model!r} is negative")
        if guaranteed[model] > capacity:
            raise ValueError(
                f"{model!r}: {guaranteed[model]} GPUs guaranteed but the cluster has only {capacity}"
            )
        pool[model] = capacity - guaranteed[model]
    return pool


def kueue_manifests(plan: QuotaPlan) -> str:
    """Kueue ResourceFlavors, ClusterQueues and LocalQueues for the plan, as multi-document YAML."""
    resolved = _resolve(plan)
    cohort = _dns_label(f"{resolved.cluster}-gpu")
    shared_name = _dns_label(f"{resolved.cluster}-shared-pool")
    _check_unique([shared_name, *(d.slug for d in resolved.departments)], what="Kueue ClusterQueue")

    documents: list[dict] = []
    for model in resolved.models:
        documents.append(
            {
                "apiVersion": KUEUE_API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": _metadata(
                    resolved, resolved.types[model], annotations={GPU_MODEL_ANNOTATION: model}
                ),
                "spec": {"nodeLabels": {GPU_PRODUCT_LABEL: _gpu_product_label(model)}},
            }
        )

    def cluster_queue(name: str, flavors: list[dict], *, department: _Department | None) -> dict:
        spec: dict = {"cohort": cohort}
        # Left out for the shared pool: no namespace may submit to it, it only lends.
        if department is not None:
            spec["namespaceSelector"] = {}
        spec |= {
            "queueingStrategy": "StrictFIFO",
            "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
            "resourceGroups": [{"coveredResources": [GPU_RESOURCE], "flavors": flavors}],
        }
        return {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "ClusterQueue",
            "metadata": _metadata(resolved, name, department=department),
            "spec": spec,
        }

    for department in resolved.departments:
        flavors = []
        for model in resolved.models:
            resource: dict = {"name": GPU_RESOURCE, "nominalQuota": department.guaranteed.get(model, 0)}
            limit = department.borrowing_limit.get(model)
            if limit is not None:
                resource["borrowingLimit"] = limit
            resource["lendingLimit"] = 0  # the guarantee is never lent
            flavors.append({"name": resolved.types[model], "resources": [resource]})
        documents.append(cluster_queue(department.slug, flavors, department=department))

    pool_flavors = [
        {
            "name": resolved.types[model],
            "resources": [{"name": GPU_RESOURCE, "nominalQuota": resolved.pool[model], "borrowingLimit": 0}],
        }
        for model in resolved.models
    ]
    documents.append(cluster_queue(shared_name, pool_flavors, department=None))

    for department in resolved.departments:
        for namespace in department.namespaces:
            documents.append(
                {
                    "apiVersion": KUEUE_API_VERSION,
                    "kind": "LocalQueue",
                    "metadata": _metadata(
                        resolved, department.slug, namespace=namespace, department=department
                    ),
                    "spec": {"clusterQueue": department.slug},
                }
            )
    return _dump(documents)


def volcano_queues(plan: QuotaPlan) -> str:
    """Volcano Queues for the plan, as multi-document YAML.

    One queue per department, or per department and model where the cluster has several models
    (named ``<dept>-<type>``): ``guarantee`` and ``deserved`` are the guaranteed GPUs,
    ``capability`` the ceiling (guaranteed + borrowing limit, or + the whole shared pool).
    """
    resolved = _resolve(plan)
    several = len(resolved.models) > 1
    documents = []
    for department in resolved.departments:
        for model in resolved.models:
            name = _dns_label(f"{department.slug}-{resolved.types[model]}") if several else department.slug
            guaranteed = department.guaranteed.get(model, 0)
            documents.append(
                {
                    "apiVersion": VOLCANO_API_VERSION,
                    "kind": "Queue",
                    "metadata": _metadata(
                        resolved, name, department=department, annotations={GPU_MODEL_ANNOTATION: model}
                    ),
                    "spec": {
                        "weight": 1,
                        "reclaimable": False,
                        "guarantee": {"resource": {GPU_RESOURCE: guaranteed}},
                        "deserved": {GPU_RESOURCE: guaranteed},
                        "capability": {GPU_RESOURCE: resolved.ceiling(department, model)},
                    },
                }
            )
    names = [document["metadata"]["name"] for document in documents]
    _check_unique(names, what="Volcano Queue")
    for name in names:
        if name in VOLCANO_RESERVED_QUEUES:
            raise ValueError(f"Volcano queue name {name!r} is reserved by Volcano; rename the department")
    return _dump(documents)


def slurm_qos_commands(plan: QuotaPlan) -> str:
    """A bash script of ``sacctmgr`` commands: one QOS per department capping its GPUs.

    ``GrpTRES`` holds the ceiling (guaranteed + borrowing limit, or + the whole shared pool):
    Slurm cannot guarantee GPUs without preemption, so only the ceiling is enforced. With several
    models the cap is also given per GRES type. The mapped accounts get the QOS added and made
    their default. Re-running the script is harmless: the QOS is added only when missing.
    """
    resolved = _resolve(plan)
    several = len(resolved.models) > 1
    types = [resolved.types[model] for model in resolved.models]
    lines = [
        "#!/usr/bin/env bash",
        f"# GPU quotas for cluster {_comment(resolved.cluster)}, cycle {_comment(resolved.cycle_label)}.",
        f"# Generated by {GENERATOR}; edit the quotas in the portal, not here.",
        "#",
        "# Slurm cannot guarantee GPUs to an account without preemption, so this script only",
        "# enforces each department's ceiling: guaranteed GPUs + borrowing limit (or + the whole",
        "# shared pool when the department has no limit). Jobs submitted with another QOS the",
        "# account also holds are not capped by it.",
    ]
    if several:
        tres = ",".join(["gres/gpu", *(f"gres/gpu:{t}" for t in types)])
        lines += [
            "#",
            "# The per-type limits need every type tracked in slurm.conf:",
            f"#   AccountingStorageTRES={tres}",
        ]
    lines += [
        "set -euo pipefail",
        "",
        "qos_exists() {",
        '  [[ -n "$(sacctmgr -n -P show qos where name="$1" format=name)" ]]',
        "}",
    ]
    for department in resolved.departments:
        qos = f"quota-{department.slug}"
        caps = {model: resolved.ceiling(department, model) for model in resolved.models}
        tres_parts = [f"gres/gpu={sum(caps.values())}"]
        if several:
            tres_parts += [f"gres/gpu:{resolved.types[model]}={caps[model]}" for model in resolved.models]
        summary = "; ".join(
            f"{resolved.types[m]}: {department.guaranteed.get(m, 0)} guaranteed, ceiling {caps[m]}"
            for m in resolved.models
        )
        quoted = shlex.quote(qos)
        lines += [
            "",
            f"# {_comment(department.code)}: {summary}",
            f"qos_exists {quoted} || sacctmgr -i add qos {quoted}",
            f"sacctmgr -i modify qos where {shlex.quote(f'name={qos}')}"
            f" set {shlex.quote('GrpTRES=' + ','.join(tres_parts))}",
        ]
        if not department.slurm_accounts:
            lines.append("# no Slurm account is mapped to this department")
        for account in department.slurm_accounts:
            lines.append(
                f"sacctmgr -i modify account where {shlex.quote(f'name={account}')}"
                f" set {shlex.quote(f'qos+={qos}')} {shlex.quote(f'defaultqos={qos}')}"
            )
    return "\n".join(lines) + "\n"


def _resolve(plan: QuotaPlan) -> _Resolved:
    """Validate the plan and group its quotas by department."""
    if not plan.capacity:
        raise ValueError(f"cluster {plan.cluster!r} has no GPU models")
    pool = shared_pool(plan)
    types = {model: gpu_type(model) for model in plan.capacity}
    _check_unique(list(types.values()), what="GPU type", sources=list(types))
    for model in plan.capacity:
        _gpu_product_label(model)
    models = sorted(plan.capacity, key=lambda model: types[model])

    departments: dict[str, _Department] = {}
    for quota in plan.quotas:
        code = quota.department_code
        department = departments.get(code)
        if department is None:
            department = departments[code] = _Department(code=code, slug=_department_slug(code))
        if quota.gpu_model in department.guaranteed:
            raise ValueError(f"{code!r} has two quotas for {quota.gpu_model!r}")
        if quota.borrowing_limit_gpus is not None and quota.borrowing_limit_gpus < 0:
            raise ValueError(f"{code!r}: borrowing limit for {quota.gpu_model!r} is negative")
        department.guaranteed[quota.gpu_model] = quota.guaranteed_gpus
        department.borrowing_limit[quota.gpu_model] = quota.borrowing_limit_gpus
        for namespace in quota.namespaces:
            if not _DNS_LABEL_RE.match(namespace) or len(namespace) > DNS_LABEL_MAX:
                raise ValueError(f"{code!r}: {namespace!r} is not a valid Kubernetes namespace name")
            if namespace not in department.namespaces:
                department.namespaces.append(namespace)
        for account in quota.slurm_accounts:
            if not account or _CONTROL_RE.search(account):
                raise ValueError(f"{code!r}: Slurm account {account!r} is empty or has control characters")
            if account not in department.slurm_accounts:
                department.slurm_accounts.append(account)

    ordered = sorted(departments.values(), key=lambda d: d.slug)
    _check_unique([d.slug for d in ordered], what="department name", sources=[d.code for d in ordered])
    namespaces = [(namespace, d.code) for d in ordered for namespace in d.namespaces]
    _check_unique([n for n, _ in namespaces], what="namespace mapping", sources=[c for _, c in namespaces])
    return _Resolved(
        cluster=_dns_label(plan.cluster),
        cycle_label=plan.cycle_label,
        models=models,
        types=types,
        pool=pool,
        departments=ordered,
    )


def _dns_label(text: str, *, max_length: int = DNS_LABEL_MAX, prefix: str = "x") -> str:
    """A DNS-1123 label for ``text``: lowercase alphanumerics and dashes, at most ``max_length``.

    Whatever is lost in the translation (non-ASCII characters, excess length) is replaced by a
    short hash of the original, so different inputs keep different names; ``prefix`` leads the
    hash when nothing of ``text`` survives (labels must start with an alphanumeric).
    """
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    lossy = not text.isascii() or not slug
    if not lossy and len(slug) <= max_length:
        return slug
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    head = slug[: max_length - len(digest) - 1].rstrip("-")
    return f"{head or prefix}-{digest}"


def _department_slug(code: str) -> str:
    return _dns_label(code, max_length=_DEPARTMENT_SLUG_MAX, prefix="dept")


def _gpu_product_label(model: str) -> str:
    value = model.strip().replace(" ", "-")
    if len(value) > DNS_LABEL_MAX or not _LABEL_VALUE_RE.match(value):
        raise ValueError(f"{model!r} does not make a valid {GPU_PRODUCT_LABEL} label value")
    return value


def _check_unique(names: list[str], *, what: str, sources: list[str] | None = None) -> None:
    seen: dict[str, str] = {}
    for index, name in enumerate(names):
        source = sources[index] if sources else name
        if name in seen:
            raise ValueError(f"{what} {name!r} would be used twice ({seen[name]!r} and {source!r})")
        seen[name] = source


def _metadata(
    resolved: _Resolved,
    name: str,
    *,
    namespace: str | None = None,
    department: _Department | None = None,
    annotations: dict[str, str] | None = None,
) -> dict:
    labels = {MANAGED_BY_LABEL: GENERATOR}
    all_annotations = {CYCLE_ANNOTATION: resolved.cycle_label}
    if department is not None:
        labels[DEPARTMENT_LABEL] = department.slug
        all_annotations[DEPARTMENT_CODE_ANNOTATION] = department.code
    all_annotations |= annotations or {}
    metadata = {"name": name} | ({"namespace": namespace} if namespace else {})
    return metadata | {"labels": labels, "annotations": all_annotations}


def _dump(documents: list[dict]) -> str:
    return yaml.safe_dump_all(documents, sort_keys=False, allow_unicode=True, explicit_start=True)


def _comment(text: str) -> str:
    """``text`` made safe for one line of a shell comment: a newline would end the comment."""
    return _CONTROL_RE.sub(" ", text)
