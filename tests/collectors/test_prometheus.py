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
from hypothesis import example, given
from hypothesis import strategies as st

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
    query_plan,
    step_window,
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
        """Answer each PromQL query with its reply; others with ``default`` (an empty matrix).

        A bare selector also answers the query the collector makes of it (averaged over the step on a
        Prometheus 2.x, or the last value for the Xid code).
        """
        table = dict(replies)
        for promql, reply in replies.items():
            for field_name in ("util_pct", "xid_last"):
                sent = query_plan(config(self.url, queries={field_name: promql}), left_open=False)
                table.setdefault(sent.queries[field_name], reply)
        self.answer = lambda path, params: table.get(params.get("query", ""), default or Reply(matrix([])))


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
    return {"metric": metric, "values": [[T0_S + 60 * i + 59.999, v] for i, v in enumerate(values)]}


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


def test_chunk_boundaries_fall_on_step_starts_and_the_unfinished_step_is_left_for_later():
    start = datetime(2024, 1, 1, 12, 0, 30, tzinfo=UTC)
    end = datetime(2024, 1, 1, 13, 0, 30, tzinfo=UTC)  # whole steps 12:01 ... 12:59: 59 of them

    chunks = plan_chunks(start, end, 60, max_points=30)

    assert chunks == [
        (start, datetime(2024, 1, 1, 12, 31, tzinfo=UTC)),
        (datetime(2024, 1, 1, 12, 31, tzinfo=UTC), datetime(2024, 1, 1, 13, 0, tzinfo=UTC)),
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

    (info, _, _), (path, params, headers), (_, counted, _) = stub.requests
    assert info == "/api/v1/status/buildinfo"
    assert path == "/api/v1/query_range"
    # [T0, T0+3 min) holds the steps starting T0, +60, +120, each evaluated at its last millisecond
    # over a range of 59,999 ms (Prometheus 2.x ranges are closed): [T0, T0+60 s) and so on.
    assert params == {
        "query": "avg_over_time(DCGM_FI_DEV_GPU_UTIL[59999ms])",
        "start": f"{T0_S + 59}.999",
        "end": f"{T0_S + 179}.999",
        "step": "60",
        "timeout": "30",
    }
    assert counted["query"] == "count_over_time(DCGM_FI_DEV_GPU_UTIL[59999ms])"
    assert headers["Authorization"] == SECRET


def test_no_query_asks_for_more_points_than_configured(stub):
    cfg = config(stub.url, step_s=15, max_points=11_000, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"})

    fetch_range(cfg, T0, T0 + timedelta(days=30))

    asked = [params for _path, params, _headers in stub.requests if params.get("query", "").startswith("avg")]
    assert len(asked) == 16
    for params in asked:
        assert (float(params["end"]) - float(params["start"])) / 15 + 1 <= 11_000
    starts = [float(params["start"]) for params in asked]
    assert starts == [T0_S + 165_000 * i + 14.999 for i in range(16)]


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
        Rejected(
            f"Prometheus warning for util_pct (data kept): {warning}",
            "avg_over_time(DCGM_FI_DEV_GPU_UTIL[59999ms])",
        )
    ]


# --- failures --------------------------------------------------------------------------------------------

CHUNK = "for 2024-03-01T12:00:00Z – 2024-03-01T12:03:00Z"


def test_http_500_is_transient_and_names_query_and_window(stub):
    stub.serve({}, default=Reply("upstream exploded", status=500, content_type="text/plain"))

    with pytest.raises(PrometheusUnavailable) as info:
        fetch_range(config(stub.url), *THREE_MINUTES)

    assert str(info.value) == (
        f"Prometheus at {stub.url}/api/v1/query_range answered HTTP 500 "
        f"(query util_pct = 'avg_over_time(DCGM_FI_DEV_GPU_UTIL[59999ms])' {CHUNK})."
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
        f"(query util_pct = 'avg_over_time(DCGM_FI_DEV_GPU_UTIL[59999ms])' {CHUNK})."
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
    second_chunk = f"{T0_S + 179}.999"

    def answer(path: str, params: dict[str, str]) -> Reply:
        if params.get("start") == second_chunk:
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
        "values": [[-99999999999999.999, "NaN"], ["1e400", "5"], [T0_S + 59.999, "42"]],
    }
    stub.serve({"DCGM_FI_DEV_GPU_UTIL": Reply(matrix([absurd]))})

    outcome = fetch_range(config(stub.url), *THREE_MINUTES)

    assert reading(A01_GPU0, 0, util_pct=42.0) in outcome.records
    reasons = sorted(item.reason for item in outcome.rejected)
    assert reasons == [
        "util_pct: 1 value(s) NaN or ±Inf, kept as not reported",
        "util_pct: 1 value(s) is a malformed point",
    ]


# --- what the collector asks Prometheus ------------------------------------------------------------------

AVG_2X = {
    "util_pct": "avg_over_time(DCGM_FI_DEV_GPU_UTIL[59999ms])",
    "gr_engine_active_pct": "avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[59999ms]) * 100",
    "sm_active_pct": "avg_over_time(DCGM_FI_PROF_SM_ACTIVE[59999ms]) * 100",
    "fb_used_mib": "avg_over_time(DCGM_FI_DEV_FB_USED[59999ms])",
    "power_w": "avg_over_time(DCGM_FI_DEV_POWER_USAGE[59999ms])",
    "temp_c": "avg_over_time(DCGM_FI_DEV_GPU_TEMP[59999ms])",
    "xid_last": "last_over_time(DCGM_FI_DEV_XID_ERRORS[59999ms])",
    "samples": "count_over_time(DCGM_FI_DEV_GPU_UTIL[59999ms])",
}


def test_default_queries_average_each_step_count_its_samples_and_take_the_last_xid():
    # Prometheus 2.x: ranges are closed, [t - r, t]; evaluated at a + 59.999 s, 59,999 ms is [a, a + 60 s).
    plan_2x = query_plan(config("http://prom:9090"), left_open=False)
    # Prometheus 3.x: ranges are left-open, (t - r, t]; 60 s at a + 59.999 s is again [a, a + 60 s).
    plan_3x = query_plan(config("http://prom:9090"), left_open=True)

    assert plan_2x.queries == AVG_2X
    assert plan_3x.queries == {name: text.replace("59999ms", "60s") for name, text in AVG_2X.items()}
    assert (plan_2x.probe_selector, plan_2x.probe_window) == ("DCGM_FI_DEV_GPU_UTIL", "7199999ms")
    assert query_plan(config("http://prom:9090", step_s=15), left_open=False).window == "14999ms"


def test_a_bare_selector_override_is_averaged_like_the_defaults_and_counts_its_own_samples():
    cfg = PrometheusConfig.from_dict(
        {
            "base_url": "http://prom:9090",
            "queries": {
                "util_pct": 'DCGM_FI_DEV_GPU_UTIL{cluster="a", Hostname=~"gpu-.*"}',
                "sm_active_pct": "DCGM_FI_PROF_SM_ACTIVE*100",
                "xid_last": 'DCGM_FI_DEV_XID_ERRORS{cluster="a"}',
            },
        }
    )

    plan = query_plan(cfg, left_open=False)

    assert plan.queries == {
        "util_pct": 'avg_over_time(DCGM_FI_DEV_GPU_UTIL{cluster="a", Hostname=~"gpu-.*"}[59999ms])',
        "sm_active_pct": "avg_over_time(DCGM_FI_PROF_SM_ACTIVE[59999ms]) * 100",
        "xid_last": 'last_over_time(DCGM_FI_DEV_XID_ERRORS{cluster="a"}[59999ms])',
        "samples": 'count_over_time(DCGM_FI_DEV_GPU_UTIL{cluster="a", Hostname=~"gpu-.*"}[59999ms])',
    }


def test_a_query_with_window_keeps_its_own_function_and_any_other_query_is_sent_as_written():
    cfg = config(
        "http://prom:9090",
        queries={
            "util_pct": 'max_over_time(DCGM_FI_DEV_GPU_UTIL{cluster="a"}[$window])',
            "power_w": "sum by (Hostname, gpu) (DCGM_FI_DEV_POWER_USAGE)",
        },
    )

    plan = query_plan(cfg, left_open=True)

    # No samples query can be derived from max_over_time or a sum: each reading stands for the step.
    assert plan.queries == {
        "util_pct": 'max_over_time(DCGM_FI_DEV_GPU_UTIL{cluster="a"}[60s])',
        "power_w": "sum by (Hostname, gpu) (DCGM_FI_DEV_POWER_USAGE)",
    }
    assert plan.probe_selector is None


@pytest.mark.parametrize(
    ("reply", "window"),
    [
        (Reply({"status": "success", "data": {"version": "3.1.0"}}), "60s"),
        (Reply({"status": "success", "data": {"version": "2.53.1"}}), "59999ms"),
        (Reply("404 page not found", status=404, content_type="text/plain"), "59999ms"),  # e.g. a proxy
    ],
)
def test_the_range_follows_the_server_version(stub, reply, window):
    stub.answer = lambda path, params: reply if path.endswith("buildinfo") else Reply(matrix([]))

    fetch_range(config(stub.url, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"}), *THREE_MINUTES)

    asked = [params["query"] for path, params, _ in stub.requests if path == "/api/v1/query_range"]
    assert asked == [
        f"avg_over_time(DCGM_FI_DEV_GPU_UTIL[{window}])",
        f"count_over_time(DCGM_FI_DEV_GPU_UTIL[{window}])",
    ]


@pytest.mark.parametrize("bad", [0, -57, True, "57", 57.5, 86_401])
def test_sample_interval_must_be_whole_seconds(bad):
    with pytest.raises(PrometheusConfigError, match="'sample_interval_s' must be a whole number of seconds"):
        PrometheusConfig.from_dict({"base_url": "http://prom:9090", "sample_interval_s": bad})


def test_queries_that_only_count_samples_are_refused():
    with pytest.raises(PrometheusConfigError, match="'queries' must name at least one metric"):
        config("http://prom:9090", queries={"samples": "count_over_time(DCGM_FI_DEV_GPU_UTIL[$window])"})


# --- weights ---------------------------------------------------------------------------------------------

COUNT_2X = "count_over_time(DCGM_FI_DEV_GPU_UTIL[59999ms])"
GPU = {"Hostname": "gpu-a01", "gpu": "0"}


def test_each_reading_stands_for_its_samples_times_the_configured_sample_interval(stub):
    stub.serve(
        {
            "DCGM_FI_DEV_GPU_UTIL": Reply(matrix([series(GPU, ["10", "40", "70"])])),
            COUNT_2X: Reply(matrix([series(GPU, ["1", "2", "1"])])),
        }
    )
    cfg = config(stub.url, sample_interval_s=57, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"})

    [chunk] = fetch_chunks(cfg, *THREE_MINUTES)

    assert [r.util_pct for r in chunk.outcome.records] == [10.0, 40.0, 70.0]
    assert chunk.interval_s == [57, 114, 57]
    assert [(seconds, len(readings)) for seconds, readings in chunk.by_interval()] == [(57, 2), (114, 1)]
    # The mean over the range is the mean of the 4 raw samples, not of the 3 steps.
    mean = sum(r.util_pct * s for r, s in zip(chunk.outcome.records, chunk.interval_s, strict=True)) / sum(
        chunk.interval_s
    )
    assert mean == pytest.approx((10 + 40 * 2 + 70) / 4)


def test_the_sample_interval_is_measured_on_the_busiest_gpu_and_kept_within_the_hour(stub):
    busiest = {"metric": GPU, "value": [T0_S + 179.999, "127"]}
    raw = {"metric": GPU, "values": [[T0_S - 7000 + 57 * i, "1"] for i in range(127)]}
    stub.serve(
        {
            "DCGM_FI_DEV_GPU_UTIL": Reply(matrix([series(GPU, ["10", "40", "70"])])),
            COUNT_2X: Reply(matrix([series(GPU, ["1", "2", "1"])])),
            "topk(1, count_over_time(DCGM_FI_DEV_GPU_UTIL[7199999ms]))": Reply(
                {"status": "success", "data": {"resultType": "vector", "result": [busiest]}}
            ),
            'DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-a01",gpu="0"}[7199999ms]': Reply(matrix([raw])),
        }
    )

    [chunk] = fetch_chunks(config(stub.url, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"}), *THREE_MINUTES)

    # Samples 57 s apart: an hour can hold 64 of them, so each stands for 3600 // 64 = 56 s.
    assert chunk.interval_s == [56, 112, 56]
    assert chunk.outcome.rejected == []


def test_a_sample_interval_that_cannot_be_measured_is_said_and_each_reading_stands_for_the_step(stub):
    stub.serve(
        {
            "DCGM_FI_DEV_GPU_UTIL": Reply(matrix([series(GPU, ["10"])])),
            COUNT_2X: Reply(matrix([series(GPU, ["1"])])),
        }
    )

    [chunk] = fetch_chunks(
        config(stub.url, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"}), T0, T0 + timedelta(minutes=1)
    )

    assert chunk.interval_s == [60]
    [rejected] = chunk.outcome.rejected
    assert rejected.reason.startswith("samples: the sample interval could not be measured")
    assert rejected.reason.endswith("set sample_interval_s")


def test_a_probe_the_server_refuses_is_said_and_the_readings_kept(stub):
    refused = {"status": "error", "errorType": "bad_data", "error": "topk is not allowed here"}

    def answer(path: str, params: dict[str, str]) -> Reply:
        if path == "/api/v1/query":
            return Reply(refused, status=400)
        if params.get("query") == COUNT_2X:
            return Reply(matrix([series(GPU, ["2"])]))
        return Reply(matrix([series(GPU, ["25"])]))

    stub.answer = answer

    [chunk] = fetch_chunks(
        config(stub.url, queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL"}), T0, T0 + timedelta(minutes=1)
    )

    assert [(r.util_pct, s) for r, s in zip(chunk.outcome.records, chunk.interval_s, strict=True)] == [
        (25.0, 60)
    ]
    [rejected] = chunk.outcome.rejected
    assert "the sample interval could not be measured" in rejected.reason
    assert "bad_data: topk is not allowed here" in rejected.reason


def test_hostile_answers_are_rejected_with_a_reason_and_the_rest_kept(stub):
    one_sample = {"Hostname": "gpu-a02", "gpu": "0"}
    backwards = {
        "metric": GPU,
        "values": [[T0_S + 179.999, "70"], [T0_S + 59.999, "10"], [T0_S + 119.999, "1e308"]],
    }
    counts = {
        "metric": GPU,
        "values": [[T0_S + 59.999, "NaN"], [T0_S + 119.999, "2.5"], [T0_S + 179.999, "1e12"]],
    }
    stub.serve(
        {
            "DCGM_FI_DEV_GPU_UTIL": Reply(matrix([backwards, series(one_sample, ["+Inf", "33"])])),
            "DCGM_FI_DEV_POWER_USAGE": Reply(matrix([series(GPU, ["1e300", "300"])])),
            COUNT_2X: Reply(matrix([counts, series(one_sample, ["1", "1"])])),
        }
    )
    cfg = config(
        stub.url,
        sample_interval_s=57,
        queries={"util_pct": "DCGM_FI_DEV_GPU_UTIL", "power_w": "DCGM_FI_DEV_POWER_USAGE"},
    )

    [chunk] = fetch_chunks(cfg, *THREE_MINUTES)

    got = [
        (r.hostname, (r.timestamp_ms // 1000 - T0_S) // 60, r.util_pct, r.power_w, s)
        for r, s in zip(chunk.outcome.records, chunk.interval_s, strict=True)
    ]
    assert got == [
        # Out of order in the answer, in order here; the absurd value dropped, its step kept for power.
        ("gpu-a01", 0, 10.0, None, 60),
        ("gpu-a01", 1, None, 300.0, 60),
        ("gpu-a01", 2, 70.0, None, 60),
        ("gpu-a02", 0, None, None, 57),
        ("gpu-a02", 1, 33.0, None, 57),
    ]
    reasons = sorted(r.reason for r in chunk.outcome.rejected)
    assert reasons == [
        "power_w: 1 value(s) DCGM's no-value sentinel, kept as not reported",
        "samples: 3 value(s) not a count of samples, the step stands for the whole step",
        "util_pct: 1 value(s) DCGM's no-value sentinel, kept as not reported",  # 1e308: beyond 2**47
        "util_pct: 1 value(s) NaN or ±Inf, kept as not reported",
    ]


# --- invariants ------------------------------------------------------------------------------------------


def _range_ms(window: str) -> int:
    return int(window.removesuffix("ms")) if window.endswith("ms") else int(window.removesuffix("s")) * 1000


def _selected(sample_ms: int, eval_ms: int, range_ms: int, *, left_open: bool) -> bool:
    """Whether Prometheus' range selector [range] at eval_ms holds a sample (2.x closed, 3.x left-open)."""
    lower = eval_ms - range_ms
    return (lower < sample_ms if left_open else lower <= sample_ms) and sample_ms <= eval_ms


@given(
    sample_ms=st.integers(min_value=0, max_value=4_102_444_800_000),  # 1970 to 2100, any millisecond
    step_s=st.sampled_from([1, 10, 15, 30, 60, 300, 3600]),
    left_open=st.booleans(),
)
@example(sample_ms=1_662_858_720_000, step_s=60, left_open=False)  # on a step boundary, as in the trace
@example(sample_ms=1_662_858_720_000, step_s=60, left_open=True)
@example(sample_ms=1_662_858_779_999, step_s=60, left_open=True)  # a step's last millisecond
def test_every_sample_falls_in_exactly_one_step_window_on_either_prometheus(sample_ms, step_s, left_open):
    range_ms = _range_ms(step_window(step_s, left_open=left_open))
    step_ms = step_s * 1000
    # Step a is evaluated at its last millisecond, a + step - 1 ms (what _eval_instant sends).
    home = sample_ms // step_ms
    holding = [
        index
        for index in range(home - 2, home + 3)
        if _selected(sample_ms, index * step_ms + step_ms - 1, range_ms, left_open=left_open)
    ]

    assert holding == [home]


@given(
    start_s=st.integers(min_value=1_600_000_000, max_value=1_700_000_000),
    length_s=st.integers(min_value=0, max_value=40 * 86_400),
    step_s=st.sampled_from([15, 60, 90, 3600]),
    max_points=st.integers(min_value=1, max_value=11_000),
)
def test_chunks_hold_every_whole_step_of_the_window_once(start_s, length_s, step_s, max_points):
    start = datetime.fromtimestamp(start_s, tz=UTC)
    end = start + timedelta(seconds=length_s)

    chunks = plan_chunks(start, end, step_s, max_points=max_points)

    whole_steps = list(range(-(-start_s // step_s) * step_s, start_s + length_s - step_s + 1, step_s))
    if not whole_steps:
        assert chunks == []
        return
    assert chunks[0][0] == start
    assert chunks[-1][1] == datetime.fromtimestamp(whole_steps[-1] + step_s, tz=UTC)
    assert all(a[1] == b[0] for a, b in pairwise(chunks))
    planned = []
    for chunk_start, chunk_end in chunks:
        first = -(-int(chunk_start.timestamp()) // step_s) * step_s
        steps = list(range(first, int(chunk_end.timestamp()), step_s))
        assert 1 <= len(steps) <= max_points
        planned += steps
    assert planned == whole_steps
