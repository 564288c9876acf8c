"""The command actuator running real programs: small Python scripts written to a temporary folder."""

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from efficiency.actuators import ActionRequest, Actuator, CommandActuator, actuator_from_config
from efficiency.actuators.command import (
    KUBECTL_CORDON,
    KUBECTL_UNCORDON,
    SLURM_DRAIN,
    SLURM_REQUEUE,
    SLURM_RESUME,
)

PYTHON = sys.executable

# Records its arguments (and one environment variable) as JSON to the file named by $RECORD_TO.
RECORDER = """
import json, os, sys
with open(os.environ["RECORD_TO"], "w") as out:
    site = os.environ.get("SITE_NAME")
    json.dump({"argv": sys.argv[1:], "site": site, "has_path": "PATH" in os.environ}, out)
print("recorded", len(sys.argv) - 1, "arguments")
"""

FAILING = """
import sys
print("half done")
print("scontrol: error: Invalid node name specified", file=sys.stderr)
sys.exit(3)
"""

SLEEPER = """
import time
print("starting", flush=True)
time.sleep(30)
"""

# Starts a grandchild that would outlive a kill of its parent alone, and records the grandchild's pid.
SPAWNER = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
with open(os.environ["RECORD_TO"], "w") as out:
    out.write(str(child.pid))
time.sleep(30)
"""


def make_request(**overrides) -> ActionRequest:
    fields = {
        "kind": "isolate_node",
        "incident_id": 42,
        "node": "gpu-a01",
        "gpu": 3,
        "job_id": "81234",
        "category": "xid",
        "reason": "Xid 79: GPU has fallen off the bus",
        "extra": {"cluster": "hpc-a", "checkpoint": "/ckpt/run7/step-12000"},
    }
    return ActionRequest(**{**fields, **overrides})


@pytest.fixture
def record_to(tmp_path) -> Path:
    return tmp_path / "recorded.json"


def script(tmp_path: Path, source: str, name: str = "recorder.py") -> str:
    path = tmp_path / name
    path.write_text(source)
    return str(path)


def recorder(tmp_path: Path, record_to: Path, *args: str, **kwargs) -> CommandActuator:
    env = {"RECORD_TO": str(record_to), **kwargs.pop("env", {})}
    return CommandActuator([PYTHON, script(tmp_path, RECORDER), *args], env=env, **kwargs)


def recorded_argv(record_to: Path) -> list[str]:
    return json.loads(record_to.read_text())["argv"]


# --- one value, one argument -----------------------------------------------------------------------------


def test_hostile_reason_arrives_as_one_literal_argument_and_runs_nothing_else(tmp_path, record_to):
    pwned = [tmp_path / f"pwned-{i}" for i in range(4)]
    reason = (
        f'"; touch {pwned[0]} #'
        f" $(touch {pwned[1]}) `touch {pwned[2]}` && touch {pwned[3]}"
        " \"; rm -rf / # $(reboot) | ' \\ * ~ ${HOME}"
    )
    actuator = recorder(tmp_path, record_to, "NodeName={node}", "Reason={reason}", "{reason}")

    result = actuator.run(make_request(reason=reason), dry_run=False)

    assert result.ok, result.summary
    assert result.exit_code == 0
    assert recorded_argv(record_to) == ["NodeName=gpu-a01", f"Reason={reason}", reason]
    assert [path for path in pwned if path.exists()] == []


def test_hostile_reason_in_a_string_template_is_still_one_argument(tmp_path, record_to):
    reason = "$(reboot); rm -rf / #"
    template = f"{shlex.quote(PYTHON)} {shlex.quote(script(tmp_path, RECORDER))} Reason={{reason}} {{reason}}"
    actuator = CommandActuator.from_template(template, env={"RECORD_TO": str(record_to)})

    actuator.run(make_request(reason=reason), dry_run=False)

    assert recorded_argv(record_to) == [f"Reason={reason}", reason]


def test_string_template_is_split_with_shell_quoting_before_substitution(tmp_path, record_to):
    template = (
        f"{shlex.quote(PYTHON)} {shlex.quote(script(tmp_path, RECORDER))} "
        'update NodeName={node} State=DRAIN Reason="{reason}" \'two words\' "{extra[cluster]} {gpu}"'
    )
    actuator = actuator_from_config(
        {"type": "command", "template": template, "env": {"RECORD_TO": str(record_to)}}
    )

    actuator.run(make_request(reason='GPU "fell off" the bus'), dry_run=False)

    assert recorded_argv(record_to) == [
        "update",
        "NodeName=gpu-a01",
        "State=DRAIN",
        'Reason=GPU "fell off" the bus',
        "two words",
        "hpc-a 3",
    ]


def test_every_placeholder_is_substituted_inside_its_argument(tmp_path, record_to):
    actuator = recorder(
        tmp_path,
        record_to,
        "{kind}",
        "incident-{incident_id}",
        "{node}:{gpu}",
        "--job={job_id}",
        "{category}",
        "--checkpoint={extra[checkpoint]}",
        "{{literal}}",
    )

    actuator.run(make_request(kind="restart_job"), dry_run=False)

    assert recorded_argv(record_to) == [
        "restart_job",
        "incident-42",
        "gpu-a01:3",
        "--job=81234",
        "xid",
        "--checkpoint=/ckpt/run7/step-12000",
        "{literal}",
    ]


def test_env_is_laid_over_the_portal_environment(tmp_path, record_to):
    recorder(tmp_path, record_to, env={"SITE_NAME": "hpc-a"}).run(make_request(), dry_run=False)

    recorded = json.loads(record_to.read_text())
    assert recorded["site"] == "hpc-a"
    assert recorded["has_path"]


def test_success_is_ok_with_stdout_in_the_detail(tmp_path, record_to):
    result = recorder(tmp_path, record_to, "{node}").run(make_request(), dry_run=False)

    assert result.ok
    assert not result.dry_run
    assert result.exit_code == 0
    assert result.detail == "recorded 1 arguments"
    assert result.summary.startswith("Ran ")
    assert result.summary.endswith("gpu-a01: exit code 0.")


# --- failures come back as results -----------------------------------------------------------------------


def test_nonzero_exit_is_not_ok_with_exit_code_and_stderr(tmp_path):
    actuator = CommandActuator([PYTHON, script(tmp_path, FAILING), "{node}"])

    result = actuator.run(make_request(), dry_run=False)

    assert not result.ok
    assert result.exit_code == 3
    assert "failed with exit code 3: scontrol: error: Invalid node name specified" in result.summary
    assert "half done" in result.detail
    assert "scontrol: error: Invalid node name specified" in result.detail


def test_command_over_its_timeout_is_killed_and_reported_as_timed_out(tmp_path):
    actuator = CommandActuator([PYTHON, script(tmp_path, SLEEPER)], timeout_s=0.5)

    started = time.monotonic()
    result = actuator.run(make_request(), dry_run=False)

    assert time.monotonic() - started < 5
    assert not result.ok
    assert result.exit_code is None
    assert "timed out after 0.5 s" in result.summary
    assert result.detail == "starting"


def test_timeout_also_kills_what_the_command_started(tmp_path, record_to):
    actuator = CommandActuator(
        [PYTHON, script(tmp_path, SPAWNER)], timeout_s=2, env={"RECORD_TO": str(record_to)}
    )

    result = actuator.run(make_request(), dry_run=False)

    assert "timed out" in result.summary
    grandchild = int(record_to.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie waiting for a parent that does not reap it counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_missing_program_is_not_ok_instead_of_raising(tmp_path):
    result = CommandActuator([str(tmp_path / "no-such-scontrol"), "{node}"]).run(
        make_request(), dry_run=False
    )

    assert not result.ok
    assert "not found" in result.summary
    assert result.exit_code is None


# --- refused values: nothing runs ------------------------------------------------------------------------


@pytest.mark.parametrize("node", ["gpu-1; reboot", "gpu-1 gpu-2", "$(reboot)", "gpu-1`id`", "--all", "-l"])
def test_node_that_is_not_a_plain_name_is_refused_without_running(tmp_path, record_to, node):
    result = recorder(tmp_path, record_to, "{node}").run(make_request(node=node), dry_run=False)

    assert not result.ok
    assert "not a plain name" in result.summary
    assert not record_to.exists()


@pytest.mark.parametrize("node", ["gpu-a01", "gpu-a01.cluster.local", "node/7", "ib:0", "svc@host", "n_1"])
def test_plain_node_names_are_accepted(tmp_path, record_to, node):
    result = recorder(tmp_path, record_to, "{node}").run(make_request(node=node), dry_run=False)

    assert result.ok, result.summary
    assert recorded_argv(record_to) == [node]


def test_job_id_that_is_not_a_plain_name_is_refused_without_running(tmp_path, record_to):
    result = recorder(tmp_path, record_to, "{job_id}").run(make_request(job_id="81234 --all"), dry_run=False)

    assert not result.ok
    assert "job id '81234 --all' is not a plain name" in result.summary
    assert not record_to.exists()


@pytest.mark.parametrize("bad", ["line\nbreak", "carriage\rreturn", "nul\0byte"])
def test_value_with_a_line_break_or_nul_is_refused_without_running(tmp_path, record_to, bad):
    actuator = recorder(tmp_path, record_to, "{reason}", "{extra[cluster]}")

    for request in (make_request(reason=bad), make_request(extra={"cluster": bad})):
        result = actuator.run(request, dry_run=False)
        assert not result.ok
        assert "contains a NUL or line break" in result.summary
    assert not record_to.exists()


@pytest.mark.parametrize(
    ("overrides", "placeholder"),
    [
        ({"node": None}, "{node}"),
        ({"gpu": None}, "{gpu}"),
        ({"job_id": None}, "{job_id}"),
        ({"reason": ""}, "{reason}"),
        ({"extra": {}}, "{extra[cluster]}"),
    ],
)
def test_missing_value_for_a_used_placeholder_is_not_ok_without_running(
    tmp_path, record_to, overrides, placeholder
):
    actuator = recorder(tmp_path, record_to, placeholder)

    result = actuator.run(make_request(**overrides), dry_run=False)

    assert not result.ok
    assert "the request has no" in result.summary
    assert placeholder in result.summary
    assert not record_to.exists()


def test_missing_value_for_an_unused_placeholder_does_not_matter(tmp_path, record_to):
    result = recorder(tmp_path, record_to, "{job_id}").run(make_request(node=None, gpu=None), dry_run=False)

    assert result.ok


# --- dry run ---------------------------------------------------------------------------------------------


def test_dry_run_shows_the_shell_quoted_argv_and_runs_nothing(tmp_path, record_to):
    actuator = recorder(tmp_path, record_to, "NodeName={node}", "Reason={reason}")

    result = actuator.run(make_request(reason="Xid 79; $(reboot)"), dry_run=True)

    expected = [*actuator.argv[:2], "NodeName=gpu-a01", "Reason=Xid 79; $(reboot)"]
    assert result.ok
    assert result.dry_run
    assert result.summary == f"Would run: {shlex.join(expected)}"
    assert result.exit_code is None
    assert not record_to.exists()


def test_dry_run_still_refuses_values_it_would_not_run_with(tmp_path, record_to):
    result = recorder(tmp_path, record_to, "{node}").run(make_request(node="gpu-1; reboot"), dry_run=True)

    assert not result.ok
    assert result.dry_run
    assert "not a plain name" in result.summary


# --- ready-made templates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (
            SLURM_DRAIN,
            [
                "scontrol",
                "update",
                "NodeName=gpu-a01",
                "State=DRAIN",
                "Reason=Xid 79: GPU has fallen off the bus",
            ],
        ),
        (SLURM_RESUME, ["scontrol", "update", "NodeName=gpu-a01", "State=RESUME"]),
        (SLURM_REQUEUE, ["scontrol", "requeue", "81234"]),
        (KUBECTL_CORDON, ["kubectl", "cordon", "gpu-a01"]),
        (KUBECTL_UNCORDON, ["kubectl", "uncordon", "gpu-a01"]),
    ],
)
def test_ready_made_templates_render_the_expected_argv(template, expected):
    actuator = CommandActuator(template)

    assert actuator.argv_for(make_request()) == expected
    assert actuator.run(make_request(), dry_run=True).summary == f"Would run: {shlex.join(expected)}"


def test_slurm_drain_needs_a_node():
    result = CommandActuator(SLURM_DRAIN).run(make_request(node=None), dry_run=True)

    assert not result.ok
    assert "the request has no node for {node}" in result.summary


# --- configuration ---------------------------------------------------------------------------------------


def test_config_builds_a_command_actuator_with_its_settings():
    actuator = actuator_from_config(
        {
            "type": "command",
            "argv": list(SLURM_DRAIN),
            "timeout_s": 20,
            "env": {"SLURM_CONF": "/etc/slurm/slurm.conf"},
            "name": "slurm-drain",
        }
    )

    assert isinstance(actuator, CommandActuator)
    assert isinstance(actuator, Actuator)
    assert actuator.argv == SLURM_DRAIN
    assert (actuator.timeout_s, actuator.env, actuator.name) == (
        20.0,
        {"SLURM_CONF": "/etc/slurm/slurm.conf"},
        "slurm-drain",
    )
    assert actuator.placeholders == {"node", "reason"}


def test_unknown_placeholder_is_refused_at_config_time():
    with pytest.raises(ValueError, match=r"unknown placeholder \{hostname\} in 'NodeName=\{hostname\}'"):
        actuator_from_config({"type": "command", "argv": ["scontrol", "update", "NodeName={hostname}"]})


def test_unknown_placeholder_in_a_string_template_is_refused_at_config_time():
    with pytest.raises(ValueError, match=r"unknown placeholder \{host\}"):
        actuator_from_config({"type": "command", "template": "kubectl cordon {host}"})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"type": "command"}, "exactly one of 'argv' and 'template'"),
        ({"type": "command", "argv": ["a"], "template": "a"}, "exactly one of 'argv' and 'template'"),
        ({"type": "command", "argv": []}, "non-empty list"),
        ({"type": "command", "argv": "scontrol requeue {job_id}"}, "use 'template'"),
        ({"type": "command", "argv": ["scontrol", 7]}, "must be a string"),
        ({"type": "command", "argv": ["{node}", "x"]}, "without placeholders"),
        ({"type": "command", "argv": ["echo", "{node!r}"]}, "no !conversion or :format"),
        ({"type": "command", "argv": ["echo", "{gpu:02d}"]}, "no !conversion or :format"),
        ({"type": "command", "argv": ["echo", "{node.upper}"]}, "unknown placeholder"),
        ({"type": "command", "argv": ["echo", "{extra}"]}, "unknown placeholder {extra}"),
        ({"type": "command", "argv": ["echo", "{}"]}, "unknown placeholder {}"),
        ({"type": "command", "argv": ["echo", "{node"]}, "unbalanced braces"),
        ({"type": "command", "argv": ["echo", "a\0b"]}, "NUL"),
        ({"type": "command", "template": ""}, "'template' is empty"),
        ({"type": "command", "template": "echo 'unclosed"}, "cannot split 'template'"),
        ({"type": "command", "template": ["echo"]}, "'template' must be a string"),
        ({"type": "command", "argv": ["echo"], "timeout_s": 0}, "'timeout_s'"),
        ({"type": "command", "argv": ["echo"], "timeout_s": 3600}, "'timeout_s'"),
        ({"type": "command", "argv": ["echo"], "env": {"A": 1}}, "'env'"),
        ({"type": "command", "argv": ["echo"], "env": {"A=B": "c"}}, "'env' names"),
        ({"type": "command", "argv": ["echo"], "shell": True}, "unknown key(s) 'shell'"),
    ],
)
def test_invalid_config_is_refused_with_a_clear_message(config, message):
    with pytest.raises(ValueError, match="Invalid command actuator config") as excinfo:
        actuator_from_config(config)

    assert message in str(excinfo.value)
