"""The domain model, one module per area."""

from efficiency.models.inventory import Cluster, Department, DepartmentMapping, Gpu, Node
from efficiency.models.jobs import Job
from efficiency.models.system import WorkerHeartbeat

__all__ = [
    "Cluster",
    "Department",
    "DepartmentMapping",
    "Gpu",
    "Job",
    "Node",
    "WorkerHeartbeat",
]
