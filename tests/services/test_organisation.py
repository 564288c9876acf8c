from django.contrib.auth import get_user_model

from efficiency.choices import MappingKind, Role
from efficiency.models import Department, DepartmentMapping, Gpu, Node
from efficiency.scoping import user_role, visible_department_ids
from efficiency.services.organisation import demo_organisation_create
from efficiency.simulator.scenario import REFERENCE_DEPARTMENTS


def test_demo_organisation_is_the_reference_scenario(db):
    demo_organisation_create(password="pw")
    assert Department.objects.count() == 9
    assert Node.objects.count() == 64
    assert Gpu.objects.count() == 512
    assert set(Node.objects.values_list("gpu_model", flat=True)) == {
        "NVIDIA H100 80GB HBM3",
        "NVIDIA A100-SXM4-80GB",
    }
    assert Node.objects.filter(owner_department__isnull=True).count() == 0  # fixed partition
    assert sum(spec.node_count for spec in REFERENCE_DEPARTMENTS) == 64
    assert sorted(set(Node.objects.values_list("fault_domain", flat=True))) == [
        "rack-01",
        "rack-02",
        "rack-03",
        "rack-04",
    ]
    assert (
        DepartmentMapping.objects.get(kind=MappingKind.K8S_NAMESPACE, value="team-bev").department.code
        == "bev"
    )


def test_demo_organisation_can_run_twice_without_duplicates_or_password_reset(db):
    demo_organisation_create(password="first")
    demo_organisation_create(password="second")
    assert Node.objects.count() == 64
    assert Gpu.objects.count() == 512
    admin = get_user_model().objects.get(username="admin")
    assert admin.check_password("first")


def test_demo_users_have_one_role_each(db):
    demo_organisation_create(password="pw")
    users = {user.username: user for user in get_user_model().objects.all()}
    assert user_role(users["admin"]) == Role.PLATFORM_ADMIN
    assert users["admin"].is_staff
    assert user_role(users["committee"]) == Role.COMMITTEE
    assert user_role(users["head-vision"]) == Role.DEPARTMENT_HEAD
    assert visible_department_ids(users["head-vision"]) == [Department.objects.get(code="vision").pk]


def test_demo_setup_command_prints_the_logins(db, capsys):
    from django.core.management import call_command

    call_command("demo_setup", password="s3cret")
    out = capsys.readouterr().out
    for username in ("admin", "committee", "head-vision", "head-radar"):
        assert username in out
    assert "s3cret" in out


def test_the_role_groups_survive_a_flush_with_their_permissions(transactional_db):
    """``manage.py flush`` (and the flush after every transactional test) empties auth_group; the
    roles come back with their permissions, so a flushed portal is not one without roles."""
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from efficiency.permissions import Role

    call_command("flush", interactive=False, verbosity=0)
    groups = {group.name: group for group in Group.objects.all()}
    assert set(groups) == {role.value for role in Role}
    assert groups[Role.PLATFORM_ADMIN].permissions.filter(codename="change_node").exists()
    assert groups[Role.PLATFORM_ADMIN].permissions.filter(content_type__app_label="axes").exists()
