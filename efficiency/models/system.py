"""Rows that describe the portal's own machinery."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class WorkerHeartbeat(models.Model):
    """The last time each Celery worker host ran the heartbeat task (one row per host)."""

    hostname = models.CharField(_("hostname"), max_length=255, unique=True)
    last_seen_at = models.DateTimeField(_("last seen at"))

    class Meta:
        ordering = ["-last_seen_at"]
        verbose_name = _("worker heartbeat")
        verbose_name_plural = _("worker heartbeats")

    def __str__(self) -> str:
        return self.hostname
