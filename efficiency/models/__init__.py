"""The domain model, one module per area."""

from efficiency.models.inventory import Cluster, Department, DepartmentMapping, Gpu, Node
from efficiency.models.jobs import Job
from efficiency.models.system import WorkerHeartbeat
from efficiency.models.telemetry import (
    DataSource,
    DepartmentHour,
    GpuSample,
    LogChunk,
    NodeHour,
    RollupDirtyHour,
    SourceRun,
)

__all__ = [
    "Cluster",
    "DataSource",
    "Department",
    "DepartmentHour",
    "DepartmentMapping",
    "Gpu",
    "GpuSample",
    "Job",
    "LogChunk",
    "Node",
    "NodeHour",
    "RollupDirtyHour",
    "SourceRun",
    "WorkerHeartbeat",
]
