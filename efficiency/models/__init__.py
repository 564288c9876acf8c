"""The domain model, one module per area."""

from efficiency.models.inventory import Cluster, Department, DepartmentMapping, Gpu, Node
from efficiency.models.jobs import Job
from efficiency.models.quotas import (
    CapacityAlert,
    Quota,
    QuotaBacktest,
    QuotaCycle,
    QuotaEvent,
    QuotaObjection,
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
    RollupDirtyHour,
    ScopeHour,
    SourceRun,
)

__all__ = [
    "CapacityAlert",
    "Cluster",
    "DataSource",
    "Department",
    "DepartmentHour",
    "DepartmentMapping",
    "Gpu",
    "GpuSample",
    "Job",
    "JobHour",
    "LogChunk",
    "Node",
    "NodeClassification",
    "NodeDay",
    "NodeHour",
    "Quota",
    "QuotaBacktest",
    "QuotaCycle",
    "QuotaEvent",
    "QuotaObjection",
    "RollupDirtyHour",
    "ScopeHour",
    "SourceRun",
    "WorkerHeartbeat",
]
