"""One factory per model, with realistic defaults.

Times default to the wall clock; a test that controls time passes its own (``occurred_at=T0``).
Rows the portal derives (rollups, classifications) have factories too, for selector and view
tests that need a known state without running the pipeline; the pipeline itself is tested from
raw input.
"""

import json
from datetime import datetime, timedelta

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from efficiency.choices import (
    ActionKind,
    CapacityAlertKind,
    Confidence,
    FaultCategory,
    IncidentStatus,
    JobSource,
    JobState,
    MappingKind,
    NodeClass,
    NodeState,
    QuotaCycleOrigin,
    QuotaCycleStatus,
    QuotaEventKind,
    RecommendationAction,
    RecommendationState,
    RecommendationSubject,
    Role,
    RunStatus,
    Severity,
    SignalSource,
    SourceKind,
)
from efficiency.days import day_of, day_start_after, day_start_of
from efficiency.models import (
    Action,
    ActuatorConfig,
    ApiToken,
    AuditEntry,
    CapacityAlert,
    Cluster,
    DataSource,
    Decision,
    Delivery,
    Department,
    DepartmentHour,
    DepartmentMapping,
    FaultPolicy,
    FaultScanCursor,
    FaultSignal,
    Gpu,
    GpuSample,
    Incident,
    IncidentAction,
    Job,
    JobHour,
    JobLogFacts,
    LogChunk,
    LogFactsCursor,
    LogStreamContext,
    Node,
    NodeClassification,
    NodeDay,
    NodeHour,
    NodeStateChange,
    Notification,
    NotificationChannel,
    NotificationSubscription,
    PrunedLogSpan,
    Quota,
    QuotaBacktest,
    QuotaCycle,
    QuotaEvent,
    QuotaObjection,
    RateCard,
    Recommendation,
    RecommendationDecision,
    ReviewMeeting,
    ReviewPack,
    RollupDirtyHour,
    RollupVersion,
    ScopeHour,
    SourceRun,
    Ticket,
    TicketComment,
    WorkerHeartbeat,
)
from efficiency.models.tokens import token_digest
from efficiency.services.organisation import user_role_assign
from efficiency.times import portal_day_zone

H100 = "NVIDIA H100 80GB HBM3"


def _hour_ago() -> datetime:
    return (timezone.now() - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)


# --- Inventory and jobs ------------------------------------------------------------------------


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
    gpu_model = H100
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
    gpu_model = H100
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


# --- Data sources and telemetry ----------------------------------------------------------------


class DataSourceFactory(factory.django.DjangoModelFactory):
    """A log push source by default (it needs no configuration); pass ``kind`` and ``config``."""

    class Meta:
        model = DataSource

    cluster = factory.SubFactory(ClusterFactory)
    kind = SourceKind.LOG_PUSH
    name = factory.Sequence(lambda n: f"source-{n}")
    config = factory.LazyFunction(dict)


class SourceRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SourceRun

    source = factory.SubFactory(DataSourceFactory)
    started_at = factory.LazyFunction(lambda: timezone.now() - timedelta(seconds=30))
    finished_at = factory.LazyAttribute(lambda o: o.started_at + timedelta(seconds=2))
    status = RunStatus.OK
    received = 10
    stored = 10


class GpuSampleFactory(factory.django.DjangoModelFactory):
    """One raw sample of one GPU, 30 s interval, busy at 60%."""

    class Meta:
        model = GpuSample

    node = factory.SubFactory(NodeFactory)
    gpu_index = 0
    ts = factory.LazyFunction(lambda: timezone.now().replace(microsecond=0))
    interval_s = 30
    util_pct = 60.0
    gr_engine_active_pct = 60.0
    sm_active_pct = 45.0
    fb_used_mib = 40_000.0
    power_w = 450.0
    temp_c = 55.0
    ecc_dbe_total = 0.0
    xid_last = 0


class LogChunkFactory(factory.django.DjangoModelFactory):
    """One stored piece of a log stream; offsets follow the text's length in bytes."""

    class Meta:
        model = LogChunk

    source = factory.SubFactory(DataSourceFactory)
    stream = "job-1001/rank-0.log"
    file_id = "f1"
    start_offset = factory.Sequence(lambda n: n * 10_000)
    text = "step 100 loss 2.31\n"
    end_offset = factory.LazyAttribute(lambda o: o.start_offset + len(o.text.encode()))
    line_count = factory.LazyAttribute(lambda o: o.text.count("\n"))
    received_at = factory.LazyFunction(timezone.now)


class RollupDirtyHourFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RollupDirtyHour

    cluster = factory.SubFactory(ClusterFactory)
    hour = factory.LazyFunction(_hour_ago)
    marked_at = factory.LazyFunction(timezone.now)


class NodeHourFactory(factory.django.DjangoModelFactory):
    """One node-hour: 8 GPUs available and allocated the whole hour, sampled throughout, 60% busy."""

    class Meta:
        model = NodeHour

    node = factory.SubFactory(NodeFactory)
    hour = factory.LazyFunction(_hour_ago)
    cluster = factory.LazyAttribute(lambda o: o.node.cluster)
    owner_department = factory.LazyAttribute(lambda o: o.node.owner_department)
    gpu_count = factory.LazyAttribute(lambda o: o.node.gpu_count)
    available_gpu_s = factory.LazyAttribute(lambda o: o.gpu_count * 3600.0)
    allocated_gpu_s = factory.LazyAttribute(lambda o: o.available_gpu_s)
    sampled_gpu_s = factory.LazyAttribute(lambda o: o.available_gpu_s)
    busy_gpu_s = factory.LazyAttribute(lambda o: 0.6 * o.sampled_gpu_s)
    gpu_util_busy_gpu_s = factory.LazyAttribute(lambda o: o.busy_gpu_s)
    sm_active_busy_gpu_s = factory.LazyAttribute(lambda o: 0.75 * o.busy_gpu_s)
    fb_used_mib_avg = 40_000.0
    power_w_avg = 450.0
    temp_c_max = 62.0
    sample_count = factory.LazyAttribute(lambda o: o.gpu_count * 120)


class DepartmentHourFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DepartmentHour

    node = factory.SubFactory(NodeFactory)
    hour = factory.LazyFunction(_hour_ago)
    department = factory.LazyAttribute(lambda o: o.node.owner_department)
    allocated_gpu_s = 8 * 3600.0
    busy_gpu_s = factory.LazyAttribute(lambda o: 0.6 * o.allocated_gpu_s)
    job_count = 1


class JobHourFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobHour

    job = factory.SubFactory(JobFactory)
    hour = factory.LazyFunction(_hour_ago)
    department = factory.LazyAttribute(lambda o: o.job.department)
    allocated_gpu_s = factory.LazyAttribute(lambda o: o.job.gpu_count * 3600.0)
    busy_gpu_s = factory.LazyAttribute(lambda o: 0.6 * o.allocated_gpu_s)


class ScopeHourFactory(factory.django.DjangoModelFactory):
    """One hour of a department's (or, with ``department=None``, the cluster's) totals."""

    class Meta:
        model = ScopeHour

    cluster = factory.SubFactory(ClusterFactory)
    hour = factory.LazyFunction(_hour_ago)
    department = factory.SubFactory(DepartmentFactory)
    available_gpu_s = 8 * 3600.0
    allocated_gpu_s = factory.LazyAttribute(lambda o: o.available_gpu_s)
    sampled_gpu_s = factory.LazyAttribute(lambda o: o.available_gpu_s)
    busy_gpu_s = factory.LazyAttribute(lambda o: 0.6 * o.sampled_gpu_s)


class NodeDayFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = NodeDay

    node = factory.SubFactory(NodeFactory)
    day = factory.LazyFunction(lambda: day_of(timezone.now(), portal_day_zone()) - timedelta(days=1))
    day_zone = factory.LazyFunction(lambda: portal_day_zone().key)
    cluster = factory.LazyAttribute(lambda o: o.node.cluster)
    owner_department = factory.LazyAttribute(lambda o: o.node.owner_department)
    available_gpu_s = factory.LazyAttribute(lambda o: o.node.gpu_count * 86_400.0)
    allocated_gpu_s = factory.LazyAttribute(lambda o: o.available_gpu_s)
    sampled_gpu_s = factory.LazyAttribute(lambda o: o.available_gpu_s)
    busy_gpu_s = factory.LazyAttribute(lambda o: 0.6 * o.sampled_gpu_s)


class NodeClassificationFactory(factory.django.DjangoModelFactory):
    """A steady node over the fourteen portal days that ended at the last midnight."""

    class Meta:
        model = NodeClassification

    node = factory.SubFactory(NodeFactory)
    # Whole portal days ending at the last midnight, as node_classes_refresh cuts them.
    cycle_end = factory.LazyFunction(lambda: day_start_of(timezone.now(), portal_day_zone()))
    day_zone = factory.LazyFunction(lambda: portal_day_zone().key)
    cycle_start = factory.LazyAttribute(lambda o: day_start_after(o.cycle_end, -14, portal_day_zone()))
    node_class = NodeClass.STEADY
    covered_hours = 336
    mean_util_pct = 55.0
    idle_hour_share = 0.0
    hot_hour_share = 0.1
    stddev_pct = 8.0
    reason = "steady"
    computed_at = factory.LazyAttribute(lambda o: o.cycle_end + timedelta(minutes=20))


# --- Faults ------------------------------------------------------------------------------------


class IncidentFactory(factory.django.DjangoModelFactory):
    """An open, located GPU hardware incident (Xid 79) of a running job on its node."""

    class Meta:
        model = Incident

    cluster = factory.SubFactory(ClusterFactory)
    department = factory.SubFactory(DepartmentFactory)
    node = factory.SubFactory(NodeFactory, cluster=factory.SelfAttribute("..cluster"), owner_department=None)
    job = factory.SubFactory(
        JobFactory,
        cluster=factory.SelfAttribute("..cluster"),
        department=factory.SelfAttribute("..department"),
    )
    gpu_index = 3
    category = FaultCategory.HARDWARE_GPU
    severity = Severity.CRITICAL
    code = "79"
    root_signature_id = "xid-79"
    status = IncidentStatus.OPEN
    occurred_at = factory.LazyFunction(lambda: timezone.now() - timedelta(minutes=5))
    detected_at = factory.LazyAttribute(lambda o: o.occurred_at + timedelta(minutes=1))
    located_at = factory.LazyAttribute(lambda o: o.detected_at)
    gpu_count = factory.LazyAttribute(lambda o: o.job.gpu_count if o.job else 0)
    confirmed = True


class FaultSignalFactory(factory.django.DjangoModelFactory):
    """One trusted kernel-log Xid 79 line on a node."""

    class Meta:
        model = FaultSignal

    cluster = factory.SubFactory(ClusterFactory)
    evidence_key = factory.Sequence(lambda n: f"log:kern/gpu.log:{n * 200}")
    source = SignalSource.LOG
    signature_id = "xid-79"
    category = FaultCategory.HARDWARE_GPU
    severity = Severity.CRITICAL
    code = "79"
    node = factory.SubFactory(NodeFactory, cluster=factory.SelfAttribute("..cluster"))
    gpu_index = 3
    occurred_at = factory.LazyFunction(lambda: timezone.now() - timedelta(minutes=5))
    detected_at = factory.LazyAttribute(lambda o: o.occurred_at + timedelta(seconds=30))
    message = "NVRM: Xid (PCI:0000:07:00): 79, pid=1234, name=python, GPU has fallen off the bus."
    trusted = True


class IncidentActionFactory(factory.django.DjangoModelFactory):
    """A dry-run notification of an incident."""

    class Meta:
        model = IncidentAction

    incident = factory.SubFactory(IncidentFactory)
    kind = ActionKind.NOTIFY
    actuator = "webhook"
    dry_run = True
    ok = True
    summary = "would notify"
    requested_at = factory.LazyFunction(timezone.now)


class NodeStateChangeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = NodeStateChange

    node = factory.SubFactory(NodeFactory)
    at = factory.LazyFunction(timezone.now)
    state = NodeState.ISOLATED
    previous_state = NodeState.ACTIVE


class FaultPolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = FaultPolicy
        django_get_or_create = ["category"]

    category = FaultCategory.HARDWARE_GPU
    isolate_node = True
    restart_job = True
    notify = True


class ActuatorConfigFactory(factory.django.DjangoModelFactory):
    """A command actuator that runs ``true`` (it succeeds and changes nothing)."""

    class Meta:
        model = ActuatorConfig
        django_get_or_create = ["name"]

    name = factory.Sequence(lambda n: f"actuator-{n}")
    action = ActionKind.ISOLATE_NODE
    config = factory.LazyFunction(lambda: {"type": "command", "argv": ["true", "{incident_id}"]})
    dry_run = False


class FaultScanCursorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = FaultScanCursor

    source = factory.SubFactory(DataSourceFactory)
    last_chunk_id = 0


class LogStreamContextFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LogStreamContext

    source = factory.SubFactory(DataSourceFactory)
    stream = factory.Sequence(lambda n: f"job-{n}/rank-0.log")
    file_id = "f"
    context = factory.LazyFunction(dict)
    updated_at = factory.LazyFunction(timezone.now)


# --- Quotas ------------------------------------------------------------------------------------


class QuotaCycleFactory(factory.django.DjangoModelFactory):
    """An approved two-week cycle that began two days ago, 32 H100 of capacity."""

    class Meta:
        model = QuotaCycle

    cluster = factory.SubFactory(ClusterFactory)
    start = factory.LazyFunction(lambda: timezone.now() - timedelta(days=2))
    end = factory.LazyAttribute(lambda o: o.start + timedelta(days=14))
    status = QuotaCycleStatus.APPROVED
    origin = QuotaCycleOrigin.PROPOSAL
    capacity = factory.LazyFunction(lambda: {H100: 32})
    created_at = factory.LazyAttribute(lambda o: o.start - timedelta(days=3))


class QuotaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Quota

    cycle = factory.SubFactory(QuotaCycleFactory)
    department = factory.SubFactory(DepartmentFactory)
    gpu_model = H100
    guaranteed_gpus = 8


class QuotaObjectionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuotaObjection

    cycle = factory.SubFactory(QuotaCycleFactory, status=QuotaCycleStatus.PROPOSED)
    department = factory.SubFactory(DepartmentFactory)
    author = factory.SubFactory("tests.factories.UserFactory")
    text = "We start a new training campaign next week and need our 16 GPUs back."
    created_at = factory.LazyFunction(timezone.now)


class QuotaEventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuotaEvent

    cycle = factory.SubFactory(QuotaCycleFactory)
    kind = QuotaEventKind.CREATED
    at = factory.LazyFunction(timezone.now)


class QuotaBacktestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuotaBacktest

    cycle = factory.SubFactory(QuotaCycleFactory)
    computed_at = factory.LazyFunction(timezone.now)
    window_start = factory.LazyAttribute(lambda o: o.cycle.start - timedelta(days=14))
    window_end = factory.LazyAttribute(lambda o: o.cycle.start)
    job_count = 120
    duration_s = 0.4
    results = factory.LazyFunction(
        lambda: [
            {"key": "fixed", "allocation_rate": 0.55, "wait_p95_s": 7200.0},
            {"key": "cycle", "allocation_rate": 0.6, "wait_p95_s": 1800.0},
        ]
    )


class CapacityAlertFactory(factory.django.DjangoModelFactory):
    """An open alert: the H100 shared pool ran out while jobs waited."""

    class Meta:
        model = CapacityAlert

    cluster = factory.SubFactory(ClusterFactory)
    gpu_model = H100
    kind = CapacityAlertKind.POOL_EXHAUSTED
    raised_at = factory.LazyFunction(lambda: timezone.now() - timedelta(hours=6))
    checked_at = factory.LazyFunction(timezone.now)
    gpus_needed = 8


# --- Recommendations ---------------------------------------------------------------------------


class RecommendationFactory(factory.django.DjangoModelFactory):
    """A proposed recommendation on a job family: alice's ``train-bev-*`` jobs talk NCCL over TCP
    sockets on RDMA nodes (two evidence lines of job 1001, which the factory does not link)."""

    class Meta:
        model = Recommendation

    rule = "network.nccl-socket-on-rdma"
    subject_kind = RecommendationSubject.JOB_FAMILY
    department = factory.SubFactory(DepartmentFactory)
    cluster = factory.SubFactory(ClusterFactory)
    user_name = "alice"
    name_pattern = factory.Sequence(lambda n: f"train-bev-{n}-*")
    subject_key = factory.LazyAttribute(lambda o: f"{o.department.code}/{o.user_name}/{o.name_pattern}")
    job_count = 12
    state = RecommendationState.PROPOSED
    observed = "NCCL_NET=Socket, NCCL_IB_DISABLE=1"
    ideal = "NCCL over InfiniBand (NET/IB, GPUDirect RDMA)"
    change = "unset NCCL_IB_DISABLE NCCL_NET; export NCCL_IB_HCA=mlx5"
    evidence = factory.LazyFunction(
        lambda: [
            {"file": "slurm-1001.out", "line": 41, "text": "NCCL INFO Using network Socket", "job": "1001"},
            {
                "file": "slurm-1001.out",
                "line": 42,
                "text": "NCCL INFO NCCL_IB_DISABLE set to 1",
                "job": "1001",
            },
        ]
    )
    config = factory.LazyFunction(lambda: [["NCCL_IB_DISABLE", "1", "unset"], ["NCCL_NET", "Socket", "IB"]])
    gain_gpu_h_week = 96.0
    gain_pct = 30.0
    gpu_h_week = 320.0
    confidence = Confidence.HIGH
    fingerprint = factory.LazyAttribute(lambda o: f"{o.rule}|{o.observed}")
    first_seen = factory.LazyFunction(lambda: timezone.now() - timedelta(days=6))
    last_seen = factory.LazyFunction(lambda: timezone.now() - timedelta(hours=2))


class RecommendationDecisionFactory(factory.django.DjangoModelFactory):
    """The engine's proposal of a recommendation (no user)."""

    class Meta:
        model = RecommendationDecision

    recommendation = factory.SubFactory(RecommendationFactory)
    action = RecommendationAction.PROPOSED
    at = factory.LazyAttribute(lambda o: o.recommendation.first_seen)


class LogFactsCursorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LogFactsCursor

    source = factory.SubFactory(DataSourceFactory)
    last_chunk_id = 0


class PrunedLogSpanFactory(factory.django.DjangoModelFactory):
    """What retention pruned of one log file: its first 4 KiB, 40 lines."""

    class Meta:
        model = PrunedLogSpan

    source = factory.SubFactory(DataSourceFactory)
    stream = factory.Sequence(lambda n: f"job-{n}/rank-0.log")
    file_id = "f1"
    end_offset = 4096
    line_count = 40
    pruned_at = factory.LazyFunction(timezone.now)


class RollupVersionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RollupVersion

    cluster = factory.SubFactory(ClusterFactory)
    version = 1


class JobLogFactsFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobLogFacts

    job = factory.SubFactory(JobFactory)
    facts = factory.LazyFunction(
        lambda: {
            "net_socket": [{"file": "slurm-1001.out", "line": 41, "text": "NCCL INFO Using network Socket"}]
        }
    )
    last_chunk_id = 0


# --- Accounts and the portal's machinery -------------------------------------------------------


class ApiTokenFactory(factory.django.DjangoModelFactory):
    """A token valid for 90 days; its key (shown once in real life) is kept on ``token.key``."""

    class Meta:
        model = ApiToken

    user = factory.SubFactory("tests.factories.UserFactory")
    name = "notebook"
    key = factory.Sequence(lambda n: f"test-token-{n:04d}-0123456789abcdefghijklmnopqrst")
    prefix = factory.LazyAttribute(lambda o: o.key[: ApiToken.PREFIX_LENGTH])
    digest = factory.LazyAttribute(lambda o: token_digest(o.key))
    expires_at = factory.LazyFunction(lambda: timezone.now() + timedelta(days=90))

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        key = kwargs.pop("key")
        token = super()._create(model_class, *args, **kwargs)
        token.key = key
        return token


class WorkerHeartbeatFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WorkerHeartbeat
        django_get_or_create = ["hostname"]

    hostname = factory.Sequence(lambda n: f"worker-{n}")
    last_seen_at = factory.LazyFunction(timezone.now)


# --- Notifications -------------------------------------------------------------------------------


class NotificationChannelFactory(factory.django.DjangoModelFactory):
    """A Slack channel of a department (the URL is a local one: nothing is sent by making it)."""

    class Meta:
        model = NotificationChannel

    name = factory.Sequence(lambda n: f"channel-{n}")
    kind = "slack"
    department = factory.SubFactory(DepartmentFactory)
    config = factory.LazyFunction(lambda: {"url": "http://127.0.0.1:9/hooks/T0/B0/x"})


class NotificationSubscriptionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = NotificationSubscription

    user = factory.SubFactory(UserFactory)
    events = factory.LazyFunction(lambda: ["ticket_assigned", "ticket_overdue"])


class NotificationFactory(factory.django.DjangoModelFactory):
    """An incident opened, as the fault service records it."""

    class Meta:
        model = Notification

    event = "incident_opened"
    created_at = factory.LazyFunction(timezone.now)
    incident = factory.SubFactory(IncidentFactory)
    department = factory.SelfAttribute("incident.department")
    payload = factory.LazyAttribute(
        lambda o: {"id": o.incident.pk, "category": o.incident.category, "severity": o.incident.severity}
    )


class DeliveryFactory(factory.django.DjangoModelFactory):
    """A pending message to a channel, due at the end of its window."""

    class Meta:
        model = Delivery

    channel = factory.SubFactory(NotificationChannelFactory)
    created_at = factory.LazyFunction(timezone.now)
    due_at = factory.LazyAttribute(lambda o: o.created_at + timedelta(minutes=1))


class TicketFactory(factory.django.DjangoModelFactory):
    """An open ticket opened by hand, due in two days (a high ticket's 18 business hours)."""

    class Meta:
        model = Ticket

    title = factory.Sequence(lambda n: f"Switch NCCL to InfiniBand ({n})")
    origin = "manual"
    department = factory.SubFactory(DepartmentFactory)
    severity = "high"
    state = "open"
    created_at = factory.LazyFunction(timezone.now)
    updated_at = factory.SelfAttribute("created_at")
    due_at = factory.LazyAttribute(lambda o: o.created_at + timedelta(days=2))


class TicketCommentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TicketComment

    ticket = factory.SubFactory(TicketFactory)
    author = factory.SubFactory(UserFactory, username=factory.Sequence(lambda n: f"commenter-{n}"))
    at = factory.LazyFunction(timezone.now)
    text = "The launcher template changes on Tuesday."


# --- The committee ------------------------------------------------------------------------------


def _sealed(content: dict) -> tuple[str, str]:
    from efficiency.analysis.committee.seal import seal

    return seal(content)


class RateCardFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RateCard

    version = factory.Sequence(lambda n: n + 1)
    effective_from = factory.LazyFunction(timezone.now)
    currency = "CNY"
    rates = factory.LazyFunction(lambda: {"NVIDIA H100 80GB HBM3": "18.50", "NVIDIA A100-SXM4-80GB": "9.80"})
    created_at = factory.LazyFunction(timezone.now)


class ReviewPackFactory(factory.django.DjangoModelFactory):
    """A sealed pack of two weeks with only its cover (sections without data say so)."""

    class Meta:
        model = ReviewPack

    cluster = factory.SubFactory(ClusterFactory)
    period_end = factory.LazyFunction(lambda: timezone.now().replace(minute=0, second=0, microsecond=0))
    period_start = factory.LazyAttribute(lambda o: o.period_end - timedelta(days=14))
    definitions_version = "2026-12.1"
    time_zone = "Asia/Shanghai"
    generated_at = factory.LazyFunction(timezone.now)
    content_json = factory.LazyAttribute(
        lambda o: _sealed(
            {
                "schema": 1,
                "cluster": {"slug": o.cluster.slug, "name": o.cluster.name},
                "period": {
                    "start": o.period_start.isoformat(),
                    "end": o.period_end.isoformat(),
                    "time_zone": o.time_zone,
                },
            }
        )[0]
    )
    content_hash = factory.LazyAttribute(lambda o: _sealed(json.loads(o.content_json))[1])


class ReviewMeetingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ReviewMeeting

    pack = factory.SubFactory(ReviewPackFactory)
    cluster = factory.SelfAttribute("pack.cluster")
    title = factory.Sequence(lambda n: f"Committee review {n}")
    scheduled_for = factory.LazyFunction(timezone.now)
    created_at = factory.LazyFunction(timezone.now)


class DecisionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Decision

    meeting = factory.SubFactory(ReviewMeetingFactory)
    number = factory.Sequence(lambda n: n + 1)
    kind = "other"
    title = "Keep the shared pool at 30% of capacity"
    options = factory.LazyFunction(lambda: ["Keep 30%", "Raise to 40%"])
    outcome = "Keep 30%"
    decided_by = "The committee, unanimous"
    decided_at = factory.LazyFunction(timezone.now)


class ActionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Action

    meeting = factory.SubFactory(ReviewMeetingFactory)
    title = "Ask the radar team about their idle nodes"
    owner = factory.SubFactory(UserFactory, username=factory.Sequence(lambda n: f"owner-{n}"))
    due_on = factory.LazyFunction(lambda: timezone.localdate() + timedelta(days=7))
    created_at = factory.LazyFunction(timezone.now)


class AuditEntryFactory(factory.django.DjangoModelFactory):
    """A link of the audit chain (not chained to its neighbours: use ``audit_append`` for that)."""

    class Meta:
        model = AuditEntry

    seq = factory.Sequence(lambda n: 1_000_000 + n)
    at = factory.LazyFunction(timezone.now)
    verb = "pack_sealed"
    object_type = "reviewpack"
    object_id = 1
    payload = factory.LazyFunction(lambda: {"version": 1})
    prev_hash = "0" * 64
    entry_hash = factory.Sequence(lambda n: f"{n:064x}")
