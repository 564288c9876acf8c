"""The webhook actuator against a real local HTTP receiver that records what it is sent."""

import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from efficiency.actuators import ActionRequest, Actuator, WebhookActuator, actuator_from_config
from efficiency.actuators.webhook import SIGNATURE_HEADER

SENT_AT = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
SECRET = "hook-s3cret"

REQUEST = ActionRequest(
    kind="isolate_node",
    incident_id=42,
    node="gpu-a01",
    gpu=3,
    job_id="81234",
    category="xid",
    reason="Xid 79: GPU has fallen off the bus",
    extra={"cluster": "hpc-a", "checkpoint": "/ckpt/run7/step-12000"},
)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A local HTTP server recording every request; answers ``status`` and ``reply`` after ``delay_s``."""

    url: str
    status: int = 200
    reply: str = '{"accepted": true}'
    reply_headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    received: list[Received] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    box: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def _record_and_answer(self) -> None:
            hook = box[0]
            length = int(self.headers.get("Content-Length") or 0)
            hook.received.append(
                Received(self.command, self.path, dict(self.headers), self.rfile.read(length))
            )
            time.sleep(hook.delay_s)
            body = hook.reply.encode()
            try:
                self.send_response(hook.status)
                for name, value in hook.reply_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout test)

        do_POST = _record_and_answer
        do_GET = _record_and_answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    box.append(Receiver(url=f"http://127.0.0.1:{server.server_address[1]}/hooks/incidents"))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield box[0]
    server.shutdown()
    server.server_close()


def hook(url: str, **overrides) -> WebhookActuator:
    return WebhookActuator(url=url, clock=lambda: SENT_AT, **overrides)


# --- what is sent ----------------------------------------------------------------------------------------


def test_posts_every_request_field_and_sent_at_as_json(receiver):
    result = hook(receiver.url).run(REQUEST, dry_run=False)

    assert result.ok, result.summary
    [sent] = receiver.received
    assert sent.method == "POST"
    assert sent.path == "/hooks/incidents"
    assert sent.headers["Content-Type"] == "application/json"
    assert json.loads(sent.body) == {
        "kind": "isolate_node",
        "incident_id": 42,
        "node": "gpu-a01",
        "gpu": 3,
        "job_id": "81234",
        "category": "xid",
        "reason": "Xid 79: GPU has fallen off the bus",
        "extra": {"cluster": "hpc-a", "checkpoint": "/ckpt/run7/step-12000"},
        "sent_at": "2024-03-01T12:00:00Z",
    }


def test_missing_node_gpu_and_job_are_sent_as_null(receiver):
    notify = ActionRequest(kind="notify", incident_id=7, category="ecc", reason="DBE on 3 GPUs")

    hook(receiver.url).run(notify, dry_run=False)

    body = json.loads(receiver.received[0].body)
    assert (body["node"], body["gpu"], body["job_id"], body["extra"]) == (None, None, None, {})


def test_sent_at_passed_to_run_wins_over_the_clock_and_is_written_in_utc(receiver):
    tokyo = timezone(timedelta(hours=9))

    hook(receiver.url).run(REQUEST, dry_run=False, sent_at=datetime(2024, 3, 2, 9, 30, tzinfo=tokyo))

    assert json.loads(receiver.received[0].body)["sent_at"] == "2024-03-02T00:30:00Z"


def test_signature_header_is_hmac_sha256_of_the_exact_body(receiver):
    hook(receiver.url, secret=SECRET).run(REQUEST, dry_run=False)

    [sent] = receiver.received
    expected = "sha256=" + hmac.new(SECRET.encode(), sent.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(sent.headers[SIGNATURE_HEADER], expected)


def test_signature_made_with_another_secret_does_not_verify(receiver):
    hook(receiver.url, secret=SECRET).run(REQUEST, dry_run=False)

    [sent] = receiver.received
    forged = "sha256=" + hmac.new(b"wrong", sent.body, hashlib.sha256).hexdigest()
    assert not hmac.compare_digest(sent.headers[SIGNATURE_HEADER], forged)


def test_no_signature_header_without_a_secret(receiver):
    hook(receiver.url).run(REQUEST, dry_run=False)

    assert SIGNATURE_HEADER not in receiver.received[0].headers


def test_configured_headers_are_sent_but_cannot_change_the_content_type(receiver):
    headers = {"Authorization": "Bearer t0ken", "Content-Type": "text/plain"}

    hook(receiver.url, headers=headers).run(REQUEST, dry_run=False)

    sent = receiver.received[0].headers
    assert sent["Authorization"] == "Bearer t0ken"
    assert sent["Content-Type"] == "application/json"


# --- what comes back -------------------------------------------------------------------------------------


def test_2xx_is_ok_with_status_and_reply_in_the_result(receiver):
    receiver.status, receiver.reply = 202, '{"ticket": "OPS-1234"}'

    result = hook(receiver.url).run(REQUEST, dry_run=False)

    assert result.ok
    assert not result.dry_run
    assert result.http_status == 202
    assert result.detail == '{"ticket": "OPS-1234"}'
    assert "HTTP 202" in result.summary
    assert result.duration_s >= 0


def test_server_error_is_not_ok_with_status_and_reply_instead_of_raising(receiver):
    receiver.status, receiver.reply = 500, '{"error": "database is down"}'

    result = hook(receiver.url).run(REQUEST, dry_run=False)

    assert not result.ok
    assert result.http_status == 500
    assert "HTTP 500" in result.summary
    assert "database is down" in result.detail


def test_redirect_is_not_followed_and_is_not_ok(receiver):
    receiver.status, receiver.reply_headers = 302, {"Location": "/elsewhere"}

    result = hook(receiver.url).run(REQUEST, dry_run=False)

    assert not result.ok
    assert result.http_status == 302
    assert "not followed" in result.summary
    assert [sent.path for sent in receiver.received] == ["/hooks/incidents"]


def test_slow_receiver_times_out_as_not_ok_instead_of_raising(receiver):
    receiver.delay_s = 1.0

    started = time.monotonic()
    result = hook(receiver.url, timeout_s=0.2).run(REQUEST, dry_run=False)

    assert time.monotonic() - started < 0.9
    assert not result.ok
    assert result.http_status is None
    assert "did not answer within 0.2 s" in result.summary


def test_refused_connection_is_not_ok_instead_of_raising():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more.

    result = hook(f"http://127.0.0.1:{port}/hook").run(REQUEST, dry_run=False)

    assert not result.ok
    assert "Cannot reach" in result.summary
    assert "ConnectionRefusedError" in result.summary


def test_long_reply_is_cut_to_4000_characters(receiver):
    receiver.reply = "x" * 50_000

    result = hook(receiver.url).run(REQUEST, dry_run=False)

    assert len(result.detail) == 4_000
    assert result.detail.endswith("…")


def test_summary_and_repr_hide_the_url_path_query_and_secret(receiver):
    url = receiver.url + "/T000/B000/XXXXtoken?sig=abc"

    actuator = hook(url, secret=SECRET, headers={"Authorization": "Bearer t0ken"})
    result = actuator.run(REQUEST, dry_run=False)

    shown = result.summary + repr(actuator)
    for secret in ("XXXXtoken", "sig=abc", SECRET, "t0ken"):
        assert secret not in shown
    assert receiver.url.split("/hooks")[0] in result.summary


# --- dry run ---------------------------------------------------------------------------------------------


def test_dry_run_sends_nothing_and_shows_the_body_it_would_send(receiver):
    actuator = hook(receiver.url, secret=SECRET)

    result = actuator.run(REQUEST, dry_run=True)

    assert receiver.received == []
    assert result.ok
    assert result.dry_run
    assert result.http_status is None
    assert result.summary.startswith("Would POST isolate_node for incident 42 to http://127.0.0.1:")
    assert "signed" in result.summary
    assert json.loads(result.detail) == json.loads(actuator.body(REQUEST, SENT_AT))


# --- configuration ---------------------------------------------------------------------------------------


def test_config_builds_a_webhook_actuator_with_its_settings():
    actuator = actuator_from_config(
        {
            "type": "webhook",
            "url": "https://ops.example.com/hooks/gpu",
            "headers": {"Authorization": "Bearer t0ken"},
            "secret": SECRET,
            "timeout_s": 5,
            "name": "ops-hook",
        }
    )

    assert isinstance(actuator, WebhookActuator)
    assert isinstance(actuator, Actuator)
    assert (actuator.url, actuator.secret, actuator.timeout_s, actuator.name) == (
        "https://ops.example.com/hooks/gpu",
        SECRET,
        5.0,
        "ops-hook",
    )
    assert actuator.headers == {"Authorization": "Bearer t0ken"}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"type": "webhook"}, "'url' is required"),
        ({"type": "webhook", "url": "ftp://ops.example.com/x"}, "http:// or https://"),
        ({"type": "webhook", "url": "file:///etc/passwd"}, "http:// or https://"),
        ({"type": "webhook", "url": "https:///no-host"}, "has no host"),
        ({"type": "webhook", "url": "https://ops.example.com:port/x"}, "bad port"),
        ({"type": "webhook", "url": "https://ops.example.com", "timeout_s": 0}, "'timeout_s'"),
        ({"type": "webhook", "url": "https://ops.example.com", "timeout_s": "10"}, "'timeout_s'"),
        ({"type": "webhook", "url": "https://ops.example.com", "headers": {"X-A": 1}}, "'headers'"),
        (
            {"type": "webhook", "url": "https://ops.example.com", "headers": {"X-A": "a\r\nB: c"}},
            "line break",
        ),
        ({"type": "webhook", "url": "https://ops.example.com", "secret": 123}, "'secret'"),
        ({"type": "webhook", "url": "https://ops.example.com", "retries": 3}, "unknown key(s) 'retries'"),
        ({"type": "pager", "url": "https://ops.example.com"}, "unknown type 'pager'"),
        ({"url": "https://ops.example.com"}, "'type' is required"),
    ],
)
def test_invalid_config_is_refused_with_a_clear_message(config, message):
    with pytest.raises(ValueError, match="Invalid") as excinfo:
        actuator_from_config(config)

    assert message in str(excinfo.value)


def test_request_with_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="Unknown action kind 'reboot'"):
        ActionRequest(kind="reboot", incident_id=1, category="xid", reason="r")  # type: ignore[arg-type]
