"""States, kinds and roles used across the domain."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Role(models.TextChoices):
    """The three portal roles; each is a Django group of the same name."""

    DEPARTMENT_HEAD = "department_head", _("Department head")
    COMMITTEE = "committee", _("GPU committee")
    PLATFORM_ADMIN = "platform_admin", _("Platform admin")


class NodeState(models.TextChoices):
    ACTIVE = "active", _("Active")
    ISOLATED = "isolated", _("Isolated")
    DRAINING = "draining", _("Draining")
    RETIRED = "retired", _("Retired")
    # Seen by a source (Slurm, Kubernetes, dcgm-exporter labels) but not yet confirmed by an admin:
    # its readings are stored and shown, but it counts in no capacity, ownership or quota.
    DISCOVERED = "discovered", _("Discovered")


class MappingKind(models.TextChoices):
    SLURM_ACCOUNT = "slurm_account", _("Slurm account")
    K8S_NAMESPACE = "k8s_namespace", _("Kubernetes namespace")


class JobSource(models.TextChoices):
    SLURM = "slurm", _("Slurm")
    KUBERNETES = "kubernetes", _("Kubernetes")
    CSV = "csv", _("CSV import")
    API = "api", _("Push API")


class JobState(models.TextChoices):
    PENDING = "pending", _("Pending")
    RUNNING = "running", _("Running")
    COMPLETED = "completed", _("Completed")
    FAILED = "failed", _("Failed")
    CANCELLED = "cancelled", _("Cancelled")
    TIMEOUT = "timeout", _("Timed out")
    PREEMPTED = "preempted", _("Preempted")
    NODE_FAIL = "node_fail", _("Node failure")

    @classmethod
    def finished(cls) -> set[str]:
        return {cls.COMPLETED, cls.FAILED, cls.CANCELLED, cls.TIMEOUT, cls.PREEMPTED, cls.NODE_FAIL}


class Framework(models.TextChoices):
    """The training stack a job runs; the config audit compares it with the optimized one."""

    UNKNOWN = "unknown", _("Unknown")
    PYTORCH = "pytorch", _("PyTorch")
    MEGATRON = "megatron", _("Megatron-LM")
    DEEPSPEED = "deepspeed", _("DeepSpeed")
    ACCELERATED = "accelerated", _("Optimized acceleration library")
    OTHER = "other", _("Other")


class SourceKind(models.TextChoices):
    """Where data comes from; each kind has one collector module."""

    PROMETHEUS = "prometheus", _("Prometheus HTTP API")
    DCGM_SCRAPE = "dcgm_scrape", _("dcgm-exporter scrape")
    SLURM = "slurm", _("Slurm sacct")
    KUBERNETES = "kubernetes", _("Kubernetes jobs")
    LOG_FILES = "log_files", _("Job log files")
    LOG_PUSH = "log_push", _("Log push (NDJSON)")
    CSV_IMPORT = "csv_import", _("CSV import")


class RunStatus(models.TextChoices):
    RUNNING = "running", _("Running")
    OK = "ok", _("OK")
    PARTIAL = "partial", _("Partly rejected")
    FAILED = "failed", _("Failed")


class NodeClass(models.TextChoices):
    """How a node was used over a cycle (efficiency.analysis.node_classes)."""

    IDLE = "idle", _("Idle")
    HOT = "hot", _("Hot")
    FLUCTUATING = "fluctuating", _("Fluctuating")
    STEADY = "steady", _("Steady")
    UNKNOWN = "unknown", _("Unknown")


class QuotaCycleStatus(models.TextChoices):
    """A cycle's quotas are proposed (the committee may still edit them), then approved."""

    PROPOSED = "proposed", _("Proposed")
    APPROVED = "approved", _("Approved")


class QuotaCycleOrigin(models.TextChoices):
    """How a cycle's quotas were set: a cluster's first cycle is its fixed partition (each
    department guaranteed the GPUs it owns); every later one starts as the portal's proposal."""

    FIXED_PARTITION = "fixed_partition", _("Fixed partition")
    PROPOSAL = "proposal", _("Proposal")


class QuotaEventKind(models.TextChoices):
    CREATED = "created", _("Cycle created")
    PROPOSED = "proposed", _("Proposal computed")
    EDITED = "edited", _("Quota edited")
    APPROVED = "approved", _("Approved")
    OBJECTION = "objection", _("Objection filed")
    ANSWERED = "answered", _("Objection answered")
    EXPORTED = "exported", _("Exported")


class CapacityAlertKind(models.TextChoices):
    POOL_EXHAUSTED = "pool_exhausted", _("Shared pool exhausted")
    DEMAND_TREND = "demand_trend", _("Demand trend crosses capacity")


class FaultCategory(models.TextChoices):
    """Root-cause categories of faults (efficiency.analysis.faults.signatures.CATEGORIES)."""

    HARDWARE_GPU = "hardware_gpu", _("GPU hardware")
    HARDWARE_MEMORY_ECC = "hardware_memory_ecc", _("GPU memory (ECC)")
    NVLINK = "nvlink", _("NVLink")
    NETWORK_RDMA = "network_rdma", _("Network (RDMA)")
    NCCL_TIMEOUT_HANG = "nccl_timeout_hang", _("NCCL timeout / hang")
    NCCL_SOCKET_FALLBACK = "nccl_socket_fallback", _("NCCL fell back to sockets")
    CUDA_OOM = "cuda_oom", _("CUDA out of memory")
    CUDA_ILLEGAL_ACCESS = "cuda_illegal_access", _("CUDA illegal memory access")
    LOSS_NAN_INF = "loss_nan_inf", _("Loss NaN / Inf")
    SLOWDOWN = "slowdown", _("Slowdown / straggler")
    STORAGE_IO = "storage_io", _("Storage I/O")
    SOFTWARE_ERROR = "software_error", _("Software error")


class Severity(models.TextChoices):
    CRITICAL = "critical", _("Critical")
    ERROR = "error", _("Error")
    WARNING = "warning", _("Warning")


class SignalSource(models.TextChoices):
    LOG = "log", _("Log line")
    DETECTOR = "detector", _("Detector")
    METRIC = "metric", _("Metric")


class IncidentStatus(models.TextChoices):
    """Resolved is recovered (the job ran again); closed is ended without a recovery (by hand, or
    because the job never came back): closing is not recovering, and counts in no MTTR."""

    OPEN = "open", _("Open")
    RECOVERING = "recovering", _("Recovering")
    RESOLVED = "resolved", _("Recovered")
    CLOSED = "closed", _("Closed without recovery")

    @classmethod
    def finished(cls) -> set[str]:
        return {cls.RESOLVED, cls.CLOSED}


class ActionKind(models.TextChoices):
    ISOLATE_NODE = "isolate_node", _("Isolate node")
    RESTART_JOB = "restart_job", _("Restart job from checkpoint")
    NOTIFY = "notify", _("Notify")
    RESUME_NODE = "resume_node", _("Return node to service")
    CLOSE = "close", _("Close")


class RecommendationState(models.TextChoices):
    """Where a recommendation stands: proposed → accepted (→ ticket) / rejected / snoozed; closed
    by the engine when its condition no longer holds."""

    PROPOSED = "proposed", _("Proposed")
    ACCEPTED = "accepted", _("Accepted")
    REJECTED = "rejected", _("Rejected")
    SNOOZED = "snoozed", _("Snoozed")
    CLOSED = "closed", _("Resolved by itself")

    @classmethod
    def open(cls) -> tuple[str, ...]:
        """States in which the condition still needs work or a decision."""
        return (cls.PROPOSED, cls.ACCEPTED, cls.SNOOZED)


class RecommendationSubject(models.TextChoices):
    JOB_FAMILY = "job_family", _("Job family")
    USER = "user", _("User")
    DEPARTMENT = "department", _("Department")
    NODE = "node", _("Node")


class Confidence(models.TextChoices):
    HIGH = "high", _("High")
    MEDIUM = "medium", _("Medium")
    LOW = "low", _("Low")


class RecommendationAction(models.TextChoices):
    PROPOSED = "proposed", _("Proposed")
    ACCEPTED = "accepted", _("Accepted")
    REJECTED = "rejected", _("Rejected")
    SNOOZED = "snoozed", _("Snoozed")
    REOPENED = "reopened", _("Reopened")
    CLOSED = "closed", _("Resolved by itself")
    COMMENTED = "commented", _("Commented")


class TicketState(models.TextChoices):
    """A remediation ticket's state; the legal moves between them are
    ``efficiency.analysis.tickets.workflow.TRANSITIONS``."""

    OPEN = "open", _("Open")
    IN_PROGRESS = "in_progress", _("In progress")
    WAITING_ON_DEPARTMENT = "waiting_on_department", _("Waiting on department")
    RESOLVED = "resolved", _("Resolved")
    VERIFYING = "verifying", _("Verifying")
    VERIFIED_GAIN = "verified_gain", _("Verified gain")
    NO_GAIN = "no_gain", _("No gain")
    REGRESSED = "regressed", _("Regressed")
    CLOSED = "closed", _("Closed")
    WONT_FIX = "wont_fix", _("Won't fix")

    @classmethod
    def active(cls) -> tuple[str, ...]:
        """States in which someone still has work to do (the SLA clock runs or is paused)."""
        return (cls.OPEN, cls.IN_PROGRESS, cls.WAITING_ON_DEPARTMENT)


class TicketAction(models.TextChoices):
    """What people (and the portal) do to a ticket: the workflow's actions, with their labels."""

    START = "start", _("Start work")
    WAIT = "wait", _("Wait on department")
    RESUME = "resume", _("Resume")
    RESOLVE = "resolve", _("Resolve")
    VERIFY = "verify", _("Start verification")
    MEASURE_GAIN = "measure_gain", _("Gain verified")
    MEASURE_NO_GAIN = "measure_no_gain", _("No gain measured")
    MEASURE_REGRESSION = "measure_regression", _("Regression measured")
    CLOSE = "close", _("Close")
    REOPEN = "reopen", _("Reopen")
    WONT_FIX = "wont_fix", _("Won't fix")


class TicketOrigin(models.TextChoices):
    RECOMMENDATION = "recommendation", _("Recommendation")
    INCIDENT = "incident", _("Incident")
    COMMITTEE = "committee", _("Committee decision")
    MANUAL = "manual", _("Manual")


class TicketSeverity(models.TextChoices):
    """How urgent a ticket is; each has its own SLA (``PORTAL_TICKET_SLA_HOURS``)."""

    CRITICAL = "critical", _("Critical")
    HIGH = "high", _("High")
    MEDIUM = "medium", _("Medium")
    LOW = "low", _("Low")


class NotificationEvent(models.TextChoices):
    """What a notification is about; ``efficiency.services.notifications.routing`` says who hears it."""

    TICKET_ASSIGNED = "ticket_assigned", _("Ticket assigned")
    TICKET_DUE_SOON = "ticket_due_soon", _("Ticket due soon")
    TICKET_OVERDUE = "ticket_overdue", _("Ticket overdue")
    TICKET_VERIFIED = "ticket_verified", _("Ticket verified")
    RECOMMENDATION_ACCEPTED = "recommendation_accepted", _("Recommendation accepted")
    INCIDENT_OPENED = "incident_opened", _("Incident opened")
    PACK_READY = "pack_ready", _("Committee review pack ready")


class ChannelKind(models.TextChoices):
    EMAIL = "email", _("Email (a mailing list)")
    WECOM = "wecom", _("WeCom group robot")
    DINGTALK = "dingtalk", _("DingTalk custom robot")
    FEISHU = "feishu", _("Feishu / Lark custom bot")
    SLACK = "slack", _("Slack incoming webhook")


class DeliveryState(models.TextChoices):
    PENDING = "pending", _("Pending")
    SENDING = "sending", _("Sending")
    SENT = "sent", _("Sent")
    FAILED = "failed", _("Failed")


class MeetingStatus(models.TextChoices):
    """A committee meeting: planned from a pack, held (decisions recorded), minutes approved at
    the next meeting."""

    PLANNED = "planned", _("Planned")
    HELD = "held", _("Held")
    APPROVED = "approved", _("Minutes approved")


class DecisionKind(models.TextChoices):
    """What a committee decision changes."""

    QUOTA = "quota", _("Quota approval")
    TICKET = "ticket", _("Remediation ticket")
    CAPACITY = "capacity", _("Capacity order")
    OTHER = "other", _("Other")


class ActionStatus(models.TextChoices):
    OPEN = "open", _("Open")
    DONE = "done", _("Done")
    DROPPED = "dropped", _("Dropped")
