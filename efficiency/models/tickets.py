"""Remediation tickets: the work an accepted recommendation, an incident's follow-up, a committee
decision or a person's request becomes, owned by a department, tracked to closure and verified.

The states and the legal moves between them are ``efficiency.analysis.tickets.workflow``'s; the
services in ``efficiency.services.tickets`` apply them. Every change of every field is recorded by
the audit trail (``efficiency.models.audit``: who, when, from → to), which the ticket page shows
as its history; a transition's reason is the history row's change reason.

**SLA.** ``due_at`` is set on creation from the severity's business hours on the working calendar
(``PORTAL_TICKET_SLA_HOURS``, ``PORTAL_WORKING_CALENDAR``). While the ticket waits on its
department the clock pauses: ``paused_at`` holds when it began, and resuming moves ``due_at`` later
by the business time spent waiting. Once resolved (or declined) the clock stops.
"""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from efficiency.choices import TicketOrigin, TicketSeverity, TicketState
from efficiency.models.faults import Incident
from efficiency.models.inventory import Department, Node
from efficiency.models.jobs import Job
from efficiency.models.recommendations import Recommendation


class Ticket(models.Model):
    title = models.CharField(_("title"), max_length=200)
    description = models.TextField(_("description"), blank=True)
    origin = models.CharField(_("origin"), max_length=20, choices=TicketOrigin.choices)
    recommendation = models.ForeignKey(
        Recommendation,
        verbose_name=_("recommendation"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tickets",
    )
    incident = models.ForeignKey(
        Incident,
        verbose_name=_("incident"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tickets",
    )
    # The committee meeting that discussed it: a reference until meetings are records of their own.
    meeting = models.CharField(_("committee meeting"), max_length=200, blank=True)
    department = models.ForeignKey(
        Department, verbose_name=_("department"), on_delete=models.PROTECT, related_name="tickets"
    )
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("assignee"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="assigned_tickets",
    )
    severity = models.CharField(_("severity"), max_length=10, choices=TicketSeverity.choices)
    state = models.CharField(_("state"), max_length=25, choices=TicketState.choices, default=TicketState.OPEN)
    due_at = models.DateTimeField(_("due"))
    paused_at = models.DateTimeField(_("waiting since"), null=True, blank=True)
    # The job family the fix is for (from the recommendation): what verification compares.
    family_user = models.CharField(_("user"), max_length=150, blank=True)
    family_pattern = models.CharField(_("job name pattern"), max_length=500, blank=True)
    expected_gain_pct = models.FloatField(_("expected gain (%)"), null=True, blank=True)
    expected_gain_gpu_h_week = models.FloatField(
        _("expected gain (GPU-hours per week)"), null=True, blank=True
    )
    measured_gain_pct = models.FloatField(_("measured gain (%)"), null=True, blank=True)
    # The last verdict of the measurement: metric, before/after values, interval, shortfalls.
    verification = models.JSONField(_("verification"), default=dict, blank=True)
    resolved_at = models.DateTimeField(_("resolved at"), null=True, blank=True)
    verified_at = models.DateTimeField(_("verified at"), null=True, blank=True)
    closed_at = models.DateTimeField(_("closed at"), null=True, blank=True)
    # The SLA notifications already sent for the current due date ("due_soon", "overdue").
    sla_notified = models.CharField(max_length=20, blank=True)
    jobs = models.ManyToManyField(Job, verbose_name=_("jobs"), related_name="tickets", blank=True)
    nodes = models.ManyToManyField(Node, verbose_name=_("nodes"), related_name="tickets", blank=True)
    incidents = models.ManyToManyField(
        Incident, verbose_name=_("incidents"), related_name="linked_tickets", blank=True
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("created by"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(_("created at"))
    updated_at = models.DateTimeField(_("updated at"))

    class Meta:
        ordering = ["due_at", "pk"]
        verbose_name = _("ticket")
        verbose_name_plural = _("tickets")
        indexes = [
            models.Index(fields=["state", "due_at"]),
            models.Index(fields=["department", "state"]),
            models.Index(fields=["assignee", "state"]),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"


class TicketComment(models.Model):
    """A comment on a ticket; ``internal`` notes are for platform admins and the committee only."""

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("by"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    at = models.DateTimeField(_("at"))
    text = models.TextField(_("comment"))
    internal = models.BooleanField(_("internal note"), default=False)

    class Meta:
        ordering = ["at", "pk"]
        verbose_name = _("ticket comment")
        verbose_name_plural = _("ticket comments")

    def __str__(self) -> str:
        return f"comment on #{self.ticket_id} at {self.at:%Y-%m-%d %H:%M}"
