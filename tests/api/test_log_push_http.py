"""Log push over real HTTP against gunicorn, as a shipper sends it.

Django's test client cannot send a chunked body (it always sets Content-Length), and Django's own
server (runserver, the live server) does not decode chunked transfer encoding; Fluent Bit and
Vector send chunked bodies, and gunicorn decodes them. So these tests start gunicorn on the test
database. PostgreSQL only: an in-memory SQLite test database cannot be shared with another process.
"""

import gzip
import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.contrib.auth.models import Permission
from django.db import connection

from efficiency.choices import SourceKind
from efficiency.models import DataSource, LogChunk
from efficiency.services.tokens import api_token_issue
from tests.factories import ClusterFactory, UserFactory
from tests.workers import ROOT, database_url_for_processes, free_port, worker_env


@contextmanager
def gunicorn(env: dict[str, str]) -> Iterator[int]:
    """gunicorn serving the portal on a free port; yields the port once it answers."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", "1", "--timeout", "120"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gunicorn did not start: {server.stdout.read()}") from None
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture
def pushing(transactional_db, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: gunicorn must see the test database")
    source = DataSource.objects.create(
        cluster=ClusterFactory(slug="http"), kind=SourceKind.LOG_PUSH, name="push"
    )
    user = UserFactory(username="vector")
    user.user_permissions.add(Permission.objects.get(codename="add_logchunk"))
    token = api_token_issue(user=user, name="vector").key
    with gunicorn(worker_env(database_url_for_processes(), tmp_path / "var")) as port:

        def push(blocks: list[bytes], **headers: str) -> tuple[int, dict]:
            """POST ``blocks`` as a chunked body (no Content-Length), one HTTP chunk each."""
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            conn.request(
                "POST", f"/api/v1/sources/{source.pk}/logs/", body=iter(blocks), encode_chunked=True,
                headers={"Authorization": f"Token {token}", "Content-Type": "application/x-ndjson",
                         **headers},
            )  # fmt: skip
            response = conn.getresponse()
            answer = json.loads(response.read())
            conn.close()
            return response.status, answer

        yield push


def body(count: int) -> bytes:
    return b"".join(
        json.dumps(
            {"stream": "/var/log/jobs/7/rank-0.log", "offset": 11 * n, "line": f"step {n:05d}"}
        ).encode()
        + b"\n"
        for n in range(count)
    )


def test_a_chunked_body_is_read_and_stored_not_received_as_empty(pushing):
    data = body(1000)
    status, answer = pushing([data[i : i + 4096] for i in range(0, len(data), 4096)])
    assert status == 200
    assert (answer["status"], answer["rejected"]) == ("ok", 0)
    assert LogChunk.objects.get().line_count == 1000


def test_a_chunked_gzip_body_is_inflated_and_stored(pushing):
    packed = gzip.compress(body(500))
    status, answer = pushing([packed[:100], packed[100:]], **{"Content-Encoding": "gzip"})
    assert (status, answer["status"]) == (200, "ok")
    assert LogChunk.objects.get().text.splitlines()[-1] == "step 00499"


def test_a_chunked_body_over_the_limit_is_413_with_the_reason(pushing):
    # ~840 KB a block, 10 MB in all: four times the 2.5 MB upload limit. The server reads on past
    # the limit (and drops it) before it answers: answering and closing with megabytes still to
    # come reset the connection under the client, which never saw the 413.
    block = body(10_000)
    status, answer = pushing([block] * 12)
    assert status == 413
    assert answer["detail"].startswith("body larger than 2621440 bytes")
    assert not LogChunk.objects.exists()
