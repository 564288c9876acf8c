"""Sending one message to one channel: email (Django's mail framework) and four chat webhooks.

The webhook clients are written here with ``requests`` rather than through Apprise (which covers
these services), for three reasons found reading Apprise 2.2's plugins: it has no Feishu/Lark
signing (``feishu://`` and ``lark://`` post unsigned bodies, so a bot with "signature
verification" on refuses them); it builds each vendor's URL from a fixed host
(``qyapi.weixin.qq.com``, ``oapi.dingtalk.com``…), so a webhook behind a company's egress gateway
or a private deployment cannot be reached, nor a test receiver; and it reports a failure as
``False`` with the vendor's reason only in its log, while a delivery must keep that reason for the
admin. Each client is a dozen lines that follow the vendor's documentation:

- **WeCom group robot**: ``POST <webhook url>`` (``…/cgi-bin/webhook/send?key=…``) with
  ``{"msgtype": "markdown", "markdown": {"content": …}}`` (at most 4096 bytes); the reply is
  ``{"errcode": 0, "errmsg": "ok"}``, any other ``errcode`` is a failure even with HTTP 200.
- **DingTalk custom robot**: ``POST <webhook url>&timestamp=…&sign=…`` with
  ``{"msgtype": "markdown", "markdown": {"title": …, "text": …}}``. With a secret ("加签"), ``sign``
  is the base64 HMAC-SHA256, keyed with the secret, of ``timestamp + "\\n" + secret`` (timestamp in
  milliseconds), URL-encoded; the reply is ``{"errcode": 0}``.
- **Feishu / Lark custom bot**: ``POST <webhook url>`` with ``{"msg_type": "text", "content":
  {"text": …}}``; with a secret, also ``"timestamp"`` (seconds, as a string) and ``"sign"``: the
  base64 HMAC-SHA256 keyed with ``timestamp + "\\n" + secret`` over an empty message. The reply is
  ``{"code": 0}`` (older bots: ``{"StatusCode": 0}``).
- **Slack incoming webhook**: ``POST <webhook url>`` with ``{"text": …}`` in mrkdwn, where ``&``,
  ``<`` and ``>`` in our text are escaped as ``&amp;``, ``&lt;``, ``&gt;``; the reply is ``ok``.

Text from users (ticket titles, job names) is escaped for each markup, so it cannot become a link,
a heading, an @-mention or a font tag; every message stays under the vendor's size limit.
Errors name the host, never the URL: a robot's URL carries its key.
"""

import base64
import hashlib
import hmac
import os
import re
import time
from collections.abc import Callable, Mapping
from urllib.parse import quote_plus, urlsplit

import requests
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.utils import translation
from django.utils.translation import gettext as _

from efficiency.choices import ChannelKind
from efficiency.config_secrets import SecretMissing, secrets_check, secrets_placeholder, secrets_resolve
from efficiency.services.notifications.messages import Message, clip, more_text

# UTF-8 bytes a chat message may take: WeCom's markdown limit (4096), with room to spare; the
# other services allow more.
CHAT_MAX_BYTES = 4000
_REPLY_CHARS = 200


class ChannelError(Exception):
    """A message that was not delivered, with the reason (safe to show: no URL, no secret)."""


# --- escaping ------------------------------------------------------------------------------------

# Inline markup only: every line starts with our own text, so block markup (a heading's "#", a
# list's "-", a quote's ">") cannot begin at the start of one.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]()~])")


def markdown_escape(text: str) -> str:
    """``text`` safe inside WeCom / DingTalk markdown: markdown punctuation backslash-escaped, and
    ``<`` ``>`` replaced by full-width brackets (both services read HTML-like tags: ``<font>``,
    ``<@userid>`` mentions)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("<", "＜").replace(">", "＞")


def slack_escape(text: str) -> str:
    """The three characters Slack asks to escape in message text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plain_escape(text: str) -> str:
    """Plain chat text (Feishu): ``<`` ``>`` replaced, so no ``<at user_id="all">`` tag is formed."""
    return text.replace("<", "＜").replace(">", "＞")


def _fit(head: list[str], blocks: list[list[str]], more: int, *, escape: Callable[[str], str]) -> str:
    """``head`` and as many item ``blocks`` as fit in ``CHAT_MAX_BYTES``; the rest counted."""
    lines = list(head)
    left = more + len(blocks)
    for block in blocks:
        candidate = "\n".join([*lines, *block, escape(more_text(left))])
        if len(candidate.encode()) > CHAT_MAX_BYTES:
            break
        lines.extend(block)
        left -= 1
    if left:
        lines.append(escape(more_text(left)))
    return "\n".join(lines)


def _open_label() -> str:
    with translation.override(settings.PORTAL_NOTIFICATION_LANGUAGE):
        return _("Open in the portal")


def markdown_text(message: Message) -> str:
    """The message in WeCom / DingTalk markdown."""
    esc = markdown_escape
    if not message.digest:
        item = message.items[0]
        head = [f"**{esc(item.headline)}**", *(f"> {esc(line)}" for line in item.details)]
        if item.url:
            head.append(f"[{esc(_open_label())}]({item.url})")
        return _fit(head, [], 0, escape=esc)
    blocks = [
        [f"- [{esc(item.headline)}]({item.url})" if item.url else f"- {esc(item.headline)}"]
        for item in message.items
    ]
    return _fit([f"**{esc(message.subject)}**"], blocks, message.more, escape=esc)


def slack_text(message: Message) -> str:
    """The message in Slack mrkdwn."""
    esc = slack_escape
    if not message.digest:
        item = message.items[0]
        head = [f"*{esc(item.headline)}*", *(esc(line) for line in item.details)]
        if item.url:
            head.append(f"<{item.url}|{esc(_open_label())}>")
        return _fit(head, [], 0, escape=esc)
    blocks = [
        [f"• <{item.url}|{esc(item.headline)}>" if item.url else f"• {esc(item.headline)}"]
        for item in message.items
    ]
    return _fit([f"*{esc(message.subject)}*"], blocks, message.more, escape=esc)


def plain_text(message: Message, *, escape: Callable[[str], str] = plain_escape, limit: bool = True) -> str:
    """The message as plain text (Feishu, email)."""
    if not message.digest:
        item = message.items[0]
        head = [escape(item.headline), *(escape(line) for line in item.details)]
        if item.url:
            head.append(item.url)
        return _fit(head, [], 0, escape=escape) if limit else "\n".join(head)
    blocks = [
        [f"- {escape(item.headline)}", f"  {item.url}"] if item.url else [f"- {escape(item.headline)}"]
        for item in message.items
    ]
    if not limit:
        lines = [escape(message.subject), ""] + [line for block in blocks for line in block]
        if message.more:
            lines.append(more_text(message.more))
        return "\n".join(lines)
    return _fit([escape(message.subject), ""], blocks, message.more, escape=escape)


# --- signatures ----------------------------------------------------------------------------------


def dingtalk_sign(secret: str, timestamp_ms: str) -> str:
    """DingTalk: base64(HMAC-SHA256(key=secret, msg=timestamp + "\\n" + secret)), not yet URL-encoded."""
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def feishu_sign(secret: str, timestamp_s: str) -> str:
    """Feishu / Lark: base64(HMAC-SHA256(key=timestamp + "\\n" + secret, msg=b""))."""
    digest = hmac.new(f"{timestamp_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


# --- sending -------------------------------------------------------------------------------------


def channel_config_problems(kind: str, config: object) -> list[str]:
    """What is wrong with a channel's configuration (empty when it can be used)."""
    if not isinstance(config, Mapping):
        return [_("The configuration must be a JSON object.")]
    problems = list(secrets_check(kind, config))
    if problems:
        return problems
    config = secrets_placeholder(kind, config)
    if kind == ChannelKind.EMAIL:
        to = config.get("to")
        if not isinstance(to, list) or not to or not all(isinstance(a, str) for a in to):
            return [_('An email channel needs "to": a list of addresses.')]
        for address in to:
            try:
                validate_email(address)
            except ValidationError:
                problems.append(_("%(address)s is not an email address.") % {"address": address})
        return problems
    url = config.get("url")
    if isinstance(url, str) and url.startswith("<"):  # an env reference, checked where it runs
        return problems
    if (
        not isinstance(url, str)
        or urlsplit(url).scheme not in ("http", "https")
        or not urlsplit(url).hostname
    ):
        problems.append(_('A webhook channel needs "url": the robot\'s http(s) address.'))
    secret = config.get("secret", "")
    if not isinstance(secret, str):
        problems.append(_('"secret" must be text.'))
    return problems


def channel_send(
    kind: str,
    config: Mapping,
    message: Message,
    *,
    timeout_s: float,
    clock: Callable[[], float] = time.time,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Send ``message`` to a channel; raises ``ChannelError`` with the reason when it fails."""
    try:
        config = secrets_resolve(kind, config, os.environ if environ is None else environ)
    except (SecretMissing, ValueError) as error:
        raise ChannelError(str(error)) from None
    if kind == ChannelKind.EMAIL:
        email_send(list(config.get("to") or []), message)
        return
    url = str(config.get("url") or "")
    secret = str(config.get("secret") or "")
    if kind == ChannelKind.WECOM:
        body = {"msgtype": "markdown", "markdown": {"content": markdown_text(message)}}
        _check_errcode(_post(url, body, timeout_s), url)
    elif kind == ChannelKind.DINGTALK:
        if secret:
            timestamp = str(int(clock() * 1000))
            url += (
                "&" if "?" in url else "?"
            ) + f"timestamp={timestamp}&sign={quote_plus(dingtalk_sign(secret, timestamp))}"
        title = clip(message.subject, 60)
        body = {"msgtype": "markdown", "markdown": {"title": title, "text": markdown_text(message)}}
        _check_errcode(_post(url, body, timeout_s), url)
    elif kind == ChannelKind.FEISHU:
        body: dict = {"msg_type": "text", "content": {"text": plain_text(message)}}
        if secret:
            timestamp = str(int(clock()))
            body = {"timestamp": timestamp, "sign": feishu_sign(secret, timestamp), **body}
        reply = _json(_post(url, body, timeout_s), url)
        code = reply.get("code", reply.get("StatusCode"))
        if code != 0:
            reason = clip(reply.get("msg") or reply.get("StatusMessage"), _REPLY_CHARS)
            raise ChannelError(f"{_host(url)}: code {code}: {reason}")
    elif kind == ChannelKind.SLACK:
        response = _post(url, {"text": slack_text(message)}, timeout_s)
        if response.text.strip() != "ok":
            raise ChannelError(f"{_host(url)}: {clip(response.text, _REPLY_CHARS)}")
    else:
        raise ChannelError(f"unknown channel kind {kind!r}")


def email_send(addresses: list[str], message: Message) -> None:
    """One plain-text email to ``addresses`` (each sees only their own address)."""
    if not addresses:
        raise ChannelError("no email address")
    try:
        EmailMessage(
            subject=clip(message.subject, 200),
            body=plain_text(message, escape=lambda text: text, limit=False),
            to=[addresses[0]],
            bcc=addresses[1:],
        ).send(fail_silently=False)
    except Exception as error:  # SMTP, socket and header errors alike: the delivery records it
        raise ChannelError(f"email: {type(error).__name__}: {clip(error, _REPLY_CHARS)}") from None


def _host(url: str) -> str:
    return urlsplit(url).hostname or "?"


def _post(url: str, body: dict, timeout_s: float) -> requests.Response:
    try:
        response = requests.post(url, json=body, timeout=timeout_s, allow_redirects=False)
    except requests.Timeout:
        raise ChannelError(f"{_host(url)}: no answer within {timeout_s:g} s") from None
    except requests.RequestException as error:
        # The exception's text holds the URL, which holds the robot's key: only its kind is kept.
        raise ChannelError(f"{_host(url)}: {type(error).__name__} (cannot connect)") from None
    if not 200 <= response.status_code < 300:
        raise ChannelError(f"{_host(url)}: HTTP {response.status_code}: {clip(response.text, _REPLY_CHARS)}")
    return response


def _json(response: requests.Response, url: str) -> dict:
    try:
        reply = response.json()
    except ValueError:
        raise ChannelError(f"{_host(url)}: not a JSON reply: {clip(response.text, _REPLY_CHARS)}") from None
    if not isinstance(reply, dict):
        raise ChannelError(f"{_host(url)}: unexpected reply: {clip(response.text, _REPLY_CHARS)}")
    return reply


def _check_errcode(response: requests.Response, url: str) -> None:
    reply = _json(response, url)
    if reply.get("errcode") != 0:
        raise ChannelError(
            f"{_host(url)}: errcode {reply.get('errcode')}: {clip(reply.get('errmsg'), _REPLY_CHARS)}"
        )
