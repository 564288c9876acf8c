"""The one scoping helper: who sees which departments' rows."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ImproperlyConfigured

from efficiency.choices import Role
from efficiency.models import Cluster, Department, DepartmentMapping, Gpu, Job, Node
from efficiency.scoping import scope_queryset, user_role, visible_department_ids
from tests.factories import DepartmentMappingFactory, GpuFactory, JobFactory, NodeFactory, UserFactory


def test_roles_follow_groups_and_superuser_is_platform_admin(org):
    superuser = UserFactory(username="root", is_superuser=True)
    assert user_role(org.head_a) == Role.DEPARTMENT_HEAD
    assert user_role(org.committee) == Role.COMMITTEE
    assert user_role(org.admin) == Role.PLATFORM_ADMIN
    assert user_role(superuser) == Role.PLATFORM_ADMIN
    assert user_role(org.no_role) is None
    assert user_role(AnonymousUser()) is None


def test_inactive_user_has_no_role(org):
    org.committee.is_active = False
    assert user_role(org.committee) is None


def test_most_privileged_group_wins(org):
    user = UserFactory(username="both", role=(Role.DEPARTMENT_HEAD, "vision"))
    from django.contrib.auth.models import Group

    user.groups.add(Group.objects.get(name=Role.COMMITTEE))
    assert user_role(user) == Role.COMMITTEE
    assert visible_department_ids(user) is None


def test_head_of_two_departments_sees_both(org):
    user = UserFactory(username="two-hats", role=(Role.DEPARTMENT_HEAD, "vision", "radar"))
    assert sorted(visible_department_ids(user)) == sorted([org.dept_a.pk, org.dept_b.pk])


def test_a_department_head_group_member_heading_nothing_sees_nothing(org):
    user = UserFactory(username="head-of-nothing", role=Role.DEPARTMENT_HEAD)
    for model in (Department, Node, Job, Gpu, DepartmentMapping):
        assert not scope_queryset(model.objects.all(), user).exists()


@pytest.mark.parametrize("model", [Department, Node, Job, Gpu, DepartmentMapping])
def test_head_sees_own_department_rows_only(org, model):
    GpuFactory(node=org.node_a, index=0)
    GpuFactory(node=org.node_b, index=0)
    DepartmentMappingFactory(department=org.dept_a, value="vision")
    DepartmentMappingFactory(department=org.dept_b, value="radar")
    visible = scope_queryset(model.objects.all(), org.head_a)
    everything = scope_queryset(model.objects.all(), org.committee)
    assert 0 < visible.count() < everything.count()


def test_head_sees_a_shared_pool_node_where_their_job_ran_but_not_other_jobs_on_it(org):
    pool_node = NodeFactory(hostname="pool-01", owner_department=None, cluster=org.cluster)
    mine = JobFactory(department=org.dept_a, cluster=org.cluster)
    theirs = JobFactory(department=org.dept_b, cluster=org.cluster)
    mine.nodes.add(pool_node)
    theirs.nodes.add(pool_node)
    assert scope_queryset(Node.objects.all(), org.head_a).filter(pk=pool_node.pk).exists()
    assert (
        not scope_queryset(Node.objects.all(), org.head_b.__class__.objects.get(pk=org.head_b.pk))
        .filter(pk=org.node_a.pk)
        .exists()
    )
    jobs_on_pool = scope_queryset(Job.objects.filter(nodes=pool_node), org.head_a)
    assert list(jobs_on_pool) == [mine]


def test_user_without_role_sees_nothing(org):
    assert not scope_queryset(Job.objects.all(), org.no_role).exists()


def test_unscoped_model_is_refused_rather_than_shown(org):
    with pytest.raises(ImproperlyConfigured, match="No department scoping"):
        scope_queryset(Cluster.objects.all(), org.head_a)


def test_a_head_acts_for_the_departments_they_head_and_the_committee_for_none(org):
    from django.contrib.auth.models import Group

    from efficiency.permissions import headed_departments

    two_hats = UserFactory(username="two-hats", role=(Role.DEPARTMENT_HEAD, "vision", "radar"))
    assert set(headed_departments(two_hats)) == {org.dept_a, org.dept_b}
    assert list(headed_departments(org.head_a)) == [org.dept_a]
    # A committee member who also heads a department acts as the committee, as scoping decides.
    two_hats.groups.add(Group.objects.get(name=Role.COMMITTEE))
    two_hats = type(two_hats).objects.get(pk=two_hats.pk)  # without the role cached on it
    assert not headed_departments(two_hats).exists()
    assert not headed_departments(org.no_role).exists()
