"""Our Slurm support against a real Slurm: slurmctld + slurmd + slurmdbd (accounting in MariaDB).

``scripts/slurm-local.sh start`` runs a one-machine cluster with 8 GPUs declared as GRES
(placeholder device files). CI starts it before the tests (``PORTAL_REQUIRE_SLURM=1``: a missing
Slurm fails); elsewhere these tests start it themselves when the Slurm packages are installed, and
are skipped when they are not. All of them share the one node, so they live in one module, which
``--dist loadfile`` keeps on one worker, and each leaves the node as it found it.
"""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from django.test import Client

from efficiency.actuators import ActionRequest
from efficiency.actuators.command import SLURM_DRAIN, SLURM_REQUEUE, SLURM_RESUME, CommandActuator
from efficiency.analysis.scheduler_config import QueueQuota, QuotaPlan, slurm_qos_commands
from efficiency.choices import JobState, MappingKind, SourceKind
from efficiency.models import DataSource, DepartmentMapping, Job
from efficiency.services.sources import source_collect
from tests.factories import ClusterFactory, DepartmentFactory, NodeFactory

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "slurm-local.sh"
HOST = socket.gethostname().split(".")[0]
H100 = "NVIDIA H100 80GB HBM3"


def _slurm_conf() -> str:
    return os.environ.get("SLURM_CONF") or str(
        Path(os.environ.get("PORTAL_SLURM_DIR", ROOT / "var" / "slurm")) / "etc" / "slurm.conf"
    )


def _up(env) -> bool:
    if not Path(env["SLURM_CONF"]).exists():
        return False  # without a slurm.conf, scontrol looks for controllers in DNS and hangs
    try:
        return subprocess.run(["scontrol", "ping"], env=env, capture_output=True, timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture(scope="module")
def slurm_env():
    env = {**os.environ, "SLURM_CONF": _slurm_conf()}
    if shutil.which("slurmctld") is None:
        if os.environ.get("PORTAL_REQUIRE_SLURM") == "1":
            pytest.fail("no Slurm installed (apt-get install slurm-wlm slurmdbd munge)")
        pytest.skip("no Slurm installed (apt-get install slurm-wlm slurmdbd munge)")
    if not _up(env):
        started = subprocess.run([str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=180)
        if started.returncode != 0 or not _up(env):
            message = f"could not start the local Slurm: {started.stdout[-2000:]} {started.stderr[-2000:]}"
            if os.environ.get("PORTAL_REQUIRE_SLURM") == "1":
                pytest.fail(message)
            pytest.skip(message)
    # The collector and the actuators run sacct / scontrol with the portal's own environment.
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = env["SLURM_CONF"]
    yield env
    if previous is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = previous


def run(env, *argv, check=True) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, cwd="/tmp")
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed: {done.stderr}")
    return done.stdout.strip()


def sbatch(env, account, gpus, command, *extra, name="") -> str:
    gres = f"--gres=gpu:h100:{gpus}"
    name = name or f"portal-{account}"
    return run(env, "sbatch", "--parsable", "-A", account, gres, "-J", name, *extra, "--wrap", command)


def wait_until(predicate, seconds=90, what="condition"):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def job_field(env, job_id, field):
    text = run(env, "scontrol", "show", "job", job_id, check=False)
    for token in text.split():
        if token.startswith(f"{field}="):
            return token.split("=", 1)[1]
    return ""


def queue_empty(env, *job_ids):
    return not run(env, "squeue", "-h", "-j", ",".join(job_ids), check=False)


@pytest.fixture
def inventory(db):
    cluster = ClusterFactory(slug="portal-slurm")
    vision = DepartmentFactory(code="vision", name="Vehicle vision")
    radar = DepartmentFactory(code="radar", name="Radar perception")
    for department in (vision, radar):
        DepartmentMapping.objects.create(
            kind=MappingKind.SLURM_ACCOUNT, value=department.code, department=department
        )
    NodeFactory(cluster=cluster, hostname=HOST, gpu_model=H100, gpu_count=8, owner_department=vision)
    return cluster, vision, radar


@pytest.mark.django_db(transaction=True)
def test_real_jobs_are_collected_with_department_gpus_state_times_and_nodes(slurm_env, inventory):
    cluster, vision, radar = inventory
    env = slurm_env
    done = sbatch(env, "vision", 6, "sleep 4")  # holds 6 of 8 GPUs
    waits = sbatch(env, "radar", 4, "sleep 1")  # must wait for GPUs
    fails = sbatch(env, "vision", 1, "exit 3", name="eval|ckpt=3|lr 3e-4")  # sacct leaves "|" as is
    cancelled = sbatch(env, "radar", 8, "sleep 300")  # waits behind the others; cancelled
    wait_until(lambda: job_field(env, fails, "JobState") in ("FAILED", ""), what="the failing job")
    run(env, "scancel", cancelled)
    wait_until(lambda: queue_empty(env, done, waits, fails, cancelled), what="all jobs to end")
    # slurmctld hands finished jobs to slurmdbd asynchronously: wait until accounting has them.
    ids = [done, waits, fails, cancelled]

    def accounted():
        rows = run(env, "sacct", "-n", "-P", "-X", "-j", ",".join(ids), "--format=JobID,State", check=False)
        states = dict(line.split("|", 1) for line in rows.splitlines() if "|" in line)
        return all(states.get(i, "PENDING").split()[0] not in ("PENDING", "RUNNING") for i in ids)

    wait_until(accounted, what="slurmdbd to record the jobs")
    source = DataSource.objects.create(cluster=cluster, kind=SourceKind.SLURM, name="slurm",
                                       config={"timezone": "UTC"})  # fmt: skip
    first = source_collect(source_id=source.pk)
    assert first.rejected == 0, first.rejects
    assert first.received >= 4, (first.status, first.message)
    jobs = {job.external_id: job for job in Job.objects.filter(cluster=cluster).prefetch_related("nodes")}
    assert {done, waits, fails, cancelled} <= set(jobs)
    assert (jobs[done].department, jobs[done].gpu_count, jobs[done].state) == (vision, 6, JobState.COMPLETED)
    assert (jobs[waits].department, jobs[waits].gpu_count) == (radar, 4)
    assert jobs[waits].wait_s >= 3  # it queued until the 6-GPU job ended
    assert (jobs[fails].state, jobs[fails].name) == (JobState.FAILED, "eval|ckpt=3|lr 3e-4")
    assert jobs[cancelled].state == JobState.CANCELLED
    assert jobs[cancelled].started_at is None
    assert [node.hostname for node in jobs[done].nodes.all()] == [HOST]
    assert jobs[done].started_at >= jobs[done].submitted_at
    assert jobs[done].ended_at > jobs[done].started_at
    assert jobs[done].gpu_model == "h100"
    # And the portal shows them so.
    from tests.factories import UserFactory

    client = Client()
    client.force_login(UserFactory(username="chair", role="committee"))
    page = client.get(f"/jobs/{jobs[waits].pk}/").content.decode()
    assert "Radar perception" in page
    assert HOST in page
    # The same jobs again: nothing changes.
    source.refresh_from_db()
    second = source_collect(source_id=source.pk)
    assert second.stored == 0
    assert Job.objects.filter(cluster=cluster).count() == len(jobs)


def test_exported_qos_commands_are_accepted_and_enforced(slurm_env, tmp_path):
    env = slurm_env
    plan = QuotaPlan(
        cluster="portal",
        cycle_label="test",
        capacity={H100: 8},
        quotas=[
            QueueQuota(
                department_code="vision",
                gpu_model=H100,
                guaranteed_gpus=2,
                borrowing_limit_gpus=0,
                slurm_accounts=("vision",),
            )
        ],
    )
    script = tmp_path / "qos.sh"
    script.write_text(slurm_qos_commands(plan))
    try:
        applied = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert applied.returncode == 0, applied.stderr
        assert "gres/gpu=2" in run(
            env, "sacctmgr", "-n", "-P", "show", "qos", "quota-vision", "format=grptres"
        )
        time.sleep(2)  # slurmctld picks up the association change
        over = sbatch(env, "vision", 4, "sleep 30")
        inside = sbatch(env, "vision", 2, "sleep 2")
        wait_until(
            lambda: job_field(env, inside, "JobState") in ("RUNNING", "COMPLETED", ""), what="the job inside"
        )
        assert job_field(env, over, "JobState") == "PENDING"
        assert job_field(env, over, "Reason").startswith("QOSGrp"), job_field(env, over, "Reason")
    finally:
        run(env, "scancel", "-A", "vision", check=False)
        run(env, "sacctmgr", "-i", "modify", "account", "where", "name=vision", "set", "qos=normal",
            "defaultqos=normal", check=False)  # fmt: skip
        run(env, "sacctmgr", "-i", "delete", "qos", "quota-vision", check=False)


def test_isolate_drains_the_node_resume_returns_it_and_restart_requeues_a_job(slurm_env):
    env = slurm_env
    request = ActionRequest(kind="isolate_node", incident_id=7, node=HOST, category="hardware_gpu",
                            reason="portal incident 7: xid-79")  # fmt: skip
    try:
        result = CommandActuator(list(SLURM_DRAIN)).run(request, dry_run=False)
        assert result.ok, result.detail
        state, reason = run(env, "sinfo", "-h", "-n", HOST, "-o", "%t|%E").split("|")
        assert state.startswith("drain")
        assert reason == "portal incident 7: xid-79"
    finally:
        resumed = CommandActuator(list(SLURM_RESUME)).run(
            ActionRequest(kind="resume_node", incident_id=7, node=HOST, category="hardware_gpu", reason="ok"),
            dry_run=False,
        )
    assert resumed.ok, resumed.detail
    # Right after a resume sinfo may flag the node "*" (not responding) until slurmctld pings it.
    wait_until(
        lambda: run(env, "sinfo", "-h", "-n", HOST, "-o", "%t") in ("idle", "mix", "alloc"), what="resume"
    )
    job = sbatch(env, "radar", 1, "sleep 120", "--requeue")
    try:
        wait_until(lambda: job_field(env, job, "JobState") == "RUNNING", what="the job to run")
        restart = ActionRequest(kind="restart_job", incident_id=8, job_id=job, category="nccl_timeout_hang",
                                reason="portal incident 8")  # fmt: skip
        result = CommandActuator(list(SLURM_REQUEUE)).run(restart, dry_run=False)
        assert result.ok, result.detail
        wait_until(lambda: job_field(env, job, "Restarts") == "1", what="the requeue")
    finally:
        run(env, "scancel", job, check=False)
