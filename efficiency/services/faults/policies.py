"""The default fault policies."""

from efficiency.choices import FaultCategory
from efficiency.models import FaultPolicy
from efficiency.services.faults.incidents import NOT_INCIDENTS


def fault_policies_ensure() -> None:
    """The default policies (editable in the admin): hardware faults isolate the node and
    restart the job; software faults restart; everything notifies."""
    isolate = {
        FaultCategory.HARDWARE_GPU,
        FaultCategory.HARDWARE_MEMORY_ECC,
        FaultCategory.NVLINK,
        FaultCategory.NETWORK_RDMA,
    }
    restart = isolate | {
        FaultCategory.NCCL_TIMEOUT_HANG,
        FaultCategory.STORAGE_IO,
        FaultCategory.SOFTWARE_ERROR,
        FaultCategory.CUDA_ILLEGAL_ACCESS,
    }
    for category in FaultCategory.values:
        if category in NOT_INCIDENTS:
            continue
        FaultPolicy.objects.get_or_create(
            category=category,
            defaults={
                "isolate_node": category in isolate,
                "restart_job": category in restart,
                "notify": True,
            },
        )
