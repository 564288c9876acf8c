"""Webhook actuator: POST the action as JSON to a URL (a chat hook, an automation service, a runbook tool).

The body is ``{"kind", "incident_id", "node", "gpu", "job_id", "category", "reason", "extra", "sent_at"}``
with ``sent_at`` in ISO 8601 UTC. With a ``secret``, the request carries
``X-Portal-Signature: sha256=<hex>``, the HMAC-SHA256 of the exact body bytes; the receiver recomputes it
and compares with ``hmac.compare_digest``, and may refuse stale ``sent_at`` values to stop replays.

Redirects are not followed: requests would turn the POST into a GET and drop the body on a 301/302.
Summaries and ``repr`` show only the scheme and host of the URL, because hook URLs often carry their token
in the path (Slack, Teams) or the query string; headers and secret are never shown.
"""

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3.exceptions

from efficiency.actuators.base import (
    DETAIL_MAX_CHARS,
    ActionRequest,
    ActionResult,
    action_failed,
    check_config_keys,
    check_str_mapping,
    check_timeout,
)

SIGNATURE_HEADER = "X-Portal-Signature"
DEFAULT_TIMEOUT_S = 10.0

_CONFIG_KEYS = ("type", "name", "url", "headers", "secret", "timeout_s")
# Enough bytes for DETAIL_MAX_CHARS characters of any UTF-8 text; the rest of a large reply is not read.
_MAX_RESPONSE_BYTES = DETAIL_MAX_CHARS * 4
# requests reports a read timeout while streaming the reply as a ConnectionError; its causes tell. Not
# urllib3's TimeoutError as a whole: a refused connection (NewConnectionError) is one of its subclasses.
_TIMEOUTS = (requests.Timeout, urllib3.exceptions.ReadTimeoutError, TimeoutError)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True, repr=False)
class WebhookActuator:
    """POSTs each ``ActionRequest`` as JSON to ``url``; ok when the receiver answers 2xx.

    ``timeout_s`` bounds connecting and each wait for response data. ``clock`` supplies ``sent_at`` when
    ``run`` is not given one; ``session`` lets a caller reuse connections.
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    secret: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S
    name: str = "webhook"
    clock: Callable[[], datetime] = field(default=_utc_now, compare=False)
    session: requests.Session | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url:
            raise ValueError("Invalid webhook actuator config: 'url' is required.")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(
                f"Invalid webhook actuator config: 'url' must be an http:// or https:// URL, "
                f"got scheme {parts.scheme!r}."
            )
        if not parts.hostname:
            raise ValueError("Invalid webhook actuator config: 'url' has no host.")
        try:
            parts.port  # noqa: B018 -- urlsplit checks the port only when asked for it
        except ValueError as exc:
            raise ValueError(f"Invalid webhook actuator config: 'url' has a bad port ({exc}).") from None
        headers = check_str_mapping(self.headers, "headers", "webhook")
        for key, value in headers.items():
            if any(ch in key + value for ch in "\r\n\0") or not key.strip():
                raise ValueError(
                    f"Invalid webhook actuator config: header {key!r} has an empty name or a line break."
                )
        object.__setattr__(self, "headers", headers)
        if not isinstance(self.secret, str):
            raise ValueError("Invalid webhook actuator config: 'secret' must be a string.")
        object.__setattr__(self, "timeout_s", check_timeout(self.timeout_s, "webhook"))
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("Invalid webhook actuator config: 'name' must be a non-empty string.")

    def __repr__(self) -> str:
        return (
            f"WebhookActuator(url={_shown_url(self.url)!r}, timeout_s={self.timeout_s:g}, name={self.name!r})"
        )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "WebhookActuator":
        """Build from ``{"type": "webhook", "url": ..., "headers": ..., "secret": ..., "timeout_s": ...}``."""
        check_config_keys(config, _CONFIG_KEYS, "webhook")
        if "url" not in config:
            raise ValueError("Invalid webhook actuator config: 'url' is required.")
        kwargs = {
            key: config[key] for key in ("url", "headers", "secret", "timeout_s", "name") if key in config
        }
        return cls(**kwargs)

    def body(self, request: ActionRequest, sent_at: datetime) -> bytes:
        """The exact bytes POSTed (and signed) for ``request``."""
        if sent_at.tzinfo is None or sent_at.utcoffset() is None:
            raise ValueError("sent_at must be timezone-aware")
        payload = {
            "kind": request.kind,
            "incident_id": request.incident_id,
            "node": request.node,
            "gpu": request.gpu,
            "job_id": request.job_id,
            "category": request.category,
            "reason": request.reason,
            "extra": dict(request.extra),
            "sent_at": sent_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        }
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()

    def signature(self, body: bytes) -> str:
        """The ``X-Portal-Signature`` value for ``body``: ``sha256=`` and the hex HMAC under ``secret``."""
        return "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()

    def run(self, request: ActionRequest, *, dry_run: bool, sent_at: datetime | None = None) -> ActionResult:
        """POST ``request`` (or, in a dry run, describe the POST); failures come back as ``ok=False``."""
        body = self.body(request, self.clock() if sent_at is None else sent_at)
        target = _shown_url(self.url)
        what = f"{request.kind} for incident {request.incident_id}"
        signed = ", signed" if self.secret else ""
        facts = {"kind": request.kind, "incident": request.incident_id, "target": target}
        if dry_run:
            return ActionResult(
                ok=True,
                dry_run=True,
                summary=f"Would POST {what} to {target} ({len(body)} bytes of JSON{signed}).",
                code="webhook_would_post_signed" if self.secret else "webhook_would_post",
                params={**facts, "bytes": len(body)},
                detail=body.decode(),
            )

        headers = {**self.headers, "Content-Type": "application/json"}
        if self.secret:
            headers[SIGNATURE_HEADER] = self.signature(body)
        http = self.session if self.session is not None else requests.Session()
        started = time.monotonic()
        try:
            response = http.post(
                self.url,
                data=body,
                headers=headers,
                timeout=self.timeout_s,
                allow_redirects=False,
                stream=True,
            )
            try:
                reply = _read_reply(response)
            finally:
                response.close()
        except requests.RequestException as exc:
            causes = _causes(exc)
            error = type(causes[-1]).__name__
            if any(isinstance(cause, _TIMEOUTS) for cause in causes):
                reason = f"{target} did not answer within {self.timeout_s:g} s"
                code, facts = "webhook_timeout", {**facts, "timeout_s": f"{self.timeout_s:g}"}
            elif isinstance(exc, requests.ConnectionError | requests.exceptions.ChunkedEncodingError):
                reason, code, facts = (
                    f"Cannot reach {target} ({error})",
                    "webhook_unreachable",
                    {**facts, "error": error},
                )
            else:
                reason = f"Cannot send the request to {target} ({error})"
                code, facts = "webhook_send_failed", {**facts, "error": error}
            return action_failed(f"{reason} ({what}).", started, code, facts)
        finally:
            if self.session is None:
                http.close()

        status = response.status_code
        duration_s = time.monotonic() - started
        if 200 <= status < 300:
            summary, code = f"Posted {what} to {target}: HTTP {status}.", "webhook_posted"
        elif 300 <= status < 400:
            summary = f"{target} answered HTTP {status} (a redirect, not followed; fix the URL) ({what})."
            code = "webhook_redirect"
        else:
            summary, code = f"{target} answered HTTP {status} ({what}).", "webhook_http_error"
        return ActionResult(
            ok=200 <= status < 300,
            dry_run=False,
            summary=summary,
            code=code,
            params={**facts, "status": status},
            detail=reply,
            http_status=status,
            duration_s=duration_s,
        )


def _read_reply(response: requests.Response) -> str:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(chunk_size=4096):
        chunks.append(chunk)
        size += len(chunk)
        if size >= _MAX_RESPONSE_BYTES:
            break
    return b"".join(chunks)[:_MAX_RESPONSE_BYTES].decode(response.encoding or "utf-8", errors="replace")


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first (ConnectionRefusedError comes last)."""
    chain = [exc]
    while len(chain) < 20:
        inner = chain[-1].__cause__ or chain[-1].__context__
        if inner is None or inner in chain:
            break
        chain.append(inner)
    return chain


def _shown_url(url: str) -> str:
    """``scheme://host[:port]``, plus "/…" when the URL has more: paths and queries may hold tokens."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    rest = "/…" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{netloc}{rest}"
