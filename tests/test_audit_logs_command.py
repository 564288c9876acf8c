"""``manage.py audit_logs``: the recommendation rules on files, as an admin runs them before a job
is in the portal (real NCCL output from tests/fixtures/recommendations; sources in its README)."""

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

CORPUS = Path(__file__).resolve().parent / "fixtures" / "recommendations"


def _run(*args) -> list[dict]:
    from io import StringIO

    out = StringIO()
    call_command("audit_logs", *[str(a) for a in args], stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_one_json_object_per_finding_with_the_documented_keys():
    (finding,) = _run(CORPUS / "nccl-952-socket-channels.log", "--rdma", "yes")
    assert set(finding) >= {
        "file",
        "rule",
        "observed",
        "ideal",
        "change",
        "evidence",
        "expected_gain",
        "confidence",
    }
    assert finding["rule"] == "network.nccl-socket-on-rdma"
    assert finding["expected_gain"]["share"] == 0.5
    lines = (CORPUS / "nccl-952-socket-channels.log").read_text().splitlines()
    for row in finding["evidence"]:
        assert lines[row["line"] - 1].endswith(row["text"].strip())


def test_healthy_ib_log_and_nodes_without_rdma_print_nothing():
    assert _run(CORPUS / "nccl-707-ib-gdrdma.log", "--rdma", "yes") == []
    assert _run(CORPUS / "nccl-952-socket-channels.log", "--rdma", "no") == []


def test_env_file_adds_config_findings_and_bad_lines_are_reported(tmp_path, capsys):
    env = tmp_path / "job.env"
    env.write_text("NCCL_ALGO=Tree\nthis is not an assignment\nexport NCCL_P2P_DISABLE=1\n")
    from io import StringIO

    out, err = StringIO(), StringIO()
    call_command(
        "audit_logs", str(CORPUS / "nccl-707-ib-gdrdma.log"), "--env", str(env), stdout=out, stderr=err
    )
    rules = {json.loads(line)["rule"] for line in out.getvalue().splitlines()}
    assert rules == {"network.nccl-debug-overrides", "network.p2p-disabled"}
    assert f"{env}:2: not a KEY=VALUE line, skipped" in err.getvalue()


def test_a_directory_is_one_job(tmp_path):
    job = tmp_path / "job-17"
    job.mkdir()
    shutil.copy(CORPUS / "nccl-952-socket-channels.log", job / "rank-0.log")
    (job / "rank-1.log").write_bytes(b"\xff\xfe binary \x00 junk\n" + b"x" * 3_000_000 + b"\n")
    findings = _run(job, "--rdma", "yes")
    assert [f["rule"] for f in findings] == ["network.nccl-socket-on-rdma"]
    assert findings[0]["file"].endswith("rank-0.log")


def test_unreadable_paths_fail_after_the_readable_ones(tmp_path):
    from io import StringIO

    out = StringIO()
    with pytest.raises(CommandError, match="1 path"):
        call_command(
            "audit_logs",
            str(tmp_path / "missing.log"),
            str(CORPUS / "nccl-952-socket-channels.log"),
            stdout=out,
        )
    assert "network.nccl-socket-on-rdma" in out.getvalue()


def test_text_format():
    from io import StringIO

    out = StringIO()
    call_command(
        "audit_logs", str(CORPUS / "returnn-1469-ib-disabled-p2p-loc.log"), "--format", "text", stdout=out
    )
    assert "network.p2p-disabled" in out.getvalue()
    assert "NCCL_P2P_LEVEL=LOC" in out.getvalue()
