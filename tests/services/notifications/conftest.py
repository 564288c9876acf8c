"""A real local HTTP receiver standing in for the chat services, and a notified organisation."""

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from efficiency.models import NotificationChannel

# Monday 2026-11-30 10:00 in Shanghai (02:00 UTC), an ordinary working day.
MONDAY_10 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)

# What each vendor answers when all is well.
OK_REPLIES = {
    "wecom": '{"errcode": 0, "errmsg": "ok"}',
    "dingtalk": '{"errcode": 0, "errmsg": "ok"}',
    "feishu": '{"code": 0, "msg": "success", "data": {}}',
    "slack": "ok",
}


@dataclass
class Received:
    path: str
    query: dict[str, list[str]]
    body: dict

    @property
    def kind(self) -> str:
        return self.path.strip("/").split("/")[0]


@dataclass
class Receiver:
    """Records each request; answers per path prefix ``/<kind>/`` with ``replies[kind]``."""

    base: str
    replies: dict[str, tuple[int, str]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)

    def url(self, kind: str, tail: str = "") -> str:
        return f"{self.base}/{kind}/hook{tail}"

    def of(self, kind: str) -> list[Received]:
        return [request for request in self.received if request.kind == kind]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    box: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hook = box[0]
            length = int(self.headers.get("Content-Length") or 0)
            parts = urlsplit(self.path)
            request = Received(
                parts.path, parse_qs(parts.query), json.loads(self.rfile.read(length) or b"{}")
            )
            hook.received.append(request)
            status, reply = hook.replies.get(request.kind, (200, OK_REPLIES.get(request.kind, "ok")))
            body = reply.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    box.append(Receiver(base=f"http://127.0.0.1:{server.server_address[1]}"))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield box[0]
    server.shutdown()
    server.server_close()


@pytest.fixture
def notified(org, settings):
    """``org`` with email addresses, and the notification settings the tests count on."""
    settings.PORTAL_NOTIFICATION_WINDOW_S = 60
    settings.PORTAL_NOTIFICATION_DIGEST_OVER = 5
    settings.PORTAL_NOTIFICATION_RETRY_S = [60, 300]
    settings.PORTAL_NOTIFICATION_LANGUAGE = "en"
    settings.PORTAL_BASE_URL = "https://portal.example.com"
    for user in (org.head_a, org.head_b, org.committee, org.admin):
        user.email = f"{user.username}@example.com"
        user.save()
    return org


def channel(receiver: Receiver, kind: str, *, department=None, events=None, secret: str = "", name=None):
    config = {"url": receiver.url(kind, "?access_token=tok-123" if kind == "dingtalk" else "")}
    if secret:
        config["secret"] = secret
    values = {"name": name or f"{kind} group", "kind": kind, "department": department, "config": config}
    if events is not None:
        values["events"] = events
    return NotificationChannel.objects.create(**values)
