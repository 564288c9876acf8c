"""Job findings grouped into recommendations: one per rule and job family.

A job family is one user's jobs of one department whose names share a pattern: digits become
``*`` ("bev-exp12" and "bev-exp31" are "bev-exp*"), so a recommendation follows the family across
resubmissions instead of appearing once per job. Its expected gain is the GPU time the change would
save per week, summed over the family's jobs in the window; its share is that over the family's
GPU-hours per week.
"""

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from efficiency.analysis.recommendations.evidence import EvidenceLine
from efficiency.analysis.recommendations.rules import CONFIDENCE_ORDER, Finding, JobView

MAX_EVIDENCE = 8
_DIGITS = re.compile(r"\d+")


def name_pattern(name: str) -> str:
    """The family pattern of a job name: runs of digits as ``*``, at most 200 characters."""
    return _DIGITS.sub("*", name.strip())[:200] or "*"


def family_key(department: str, user: str, name: str) -> str:
    """The subject key of a job family: department / user / name pattern."""
    return f"{department}/{user}/{name_pattern(name)}"


@dataclass(frozen=True, slots=True)
class JobFindings:
    """One job's findings and what the family sums need from it."""

    job: JobView
    job_id: int | None
    findings: tuple[Finding, ...]
    allocated_gpu_h: float
    start: datetime | None
    end: datetime | None


@dataclass
class Draft:
    """A recommendation as the engine computed it, before it meets the stored one."""

    rule: str
    subject_key: str
    department: str
    user: str
    pattern: str
    finding: Finding  # the latest job's finding: observed, ideal, change, config
    evidence: list[dict] = field(default_factory=list)
    job_ids: list[int] = field(default_factory=list)
    gain_gpu_h_week: float = 0.0
    gpu_h_week: float = 0.0
    confidence: str = "low"
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    fingerprints: set[str] = field(default_factory=set)

    @classmethod
    def of_finding(cls, finding: Finding, *, subject_key: str, department: str, **values) -> "Draft":
        """A draft of one finding on a subject that is not a family of job findings (a node, a
        department's guarantee, a family's week): rule, confidence and fingerprint are the finding's."""
        draft = cls(
            rule=finding.rule,
            subject_key=subject_key,
            department=department,
            user=values.pop("user", ""),
            pattern=values.pop("pattern", ""),
            finding=finding,
            confidence=finding.confidence,
            **values,
        )
        draft.fingerprints.add(finding.fingerprint())
        return draft

    @property
    def gain_pct(self) -> float:
        return 100 * self.gain_gpu_h_week / self.gpu_h_week if self.gpu_h_week > 0 else 0.0

    @property
    def fingerprint(self) -> str:
        return " || ".join(sorted(self.fingerprints))[:1000]


def _evidence_rows(job: JobView, lines: Iterable[EvidenceLine]) -> list[dict]:
    return [{**line.as_dict(), "job": job.key} for line in lines]


def group_findings(jobs: Iterable[JobFindings], *, window_days: float) -> list[Draft]:
    """Recommendations of the window, most GPU-hours to gain first.

    A finding's gain is what the rule measured (``gain_gpu_h``), else its share of the job's
    GPU-hours in the window; both are per window and divided into weeks. The family's GPU-hours
    per week count every job of the family that had a finding of the rule.
    """
    weeks = max(window_days, 1e-9) / 7
    drafts: dict[tuple[str, str], Draft] = {}
    latest: dict[tuple[str, str], datetime | None] = defaultdict(lambda: None)
    for item in jobs:
        job = item.job
        key = family_key(job.department, job.user, job.name)
        for finding in item.findings:
            draft = drafts.get((finding.rule, key))
            if draft is None:
                draft = drafts[(finding.rule, key)] = Draft(
                    rule=finding.rule,
                    subject_key=key,
                    department=job.department,
                    user=job.user,
                    pattern=name_pattern(job.name),
                    finding=finding,
                    confidence=finding.confidence,
                )
            gain = (
                finding.gain_gpu_h
                if finding.gain_gpu_h is not None
                else item.allocated_gpu_h * finding.gain_share
            )
            draft.gain_gpu_h_week += gain / weeks
            draft.gpu_h_week += item.allocated_gpu_h / weeks
            if item.job_id is not None:
                draft.job_ids.append(item.job_id)
            if CONFIDENCE_ORDER[finding.confidence] > CONFIDENCE_ORDER[draft.confidence]:
                draft.confidence = finding.confidence
            draft.fingerprints.add(finding.fingerprint())
            moment = item.start
            if moment is not None and (draft.first_seen is None or moment < draft.first_seen):
                draft.first_seen = moment
            seen = item.end or item.start
            if seen is not None and (draft.last_seen is None or seen > draft.last_seen):
                draft.last_seen = seen
            previous = latest[(finding.rule, key)]
            if previous is None or (item.start is not None and item.start >= previous):
                latest[(finding.rule, key)] = item.start
                draft.finding = finding
                # The latest job's lines first; older jobs' lines fill up to the limit.
                draft.evidence = (_evidence_rows(job, finding.evidence) + draft.evidence)[:MAX_EVIDENCE]
            elif len(draft.evidence) < MAX_EVIDENCE:
                draft.evidence.extend(
                    _evidence_rows(job, finding.evidence)[: MAX_EVIDENCE - len(draft.evidence)]
                )
    return sorted(drafts.values(), key=lambda d: (-d.gain_gpu_h_week, d.rule, d.subject_key))
