"""Property tests run a few examples locally and many more in CI (HYPOTHESIS_PROFILE=ci)."""

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent


def test_the_profile_named_in_the_environment_is_in_force():
    assert (
        settings.default.max_examples
        == settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev")).max_examples
    )


def test_ci_runs_many_more_examples_than_dev_and_prints_how_to_reproduce_a_failure():
    dev, ci = settings.get_profile("dev"), settings.get_profile("ci")
    assert ci.max_examples >= 10 * dev.max_examples
    assert (ci.print_blob, ci.derandomize) == (True, False)
    assert (dev.deadline, ci.deadline) == (None, None)


def test_ci_selects_the_thorough_profile(tmp_path):
    assert "export HYPOTHESIS_PROFILE=ci" in (ROOT / ".ci" / "run").read_text()
    script = (
        "import django; django.setup(); import tests.conftest; from hypothesis import settings;"
        "print(settings.default.max_examples)"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "PORTAL_VAR_DIR": str(tmp_path),
        "HYPOTHESIS_PROFILE": "ci",
    }
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == settings.get_profile("ci").max_examples
