"""Faults, the write side: scan new log chunks, group evidence into incidents, locate, act, recover.

The path of a fault: a log line is collected (log files or log push) → ``fault_scan_source`` runs
the signature scanner over the new chunks and stores one ``FaultSignal`` per finding (the same
line is stored once however often it is scanned) → ``incidents_group`` attaches the signals of a
job to its open incident or opens one, and locates the root cause: the most fundamental category
present (hardware before network before software before the NCCL timeouts that follow them), its
earliest signal's node and rank; for a hang with only watchdog timeouts, the ranks that did *not*
report one (they never entered the collective) → the category's ``FaultPolicy`` isolates the
node, requests a restart from the last checkpoint and notifies, through the configured actuators
(each call and its outcome logged on the incident) → ``incidents_refresh`` marks an incident
recovered when the job, or its resubmission, runs again, and computes the GPU-hours lost.

The rules of trust (DESIGN.md) hold here, each in one place:

- *Time only moves forward in an incident*: every phase is stamped through ``incidents.phase_stamp``.
- *One fault seen by several signal paths is one incident*: ``incidents._incident_for`` joins evidence on the
  same node (and GPU) within ``SAME_FAULT_WINDOW`` to the incident that already holds the fault.
- *Closing is not recovering*: ``incident_close`` ends an incident without a recovery time.
- *Dry run changes nothing* but the log: ``actions._carry_out`` says whether an action was really done, and
  only then does the inventory or an incident's phase change. With no actuator configured for an
  action, the automatic policy does nothing (and logs so), while a platform admin's own action is
  recorded as done by hand: the admin is the actuator.

Which operations an incident offers in its state is ``incident_operations``, used by the page, the
API and the services themselves (an operation that does not apply raises ``IncidentActionRefused``).

One module per concern: ``scanning`` (log chunks → signals), ``detection`` (progress and metric
detectors), ``evidence`` (storing signals; which job held a node, which node ran a rank),
``incidents`` (grouping, locating, phases), ``actions`` (operations, policies, actuators, node
state, closing), ``recovery`` (recovered, GPU-hours lost) and ``policies`` (the defaults). The
decisions that need no database (root cause, silent ranks, the straggler) are in
``efficiency.analysis.faults``. Import from this package, not from its modules.
"""

from efficiency.services.faults.actions import (
    CLOSE,
    ISOLATE,
    OPERATIONS,
    RESTART,
    RESTARTABLE,
    RETURN_TO_SERVICE,
    IncidentActionRefused,
    incident_close,
    incident_operation_run,
    incident_operations,
    incident_policy_apply,
    job_restart_request,
    node_isolate,
    node_return_to_service,
)
from efficiency.services.faults.detection import (
    fault_detect_jobs,
    fault_detect_metrics,
    xid_count_signals_record,
)
from efficiency.services.faults.incidents import (
    INCIDENT_WINDOW,
    NODE_FAULTS,
    NOT_INCIDENTS,
    ROOT_PRIORITY,
    SAME_FAULT_WINDOW,
    incidents_group,
)
from efficiency.services.faults.policies import fault_policies_ensure
from efficiency.services.faults.recovery import RUN_AGAIN_WITHIN, incidents_refresh
from efficiency.services.faults.scanning import ScanSummary, fault_scan_source, fault_scan_sources

__all__ = [
    "CLOSE",
    "INCIDENT_WINDOW",
    "ISOLATE",
    "NODE_FAULTS",
    "NOT_INCIDENTS",
    "OPERATIONS",
    "RESTART",
    "RESTARTABLE",
    "RETURN_TO_SERVICE",
    "ROOT_PRIORITY",
    "RUN_AGAIN_WITHIN",
    "SAME_FAULT_WINDOW",
    "IncidentActionRefused",
    "ScanSummary",
    "fault_detect_jobs",
    "fault_detect_metrics",
    "fault_policies_ensure",
    "fault_scan_source",
    "fault_scan_sources",
    "incident_close",
    "incident_operation_run",
    "incident_operations",
    "incident_policy_apply",
    "incidents_group",
    "incidents_refresh",
    "job_restart_request",
    "node_isolate",
    "node_return_to_service",
    "xid_count_signals_record",
]
