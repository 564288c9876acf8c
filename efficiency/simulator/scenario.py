"""The reference scenario (DESIGN.md, car maker A): who owns which nodes. Plain Python."""

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class DepartmentSpec:
    code: str
    name: str
    node_count: int


@dataclass(frozen=True)
class NodeSpec:
    hostname: str
    gpu_model: str
    gpu_memory_mib: int
    gpu_count: int
    rdma_capable: bool
    fault_domain: str
    owner: str  # department code; "" is the shared pool


# Nine departments of an autonomous-driving platform on a fixed partition of 64 nodes x 8 GPUs.
REFERENCE_DEPARTMENTS = [
    DepartmentSpec("vision", "Vehicle vision", 10),
    DepartmentSpec("radar", "Radar perception", 6),
    DepartmentSpec("data", "Data processing", 6),
    DepartmentSpec("bev", "BEV", 8),
    DepartmentSpec("mapping", "Mapping", 4),
    DepartmentSpec("sim", "Simulation", 6),
    DepartmentSpec("pnc", "Planning & control", 6),
    DepartmentSpec("e2e", "End-to-end driving models", 12),
    DepartmentSpec("cabin", "In-cabin assistant", 6),
]
GPUS_PER_NODE = 8
NODES_PER_RACK = 16
H100 = ("NVIDIA H100 80GB HBM3", 81_559, True)
A100 = ("NVIDIA A100-SXM4-80GB", 81_920, False)
H100_NODE_COUNT = 48  # the first 48 nodes are H100 with RDMA, the rest A100 without


def reference_nodes(
    departments: list[DepartmentSpec] = REFERENCE_DEPARTMENTS, scale: int = 1
) -> list[NodeSpec]:
    """The nodes of the reference scenario, ``scale`` times over (scale 20 gives 1,280 nodes)."""
    nodes = []
    number = 0
    for _ in range(scale):
        for department in departments:
            for _ in range(department.node_count):
                number += 1
                model, memory_mib, rdma = H100 if (number - 1) % 64 < H100_NODE_COUNT else A100
                nodes.append(
                    NodeSpec(
                        hostname=f"gpu-{number:03d}",
                        gpu_model=model,
                        gpu_memory_mib=memory_mib,
                        gpu_count=GPUS_PER_NODE,
                        rdma_capable=rdma,
                        fault_domain=f"rack-{(number - 1) // NODES_PER_RACK + 1:02d}",
                        owner=department.code,
                    )
                )
    return nodes


def gpu_uuid(hostname: str, index: int) -> str:
    """A stable GPU UUID, so the inventory and the simulator's exporter agree on identities."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{hostname}.gpu{index}')}"
