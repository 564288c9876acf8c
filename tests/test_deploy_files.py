"""The deployment files in deploy/ lint in CI, where no container engine or systemd runs.

* systemd units: ``systemd-analyze verify`` (CI installs systemd), and the keys graceful shutdown
  and restarts depend on;
* compose.yaml: ``docker compose config`` where Docker's compose plugin exists, else the Compose
  Specification's JSON schema (vendored in deploy/schema/), plus a health check on every process;
* the Dockerfile: hadolint (a wheel in requirements-dev.txt) and the rules of our image;
* every queue a portal task is routed to has a worker unit and a compose service consuming it.

Each check is also run on a broken copy, to prove it fails when a file is broken.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from celery.app.routes import Router, prepare
from django.conf import settings

from portal.celery import app

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
UNITS = DEPLOY / "systemd"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
QUEUES = ("collection", "analysis", "actions")
# Each template unit is verified as the instances a host runs.
UNIT_NAMES = [
    "portal-web.service",
    *(f"portal-worker@{queue}.service" for queue in QUEUES),
    "portal-beat.service",
    "portal-migrate.service",
    "portal.target",
    "portal-healthcheck@web.service",
    "portal-healthcheck@web.timer",
]
# The units run the code installed in /opt/portal, which is not there on a CI machine.
_NOT_INSTALLED = re.compile(r"Command /opt/portal/\S+ is not executable: No such file or directory")
in_ci = bool(os.environ.get("CI"))


# --- systemd ---------------------------------------------------------------------------------
def unit_parse(text: str) -> dict[str, list[tuple[str, str]]]:
    """A unit file's sections as (key, value) pairs in order (keys may repeat, e.g. Environment=)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    section = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = sections.setdefault(line[1:-1], [])
        elif "=" in line and section is not None:
            key, value = line.split("=", 1)
            section.append((key.strip(), value.strip()))
        else:
            raise ValueError(f"line {number}: {raw!r} is neither a [Section] nor Key=value")
    return sections


def unit_problems(name: str, text: str) -> list[str]:
    """What a portal unit lacks that its deployment relies on (the README's promises)."""
    try:
        sections = unit_parse(text)
    except ValueError as error:
        return [str(error)]
    values = {section: dict(pairs) for section, pairs in sections.items()}
    problems = [] if values.get("Unit", {}).get("Description") else ["no [Unit] Description="]
    service = values.get("Service")
    if name.endswith(".service"):
        if service is None:
            return [*problems, "no [Service] section"]
        if not service.get("ExecStart", "").startswith("/"):
            problems.append("ExecStart= is not an absolute path")
        if service.get("User", "root") in {"root", "0"}:
            problems.append("runs as root (User=)")
        if "EnvironmentFile" not in service:
            problems.append("reads no EnvironmentFile=")
    if service is not None and service.get("Type") != "oneshot" and not name.startswith("portal-healthcheck"):
        # Long-running processes: warm shutdown on SIGTERM, a bounded wait, restart after a crash.
        if service.get("KillSignal") != "SIGTERM":
            problems.append("KillSignal= is not SIGTERM (warm shutdown)")
        if not service.get("TimeoutStopSec"):
            problems.append("no TimeoutStopSec= (how long shutdown may take)")
        if service.get("Restart") not in {"on-failure", "always"}:
            problems.append("no Restart=on-failure")
        if "Install" not in values:
            problems.append("no [Install] section (cannot be enabled)")
    if name.startswith("portal-worker@") and service is not None:
        if service.get("KillMode") != "mixed":
            problems.append("KillMode= is not mixed: SIGTERM would kill the pool's children mid-task")
        if "--queues %i" not in service.get("ExecStart", ""):
            problems.append("the worker does not consume its instance's queue (--queues %i)")
    return problems


def systemd_verify(unit_dir: Path, names: list[str]) -> list[str]:
    """``systemd-analyze verify``'s complaints about the units (unknown keys included)."""
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *(str(unit_dir / name) for name in names)],
        capture_output=True, text=True, timeout=60, cwd=unit_dir,
    )  # fmt: skip
    lines = (done.stdout + done.stderr).splitlines()
    return [line for line in lines if line.strip() and not _NOT_INSTALLED.search(line)]


def test_every_unit_has_what_deployment_relies_on():
    for path in sorted(UNITS.iterdir()):
        assert unit_problems(path.name, path.read_text()) == [], path.name


def test_a_worker_unit_that_would_kill_tasks_on_stop_is_refused():
    text = (UNITS / "portal-worker@.service").read_text()
    broken = text.replace("KillMode=mixed", "KillMode=control-group").replace("KillSignal=SIGTERM", "")
    assert unit_problems("portal-worker@.service", broken) == [
        "KillSignal= is not SIGTERM (warm shutdown)",
        "KillMode= is not mixed: SIGTERM would kill the pool's children mid-task",
    ]


@pytest.mark.skipif(
    not shutil.which("systemd-analyze") and not in_ci, reason="systemd-analyze is not installed here"
)
def test_units_pass_systemd_analyze_verify():
    assert systemd_verify(UNITS, UNIT_NAMES) == []


@pytest.mark.skipif(
    not shutil.which("systemd-analyze") and not in_ci, reason="systemd-analyze is not installed here"
)
def test_systemd_analyze_verify_reports_a_broken_unit(tmp_path):
    for path in UNITS.iterdir():
        shutil.copy(path, tmp_path / path.name)
    web = tmp_path / "portal-web.service"
    web.write_text(web.read_text().replace("TimeoutStopSec=75", "TimeoutStopSecs=75"))
    complaints = systemd_verify(tmp_path, UNIT_NAMES)
    assert any("Unknown key 'TimeoutStopSecs'" in line for line in complaints), complaints


# --- compose ---------------------------------------------------------------------------------
_VARIABLE = re.compile(r"\$(?:\$|\{(\w+)(?:(:?[-?])([^}]*))?\}|(\w+))")
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$")
_HEALTH_DURATIONS = ("interval", "timeout", "start_period", "start_interval")
COMPOSE_ENV = {"POSTGRES_PASSWORD": "ci-only"}


def interpolate(value, env: dict[str, str]):
    """Compose's ${VAR}, ${VAR:-default}, ${VAR:?error} and $$, as the engine applies them."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        operator, argument = match.group(2), match.group(3)
        current = env.get(name)
        if operator in {":?", "?"} and not current:
            raise ValueError(f"{name}: {argument}")
        if operator in {":-", "-"} and not current:
            return argument
        return current or ""

    return _VARIABLE.sub(substitute, value)


def compose_problems(text: str, env: dict[str, str]) -> list[str]:
    """The Compose Specification's complaints about a compose file, then our own."""
    schema = json.loads((DEPLOY / "schema" / "compose-spec.json").read_text())
    document = interpolate(yaml.safe_load(text), env)
    validator = jsonschema.Draft7Validator(schema)
    problems = [f"{error.json_path}: {error.message}" for error in validator.iter_errors(document)]
    if problems:
        return problems
    for name, service in document["services"].items():
        health = service.get("healthcheck", {})
        # The schema says "string"; the engine wants a Go duration ("75s", "1m30s").
        durations = {"stop_grace_period": service.get("stop_grace_period")}
        durations.update({f"healthcheck.{key}": health.get(key) for key in _HEALTH_DURATIONS})
        problems += [
            f"{name}: {key} {value!r} is not a duration"
            for key, value in durations.items()
            if value is not None and not _DURATION.match(str(value))
        ]
        if name != "migrate" and (health.get("disable") or not health.get("test")):
            problems.append(f"{name}: no health check")
        if name not in {"migrate", "db", "redis"} and service.get("stop_signal") != "SIGTERM":
            problems.append(f"{name}: stop_signal is not SIGTERM")
    if document["services"].get("beat", {}).get("deploy", {}).get("replicas") != 1:
        problems.append("beat: deploy.replicas must be 1 (a second beat doubles the schedule)")
    return problems


def test_compose_file_matches_the_compose_specification():
    jsonschema.Draft7Validator.check_schema(json.loads((DEPLOY / "schema" / "compose-spec.json").read_text()))
    assert compose_problems(COMPOSE.read_text(), COMPOSE_ENV) == []


def test_a_broken_compose_file_is_refused():
    text = COMPOSE.read_text()
    misspelled = text.replace("stop_grace_period: 10m", "stop_grace_periode: 10m")
    assert any("stop_grace_periode" in p for p in compose_problems(misspelled, COMPOSE_ENV))
    bad_duration = text.replace("stop_grace_period: 10m", "stop_grace_period: ten minutes")
    assert any("ten minutes" in p for p in compose_problems(bad_duration, COMPOSE_ENV))
    no_check = text.replace(
        'test: ["CMD", "python", "deploy/healthcheck.py", "worker", "analysis"]', "disable: true"
    )
    assert "worker-analysis: no health check" in compose_problems(no_check, COMPOSE_ENV)
    with pytest.raises(ValueError, match="POSTGRES_PASSWORD"):
        compose_problems(text, {})


def _compose_plugin() -> bool:
    if not shutil.which("docker"):
        return False
    done = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
    return done.returncode == 0


@pytest.mark.skipif(not _compose_plugin(), reason="Docker's compose plugin is not installed here")
def test_docker_compose_accepts_the_file():
    done = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True, text=True, timeout=60, env={**os.environ, **COMPOSE_ENV},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


# --- Dockerfile ------------------------------------------------------------------------------
def hadolint_problems(path: Path) -> list[str]:
    binary = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    done = subprocess.run([binary, "--no-color", str(path)], capture_output=True, text=True, timeout=60)
    return (done.stdout + done.stderr).splitlines() if done.returncode else []


def dockerfile_problems(text: str) -> list[str]:
    """Our image's rules: a pinned base, a non-root user, a health check, nothing fetched by ADD."""
    instructions = [
        line.strip().split(None, 1)
        for line in re.sub(r"\\\n", " ", text).splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    args = {}
    for instruction, rest in instructions:
        if instruction.upper() == "ARG" and "=" in rest:
            name, default = rest.split("=", 1)
            args[name] = default
    problems = []
    for instruction, rest in instructions:
        if instruction.upper() == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), rest.split()[0])
            if "@sha256:" not in image and not re.search(r":\d+\.\d+\.\d+", image):
                problems.append(f"base image {image!r} is not pinned to a patch release or digest")
        if instruction.upper() == "ADD" and re.search(r"\b(https?|git)://", rest):
            problems.append(f"ADD fetches from the network: {rest}")
    users = [rest.split(":")[0] for instruction, rest in instructions if instruction.upper() == "USER"]
    if not users or users[-1] in {"root", "0"}:
        problems.append("the image runs as root (no USER, or USER root last)")
    if not any(instruction.upper() == "HEALTHCHECK" for instruction, _ in instructions):
        problems.append("no HEALTHCHECK")
    return problems


@pytest.mark.skipif(
    not (shutil.which("hadolint") or (Path(sys.executable).parent / "hadolint").exists()) and not in_ci,
    reason="hadolint is not installed here (pip install -r requirements-dev.txt)",
)
def test_dockerfile_passes_hadolint_and_our_rules(tmp_path):
    assert hadolint_problems(DOCKERFILE) == []
    assert dockerfile_problems(DOCKERFILE.read_text()) == []

    broken = tmp_path / "Dockerfile"
    broken.write_text(
        DOCKERFILE.read_text()
        .replace("USER 10001:10001", "USER root")
        .replace("--no-install-recommends gettext", "gettext")
    )
    complaints = hadolint_problems(broken)
    assert any("DL3002" in line for line in complaints), complaints  # last USER is root
    assert any("DL3015" in line for line in complaints), complaints  # recommended packages too


def test_a_dockerfile_against_our_rules_is_refused():
    broken = (
        DOCKERFILE.read_text()
        .replace("python:3.11.14-slim-bookworm", "python:3.11-slim")
        .replace("USER 10001:10001", "")
        .replace("COPY requirements.txt", "ADD https://example.com/requirements.txt")
    )
    unpinned = "base image 'python:3.11-slim' is not pinned to a patch release or digest"
    assert dockerfile_problems(broken) == [
        unpinned,
        "ADD fetches from the network: https://example.com/requirements.txt /tmp/requirements.txt",
        unpinned,
        "the image runs as root (no USER, or USER root last)",
    ]
    no_check = re.sub(r"HEALTHCHECK .*?\n(\s+CMD .*\n)?", "", DOCKERFILE.read_text())
    assert dockerfile_problems(no_check) == ["no HEALTHCHECK"]


# --- queues ----------------------------------------------------------------------------------
def routed_queues(routes) -> dict[str, str]:
    """The queue Celery sends each portal task to under ``routes`` (CELERY_TASK_ROUTES)."""
    app.loader.import_default_modules()
    router = Router(prepare(routes), app.amqp.queues, True, app=app)
    return {
        name: router.route({}, name)["queue"].name
        for name in sorted(app.tasks)
        if name.startswith("efficiency.")
    }


def consumed_queues() -> dict[str, set[str]]:
    """The queues each deployment's workers consume: systemd (portal.target's instances), compose."""
    target = dict(unit_parse((UNITS / "portal.target").read_text())["Unit"])
    systemd = set(re.findall(r"portal-worker@([\w-]+)\.service", target["Wants"]))
    compose = set()
    for service in yaml.safe_load(COMPOSE.read_text())["services"].values():
        command = service.get("command", [])
        command = shlex.split(command) if isinstance(command, str) else command
        if "worker" in command and "--queues" in command:
            compose.update(command[command.index("--queues") + 1].split(","))
    return {"systemd": systemd, "compose": compose}


def unconsumed(routes) -> dict[str, list[str]]:
    queues = set(routed_queues(routes).values())
    return {where: sorted(queues - consumed) for where, consumed in consumed_queues().items()}


def test_workers_consume_the_three_queues():
    assert consumed_queues() == {"systemd": set(QUEUES), "compose": set(QUEUES)}


@pytest.mark.skipif(
    not getattr(settings, "CELERY_TASK_ROUTES", None),
    reason="CELERY_TASK_ROUTES is not in portal/settings.py yet: every task goes to one queue",
)
def test_every_routed_queue_has_a_worker_in_each_deployment():
    # The routes as the Celery app has them (CELERY_TASK_ROUTES), unrouted tasks to the default queue.
    assert unconsumed(app.conf.task_routes) == {"systemd": [], "compose": []}


def test_a_task_routed_to_a_queue_without_worker_is_found():
    routes = {"efficiency.tasks.ping_task": {"queue": "nobody-reads-this"}}
    # The other tasks go to the default queue, which no worker reads unless it is one of the three.
    missing = sorted({"nobody-reads-this", app.conf.task_default_queue} - set(QUEUES))
    assert unconsumed(routes) == {"systemd": missing, "compose": missing}
