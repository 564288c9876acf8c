"""Actions: what may be done with an incident, and doing it through the actuators (each call logged)."""

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency.actuators import ActionRequest, actuator_from_config
from efficiency.analysis.faults import trust
from efficiency.choices import ActionKind, IncidentStatus, JobState, NodeState
from efficiency.fault_messages import message, render_english
from efficiency.models import ActuatorConfig, FaultPolicy, Incident, IncidentAction, Node, NodeStateChange
from efficiency.selectors.faults import node_isolating_incident
from efficiency.services.faults.incidents import phase_stamp

logger = logging.getLogger(__name__)

ISOLATE, RESTART, RETURN_TO_SERVICE, CLOSE = "isolate", "restart", "return-to-service", "close"
OPERATIONS = (ISOLATE, RESTART, RETURN_TO_SERVICE, CLOSE)
# A job in these states can be requeued from its checkpoint (Slurm requeues finished batch jobs too);
# a completed job has nothing to redo, a cancelled one was stopped by its user, a pending one waits.
RESTARTABLE = {JobState.RUNNING, JobState.FAILED, JobState.NODE_FAIL, JobState.TIMEOUT, JobState.PREEMPTED}


class IncidentActionRefused(Exception):
    """An operation that does not apply to the incident (or node) in its state; nothing was done."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def incident_operations(*, incident: Incident) -> dict[str, str | None]:
    """What a platform admin may do with ``incident`` now: each operation with None when it
    applies, else why not (in the reader's language). Pages offer only the first kind; the API
    and the services refuse the second with the reason."""
    node, job = incident.node, incident.job
    over = {
        IncidentStatus.RESOLVED: _("The incident has recovered."),
        IncidentStatus.CLOSED: _("The incident is closed."),
    }.get(incident.status)
    why: dict[str, str | None] = dict.fromkeys(OPERATIONS)
    if node is None:
        why[ISOLATE] = why[RETURN_TO_SERVICE] = _("The incident has no suspected node.")
    else:
        if node.state != NodeState.ACTIVE:
            why[ISOLATE] = _("Node %(node)s is not in service (%(state)s).") % {
                "node": node.hostname,
                "state": node.get_state_display(),
            }
        elif incident.status == IncidentStatus.CLOSED:
            why[ISOLATE] = over
        if node.state != NodeState.ISOLATED:
            why[RETURN_TO_SERVICE] = _("Node %(node)s is not isolated.") % {"node": node.hostname}
    if job is None:
        why[RESTART] = _("The incident has no job.")
    elif over:
        why[RESTART] = over
    elif incident.restart_requested_at is not None:
        why[RESTART] = _("A restart was already requested.")
    elif job.state not in RESTARTABLE:
        why[RESTART] = _("Job %(job)s is %(state)s: there is nothing to restart.") % {
            "job": job.external_id,
            "state": job.get_state_display().lower(),
        }
    why[CLOSE] = over
    return why


def _check(incident: Incident, operation: str) -> None:
    why_not = incident_operations(incident=incident)[operation]
    if why_not is not None:
        raise IncidentActionRefused(why_not)


def incident_policy_apply(*, incident: Incident, now: datetime | None = None) -> list[IncidentAction]:
    """Run the category's policy once: isolate, request a restart, notify (each logged).

    What does not apply in the incident's state (a node already out, a job that completed) is
    skipped; what applies runs through the actuators, and takes effect only when one really did it.
    An unconfirmed incident (only the job's own output as evidence) of the machine (GPU, ECC,
    NVLink, network) does nothing; one of the job itself (NCCL timeout, OOM, NaN loss, …) may
    requeue that same job and notify, but never acts on a node. Only a node named by trusted
    evidence is isolated automatically.
    """
    now = now or timezone.now()
    policy = FaultPolicy.objects.filter(category=incident.category).first()
    if policy is None:
        return []
    if not incident.confirmed and not trust.job_output_may_restart(incident.category):
        return []  # a suspicion of the machine waits for a trusted signal
    done = set(incident.actions.values_list("kind", flat=True))
    can = incident_operations(incident=incident)
    # Only a node that trusted evidence names is taken out automatically, whatever the job said.
    node_vouched = incident.signals.filter(trusted=True, node_id=incident.node_id).exists()
    actions = []
    if policy.isolate_node and ActionKind.ISOLATE_NODE not in done and can[ISOLATE] is None and node_vouched:
        actions += node_isolate(incident=incident, now=now)
    if policy.restart_job and ActionKind.RESTART_JOB not in done and can[RESTART] is None:
        actions += job_restart_request(incident=incident, now=now)
    if policy.notify and ActionKind.NOTIFY not in done and not incident.is_finished:
        actions += _carry_out(incident, ActionKind.NOTIFY, now=now)[0]
    return actions


def node_isolate(*, incident: Incident, actor=None, now: datetime | None = None) -> list[IncidentAction]:
    """Take the suspected node out of scheduling: the scheduler (actuators), then our inventory
    and the node's history, when it was really done."""
    now = now or timezone.now()
    _check(incident, ISOLATE)
    actions, done = _carry_out(incident, ActionKind.ISOLATE_NODE, now=now, actor=actor)
    if done:
        _node_state_change(
            incident.node, NodeState.ACTIVE, NodeState.ISOLATED, incident=incident, actor=actor, now=now
        )
    return actions


def job_restart_request(
    *, incident: Incident, actor=None, now: datetime | None = None
) -> list[IncidentAction]:
    """Requeue the job from its last checkpoint (actuators); the phase is stamped when it was done."""
    now = now or timezone.now()
    _check(incident, RESTART)
    actions, done = _carry_out(incident, ActionKind.RESTART_JOB, now=now, actor=actor)
    if done:
        phase_stamp(incident, "restart_requested_at", now)
        incident.status = IncidentStatus.RECOVERING
        incident.save(update_fields=["restart_requested_at", "status", "updated_at"])
    return actions


def node_return_to_service(
    *, node: Node | None, incident: Incident | None = None, actor=None, now: datetime | None = None
) -> list[IncidentAction]:
    """Put an isolated node back into scheduling (``scontrol update … State=RESUME``, ``kubectl
    uncordon``), logged on the incident that isolated it; the inventory and the node's history
    change when it was really done."""
    now = now or timezone.now()
    if node is None:
        raise IncidentActionRefused(_("The incident has no suspected node."))
    node.refresh_from_db()
    if node.state != NodeState.ISOLATED:
        raise IncidentActionRefused(_("Node %(node)s is not isolated.") % {"node": node.hostname})
    incident = incident or node_isolating_incident(node=node)
    if incident is None:
        raise IncidentActionRefused(
            _("No incident isolated node %(node)s: change its state in the inventory.")
            % {"node": node.hostname}
        )
    actions, done = _carry_out(incident, ActionKind.RESUME_NODE, now=now, actor=actor, node=node)
    if done:
        _node_state_change(
            node, NodeState.ISOLATED, NodeState.ACTIVE, incident=incident, actor=actor, now=now
        )
    return actions


def incident_close(*, incident: Incident, reason: str, actor=None, now: datetime | None = None) -> Incident:
    """End an incident by hand without a recovery: who, when and why are recorded, and it counts in
    no MTTR (closing is not recovering)."""
    now = now or timezone.now()
    reason = (reason or "").strip()
    if not reason:
        raise IncidentActionRefused(_("Say why the incident is closed: a reason is required."))
    _check(incident, CLOSE)
    return incident_mark_closed(
        incident, now=now, actor=actor, reason=reason, facts=message("closed", reason=reason)
    )


def incident_operation_run(
    *, incident: Incident, operation: str, actor, reason: str = "", now: datetime | None = None
) -> list[IncidentAction]:
    """Run one of ``OPERATIONS`` on an incident for a person (the page and the API both call this).

    Returns the actions carried out (none for a close). Raises ``IncidentActionRefused`` when the
    operation does not apply to the incident in its state, and ``ValueError`` for an unknown one.
    """
    if operation == CLOSE:
        incident_close(incident=incident, reason=reason, actor=actor, now=now)
        return []
    if operation == ISOLATE:
        return node_isolate(incident=incident, actor=actor, now=now)
    if operation == RESTART:
        return job_restart_request(incident=incident, actor=actor, now=now)
    if operation == RETURN_TO_SERVICE:
        return node_return_to_service(node=incident.node, incident=incident, actor=actor, now=now)
    raise ValueError(f"unknown incident operation {operation!r}")


def incident_mark_closed(incident: Incident, *, now: datetime, actor, reason: str, facts: dict) -> Incident:
    incident.status = IncidentStatus.CLOSED
    incident.closed_at = max(now, incident.detected_at)
    incident.closed_by = actor
    incident.close_reason = reason
    incident.save()
    _log_action(incident, ActionKind.CLOSE, "", True, False, facts, now=now, actor=actor)
    return incident


NO_ACTUATOR = {
    ActionKind.ISOLATE_NODE: "no_isolate_actuator",
    ActionKind.RESTART_JOB: "no_restart_actuator",
    ActionKind.RESUME_NODE: "no_resume_actuator",
    ActionKind.NOTIFY: "no_notify_actuator",
}
BY_HAND = {
    ActionKind.ISOLATE_NODE: "isolated_by_hand",
    ActionKind.RESTART_JOB: "restart_by_hand",
    ActionKind.RESUME_NODE: "resumed_by_hand",
}


def _carry_out(
    incident: Incident, kind: str, *, now: datetime, actor=None, node: Node | None = None
) -> tuple[list[IncidentAction], bool]:
    """Run the action's enabled actuators, each logged; whether it was really done.

    Done means an actuator out of dry run succeeded. With none configured, the automatic policy
    does nothing (logged as such), while a platform admin's own action is recorded as done by hand.
    """
    node = node or incident.node
    configs = list(ActuatorConfig.objects.filter(action=kind, enabled=True))
    if not configs:
        facts = {
            "node": node.hostname if node else "—",
            "job": incident.job.external_id if incident.job else "—",
        }
        if actor is not None and kind in BY_HAND:
            return [
                _log_action(
                    incident, kind, "", True, False, message(BY_HAND[kind], **facts), now=now, actor=actor
                )
            ], True
        return [
            _log_action(
                incident, kind, "", False, False, message(NO_ACTUATOR[kind], **facts), now=now, actor=actor
            )
        ], False
    actions = []
    for config in configs:
        request = ActionRequest(
            kind=kind,
            incident_id=incident.pk,
            node=node.hostname if node else None,
            gpu=incident.gpu_index,
            job_id=incident.job.external_id if incident.job else None,
            category=incident.category,
            reason=f"portal incident {incident.pk}: {incident.root_signature_id}",
            extra={"cluster": incident.cluster.slug},
        )
        try:
            result = actuator_from_config(config.config).run(request, dry_run=config.dry_run)
        except ValueError as error:
            logger.warning(
                "actuator %s could not run %s for incident %s: bad configuration: %s",
                config.name, kind, incident.pk, error,
            )  # fmt: skip
            facts = message("bad_actuator_config", error=str(error))
            actions.append(
                _log_action(incident, kind, config.name, False, config.dry_run, facts, now=now, actor=actor)
            )
            continue
        if not result.ok:
            logger.warning(
                "actuator %s failed to %s for incident %s: %s",
                config.name, kind, incident.pk, result.summary or result.code,
            )  # fmt: skip
        facts = {"code": result.code, "params": dict(result.params)} if result.code else {}
        actions.append(_log_action(
            incident, kind, config.name, result.ok, result.dry_run, facts, summary=result.summary,
            detail=result.detail, duration_s=result.duration_s, now=now, actor=actor,
        ))  # fmt: skip
    return actions, any(action.ok and not action.dry_run for action in actions)


def _node_state_change(
    node: Node, before: str, after: str, *, incident: Incident, actor, now: datetime
) -> bool:
    """Move ``node`` from ``before`` to ``after`` in the inventory and its history; False when it
    was not in ``before`` any more (someone else changed it meanwhile)."""
    reason = (
        f"incident {incident.pk}: {incident.root_signature_id}"[:300] if after == NodeState.ISOLATED else ""
    )
    with transaction.atomic():
        changed = Node.objects.filter(pk=node.pk, state=before).update(
            state=after, state_reason=reason, updated_at=timezone.now()
        )
        if changed:
            NodeStateChange.objects.create(
                node=node, at=now, state=after, previous_state=before, incident=incident, actor=actor
            )
    node.refresh_from_db(fields=["state", "state_reason", "updated_at"])
    return bool(changed)


def _log_action(
    incident, kind, actuator, ok, dry_run, facts, *, now, actor, summary="", detail="", duration_s=0.0
) -> IncidentAction:
    return IncidentAction.objects.create(
        incident=incident,
        kind=kind,
        actuator=actuator,
        ok=ok,
        dry_run=dry_run,
        summary=(summary or render_english(facts))[:1000],
        message=facts,
        detail=detail,
        requested_at=now,
        duration_s=duration_s,
        actor=actor,
    )
