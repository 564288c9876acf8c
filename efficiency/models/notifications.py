"""Notifications: what happened (``Notification``), who wants to hear of it (``NotificationChannel``,
``NotificationSubscription``) and each message sent or still to send (``Delivery``).

A service records a ``Notification`` (one insert, inside its own transaction); a worker routes it to
its targets — people by email, and chat or mailing-list channels — by adding it to each target's
pending ``Delivery``; another worker sends each delivery once its batching window has passed, as one
message, or as a digest when many notifications piled up. A delivery that fails stays, with its
error, is tried again later (``PORTAL_NOTIFICATION_RETRY_S``), and is marked failed after the last
try: the admin lists it, nothing is dropped silently.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from efficiency.choices import ChannelKind, DeliveryState, NotificationEvent
from efficiency.models.faults import Incident
from efficiency.models.inventory import Department
from efficiency.models.recommendations import Recommendation
from efficiency.models.tickets import Ticket


def _default_channel_events() -> list[str]:
    return [
        NotificationEvent.TICKET_DUE_SOON,
        NotificationEvent.TICKET_OVERDUE,
        NotificationEvent.INCIDENT_OPENED,
    ]


class NotificationChannel(models.Model):
    """A chat group or mailing list that hears the ``events`` of its department (of every
    department when it has none).

    ``config`` holds where to send: ``{"url": …, "secret": …}`` for the webhooks (the URL carries the
    robot's key, so it is a secret too), ``{"to": ["list@example.com"]}`` for email. Secrets may be
    ``{"env": "NAME"}`` references to the workers' environment (``efficiency.config_secrets``).
    """

    name = models.CharField(_("name"), max_length=100)
    kind = models.CharField(_("kind"), max_length=20, choices=ChannelKind.choices)
    department = models.ForeignKey(
        Department,
        verbose_name=_("department"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="notification_channels",
        help_text=_("Empty: the channel hears these events of every department."),
    )
    events = models.JSONField(_("events"), default=_default_channel_events, blank=True)
    config = models.JSONField(_("configuration"), default=dict, blank=True)
    is_active = models.BooleanField(_("active"), default=True)

    class Meta:
        ordering = ["name", "pk"]
        verbose_name = _("notification channel")
        verbose_name_plural = _("notification channels")

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"


class NotificationSubscription(models.Model):
    """A person's choice of the events they hear of by email.

    Without a row a person hears every event they are a direct recipient of (the assignee, the
    department's heads); with one, only the ``events`` listed, and also those events about what
    they may see that would not reach them otherwise (a committee member following verifications).
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="notification_subscription",
    )
    events = models.JSONField(_("events"), default=list, blank=True)
    email = models.BooleanField(_("by email"), default=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("notification subscription")
        verbose_name_plural = _("notification subscriptions")

    def __str__(self) -> str:
        return f"{self.user}: {', '.join(self.events) or '-'}"


class Notification(models.Model):
    """One event about a ticket, a recommendation or an incident, as it was when it happened.

    ``payload`` is the subject's snapshot the message is written from (title, department, due
    date…), so that a later edit does not rewrite what was announced. ``user_ids`` are the people
    the emitting service named (a ticket's new assignee).
    """

    event = models.CharField(_("event"), max_length=40, choices=NotificationEvent.choices)
    created_at = models.DateTimeField(_("created at"), db_index=True)
    department = models.ForeignKey(
        Department,
        verbose_name=_("department"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    ticket = models.ForeignKey(
        Ticket, verbose_name=_("ticket"), null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    recommendation = models.ForeignKey(
        Recommendation,
        verbose_name=_("recommendation"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    incident = models.ForeignKey(
        Incident,
        verbose_name=_("incident"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    payload = models.JSONField(_("payload"), default=dict, blank=True)
    user_ids = models.JSONField(default=list, blank=True)
    routed_at = models.DateTimeField(_("routed at"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("notification")
        verbose_name_plural = _("notifications")

    def __str__(self) -> str:
        return f"{self.get_event_display()} at {self.created_at:%Y-%m-%d %H:%M}"


class DeliveryQuerySet(models.QuerySet):
    def failed(self) -> "DeliveryQuerySet":
        return self.filter(state=DeliveryState.FAILED)


class Delivery(models.Model):
    """One message to one target (a channel, or a person's email): the notifications it carries,
    and how sending went. Pending deliveries collect the notifications of their batching window."""

    channel = models.ForeignKey(
        NotificationChannel,
        verbose_name=_("channel"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="deliveries",
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="notification_deliveries",
    )
    notifications = models.ManyToManyField(
        Notification, verbose_name=_("notifications"), related_name="deliveries"
    )
    state = models.CharField(
        _("state"), max_length=10, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    last_error = models.TextField(_("last error"), blank=True)
    created_at = models.DateTimeField(_("created at"))
    # When to send (the end of the batching window), then when to try again after a failure.
    due_at = models.DateTimeField(_("due"))
    claimed_at = models.DateTimeField(_("claimed at"), null=True, blank=True)
    sent_at = models.DateTimeField(_("sent at"), null=True, blank=True)
    digest = models.BooleanField(_("digest"), default=False)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("notification delivery")
        verbose_name_plural = _("notification deliveries")
        indexes = [models.Index(fields=["state", "due_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(channel__isnull=True, user__isnull=False)
                | Q(channel__isnull=False, user__isnull=True),
                name="delivery_has_one_target",
            )
        ]

    def __str__(self) -> str:
        target = self.channel or self.user
        return f"{target} — {self.get_state_display()}"
