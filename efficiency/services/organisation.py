"""Roles, departments and the demo organisation of the reference scenario."""

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction

from efficiency.choices import MappingKind, Role
from efficiency.models import Cluster, Department, DepartmentMapping, Gpu, Node
from efficiency.permissions import role_permissions_grant
from efficiency.simulator.scenario import REFERENCE_DEPARTMENTS, NodeSpec, gpu_uuid, reference_nodes

DEMO_CLUSTER_SLUG = "ad-platform"


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
    """Create the three role groups if missing, with the model permissions of their role."""
    groups = {role: Group.objects.get_or_create(name=role.value)[0] for role in Role}
    role_permissions_grant(group_model=Group, permission_model=Permission)
    return groups


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
    departments = {}
    for spec in REFERENCE_DEPARTMENTS:
        department, _ = Department.objects.get_or_create(code=spec.code, defaults={"name": spec.name})
        departments[spec.code] = department
        for kind, value in [
            (MappingKind.SLURM_ACCOUNT, spec.code),
            (MappingKind.K8S_NAMESPACE, f"team-{spec.code}"),
        ]:
            DepartmentMapping.objects.get_or_create(
                cluster=None, kind=kind, value=value, defaults={"department": department}
            )
    for spec in reference_nodes():
        _demo_node_ensure(cluster=cluster, spec=spec, owner=departments.get(spec.owner))

    roles_ensure()
    user_model = get_user_model()
    for login in DEMO_LOGINS:
        user, created = user_model.objects.get_or_create(username=login.username)
        if created:
            user.set_password(password)
            user.save()
        user_role_assign(user=user, role=login.role, department_codes=login.departments)
    return DEMO_LOGINS


def _demo_node_ensure(*, cluster: Cluster, spec: NodeSpec, owner: Department | None) -> Node:
    node, created = Node.objects.get_or_create(
        cluster=cluster,
        hostname=spec.hostname,
        defaults={
            "gpu_model": spec.gpu_model,
            "gpu_count": spec.gpu_count,
            "rdma_capable": spec.rdma_capable,
            "fault_domain": spec.fault_domain,
            "owner_department": owner,
        },
    )
    if created:
        Gpu.objects.bulk_create(
            Gpu(
                node=node,
                index=i,
                uuid=gpu_uuid(spec.hostname, i),
                model=spec.gpu_model,
                memory_mib=spec.gpu_memory_mib,
            )
            for i in range(spec.gpu_count)
        )
    return node
