"""Template helpers of the ticket pages: the SLA badge, history values, and the tickets of an
incident or a recommendation on their pages."""

from datetime import date, datetime

from django import template
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext as _

from efficiency.permissions import TICKET_CREATORS, has_role
from efficiency.selectors.tickets import incident_tickets, recommendation_tickets
from efficiency.services.tickets import DUE_SOON, OVERDUE, creatable_departments, sla_status
from efficiency.templatetags.portal import when

register = template.Library()


@register.simple_tag
def sla_badge(ticket, status: str | None = "", now: datetime | None = None) -> str:
    """ "Overdue" / "Due soon" / "Paused" beside a ticket's due date (nothing while on time or once
    the clock has stopped). ``status`` is ``sla_status``'s answer where the view has it already."""
    if status == "":
        status = sla_status(ticket, now or timezone.now())
    if status == OVERDUE:
        badge = format_html('<span class="sla sla-overdue">{}</span>', _("Overdue"))
    elif status == DUE_SOON:
        badge = format_html('<span class="sla sla-due-soon">{}</span>', _("Due soon"))
    else:
        badge = ""
    if ticket.state == "waiting_on_department":
        badge = format_html('{} <span class="sla sla-paused">{}</span>', badge, _("Paused"))
    return badge


@register.filter
def history_value(value) -> str:
    """A value of the ticket's history as a reader reads it."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return _("Yes") if value else _("No")
    if isinstance(value, datetime | date):
        return when(value)
    if isinstance(value, AbstractBaseUser):
        return value.get_username()
    if isinstance(value, list | tuple):
        return ", ".join(history_value(item) for item in value) or "—"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


@register.inclusion_tag("efficiency/tickets/partials/related.html", takes_context=True)
def incident_ticket_links(context, incident):
    """An incident's follow-up tickets, and the button that opens one (for those who may)."""
    user = context["request"].user
    department_id = incident.department_id or (
        incident.node.owner_department_id if incident.node_id else None
    )
    may_create = (
        has_role(user, TICKET_CREATORS)
        and department_id is not None
        and creatable_departments(user).filter(pk=department_id).exists()
    )
    return {
        "tickets": incident_tickets(user=user, incident=incident),
        "incident": incident,
        "may_create": may_create,
        "csrf_token": context.get("csrf_token"),
        "now": timezone.now(),
    }


@register.inclusion_tag("efficiency/tickets/partials/recommendation_tickets.html", takes_context=True)
def recommendation_ticket_links(context, recommendation):
    """The tickets an accepted recommendation became."""
    user = context["request"].user
    return {
        "tickets": recommendation_tickets(user=user, recommendation_id=recommendation.pk),
        "now": timezone.now(),
    }
