"""A dcgm-exporter stand-in: serves the simulator's ``/metrics`` for the current wall-clock time.

``GET /metrics`` returns every node's GPUs (each series labelled with its ``Hostname``);
``GET /metrics?node=<hostname>`` returns one node, as the exporter on that node would. Values
are computed for the moment of the request, so a live scrape and a backfill of the same instant
from the same simulator (seed and start) agree.
"""

import logging
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from efficiency.simulator.model import ClusterSimulator

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def make_handler(
    simulator: ClusterSimulator, lock: "threading.Lock | None" = None
) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``simulator``.

    The simulator is not thread-safe: every use goes through ``lock`` (pass the one that other
    users of the same simulator hold, e.g. the demo's live log writer).
    """
    lock = lock or threading.Lock()
    known = set(simulator.hostnames())

    class MetricsHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path != "/metrics":
                self._reply(404, "not found: try /metrics or /metrics?node=<hostname>\n")
                return
            nodes = parse_qs(url.query).get("node")
            unknown = [node for node in nodes or [] if node not in known]
            if unknown:
                self._reply(404, f"unknown node: {', '.join(unknown)}\n")
                return
            with lock:
                body = simulator.exposition(datetime.now(tz=UTC), nodes=nodes)
            self._reply(200, body, CONTENT_TYPE)

        def _reply(self, status: int, body: str, content_type: str = "text/plain; charset=utf-8") -> None:
            payload = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            logger.debug("%s - " + format, self.address_string(), *args)

    return MetricsHandler


def make_server(
    simulator: ClusterSimulator,
    host: str = "127.0.0.1",
    port: int = 9400,
    *,
    lock: "threading.Lock | None" = None,
) -> ThreadingHTTPServer:
    """A ready, not yet serving, HTTP server (port 0 picks a free port: see ``server_address``)."""
    return ThreadingHTTPServer((host, port), make_handler(simulator, lock))


def serve(simulator: ClusterSimulator, host: str = "127.0.0.1", port: int = 9400) -> None:
    """Serve ``/metrics`` until interrupted (9400 is dcgm-exporter's port)."""
    server = make_server(simulator, host, port)
    logger.info("simulated dcgm-exporter on http://%s:%s/metrics", *server.server_address[:2])
    try:
        server.serve_forever()
    finally:
        server.server_close()
