"""API tokens: issue one (the key is shown once), check one presented by a client.

A key is 43 random URL-safe characters; the database keeps its SHA-256 digest and first eight
characters. Every token expires (``PORTAL_API_TOKEN_DAYS`` unless said otherwise). A push
token is bound to one *Log push* source and can do nothing else.
"""

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import formats, timezone
from django.utils.translation import gettext as _

from efficiency.choices import SourceKind
from efficiency.models import ApiToken, DataSource
from efficiency.models.tokens import token_digest

# last_used_at is refreshed at most this often, so a busy client does not write on every call.
LAST_USED_RESOLUTION = timedelta(minutes=5)


class TokenError(Exception):
    """A token cannot be issued, or a presented key is not (or no longer) valid; the message
    says why."""


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    key: str  # the only copy: it is not stored


def api_token_build(
    *,
    user,
    name: str,
    days: int | None = None,
    source: DataSource | None = None,
    now: datetime | None = None,
) -> IssuedToken:
    """A new, unsaved token for ``user`` valid ``days`` days (with ``source``: a push token for
    it) and its key; ``TokenError`` when it cannot be issued."""
    now = now or timezone.now()
    days = settings.PORTAL_API_TOKEN_DAYS if days is None else days
    if days < 1:
        raise TokenError(_("A token must be valid for at least one day (got %(days)s).") % {"days": days})
    if source is not None and source.kind != SourceKind.LOG_PUSH:
        raise TokenError(
            _("%(source)s is not a log push source: push tokens exist only for those.") % {"source": source}
        )
    if not user.is_active:
        raise TokenError(_("%(user)s is inactive: an inactive user gets no token.") % {"user": user})
    key = secrets.token_urlsafe(32)
    token = ApiToken(
        user=user,
        name=name,
        prefix=key[: ApiToken.PREFIX_LENGTH],
        digest=token_digest(key),
        source=source,
        expires_at=now + timedelta(days=days),
    )
    return IssuedToken(token=token, key=key)


def api_token_issue(
    *,
    user,
    name: str,
    days: int | None = None,
    source: DataSource | None = None,
    now: datetime | None = None,
) -> IssuedToken:
    """Create a token for ``user`` valid ``days`` days; with ``source``, a push token for it."""
    issued = api_token_build(user=user, name=name, days=days, source=source, now=now)
    issued.token.save()
    return issued


def api_token_check(*, key: str, now: datetime | None = None) -> ApiToken:
    """The valid token whose key this is (with its user), or ``TokenError`` saying why not."""
    now = now or timezone.now()
    token = ApiToken.objects.select_related("user", "source").filter(digest=token_digest(key)).first()
    if token is None:
        raise TokenError(_("Invalid token."))
    if token.expires_at <= now:
        raise TokenError(
            _("Token expired on %(date)s: ask a platform admin for a new one.")
            % {"date": formats.date_format(timezone.localtime(token.expires_at), "DATETIME_FORMAT")}
        )
    if not token.user.is_active:
        raise TokenError(_("User inactive or deleted."))
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
