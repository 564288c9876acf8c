"""``manage.py scan_logs``: findings of log files and directories, as JSON lines or text."""

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "tests" / "fixtures" / "logs" / "cluster"
XID_119 = (
    "[Fri Mar  3 04:27:08 2023] NVRM: Xid (PCI:0000:61:00): 119, pid=1346198, name=nvidia-smi, "
    "Timeout waiting for RPC from GSP! Expected function 103 (GSP_RM_ALLOC) (0x80 0x38)."
)


def _run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("scan_logs", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_a_directory_is_walked_in_order_and_each_finding_is_one_json_line():
    out, err = _run(str(CLUSTER), "--format", "json", "--year", "2024")
    assert err == ""
    rows = _json_lines(out)
    summary = [
        (Path(row["file"]).relative_to(CLUSTER).as_posix(), row["line"], row["category"], row["code"])
        for row in rows
    ]
    assert summary == [
        ("665872/rank-0.log", 11, "nccl_timeout_hang", None),
        (
            "665872/rank-0.log",
            13,
            "nccl_timeout_hang",
            None,
        ),  # "Some NCCL operations have failed or timed out"
        ("666852/rank-7.log", 11, "loss_nan_inf", None),
        ("666852/rank-7.log", 12, "loss_nan_inf", None),
        ("667918/rank-0.log", 11, "network_rdma", "ncclRemoteError"),
        ("667918/rank-6.log", 15, "hardware_gpu", None),
        # "NET/Socket : Using" is a fallback only after "NET/IB : No device found" (NCCL prints
        # it in healthy IB runs too): 668239's rank found no IB device first; 669541 did not say.
        ("668239/rank-2.log", 4, "nccl_socket_fallback", None),
        ("668239/rank-2.log", 6, "nccl_socket_fallback", None),
        ("668239/rank-2.log", 18, "cuda_oom", None),
        ("669541/rank-0.log", 8, "nccl_socket_fallback", None),
        ("kern/gpu-039.log", 1, "hardware_gpu", "79"),
    ]
    assert set(rows[0]) == {"file", "line", "category", "code", "severity", "node", "rank", "message"}
    xid = rows[-1]
    assert (xid["severity"], xid["node"], xid["rank"]) == ("critical", "gpu-039", None)
    assert "NVRM: Xid (PCI:0000:ba:00): 79" in xid["message"]
    # The CUDA error names no rank: it comes from the file name.
    assert (rows[5]["rank"], rows[5]["node"]) == (6, None)


def test_a_kernel_line_without_a_host_takes_the_node_from_its_file(tmp_path):
    kern = tmp_path / "kern"
    kern.mkdir()
    (kern / "gpu-node-00042.log").write_text(XID_119 + "\n", encoding="utf-8")
    (row,) = _json_lines(_run(str(tmp_path), "--format", "json")[0])
    assert (row["node"], row["code"], row["category"]) == ("gpu-node-00042", "119", "hardware_gpu")


def test_text_format_is_one_readable_line_per_finding():
    out, _ = _run(str(CLUSTER / "kern"), str(CLUSTER / "667918" / "rank-6.log"), "--year", "2024")
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{CLUSTER / 'kern' / 'gpu-039.log'}:1: critical hardware_gpu 79 [xid-79]")
    assert "(node gpu-039)" in lines[0]
    assert lines[1].startswith(f"{CLUSTER / '667918' / 'rank-6.log'}:15: error hardware_gpu")
    assert "(rank 6): RuntimeError: CUDA error: unspecified launch failure" in lines[1]


def test_an_unreadable_path_is_reported_and_the_rest_still_scanned(tmp_path):
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as raised:
        call_command(
            "scan_logs",
            str(tmp_path / "missing.log"),
            str(CLUSTER / "kern"),
            "--format",
            "json",
            stdout=out,
            stderr=err,
        )
    assert raised.value.returncode == 1
    assert "missing.log: No such file or directory" in err.getvalue()
    assert [row["code"] for row in _json_lines(out.getvalue())] == ["79"]


def _manage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "scan_logs", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_manage_py_prints_findings_and_exits_0():
    result = _manage(str(CLUSTER), "--format", "json", "--year", "2024")
    assert result.returncode == 0, result.stderr
    assert len(_json_lines(result.stdout)) == 11


def test_manage_py_survives_garbage_and_exits_1_only_for_unreadable_paths(tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "binary.bin").write_bytes(os.urandom(200_000))
    (tmp_path / "nul.log").write_bytes(b"\x00" * 1000 + b"\nNVRM: Xid (PCI:0000:18:00): 79, x\x00\xff\n")
    (tmp_path / "latin1.log").write_bytes("Loss = inf \xe9t\xe9\n".encode("latin-1"))
    (tmp_path / "huge.log").write_bytes(b"=" * 5_000_000 + b"CUDA error: out of memory")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "rank-3.log").write_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n", encoding="utf-8"
    )

    result = _manage(str(tmp_path), "--format", "json")
    assert result.returncode == 0, result.stderr
    found = {(Path(row["file"]).name, row["category"], row["rank"]) for row in _json_lines(result.stdout)}
    assert found >= {
        ("nul.log", "hardware_gpu", None),
        ("latin1.log", "loss_nan_inf", None),
        ("huge.log", "cuda_oom", None),
        ("rank-3.log", "cuda_oom", 3),
    }

    result = _manage(str(tmp_path), str(tmp_path / "gone"))
    assert result.returncode == 1
    assert "gone: No such file or directory" in result.stderr
    assert "huge.log:1: error cuda_oom" in result.stdout


def test_root_prints_one_line_per_file_its_most_fundamental_finding():
    out, err = _run(str(CLUSTER), "--format", "json", "--year", "2024", "--root")
    assert err == ""
    roots = {Path(row["file"]).relative_to(CLUSTER).as_posix(): row for row in _json_lines(out)}
    # The OOM job also fell back to sockets: the OOM is its root, the fallback another finding.
    oom = roots["668239/rank-2.log"]
    assert (oom["root"], oom["signature"], oom["line"], oom["findings"]) == ("cuda_oom", "cuda-oom", 18, 3)
    assert oom["other_categories"] == ["nccl_socket_fallback"]
    assert roots["kern/gpu-039.log"]["root"] == "hardware_gpu"
    assert len(roots) == 7  # one per file with findings; the quiet kernel log has none
    text, _ = _run(str(CLUSTER / "668239"), "--year", "2024", "--root")
    assert (
        "rank-2.log:18: root cause cuda_oom [cuda-oom]; 2 more finding(s) in nccl_socket_fallback: " in text
    )
