"""Source and actuator configurations: checked on save with the code that runs them, secrets by
reference to the workers' environment, and no secret in a run record or a log line."""

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

import pytest
import requests
from django.db import DataError, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.actuators import actuator_config_validate, actuator_from_config
from efficiency.choices import RunStatus, SourceKind
from efficiency.config_secrets import (
    MASK,
    SecretMissing,
    literal_secret_keys,
    secrets_keep,
    secrets_mask,
    secrets_resolve,
)
from efficiency.models import DataSource
from efficiency.services.sources import (
    SourceConfigError,
    SourceOutsideRoots,
    source_collect,
    source_config_read,
    source_config_validate,
)
from tests.factories import ClusterFactory

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
TOKEN = "Bearer tok-7f3a9c-literal"  # a secret's value: must never be shown
ENV_TOKEN = "Bearer env-51d2e8-from-environment"


# --- the secret-reference helpers -------------------------------------------------------------


def test_an_env_reference_is_resolved_from_the_environment_given():
    config = {"base_url": "http://prom:9090", "auth_header": {"env": "PROM_AUTH"}}
    assert secrets_resolve("prometheus", config, {"PROM_AUTH": ENV_TOKEN})["auth_header"] == ENV_TOKEN
    assert config["auth_header"] == {"env": "PROM_AUTH"}  # the stored config is left alone


def test_a_missing_variable_names_the_variable_and_the_key_never_a_value():
    with pytest.raises(SecretMissing) as caught:
        secrets_resolve("webhook", {"headers": {"Authorization": {"env": "HOOK_AUTH"}}}, {"OTHER": TOKEN})
    assert "'HOOK_AUTH'" in str(caught.value)
    assert "'headers.Authorization'" in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_masking_hides_literal_secrets_and_keeps_references_and_other_keys():
    config = {
        "url": "https://hooks.example.com/x",
        "secret": "hmac-key-1",
        "headers": {"Authorization": {"env": "HOOK_AUTH"}, "X-Team": "gpu"},
    }
    assert secrets_mask("webhook", config) == {
        "url": "https://hooks.example.com/x",
        "secret": MASK,
        "headers": {"Authorization": {"env": "HOOK_AUTH"}, "X-Team": MASK},
    }
    assert literal_secret_keys("webhook", config) == ["secret", "headers.X-Team"]


def test_a_form_sent_back_with_the_mask_keeps_the_stored_secret_and_a_new_value_replaces_it():
    stored = {"base_url": "http://prom:9090", "auth_header": TOKEN}
    shown = secrets_mask("prometheus", stored)
    assert secrets_keep("prometheus", {**shown, "step_s": 30}, stored) == {**stored, "step_s": 30}
    replaced = {**shown, "auth_header": {"env": "PROM_AUTH"}}
    assert secrets_keep("prometheus", replaced, stored) == replaced


# --- sources: refused on save with the key named ---------------------------------------------


@pytest.mark.parametrize(
    ("kind", "config", "named"),
    [
        (SourceKind.PROMETHEUS, {"base_url": "http://prom:9090", "lag_s": "sixty"}, "'lag_s'"),
        (SourceKind.PROMETHEUS, {"base_url": "http://prom:9090", "step": 60}, "'step'"),
        (SourceKind.PROMETHEUS, {"base_url": "ftp://prom"}, "'base_url'"),
        (SourceKind.PROMETHEUS, {"base_url": "http://p", "timeout_s": float("nan")}, "'timeout_s'"),
        (SourceKind.DCGM_SCRAPE, {"urls": [], "x": {"y": [float("inf")]}}, "'x.y[0]'"),
        (
            SourceKind.PROMETHEUS,
            {"base_url": "http://p", "auth_header": {"env": "bad name"}},
            "'auth_header'",
        ),
        (SourceKind.PROMETHEUS, {"base_url": "http://p", "auth_header": MASK}, "'auth_header'"),
        (SourceKind.DCGM_SCRAPE, {"urls": ["http://a:9400/metrics"], "timeout_s": "10"}, "'timeout_s'"),
        (SourceKind.DCGM_SCRAPE, {"urls": [9400]}, "'urls[0]'"),
        (SourceKind.DCGM_SCRAPE, {}, "'urls'"),
        (SourceKind.SLURM, {"timezone": "Mars/Olympus"}, "'timezone'"),
        (SourceKind.SLURM, {"overlap_hours": -1}, "'overlap_hours'"),
        (SourceKind.SLURM, {"command": "sacct -a"}, "'command'"),
        (SourceKind.KUBERNETES, {}, "'path' or 'command'"),
        (SourceKind.LOG_FILES, {"timezone": "UTC"}, "'root'"),
        (SourceKind.LOG_PUSH, {"kernel_logs": "yes"}, "'kernel_logs'"),
        (SourceKind.LOG_PUSH, {"token": {"env": "PUSH"}}, "'token'"),
    ],
)
def test_an_unusable_source_configuration_is_refused_naming_the_key(kind, config, named):
    with pytest.raises(SourceConfigError) as caught:
        source_config_validate(kind=kind, config=config)
    assert named in str(caught.value)


def test_a_scheduler_source_may_name_its_node_list_for_discovery(tmp_path):
    config = {
        "path": str(tmp_path / "sacct.txt"),
        "nodes_path": str(tmp_path / "nodes.txt"),
        "discover_nodes": True,
    }
    source_config_validate(kind=SourceKind.SLURM, config=config)
    source_config_validate(
        kind=SourceKind.KUBERNETES, config={"command": ["kubectl"], "nodes_command": ["k"]}
    )
    with pytest.raises(SourceConfigError, match="'nodes_command'"):
        source_config_validate(kind=SourceKind.SLURM, config={"nodes_command": "scontrol show nodes"})
    with pytest.raises(SourceConfigError, match="outside the source roots"):
        source_config_validate(kind=SourceKind.SLURM, config={"nodes_path": "/etc/shadow"})


def test_a_reference_is_checked_on_save_without_the_variable_and_resolved_at_run_time():
    config = {"base_url": "http://prom:9090", "auth_header": {"env": "PORTAL_TEST_PROM_AUTH"}}
    source_config_validate(kind=SourceKind.PROMETHEUS, config=config)  # not set here: still valid
    settings_ = source_config_read(
        kind=SourceKind.PROMETHEUS, config=config, environ={"PORTAL_TEST_PROM_AUTH": ENV_TOKEN}
    )
    assert settings_.query.auth_header == ENV_TOKEN
    with pytest.raises(SourceConfigError, match="'PORTAL_TEST_PROM_AUTH'") as caught:
        source_config_read(kind=SourceKind.PROMETHEUS, config=config, environ={})
    assert "worker's environment" in str(caught.value)


# --- actuators --------------------------------------------------------------------------------


def test_a_webhook_secret_by_reference_signs_with_the_environment_value():
    config = {"type": "webhook", "url": "https://hooks.example.com/a", "secret": {"env": "HOOK_KEY"}}
    actuator_config_validate(config)
    actuator = actuator_from_config(config, environ={"HOOK_KEY": "k-123"})
    assert actuator.secret == "k-123"
    with pytest.raises(ValueError, match="'HOOK_KEY'"):
        actuator_from_config(config, environ={})


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"type": "webhook", "url": "https://h.example.com", "timeout_s": 0}, "'timeout_s'"),
        ({"type": "webhook", "url": "https://h.example.com", "secret": {"env": ""}}, "'secret'"),
        ({"type": "webhook", "url": "https://h.example.com", "secret": MASK}, "'secret'"),
        ({"type": "command"}, "'argv'"),
        ({"type": "command", "argv": ["true"], "timeout_s": float("inf")}, "'timeout_s'"),
        ({"type": "pager"}, "'pager'"),
    ],
)
def test_an_unusable_actuator_configuration_is_refused_naming_the_key(config, named):
    with pytest.raises(ValueError, match="Invalid") as caught:
        actuator_config_validate(config)
    assert named in str(caught.value)


# --- at run time: resolved, and never shown ------------------------------------------------------


@contextmanager
def _prometheus_stub(status: int = 200) -> Iterator[tuple[str, list[str]]]:
    """A stand-in Prometheus API answering every query with an empty matrix (or ``status``);
    yields its URL and the Authorization headers it received."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization", ""))
            body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}})
            if status != 200:
                body = json.dumps({"status": "error", "errorType": "auth", "error": "unauthorized"})
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _prometheus_source(config: dict) -> DataSource:
    return DataSource.objects.create(
        cluster=ClusterFactory(), kind=SourceKind.PROMETHEUS, name="prom", config=config, watermark=NOW
    )


def test_the_collector_sends_the_environment_value_and_stores_only_the_reference(db, monkeypatch):
    monkeypatch.setenv("PORTAL_TEST_PROM_AUTH", ENV_TOKEN)
    with _prometheus_stub() as (url, seen):
        source = _prometheus_source(
            {"base_url": url, "lag_s": 0, "auth_header": {"env": "PORTAL_TEST_PROM_AUTH"}}
        )
        run = source_collect(source_id=source.pk, now=NOW.replace(minute=10))
    assert run.status == RunStatus.OK, run.message
    assert seen
    assert set(seen) == {ENV_TOKEN}
    source.refresh_from_db()
    assert source.config["auth_header"] == {"env": "PORTAL_TEST_PROM_AUTH"}


def test_an_unset_variable_fails_the_run_naming_it(db, monkeypatch, caplog):
    monkeypatch.delenv("PORTAL_TEST_PROM_AUTH", raising=False)
    source = _prometheus_source(
        {"base_url": "http://127.0.0.1:9", "auth_header": {"env": "PORTAL_TEST_PROM_AUTH"}}
    )
    with caplog.at_level(logging.WARNING), pytest.raises(SourceConfigError):
        source_collect(source_id=source.pk, now=NOW.replace(minute=10))
    source.refresh_from_db()
    assert "'PORTAL_TEST_PROM_AUTH'" in source.last_error
    assert "'PORTAL_TEST_PROM_AUTH'" in caplog.text


@pytest.mark.parametrize("by_reference", [False, True])
def test_a_refused_secret_is_in_no_run_record_and_no_log_line(db, monkeypatch, caplog, by_reference):
    monkeypatch.setenv("PORTAL_TEST_PROM_AUTH", ENV_TOKEN)
    secret = ENV_TOKEN if by_reference else TOKEN
    with _prometheus_stub(status=401) as (url, seen), caplog.at_level(logging.DEBUG):
        source = _prometheus_source(
            {
                "base_url": url,
                "lag_s": 0,
                "auth_header": {"env": "PORTAL_TEST_PROM_AUTH"} if by_reference else TOKEN,
            }
        )
        with pytest.raises(SourceConfigError):
            source_collect(source_id=source.pk, now=NOW.replace(minute=10))
    assert seen
    assert set(seen) == {secret}  # it was sent…
    run = source.runs.get()
    source.refresh_from_db()
    assert "auth header" in run.message
    for shown in (run.message, json.dumps(run.rejects), source.last_error, caplog.text):
        assert secret not in shown  # …and never shown


# --- the property: what the check accepts is exactly what the collectors can run -----------------

ENV = {"PORTAL_TEST_SECRET": "s3cret"}
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=100_000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            "",
            "x",
            "UTC",
            "Asia/Shanghai",
            "Mars/Olympus",
            "http://127.0.0.1:9/metrics",
            "https://prom.example.com",
            "ftp://x",
            "Bearer abc",
            MASK,
        ]
    ),
    st.just({"env": "PORTAL_TEST_SECRET"}),
    st.just({"env": "bad name"}),
    st.lists(st.sampled_from(["http://127.0.0.1:9/metrics", 3, {"url": "http://127.0.0.1:9/m"}]), max_size=3),
    st.dictionaries(
        st.sampled_from(["util_pct", "power_w", "bogus"]), st.sampled_from(["DCGM_FI_DEV_GPU_UTIL", ""])
    ),
)
KEYS = {
    SourceKind.PROMETHEUS: [
        *("base_url", "auth_header", "timeout_s", "step_s", "max_points", "queries"),
        *("lag_s", "initial_backfill_days", "nonsense"),
    ],
    SourceKind.DCGM_SCRAPE: ["urls", "timeout_s", "nonsense"],
}


VALID = {
    SourceKind.PROMETHEUS: {
        "base_url": "http://127.0.0.1:9",
        "auth_header": {"env": "PORTAL_TEST_SECRET"},
        "step_s": 60,
        "lag_s": 0,
        "initial_backfill_days": 1,
    },
    SourceKind.DCGM_SCRAPE: {"urls": ["http://127.0.0.1:9/metrics"], "timeout_s": 5},
}


URLS = st.builds("http://{}:{}/{}".format, st.sampled_from(["127.0.0.1", "dcgm-01"]), st.integers(1, 65535),
                 st.sampled_from(["", "metrics"]))  # fmt: skip
GOOD = {
    "base_url": URLS,
    "urls": st.lists(URLS | st.fixed_dictionaries({"url": URLS}, optional={"hostname": st.just("gpu-01")})),
    "auth_header": st.text(max_size=20) | st.sampled_from(["Bearer a\nb", {"env": "PORTAL_TEST_SECRET"}]),
    "timeout_s": st.floats(min_value=0.001, max_value=600) | st.integers(1, 600),
    "step_s": st.integers(1, 3600),
    "max_points": st.integers(1, 11_000),
    "lag_s": st.integers(0, 86_400),
    "initial_backfill_days": st.integers(1, 3_650),
    "queries": st.dictionaries(
        st.sampled_from(["util_pct", "power_w"]), st.just("DCGM_FI_DEV_GPU_UTIL"), min_size=1
    ),
}


@st.composite
def configs(draw, kind):
    """A runnable configuration with up to two keys dropped and up to two set to any value."""
    config = dict(VALID[kind])
    if draw(st.booleans()):
        config.pop(draw(st.sampled_from(sorted(config))))
    for key in draw(st.lists(st.sampled_from(KEYS[kind]), max_size=2, unique=True)):
        config[key] = draw(GOOD[key] | VALUES if key in GOOD else VALUES)
    return config


def _unreachable(*args, **kwargs):
    raise requests.ConnectionError("no network in this test")


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.parametrize("kind", [SourceKind.PROMETHEUS, SourceKind.DCGM_SCRAPE])
def test_the_check_on_save_accepts_exactly_what_the_collector_runs_with(db, monkeypatch, kind, data):
    config = data.draw(configs(kind))
    monkeypatch.setenv("PORTAL_TEST_SECRET", ENV["PORTAL_TEST_SECRET"])

    def valid(config) -> bool:
        try:
            source_config_validate(kind=kind, config=config)
        except SourceConfigError:
            return False
        return True

    # The collector itself, against a network that never answers: it fails, but only with a
    # configuration error when the check refused the configuration it runs with.
    DataSource.objects.all().delete()
    try:
        with transaction.atomic():
            source = DataSource.objects.create(cluster=ClusterFactory(), kind=kind, name="s", config=config)
    except DataError:  # a NUL character: PostgreSQL cannot store it, and the check must say so
        assert not valid(config), config
        return
    # What the database gives back is what runs: jsonb turns 1e16 into the integer 10**16.
    source.refresh_from_db()
    valid = valid(source.config)
    # Patched where requests hands a prepared request to the network: headers are checked before.
    with mock.patch("requests.adapters.HTTPAdapter.send", _unreachable):
        try:
            source_collect(source_id=source.pk, now=NOW)
            config_error = False
        except SourceConfigError:
            config_error = True
        except Exception:  # the source is down: not a configuration error
            config_error = False
    assert valid is not config_error, (config, source.runs.get().message)


ANY_KIND_KEYS = [
    *("path", "command", "root", "timezone", "overlap_hours", "kernel_logs", "urls", "auth_header"),
    *("nodes_path", "nodes_command", "discover_nodes"),
]


@given(
    kind=st.sampled_from(list(SourceKind)),
    config=st.dictionaries(
        st.sampled_from(ANY_KIND_KEYS),
        VALUES | st.sampled_from(["/tmp/sacct.txt", "/etc/shadow", ["sacct", "-a"], "Asia/Shanghai"]),
        max_size=3,
    ),
)
def test_for_every_kind_the_check_on_save_agrees_with_the_run_time_reader(kind, config):
    """Checked without the variables (placeholders) or read with them set: the same verdict,
    except that the check also refuses a node list outside the roots (a run rejects only it)."""
    outcomes = []
    for check in (
        lambda: source_config_validate(kind=kind, config=config),
        lambda: source_config_read(kind=kind, config=config, environ=ENV),
    ):
        try:
            check()
            outcomes.append("ok")
        except SourceOutsideRoots as error:
            outcomes.append("node list outside" if error.path == config.get("nodes_path") else "refused")
        except SourceConfigError:
            outcomes.append("refused")
    assert outcomes[0] == outcomes[1] or outcomes == ["node list outside", "ok"], config


@pytest.mark.parametrize(
    "config",
    [
        {"base_url": "http://prometheus:9090/\x00"},
        {"base_url": "http://prometheus:9090", "labels": {"host\x00name": "Hostname"}},
        {"base_url": "http://prometheus:9090", "auth_header": "Bearer \x00"},
    ],
)
def test_a_nul_character_anywhere_is_refused_on_save_naming_the_key(config):
    # PostgreSQL's jsonb cannot store \u0000: the admin's save failed with a server error.
    with pytest.raises(SourceConfigError, match="NUL character"):
        source_config_validate(kind=SourceKind.PROMETHEUS, config=config)


def test_an_unknown_prometheus_key_is_named_with_every_key_the_portal_reads():
    with pytest.raises(SourceConfigError) as refused:
        source_config_validate(kind=SourceKind.PROMETHEUS, config={"base_url": "http://p:9090", "lagg_s": 0})
    message = str(refused.value)
    assert "unknown key(s) 'lagg_s'" in message
    assert "lag_s" in message.split("allowed:")[1]
    assert "initial_backfill_days" in message
    assert not message.endswith(".")  # the form and the run quote it inside a sentence of their own
