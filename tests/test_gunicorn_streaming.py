"""A long download (a million-job CSV streams for minutes) outlives gunicorn's --timeout with the
worker settings `make run` uses, where a sync worker is killed mid-response.

Real gunicorn processes; the slow response is a tiny WSGI app streaming 6 chunks a second apart
against a 2 s timeout, so the test needs no million rows.
"""

import http.client
import socket
import subprocess
import sys
import time

from efficiency.management.commands.runportal import GUNICORN_WORKER_ARGS
from tests.workers import ROOT, free_port


def _download(worker_args: tuple[str, ...]) -> str:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "tests.slow_stream_app:application", "--bind", f"127.0.0.1:{port}",
         "--workers", "1", "--timeout", "2", *worker_args],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/")
        try:
            return connection.getresponse().read().decode()
        except (http.client.IncompleteRead, ConnectionError) as error:
            return f"cut off: {error!r}"
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_a_response_streaming_past_the_timeout_completes_with_the_portals_workers():
    assert _download(GUNICORN_WORKER_ARGS) == "".join(f"chunk {index}\n" for index in range(6))


def test_a_sync_worker_is_cut_off_at_the_timeout():
    """Why the portal's workers are threaded: the same download from a sync worker is cut off."""
    assert _download(("--worker-class", "sync")).startswith("cut off")
