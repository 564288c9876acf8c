"""Template filters of the recommendation pages."""

from django import template

from efficiency.choices import RecommendationSubject
from efficiency.recommendation_messages import rule_title as _rule_title

register = template.Library()


@register.filter
def rule_title(rule_id: str) -> str:
    """A rule's title in the reader's language."""
    return _rule_title(rule_id)


@register.filter
def subject_text(rec) -> str:
    """What a recommendation is about: "user · job name pattern", a node's hostname."""
    if rec.subject_kind == RecommendationSubject.NODE:
        return rec.node.hostname if rec.node_id and rec.node else rec.subject_key
    if rec.subject_kind == RecommendationSubject.JOB_FAMILY:
        return f"{rec.user_name} · {rec.name_pattern}"
    return rec.subject_key
