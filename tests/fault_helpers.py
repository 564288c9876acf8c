"""Evidence as the collectors deliver it, for the fault tests: kernel lines, exporter Xid counts."""

from datetime import UTC, datetime, timedelta

from efficiency.actuators.command import SLURM_DRAIN, SLURM_REQUEUE, SLURM_RESUME
from efficiency.choices import ActionKind, JobState
from efficiency.models import ActuatorConfig, LogChunk
from tests.factories import LogChunkFactory

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def kernel_xid_chunk(source, node, at: datetime, xid: int = 79, *, offset: int | None = None) -> LogChunk:
    """One kernel log line ``NVRM: Xid (…): <xid>`` of ``node`` at ``at``, as the log collector stores it."""
    text = (
        f"{at:%b} {at.day:2d} {at:%H:%M:%S} {node.hostname} kernel: [  219.470994] "
        f"NVRM: Xid (PCI:0000:07:00): {xid}, pid=1234, name=python, Ch 00000010\n"
    )
    start = offset if offset is not None else LogChunk.objects.filter(source=source).count() * 1000
    return LogChunkFactory(
        source=source,
        stream=f"kern/{node.hostname}.log",
        file_id="kern",
        start_offset=start,
        end_offset=start + len(text.encode()),
        node=node.hostname,
        line_count=1,
        text=text,
        received_at=at,
    )


def xid_count_event(node, gpu: int, xid: int, at: datetime) -> tuple[int, int, int, int]:
    """``DCGM_EXP_XID_ERRORS_COUNT{xid=…} 1`` of one GPU in a scrape at ``at``."""
    return (node.pk, gpu, xid, int(at.timestamp() * 1000))


def running_job(job, *, started: datetime = T0 - timedelta(hours=2)):
    """``job`` running since ``started`` (factories date jobs from the wall clock)."""
    job.submitted_at = started - timedelta(minutes=5)
    job.started_at = started
    job.ended_at = None
    job.state = JobState.RUNNING
    job.save()
    return job


def slurm_actuators(*, dry_run: bool) -> None:
    """Drain, requeue and resume through scontrol, as the demo configures them."""
    for name, kind, argv in (
        ("slurm-drain", ActionKind.ISOLATE_NODE, SLURM_DRAIN),
        ("slurm-requeue", ActionKind.RESTART_JOB, SLURM_REQUEUE),
        ("slurm-resume", ActionKind.RESUME_NODE, SLURM_RESUME),
    ):
        ActuatorConfig.objects.update_or_create(
            name=name,
            defaults={"action": kind, "config": {"type": "command", "argv": list(argv)}, "dry_run": dry_run},
        )


def true_actuators() -> None:
    """Actuators that really run and succeed (``true`` ignores its arguments)."""
    for kind in (ActionKind.ISOLATE_NODE, ActionKind.RESTART_JOB, ActionKind.RESUME_NODE):
        ActuatorConfig.objects.update_or_create(
            name=f"true-{kind}",
            defaults={
                "action": kind,
                "config": {"type": "command", "argv": ["true", "{incident_id}"]},
                "dry_run": False,
            },
        )
