"""One factory per model, with realistic defaults."""

from datetime import timedelta

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from efficiency.choices import JobSource, JobState, MappingKind, Role
from efficiency.models import Cluster, Department, DepartmentMapping, Gpu, Job, Node
from efficiency.services.organisation import user_role_assign


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        django_get_or_create = ["slug"]

    name = factory.Sequence(lambda n: f"Cluster {n}")
    slug = factory.Sequence(lambda n: f"cluster-{n}")


class DepartmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Department
        django_get_or_create = ["code"]

    code = factory.Sequence(lambda n: f"dept{n}")
    name = factory.LazyAttribute(lambda o: f"Department {o.code}")


class DepartmentMappingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DepartmentMapping

    kind = MappingKind.SLURM_ACCOUNT
    value = factory.LazyAttribute(lambda o: o.department.code)
    department = factory.SubFactory(DepartmentFactory)


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    cluster = factory.SubFactory(ClusterFactory)
    hostname = factory.Sequence(lambda n: f"gpu-{n:03d}")
    gpu_model = "NVIDIA H100 80GB HBM3"
    gpu_count = 8
    rdma_capable = True
    fault_domain = "rack-01"
    owner_department = factory.SubFactory(DepartmentFactory)


class GpuFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Gpu

    node = factory.SubFactory(NodeFactory)
    index = factory.Sequence(lambda n: n % 8)
    uuid = factory.Sequence(lambda n: f"GPU-00000000-0000-0000-0000-{n:012d}")
    model = factory.LazyAttribute(lambda o: o.node.gpu_model)
    memory_mib = 81_559


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    cluster = factory.SubFactory(ClusterFactory)
    source = JobSource.SLURM
    external_id = factory.Sequence(lambda n: str(1000 + n))
    department = factory.SubFactory(DepartmentFactory)
    account = factory.LazyAttribute(lambda o: o.department.code if o.department else "")
    user_name = "alice"
    name = factory.Sequence(lambda n: f"train-bev-{n}")
    state = JobState.RUNNING
    gpu_count = 8
    gpu_model = "NVIDIA H100 80GB HBM3"
    node_count = 1
    submitted_at = factory.LazyFunction(lambda: timezone.now() - timedelta(hours=3))
    started_at = factory.LazyAttribute(lambda o: o.submitted_at + timedelta(minutes=10))
    ended_at = None


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ["username"]
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "correct horse battery")

    @factory.post_generation
    def role(self, create, extracted, **kwargs):
        if extracted:
            role, *codes = extracted if isinstance(extracted, tuple) else (extracted,)
            user_role_assign(user=self, role=Role(role), department_codes=tuple(codes))
        self.save()
