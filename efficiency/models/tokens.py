"""API tokens: only a digest is stored, every token expires, a push token serves one source."""

import hashlib

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from efficiency.models.telemetry import DataSource


def token_digest(key: str) -> str:
    """The SHA-256 hex digest under which a token is stored (the key itself never is)."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """A credential for ``Authorization: Token <key>``, shown once when it is issued.

    The database keeps the SHA-256 digest of the key and its first characters (``prefix``) so
    that an admin can tell tokens apart; a copy of the database authenticates nobody. A token
    with a ``source`` is a push token: it may only ``POST`` log lines to that *Log push*
    source, and reads nothing.
    """

    PREFIX_LENGTH = 8

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"), on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(_("name"), max_length=100, help_text=_("What or who uses this token."))
    prefix = models.CharField(_("starts with"), max_length=PREFIX_LENGTH, editable=False)
    digest = models.CharField(_("SHA-256 digest"), max_length=64, unique=True, editable=False)
    source = models.ForeignKey(
        DataSource,
        verbose_name=_("push source"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="push_tokens",
        limit_choices_to={"kind": "log_push"},
        help_text=_("A push token may only push log lines to this source and reads nothing."),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    expires_at = models.DateTimeField(_("expires at"))
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"
