"""The Prometheus HTTP API collector against a local stub server serving canned API responses."""

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from efficiency.collectors.prometheus import (
    DEFAULT_LABELS,
    DEFAULT_QUERIES,
    PrometheusConfig,
    PrometheusConfigError,
    PrometheusQueryError,
    PrometheusUnavailable,
    fetch_chunks,
    fetch_range,
    plan_chunks,
)
from efficiency.collectors.records import GpuReading, Rejected, excerpt

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
T0_S = int(T0.timestamp())
SECRET = "Bearer s3cr3t-token"

# Labels as dcgm-exporter 3.x writes them, plus the ones Prometheus adds when scraping it.
A01_GPU0 = {
    "DCGM_FI_DRIVER_VERSION": "535.129.03",
    "Hostname": "gpu-a01",
    "UUID": "GPU-1b2c3d4e-0000-0000-0000-000000000000",
    "device": "nvidia0",
    "gpu": "0",
    "instance": "10.0.0.11:9400",
    "job": "dcgm-exporter",
    "modelName": "NVIDIA H100 80GB HBM3",
    "namespace": "vision",
    "pci_bus_id": "00000000:18:00.0",
    "pod": "bev-train-0",
}
A01_GPU1 = {**A01_GPU0, "UUID": "GPU-1b2c3d4e-0000-0000-0000-000000000001", "device": "nvidia1", "gpu": "1"}
del A01_GPU1["namespace"], A01_GPU1["pod"]  # an idle GPU: dcgm-exporter leaves the pod labels empty


@dataclass
class Reply:
    """What the stub answers: a JSON-able body (or raw text), a status, a delay."""

    body: Any = None
    status: int = 200
    content_type: str = "application/json"
    delay_s: float = 0.0


@dataclass
class StubPrometheus:
    """A local HTTP server standing in for Prometheus; ``answer`` decides each reply."""

    url: str
    answer: Callable[[str, dict[str, str]], Reply] = lambda path, params: Reply(matrix([]))
    requests: list[tuple[str, dict[str, str], dict[str, str]]] = field(default_factory=list)

    def serve(self, replies: dict[str, Reply], default: Reply | None = None) -> None:
        """Answer each PromQL query with its reply; others with ``default`` (an empty matrix)."""
        self.answer = lambda path, params: replies.get(params.get("query", ""), default or Reply(matrix([])))


@pytest.fixture
def stub() -> Iterator[StubPrometheus]:
    server_box: list[StubPrometheus] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            params = {key: values[0] for key, values in parse_qs(parts.query).items()}
            prom = server_box[0]
            prom.requests.append((parts.path, params, dict(self.headers)))
            reply = prom.answer(parts.path, params)
            time.sleep(reply.delay_s)
            body = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(body.encode())))
                self.end_headers()
                self.wfile.write(body.encode())
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout test)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server_box.append(StubPrometheus(url=f"http://127.0.0.1:{server.server_address[1]}"))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield server_box[0]
    server.shutdown()
    server.server_close()


def matrix(result: list[dict[str, Any]], warnings: list[str] | None = None) -> dict[str, Any]:
    """A query_range success body as Prometheus writes it."""
    body: dict[str, Any] = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    if warnings:
        body["warnings"] = warnings
    return body


def series(labels: dict[str, str], values: list[str], name: str | None = None) -> dict[str, Any]:
    """One matrix series with ``values`` at T0, T0+60 s, ..."""
    metric = {**labels, "__name__": name} if name else dict(labels)
    return {"metric": metric, "values": [[T0_S + 60 * i, v] for i, v in enumerate(values)]}


def config(url: str, **overrides: Any) -> PrometheusConfig:
    return PrometheusConfig(base_url=url, **overrides)


def reading(gpu: dict[str, str], minute: int, **values: Any) -> GpuReading:
    return GpuReading(
        hostname=gpu["Hostname"],
        gpu_index=int(gpu["gpu"]),
        timestamp_ms=(T0_S + 60 * minute) * 1000,
        uuid=gpu["UUID"],
        model=gpu["modelName"],
        pci_bus_id=gpu.get("pci_bus_id", ""),
        namespace=gpu.get("namespace", ""),
        pod=gpu.get("pod", ""),
        **values,
    )


THREE_MINUTES = (T0, T0 + timedelta(minutes=3))


# --- plan_chunks -----------------------------------------------------------------------------------------


def test_thirty_days_at_15_s_split_into_16_chunks_of_at_most_11000_points():
    start = datetime(2024, 1, 1, tzinfo=UTC)
    end = start + timedelta(days=30)  # 2,592,000 s / 15 s = 172,800 instants

    chunks = plan_chunks(start, end, 15)

    # 15 full chunks of 11,000 instants (165,000 s = 45 h 50 min) and 7,800 instants left over.
    assert len(chunks) == 16
    assert chunks[0] == (start, datetime(2024, 1, 2, 21, 50, tzinfo=UTC))
    assert chunks[1] == (datetime(2024, 1, 2, 21, 50, tzinfo=UTC), datetime(2024, 1, 4, 19, 40, tzinfo=UTC))
    assert chunks[-1] == (datetime(2024, 1, 29, 15, 30, tzinfo=UTC), end)
    assert (chunks[-1][1] - chunks[-1][0]) / timedelta(seconds=15) == 7_800
    assert all(a[1] == b[0] for a, b in pairwise(chunks))


def test_chunk_boundaries_fall_on_step_instants_and_the_window_edges_are_kept():
    start = datetime(2024, 1, 1, 12, 0, 30, tzinfo=UTC)
    end = datetime(2024, 1, 1, 13, 0, 30, tzinfo=UTC)  # instants 12:01 ... 13:00: 60 of them

    chunks = plan_chunks(start, end, 60, max_points=30)

    assert chunks == [
        (start, datetime(2024, 1, 1, 12, 31, tzinfo=UTC)),
        (datetime(2024, 1, 1, 12, 31, tzinfo=UTC), end),
    ]


def test_a_window_holding_no_instant_has_no_chunk():
    start = datetime(2024, 1, 1, 12, 0, 1, tzinfo=UTC)

    assert plan_chunks(start, start + timedelta(seconds=58), 60) == []
    assert plan_chunks(start, start, 60) == []


def test_exactly_max_points_instants_fit_in_one_chunk():
    assert plan_chunks(T0, T0 + timedelta(minutes=10), 60, max_points=10) == [
        (T0, T0 + timedelta(minutes=10))
    ]


def test_naive_datetimes_are_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        plan_chunks(datetime(2024, 1, 1), T0, 60)


# --- configuration ---------------------------------------------------------------------------------------


def test_config_from_dict_uses_defaults_and_merges_labels():
    cfg = PrometheusConfig.from_dict({"base_url": "http://prom:9090", "labels": {"pod": "exported_pod"}})

    assert cfg.queries == DEFAULT_QUERIES
    assert cfg.labels == {**DEFAULT_LABELS, "pod": "exported_pod"}
    assert (cfg.step_s, cfg.timeout_s, cfg.auth_header) == (60, 30, "")


def test_config_from_dict_lists_every_problem():
    with pytest.raises(PrometheusConfigError) as info:
        PrometheusConfig.from_dict(
            {
                "base_url": "prom:9090",
                "timeout_s": True,
                "step_s": "60s",
                "max_points": 20_000,
                "queries": {"util": "DCGM_FI_DEV_GPU_UTIL", "power_w": ""},
                "labels": ["Hostname"],
            }
        )

    message = str(info.value)
    assert "'base_url' must be an http:// or https:// URL" in message
    assert "'timeout_s' must be a number of seconds in (0, 600], got True" in message
    assert "'step_s' must be a positive whole number of seconds, got '60s'" in message
    assert "'max_points' must be a whole number from 1 to 11000, got 20000" in message
    assert "'queries' has unknown key(s) util" in message
    assert "'queries.power_w' must be a non-empty string" in message
    assert "'labels' must be an object mapping names to strings" in message


def test_config_from_dict_refuses_unknown_keys_and_a_missing_url():
    with pytest.raises(PrometheusConfigError, match="unknown key\\(s\\) 'step'"):
        PrometheusConfig.from_dict({"base_url": "http://prom:9090", "step": 60})
    with pytest.raises(PrometheusConfigError, match="'base_url' is required"):
        PrometheusConfig.from_dict({})


def test_config_repr_hides_the_auth_header():
    assert "s3cr3t" not in repr(PrometheusConfig(base_url="http://prom:9090", auth_header=SECRET))


# --- fetching and merging --------------------------------------------------------------------------------


def test_all_queries_merge_into_one_reading_per_gpu_and_instant(stub):
    stub.serve(
        {
            "DCGM_FI_DEV_GPU_UTIL": Reply(
                matrix(
                    [
                        series(A01_GPU0, ["87", "91", "100"], "DCGM_FI_DEV_GPU_UTIL"),
                        series(A01_GPU1, ["0", "0", "0"], "DCGM_FI_DEV_GPU_UTIL"),
                    ]
                )
            ),
            # Arithmetic drops __name__, as Prometheus does.
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE * 100": Reply(matrix([series(A01_GPU0, ["85.5", "90", "99.25"])])),
            "DCGM_FI_DEV_FB_USED": Reply(matrix([series(A01_GPU0, ["61440", "61440", "61952"])])),
            "DCGM_FI_DEV_POWER_USAGE": Reply(matrix([series(A01_GPU0, ["612.25", "650.5", "700"])])),
            "DCGM_FI_DEV_GPU_TEMP": Reply(matrix([series(A01_GPU0, ["61", "63", "64"])])),
            "DCGM_FI_DEV_XID_ERRORS": Reply(matrix([series(A01_GPU0, ["0", "0", "79"])])),
        }
    )

    outcome = fetch_range(config(stub.url), *THREE_MINUTES)

    assert outcome.rejected == []
    assert outcome.records == [
        reading(
            A01_GPU0,
            0,
            util_pct=87.0,
            gr_engine_active_pct=85.5,
            fb_used_mib=61440.0,
            power_w=612.25,
            temp_c=61.0,
            xid_last=0,
        ),
        reading(
            A01_GPU0,
            1,
            util_pct=91.0,
            gr_engine_active_pct=90.0,
            fb_used_mib=61440.0,
            power_w=650.5,
            temp_c=63.0,
            xid_last=0,
        ),
        reading(
            A01_GPU0,
            2,
            util_pct=100.0,
            gr_engine_active_pct=99.25,
            fb_used_mib=61952.0,
            power_w=700.0,
            temp_c=64.0,
            xid_last=79,
        ),
        reading(A01_GPU1, 0, util_pct=0.0),
        reading(A01_GPU1, 1, util_pct=0.0),
        reading(A01_GPU1, 2, util_pct=0.0),
    ]


def test_requests_carry_the_window_in_unix_seconds_the_step_and_the_auth_header(stub):
    fetch_range(
        config(stub.url, auth_header=SECRET, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"}), *THREE_MINUTES
    )

    [(path, params, headers)] = stub.requests
    assert path == "/api/v1/query_range"
    # [T0, T0+3 min) holds the instants T0, +60, +120: Prometheus' end is inclusive.
    assert params == {
        "query": "DCGM_FI_DEV_GPU_UTIL",
        "start": str(T0_S),
        "end": str(T0_S + 120),
        "step": "60",
        "timeout": "30",
    }
    assert headers["Authorization"] == SECRET


def test_no_query_asks_for_more_points_than_configured(stub):
    cfg = config(stub.url, step_s=15, max_points=11_000, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"})

    fetch_range(cfg, T0, T0 + timedelta(days=30))

    assert len(stub.requests) == 16
    for _path, params, _headers in stub.requests:
        assert (int(params["end"]) - int(params["start"])) / 15 + 1 <= 11_000
    starts = [int(params["start"]) for _path, params, _headers in stub.requests]
    assert starts == [T0_S + 165_000 * i for i in range(16)]


def test_nan_inf_and_the_dcgm_sentinel_become_none_and_are_counted(stub):
    stub.serve(
        {
            "DCGM_FI_DEV_GPU_UTIL": Reply(matrix([series(A01_GPU0, ["NaN", "+Inf", "42"])])),
            "DCGM_FI_DEV_FB_USED": Reply(matrix([series(A01_GPU0, ["9223372036854775794", "1024", "-Inf"])])),
        }
    )

    outcome = fetch_range(config(stub.url), *THREE_MINUTES)

    assert [(r.util_pct, r.fb_used_mib) for r in outcome.records] == [
        (None, None),
        (None, 1024.0),
        (42.0, None),
    ]
    gpu0 = (
        'DCGM_FI_DRIVER_VERSION="535.129.03",Hostname="gpu-a01",'
        'UUID="GPU-1b2c3d4e-0000-0000-0000-000000000000",device="nvidia0",gpu="0",'
        'instance="10.0.0.11:9400",job="dcgm-exporter",modelName="NVIDIA H100 80GB HBM3",'
        'namespace="vision",pci_bus_id="00000000:18:00.0",pod="bev-train-0"'
    )
    assert [(r.reason, r.excerpt) for r in outcome.rejected] == [
        (
            "util_pct: 2 value(s) NaN or ±Inf, kept as not reported",
            excerpt(f"{{{gpu0}}} first at 2024-03-01T12:00:00Z 'NaN'"),
        ),
        (
            "fb_used_mib: 1 value(s) DCGM's no-value sentinel, kept as not reported",
            excerpt(f"{{{gpu0}}} first at 2024-03-01T12:00:00Z '9223372036854775794'"),
        ),
        (
            "fb_used_mib: 1 value(s) NaN or ±Inf, kept as not reported",
            excerpt(f"{{{gpu0}}} first at 2024-03-01T12:02:00Z '-Inf'"),
        ),
    ]


def test_negative_amounts_and_percentages_over_100_are_rejected(stub):
    gpu = {"Hostname": "gpu-b07", "gpu": "3", "UUID": "GPU-b7", "modelName": "NVIDIA A800-SXM4-80GB"}
    stub.serve(
        {
            "DCGM_FI_PROF_SM_ACTIVE * 100": Reply(matrix([series(gpu, ["100", "100.5", "250"])])),
            "DCGM_FI_DEV_POWER_USAGE": Reply(matrix([series(gpu, ["-1", "310.5", "0"])])),
            "DCGM_FI_DEV_XID_ERRORS": Reply(matrix([series(gpu, ["13", "13.5", "0"])])),
        }
    )

    outcome = fetch_range(config(stub.url), *THREE_MINUTES)

    assert [(r.sm_active_pct, r.power_w, r.xid_last) for r in outcome.records] == [
        (100.0, None, 13),
        (None, 310.5, None),
        (None, 0.0, 0),
    ]
    labels = '{Hostname="gpu-b07",UUID="GPU-b7",gpu="3",modelName="NVIDIA A800-SXM4-80GB"}'
    assert outcome.rejected == [
        Rejected(
            "sm_active_pct: 2 value(s) above 100 %, kept as not reported",
            f"{labels} first at 2024-03-01T12:01:00Z '100.5'",
        ),
        Rejected(
            "power_w: 1 value(s) negative, kept as not reported",
            f"{labels} first at 2024-03-01T12:00:00Z '-1'",
        ),
        Rejected(
            "xid_last: 1 value(s) not a whole Xid code, kept as not reported",
            f"{labels} first at 2024-03-01T12:01:00Z '13.5'",
        ),
    ]


def test_series_without_hostname_or_gpu_are_rejected_with_their_labels(stub):
    no_gpu = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "gpu-a01", "job": "dcgm-exporter"}
    no_host = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "job": "dcgm-exporter"}
    bad_gpu = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "gpu-a01", "gpu": "all"}
    stub.serve(
        {
            "DCGM_FI_DEV_GPU_UTIL": Reply(
                matrix([series(no_gpu, ["1"]), series(no_host, ["2"]), series(bad_gpu, ["3"])])
            )
        }
    )

    outcome = fetch_range(config(stub.url), *THREE_MINUTES)

    assert outcome.records == []
    assert [(r.reason, r.excerpt) for r in outcome.rejected] == [
        (
            "util_pct: series without a gpu label, ignored",
            'DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-a01",job="dcgm-exporter"}',
        ),
        (
            "util_pct: series without a hostname label, ignored",
            'DCGM_FI_DEV_GPU_UTIL{gpu="0",job="dcgm-exporter"}',
        ),
        (
            "util_pct: gpu label 'all' is not a GPU index, series ignored",
            'DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-a01",gpu="all"}',
        ),
    ]


def test_label_fallbacks_instance_host_lowercase_uuid_and_pod_name(stub):
    old_exporter = {
        "gpu": "2",
        "uuid": "GPU-old",
        "instance": "gpu-c03:9400",
        "pod_name": "p",
        "pod_namespace": "ns",
    }
    ipv6 = {"gpu": "0", "instance": "[fd00::5]:9400"}
    mig = {"Hostname": "gpu-d01", "gpu": "1", "GPU_I_ID": "3", "GPU_I_PROFILE": "1g.10gb"}
    stub.serve(
        {
            "DCGM_FI_DEV_GPU_UTIL": Reply(
                matrix([series(old_exporter, ["5"]), series(ipv6, ["6"]), series(mig, ["7"])])
            )
        }
    )

    outcome = fetch_range(config(stub.url), T0, T0 + timedelta(minutes=1))

    ts = T0_S * 1000
    assert outcome.records == [
        GpuReading(hostname="fd00::5", gpu_index=0, timestamp_ms=ts, util_pct=6.0),
        GpuReading(
            hostname="gpu-c03",
            gpu_index=2,
            timestamp_ms=ts,
            uuid="GPU-old",
            namespace="ns",
            pod="p",
            util_pct=5.0,
        ),
        GpuReading(hostname="gpu-d01", gpu_index=1, timestamp_ms=ts, mig_instance="3", util_pct=7.0),
    ]


def test_configured_labels_come_before_the_fallbacks(stub):
    labels = {
        "Hostname": "exporter-pod-xyz",
        "node": "gpu-a01",
        "gpu": "0",
        "pod": "dcgm-exporter-abc",
        "exported_pod": "bev-train-0",
    }
    stub.serve({"DCGM_FI_DEV_GPU_UTIL": Reply(matrix([series(labels, ["5"])]))})
    cfg = config(stub.url, labels={**DEFAULT_LABELS, "hostname": "node", "pod": "exported_pod"})

    [only] = fetch_range(cfg, T0, T0 + timedelta(minutes=1)).records

    assert (only.hostname, only.pod) == ("gpu-a01", "bev-train-0")


def test_two_series_for_the_same_gpu_keep_the_first_and_are_reported(stub):
    scraped_twice = {**A01_GPU0, "job": "dcgm-exporter-2"}
    stub.serve(
        {
            "DCGM_FI_DEV_GPU_UTIL": Reply(
                matrix([series(A01_GPU0, ["10", "11"]), series(scraped_twice, ["10", "11"])])
            )
        }
    )

    outcome = fetch_range(config(stub.url), T0, T0 + timedelta(minutes=2))

    assert [r.util_pct for r in outcome.records] == [10.0, 11.0]
    [rejected] = outcome.rejected
    assert (
        rejected.reason
        == "util_pct: 2 value(s) duplicate another series for the same GPU and time (kept the first)"
    )
    assert 'job="dcgm-exporter-2"' in rejected.excerpt


def test_warnings_are_reported_and_the_data_kept(stub):
    warning = "PromQL info: metric might not be a counter, name does not end in _total"
    stub.serve({"DCGM_FI_DEV_GPU_UTIL": Reply(matrix([series(A01_GPU0, ["55"])], warnings=[warning]))})

    outcome = fetch_range(config(stub.url), T0, T0 + timedelta(minutes=1))

    assert [r.util_pct for r in outcome.records] == [55.0]
    assert outcome.rejected == [
        Rejected(f"Prometheus warning for util_pct (data kept): {warning}", "DCGM_FI_DEV_GPU_UTIL")
    ]


# --- failures --------------------------------------------------------------------------------------------

CHUNK = "for 2024-03-01T12:00:00Z – 2024-03-01T12:03:00Z"


def test_http_500_is_transient_and_names_query_and_window(stub):
    stub.serve({}, default=Reply("upstream exploded", status=500, content_type="text/plain"))

    with pytest.raises(PrometheusUnavailable) as info:
        fetch_range(config(stub.url), *THREE_MINUTES)

    assert str(info.value) == (
        f"Prometheus at {stub.url}/api/v1/query_range answered HTTP 500 "
        f"(query util_pct = 'DCGM_FI_DEV_GPU_UTIL' {CHUNK})."
    )


def test_503_timeout_and_429_are_transient_with_prometheus_own_message(stub):
    timeout = {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}
    stub.serve({}, default=Reply(timeout, status=503))
    with pytest.raises(
        PrometheusUnavailable, match="HTTP 503 \\(timeout: query timed out in expression evaluation\\)"
    ):
        fetch_range(config(stub.url), *THREE_MINUTES)

    stub.serve({}, default=Reply("slow down", status=429, content_type="text/plain"))
    with pytest.raises(PrometheusUnavailable, match="HTTP 429"):
        fetch_range(config(stub.url), *THREE_MINUTES)


def test_a_slow_server_times_out_as_transient(stub):
    stub.serve({}, default=Reply(matrix([]), delay_s=1.0))

    with pytest.raises(PrometheusUnavailable) as info:
        fetch_range(config(stub.url, timeout_s=0.2), *THREE_MINUTES)

    assert str(info.value) == (
        f"Prometheus at {stub.url}/api/v1/query_range did not answer within 0.2 s "
        f"(query util_pct = 'DCGM_FI_DEV_GPU_UTIL' {CHUNK})."
    )


def test_nothing_listening_is_transient():
    with pytest.raises(
        PrometheusUnavailable,
        match=re.escape("Cannot reach Prometheus at http://127.0.0.1:9/api/v1/query_range"),
    ):
        fetch_range(config("http://127.0.0.1:9", timeout_s=2), *THREE_MINUTES)


def test_bad_promql_is_permanent_with_prometheus_error(stub):
    error = {
        "status": "error",
        "errorType": "bad_data",
        "error": "1:22: parse error: unexpected end of input inside braces",
    }
    stub.serve({}, default=Reply(error, status=400))

    with pytest.raises(PrometheusQueryError) as info:
        fetch_range(config(stub.url, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL{"}), *THREE_MINUTES)

    assert str(info.value) == (
        f"Prometheus at {stub.url}/api/v1/query_range rejected the query: HTTP 400 "
        f"(bad_data: 1:22: parse error: unexpected end of input inside braces) "
        f"(query util_pct = 'DCGM_FI_DEV_GPU_UTIL{{' {CHUNK})."
    )


def test_refused_credentials_are_permanent_and_the_secret_is_never_shown(stub):
    stub.serve({}, default=Reply({"status": "error", "error": "unauthorized"}, status=401))
    with_password = stub.url.replace("http://", "http://admin:hunter2@")

    with pytest.raises(PrometheusQueryError) as info:
        fetch_range(config(with_password, auth_header=SECRET), *THREE_MINUTES)

    assert "HTTP 401: check the auth header" in str(info.value)
    assert "s3cr3t" not in str(info.value)
    assert "hunter2" not in str(info.value)


def test_an_html_page_is_permanent(stub):
    stub.serve({}, default=Reply("<html><body>Sign in to continue</body></html>", content_type="text/html"))

    with pytest.raises(PrometheusQueryError, match="something other than JSON \\('<html><body>Sign in"):
        fetch_range(config(stub.url), *THREE_MINUTES)


def test_a_wrong_result_type_is_permanent(stub):
    stub.serve({}, default=Reply({"status": "success", "data": {"resultType": "vector", "result": []}}))

    with pytest.raises(PrometheusQueryError, match="result type 'vector' instead of 'matrix'"):
        fetch_range(config(stub.url), *THREE_MINUTES)


def test_a_failing_chunk_keeps_the_earlier_chunks_and_says_where_they_end(stub):
    second_chunk = str(T0_S + 120)

    def answer(path: str, params: dict[str, str]) -> Reply:
        if params["start"] == second_chunk:
            return Reply("bad gateway", status=502, content_type="text/plain")
        return Reply(matrix([series(A01_GPU0, ["1", "2"])]))

    stub.answer = answer
    cfg = config(stub.url, max_points=2, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"})

    with pytest.raises(PrometheusUnavailable) as info:
        fetch_range(cfg, T0, T0 + timedelta(minutes=6))

    assert info.value.completed_until == T0 + timedelta(minutes=2)
    assert [r.util_pct for r in info.value.partial.records] == [1.0, 2.0]
    assert "for 2024-03-01T12:02:00Z – 2024-03-01T12:04:00Z" in str(info.value)


def test_fetch_chunks_yields_each_chunk_as_it_completes(stub):
    stub.serve({"DCGM_FI_DEV_GPU_UTIL": Reply(matrix([series(A01_GPU0, ["1"])]))})
    cfg = config(stub.url, max_points=2, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"})

    chunks = list(fetch_chunks(cfg, T0, T0 + timedelta(minutes=5)))

    assert [(c.start, c.end, len(c.outcome.records)) for c in chunks] == [
        (T0, T0 + timedelta(minutes=2), 1),
        (T0 + timedelta(minutes=2), T0 + timedelta(minutes=4), 1),
        (T0 + timedelta(minutes=4), T0 + timedelta(minutes=5), 1),
    ]


def test_a_point_at_an_absurd_instant_is_rejected_with_its_number_and_the_series_kept(stub):
    # -99999999999999999 ms lies before year 1: naming it in the rejection raised OverflowError.
    absurd = {
        "metric": dict(A01_GPU0),
        "values": [[-99999999999999.999, "NaN"], ["1e400", "5"], [T0_S, "42"]],
    }
    stub.serve({"DCGM_FI_DEV_GPU_UTIL": Reply(matrix([absurd]))})

    outcome = fetch_range(config(stub.url), *THREE_MINUTES)

    assert reading(A01_GPU0, 0, util_pct=42.0) in outcome.records
    reasons = sorted(item.reason for item in outcome.rejected)
    assert reasons == [
        "util_pct: 1 value(s) NaN or ±Inf, kept as not reported",
        "util_pct: 1 value(s) is a malformed point",
    ]
