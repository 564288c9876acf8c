"""Template filters of the recommendation pages."""

from django import template

from efficiency.recommendation_messages import rule_title as _rule_title
from efficiency.recommendation_messages import subject_text as _subject_text

register = template.Library()


@register.filter
def rule_title(rule_id: str) -> str:
    """A rule's title in the reader's language."""
    return _rule_title(rule_id)


@register.filter
def subject_text(rec) -> str:
    """What a recommendation is about: "user · job name pattern", a node's hostname."""
    return _subject_text(rec)
