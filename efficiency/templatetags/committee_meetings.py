"""``{% pack_meetings pack %}``: a pack's meetings and the form that starts one from it (committee
members and platform admins; nothing for others). For the pack page's ``meeting_records`` block."""

from django import template
from django.utils import timezone

from efficiency.forms import MeetingCreateForm
from efficiency.selectors import committee_meetings as selectors

register = template.Library()


@register.inclusion_tag("efficiency/committee/meetings/_pack_meetings.html", takes_context=True)
def pack_meetings(context, pack):
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not selectors.may_keep_meetings(user):
        return {"visible": False}
    form = MeetingCreateForm(
        initial={"pack": pack.pk, "scheduled_for": timezone.localtime().replace(second=0, microsecond=0)},
        people=selectors.committee_people(),
    )
    return {
        "visible": True,
        "pack": pack,
        "meetings": selectors.pack_meetings(user=user, pack_id=pack.pk),
        "form": form,
        "csrf_token": context.get("csrf_token"),
    }
