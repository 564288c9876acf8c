"""Quota planning, the write side: cycles, proposals, review, backtests, exports, capacity alerts.

The life of a cycle: the first one of a cluster is its fixed partition (what each department
owns). A few days before the cycle in force ends, the next one is *proposed* from the demand of
the last cycle (efficiency.analysis.quotas) and backtested; committee members edit numbers and
approve it (each change recorded with who, when and why); department heads see their proposal
and may object. Once approved it comes into force at its start and can be exported as Kueue,
Volcano or Slurm configuration.

One module per concern: ``cycles`` (shared helpers and a cluster's first cycle), ``proposal``,
``review`` (edits, objections, approval), ``backtest``, ``export``, ``capacity`` (alerts) and
``roll`` (the periodic work). The arithmetic that needs no database (the proposal, the backtest
and the jobs it replays, pool and trend figures) is in ``efficiency.analysis``. Import from this
package, not from its modules.
"""

from efficiency.analysis.backtest import backtest_jobs
from efficiency.services.quotas.backtest import quota_backtest_run
from efficiency.services.quotas.capacity import capacity_check
from efficiency.services.quotas.cycles import (
    QuotaError,
    cycle_length,
    local_midnight,
    quota_cycle_initial_create,
)
from efficiency.services.quotas.export import EXPORT_FORMATS, quota_export, quota_plan
from efficiency.services.quotas.proposal import proposal_settings, quota_proposal_create
from efficiency.services.quotas.review import (
    QuotaOverCapacity,
    check_within_capacity,
    quota_cycle_approve,
    quota_cycle_edit,
    quota_objection_answer,
    quota_objection_file,
    quota_update,
)
from efficiency.services.quotas.roll import quota_cycles_roll

__all__ = [
    "EXPORT_FORMATS",
    "QuotaError",
    "QuotaOverCapacity",
    "backtest_jobs",
    "capacity_check",
    "check_within_capacity",
    "cycle_length",
    "local_midnight",
    "proposal_settings",
    "quota_backtest_run",
    "quota_cycle_approve",
    "quota_cycle_edit",
    "quota_cycle_initial_create",
    "quota_cycles_roll",
    "quota_export",
    "quota_objection_answer",
    "quota_objection_file",
    "quota_plan",
    "quota_proposal_create",
    "quota_update",
]
