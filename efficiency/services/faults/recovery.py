"""Recovery: incidents marked recovered when their job runs again, MTTR phases, GPU-hours lost."""

from datetime import datetime, timedelta

from django.utils import timezone

from efficiency.choices import IncidentStatus, JobState
from efficiency.fault_messages import message
from efficiency.models import Cluster, Incident, Job
from efficiency.selectors.faults import rollback_s
from efficiency.services.faults.actions import incident_mark_closed
from efficiency.services.faults.incidents import phase_stamp

RUN_AGAIN_WITHIN = timedelta(days=1)


def incidents_refresh(*, cluster: Cluster, now: datetime | None = None) -> int:
    """Mark incidents recovered when their job (requeued) or its resubmission runs again; close
    those whose job ended and did not run again within a day (closed, not recovered)."""
    now = now or timezone.now()
    recovered = 0
    for incident in (
        Incident.objects.filter(cluster=cluster)
        .exclude(status__in=IncidentStatus.finished())
        .select_related("job", "cluster")
    ):
        job = incident.job
        if job is None:
            continue
        back = _running_again(job, incident.occurred_at, now)
        if back is None:
            if job.state in JobState.finished() and job.ended_at and now - job.ended_at > RUN_AGAIN_WITHIN:
                incident.gpu_hours_lost = _gpu_hours_lost(incident, max(job.ended_at, incident.occurred_at))
                incident_mark_closed(
                    incident, now=now, actor=None, reason="", facts=message("closed_not_run_again")
                )
            continue
        phase_stamp(incident, "recovered_at", back)
        incident.status = IncidentStatus.RESOLVED
        incident.gpu_hours_lost = _gpu_hours_lost(incident, incident.recovered_at)
        incident.save(update_fields=["recovered_at", "status", "gpu_hours_lost", "updated_at"])
        recovered += 1
    return recovered


def _running_again(job: Job, occurred: datetime, now: datetime) -> datetime | None:
    """When the job ran again after the fault: requeued under its id, or resubmitted under its
    name within ``RUN_AGAIN_WITHIN`` of its end (a job of the same name days later is another
    run, not a recovery). Never after ``now``: a start the portal cannot have seen yet."""
    if job.started_at and occurred < job.started_at <= now:  # requeued under the same id
        return job.started_at
    ended = max(job.ended_at or occurred, occurred)
    successor = (
        Job.objects.filter(cluster=job.cluster, name=job.name, department_id=job.department_id)
        .filter(submitted_at__gte=occurred - timedelta(minutes=1), submitted_at__lte=ended + RUN_AGAIN_WITHIN)
        .filter(started_at__isnull=False, started_at__lte=now)
        .exclude(pk=job.pk)
        .order_by("started_at")
        .first()
    )
    return successor.started_at if successor else None


def _gpu_hours_lost(incident: Incident, back: datetime) -> float:
    """GPUs x (work since the last checkpoint + time until running again)."""
    downtime_s = max(0.0, (back - incident.occurred_at).total_seconds())
    return incident.gpu_count * (rollback_s(incident) + downtime_s) / 3600
