"""Runs a real Prometheus server for tests, optionally backfilled with OpenMetrics text.

Tests that use it skip when ``/usr/bin/prometheus`` is missing, unless ``PORTAL_REQUIRE_PROMETHEUS=1``
(CI machines that must run them) turns the skip into a failure.

Backfill rules (``promtool tsdb create-blocks-from openmetrics``): timestamps are Unix *seconds*, each
metric family's samples are contiguous and time-ordered per series, and the text ends with ``# EOF``.
Keep the samples a few hours old (e.g. 6 h to 4 h ago) so they never overlap the head block of the
running server, and inside ``--storage.tsdb.retention.time`` (30 d here), or Prometheus deletes them at
start-up.
"""

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

PROMETHEUS_BIN = Path("/usr/bin/prometheus")
PROMTOOL_BIN = Path("/usr/bin/promtool")
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
LOG_TAIL_CHARS = 3000


def require_prometheus() -> None:
    """Skip the calling test when the Prometheus binaries are missing (fail if they are required)."""
    missing = [str(path) for path in (PROMETHEUS_BIN, PROMTOOL_BIN) if not path.exists()]
    if not missing:
        return
    reason = f"{' and '.join(missing)} not installed (Debian package 'prometheus')"
    if os.environ.get("PORTAL_REQUIRE_PROMETHEUS") == "1":
        pytest.fail(f"PORTAL_REQUIRE_PROMETHEUS=1 but {reason}")
    pytest.skip(reason)


@contextmanager
def running_prometheus(
    tmp_path: Path,
    *,
    openmetrics_text: str | None = None,
    scrape_targets: list[str] | None = None,
) -> Iterator[str]:
    """Start Prometheus on a free local port and yield its base URL; stop it on exit.

    ``openmetrics_text`` is backfilled into the TSDB before start-up; ``scrape_targets`` (``host:port``)
    are scraped every second under job ``test``.
    """
    require_prometheus()
    data_dir = tmp_path / "prometheus-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    if openmetrics_text is not None:
        backfill(tmp_path, data_dir, openmetrics_text)
    config_file = tmp_path / "prometheus.yml"
    config_file.write_text(_config_yaml(scrape_targets or []))
    log_file = tmp_path / "prometheus.log"

    process, base_url = _start_ready(config_file, data_dir, log_file)
    try:
        if scrape_targets:
            _wait_scraped(process, base_url, log_file, len(scrape_targets))
        yield base_url
    finally:
        _stop(process)


def backfill(tmp_path: Path, data_dir: Path, openmetrics_text: str) -> None:
    """Write OpenMetrics text into TSDB blocks in ``data_dir`` with promtool; raise with its output."""
    if not openmetrics_text.rstrip().endswith("# EOF"):
        raise ValueError("OpenMetrics text must end with a '# EOF' line (promtool refuses it otherwise)")
    source = tmp_path / "backfill.om"
    source.write_text(openmetrics_text)
    result = subprocess.run(
        [
            str(PROMTOOL_BIN),
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--quiet",
            str(source),
            str(data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"promtool backfill failed ({result.returncode}): {result.stdout}{result.stderr}")


class _AddressInUse(RuntimeError):
    pass


def _config_yaml(scrape_targets: list[str]) -> str:
    lines = ["global:", "  scrape_interval: 1s", "  evaluation_interval: 1s", "scrape_configs:"]
    if scrape_targets:
        targets = ", ".join(f'"{target}"' for target in scrape_targets)
        lines += ["  - job_name: test", "    static_configs:", f"      - targets: [{targets}]"]
    else:
        lines[-1] = "scrape_configs: []"
    return "\n".join(lines) + "\n"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_ready(config_file: Path, data_dir: Path, log_file: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start Prometheus and wait for ``/-/ready``; returns the process and its base URL."""
    # A port found free can be taken by someone else before Prometheus binds it: then try another.
    for attempt in range(3):
        port = _free_port()
        process = _start(config_file, data_dir, port, log_file)
        base_url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(process, base_url, log_file)
        except _AddressInUse:
            _stop(process)
            if attempt == 2:
                raise
        except BaseException:
            _stop(process)
            raise
        else:
            return process, base_url
    raise AssertionError("unreachable")


def _start(config_file: Path, data_dir: Path, port: int, log_file: Path) -> subprocess.Popen[bytes]:
    with log_file.open("ab") as log:
        return subprocess.Popen(
            [
                str(PROMETHEUS_BIN),
                f"--config.file={config_file}",
                f"--storage.tsdb.path={data_dir}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=30d",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def _wait_ready(process: subprocess.Popen[bytes], base_url: str, log_file: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = _tail(log_file)
            if "address already in use" in tail:
                raise _AddressInUse(tail)
            raise RuntimeError(f"Prometheus exited with {process.returncode} at start-up:\n{tail}")
        try:
            if requests.get(f"{base_url}/-/ready", timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"Prometheus not ready after {READY_TIMEOUT_S:.0f} s:\n{_tail(log_file)}")


def _wait_scraped(process: subprocess.Popen[bytes], base_url: str, log_file: Path, count: int) -> None:
    """Wait until every target has been scraped once (service discovery only reports every 5 s)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Prometheus exited with {process.returncode}:\n{_tail(log_file)}")
        targets = requests.get(f"{base_url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
        if len(targets) >= count and all(target["health"] != "unknown" for target in targets):
            return
        time.sleep(0.2)
    raise RuntimeError(f"Prometheus did not scrape its {count} target(s) within {READY_TIMEOUT_S:.0f} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_S)


def _tail(log_file: Path) -> str:
    try:
        return log_file.read_text(errors="replace")[-LOG_TAIL_CHARS:]
    except OSError:
        return "(no log)"
