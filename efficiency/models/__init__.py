"""The domain model, one module per area."""

from efficiency.models.committee import (
    Action,
    AuditEntry,
    Decision,
    ImmutableRecord,
    RateCard,
    ReviewMeeting,
    ReviewPack,
)
from efficiency.models.faults import (
    ActuatorConfig,
    FaultPolicy,
    FaultScanCursor,
    FaultSignal,
    Incident,
    IncidentAction,
    LogStreamContext,
    NodeStateChange,
)
from efficiency.models.inventory import Cluster, Department, DepartmentMapping, Gpu, Node
from efficiency.models.jobs import Job
from efficiency.models.notifications import (
    Delivery,
    Notification,
    NotificationChannel,
    NotificationSubscription,
)
from efficiency.models.quotas import (
    CapacityAlert,
    Quota,
    QuotaBacktest,
    QuotaCycle,
    QuotaEvent,
    QuotaObjection,
)
from efficiency.models.recommendations import (
    JobLogFacts,
    LogFactsCursor,
    Recommendation,
    RecommendationDecision,
)
from efficiency.models.system import WorkerHeartbeat
from efficiency.models.telemetry import (
    DataSource,
    DepartmentHour,
    GpuSample,
    JobHour,
    LogChunk,
    NodeClassification,
    NodeDay,
    NodeHour,
    PrunedLogSpan,
    RollupDirtyHour,
    RollupVersion,
    ScopeHour,
    SourceRun,
)
from efficiency.models.tickets import Ticket, TicketComment
from efficiency.models.tokens import ApiToken

# Registers the audit trail's historical models (after every model it records).
from efficiency.models import audit  # noqa: F401  isort: skip

__all__ = [
    "Action",
    "ActuatorConfig",
    "ApiToken",
    "AuditEntry",
    "CapacityAlert",
    "Cluster",
    "DataSource",
    "Decision",
    "Delivery",
    "Department",
    "DepartmentHour",
    "DepartmentMapping",
    "FaultPolicy",
    "FaultScanCursor",
    "FaultSignal",
    "Gpu",
    "GpuSample",
    "ImmutableRecord",
    "Incident",
    "IncidentAction",
    "Job",
    "JobHour",
    "JobLogFacts",
    "LogChunk",
    "LogFactsCursor",
    "LogStreamContext",
    "Node",
    "NodeClassification",
    "NodeDay",
    "NodeHour",
    "NodeStateChange",
    "Notification",
    "NotificationChannel",
    "NotificationSubscription",
    "PrunedLogSpan",
    "Quota",
    "QuotaBacktest",
    "QuotaCycle",
    "QuotaEvent",
    "QuotaObjection",
    "RateCard",
    "Recommendation",
    "RecommendationDecision",
    "ReviewMeeting",
    "ReviewPack",
    "RollupDirtyHour",
    "RollupVersion",
    "ScopeHour",
    "SourceRun",
    "Ticket",
    "TicketComment",
    "WorkerHeartbeat",
]
