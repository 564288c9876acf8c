"""Roles, departments and the demo organisation of the reference scenario."""

import uuid
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from efficiency.choices import MappingKind, Role
from efficiency.models import Cluster, Department, DepartmentMapping, Gpu, Node


@dataclass(frozen=True)
class DepartmentSpec:
    code: str
    name: str
    node_count: int


# Car maker A's autonomous-driving platform (DESIGN.md): nine departments on a fixed
# partition of 64 nodes x 8 GPUs. Node counts follow the shares such platforms report.
REFERENCE_DEPARTMENTS = [
    DepartmentSpec("vision", "Vehicle vision", 10),
    DepartmentSpec("radar", "Radar perception", 6),
    DepartmentSpec("data", "Data processing", 6),
    DepartmentSpec("bev", "BEV", 8),
    DepartmentSpec("mapping", "Mapping", 4),
    DepartmentSpec("sim", "Simulation", 6),
    DepartmentSpec("pnc", "Planning & control", 6),
    DepartmentSpec("e2e", "End-to-end driving models", 12),
    DepartmentSpec("cabin", "In-cabin assistant", 6),
]
DEMO_CLUSTER_SLUG = "ad-platform"
GPUS_PER_NODE = 8
NODES_PER_RACK = 16
# (model, memory MiB, RDMA capable): the first 48 nodes are H100 with RDMA, the rest A100.
GPU_MODELS = [("NVIDIA H100 80GB HBM3", 81_559, True), ("NVIDIA A100-SXM4-80GB", 81_920, False)]
H100_NODE_COUNT = 48


@dataclass(frozen=True)
class DemoLogin:
    username: str
    role: Role
    departments: tuple[str, ...]


DEMO_LOGINS = [
    DemoLogin("admin", Role.PLATFORM_ADMIN, ()),
    DemoLogin("committee", Role.COMMITTEE, ()),
    DemoLogin("head-vision", Role.DEPARTMENT_HEAD, ("vision",)),
    DemoLogin("head-radar", Role.DEPARTMENT_HEAD, ("radar",)),
]


def roles_ensure() -> dict[Role, Group]:
    """Create the three role groups if missing."""
    return {role: Group.objects.get_or_create(name=role.value)[0] for role in Role}


def user_role_assign(*, user, role: Role, department_codes: tuple[str, ...] = ()) -> None:
    """Put a user in exactly one role group; a department head also heads the given departments."""
    groups = roles_ensure()
    user.groups.remove(*[group for r, group in groups.items() if r != role])
    user.groups.add(groups[role])
    if role == Role.PLATFORM_ADMIN and not user.is_staff:
        # Platform admins run the inventory in the Django admin.
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    if department_codes:
        for department in Department.objects.filter(code__in=department_codes):
            department.heads.add(user)


def _gpu_uuid(hostname: str, index: int) -> str:
    # Stable across runs so re-running the setup and the simulator agree on GPU identities.
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{hostname}.gpu{index}')}"


@transaction.atomic
def demo_organisation_create(*, password: str) -> list[DemoLogin]:
    """Create (or complete) the reference scenario's organisation; safe to run again.

    One cluster, nine departments with Slurm-account and namespace mappings, 64 nodes x 8
    GPUs in four racks, owned by the departments (fixed partition), and one user per role.
    Existing users keep their passwords.
    """
    cluster, _ = Cluster.objects.get_or_create(
        slug=DEMO_CLUSTER_SLUG,
        defaults={"name": "AD platform", "description": "Autonomous-driving training cluster (demo)."},
    )
    node_number = 0
    for spec in REFERENCE_DEPARTMENTS:
        department, _ = Department.objects.get_or_create(code=spec.code, defaults={"name": spec.name})
        for kind, value in [
            (MappingKind.SLURM_ACCOUNT, spec.code),
            (MappingKind.K8S_NAMESPACE, f"team-{spec.code}"),
        ]:
            DepartmentMapping.objects.get_or_create(
                cluster=None, kind=kind, value=value, defaults={"department": department}
            )
        for _ in range(spec.node_count):
            node_number += 1
            _demo_node_ensure(cluster=cluster, number=node_number, owner=department)

    roles_ensure()
    user_model = get_user_model()
    for login in DEMO_LOGINS:
        user, created = user_model.objects.get_or_create(username=login.username)
        if created:
            user.set_password(password)
            user.save()
        user_role_assign(user=user, role=login.role, department_codes=login.departments)
    return DEMO_LOGINS


def _demo_node_ensure(*, cluster: Cluster, number: int, owner: Department) -> Node:
    model, memory_mib, rdma = GPU_MODELS[0] if number <= H100_NODE_COUNT else GPU_MODELS[1]
    hostname = f"gpu-{number:03d}"
    node, created = Node.objects.get_or_create(
        cluster=cluster,
        hostname=hostname,
        defaults={
            "gpu_model": model,
            "gpu_count": GPUS_PER_NODE,
            "rdma_capable": rdma,
            "fault_domain": f"rack-{(number - 1) // NODES_PER_RACK + 1:02d}",
            "owner_department": owner,
        },
    )
    if created:
        Gpu.objects.bulk_create(
            Gpu(node=node, index=i, uuid=_gpu_uuid(hostname, i), model=model, memory_mib=memory_mib)
            for i in range(GPUS_PER_NODE)
        )
    return node
