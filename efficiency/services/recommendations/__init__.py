"""Recommendations, the write side: job log facts, the engine, and the review workflow.

One module per concern: ``logfacts`` (log chunks → each job's facts, read once), ``engine``
(jobs, facts and rollups → the rules → stored recommendations, updated, reopened and closed) and
``decisions`` (accept, reject, snooze, comment). The rules themselves are pure, in
``efficiency.analysis.recommendations``. Import from this package, not from its modules.
"""

from efficiency.services.recommendations.decisions import (
    ACCEPT,
    COMMENT,
    REJECT,
    SNOOZE,
    RecommendationDecisionRefused,
    may_comment,
    recommendation_actions,
    recommendation_decide,
)
from efficiency.services.recommendations.engine import RefreshSummary, recommendations_refresh, rule_settings
from efficiency.services.recommendations.logfacts import job_log_facts_update

__all__ = [
    "ACCEPT",
    "COMMENT",
    "REJECT",
    "SNOOZE",
    "RecommendationDecisionRefused",
    "RefreshSummary",
    "job_log_facts_update",
    "may_comment",
    "recommendation_actions",
    "recommendation_decide",
    "recommendations_refresh",
    "rule_settings",
]
