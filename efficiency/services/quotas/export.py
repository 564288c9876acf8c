"""Export: an approved cycle as Kueue, Volcano or Slurm configuration."""

from collections import defaultdict
from datetime import datetime

from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency.analysis import scheduler_config
from efficiency.choices import MappingKind, QuotaCycleStatus, QuotaEventKind
from efficiency.models import DepartmentMapping, QuotaCycle
from efficiency.services.quotas.cycles import QuotaError, cycle_event, day_text
from efficiency.times import portal_day_text

EXPORT_FORMATS = {
    "kueue": ("kueue-clusterqueues.yaml", "application/yaml", scheduler_config.kueue_manifests),
    "volcano": ("volcano-queues.yaml", "application/yaml", scheduler_config.volcano_queues),
    "slurm": ("slurm-qos.sh", "text/x-shellscript", scheduler_config.slurm_qos_commands),
}


def quota_plan(cycle: QuotaCycle) -> scheduler_config.QuotaPlan:
    """An approved cycle's quotas with each department's namespaces and Slurm accounts."""
    mappings: dict[tuple[int, str], list[str]] = defaultdict(list)
    for department_id, kind, value in (
        DepartmentMapping.objects.filter(Q(cluster=cycle.cluster_id) | Q(cluster__isnull=True))
        .order_by("value")
        .values_list("department_id", "kind", "value")
    ):
        mappings[(department_id, kind)].append(value)
    quotas = cycle.quotas.select_related("department").order_by("department__code", "gpu_model")
    return scheduler_config.QuotaPlan(
        cluster=cycle.cluster.slug,
        cycle_label=f"{day_text(cycle.start)} – {day_text(cycle.end)}",
        capacity={model: int(gpus) for model, gpus in cycle.capacity.items()},
        quotas=[
            scheduler_config.QueueQuota(
                department_code=q.department.code,
                gpu_model=q.gpu_model,
                guaranteed_gpus=q.guaranteed_gpus,
                borrowing_limit_gpus=q.borrowing_limit_gpus,
                namespaces=tuple(mappings[(q.department_id, MappingKind.K8S_NAMESPACE)]),
                slurm_accounts=tuple(mappings[(q.department_id, MappingKind.SLURM_ACCOUNT)]),
            )
            for q in quotas
            if q.gpu_model in cycle.capacity
        ],
    )


def quota_export(
    *, cycle: QuotaCycle, fmt: str, actor=None, now: datetime | None = None
) -> tuple[str, str, str]:
    """An approved cycle as scheduler configuration: (file name, content type, text)."""
    if fmt not in EXPORT_FORMATS:
        raise QuotaError(_("Unknown export format %(format)s.") % {"format": fmt})
    if cycle.status != QuotaCycleStatus.APPROVED:
        raise QuotaError(_("Only approved quotas can be exported."))
    name, content_type, render = EXPORT_FORMATS[fmt]
    try:
        text = render(quota_plan(cycle))
    except ValueError as error:
        raise QuotaError(str(error)) from None
    cycle_event(cycle, QuotaEventKind.EXPORTED, actor=actor, at=now or timezone.now(), comment=fmt)
    return f"{cycle.cluster.slug}-{portal_day_text(cycle.start, '%Y%m%d')}-{name}", content_type, text
