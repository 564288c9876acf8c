import json
import re
import shlex
import shutil
import subprocess
import sys
from collections import defaultdict

import pytest
import yaml

from efficiency.analysis import scheduler_config
from efficiency.analysis.scheduler_config import (
    QueueQuota,
    QuotaPlan,
    gpu_type,
    kueue_manifests,
    shared_pool,
    slurm_qos_commands,
    volcano_queues,
)

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
CYCLE = "2026-11-30 – 2026-12-14"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
BASH = shutil.which("bash")


def two_model_plan(**changes):
    """32 H100 and 16 A100. Shared pool: 32 - (8 + 12) = 12 H100, 16 - (4 + 6) = 6 A100."""
    quotas = [
        QueueQuota("vision", H100, 8, 4, ("vision-train", "vision-dev"), ("vision-lab",)),
        QueueQuota("vision", A100, 4, None, ("vision-train",), ("vision-lab",)),
        QueueQuota("nlp", H100, 12, None, ("nlp",), ("nlp",)),  # no A100 quota at all
        QueueQuota("数据", A100, 6, 0, ("data",), ("data",)),
    ]
    fields = {"cluster": "gpu-east", "cycle_label": CYCLE, "capacity": {H100: 32, A100: 16}, "quotas": quotas}
    return QuotaPlan(**(fields | changes))


def one_model_plan(**changes):
    quotas = [
        QueueQuota("vision", H100, 8, 4, ("vision",), ("vision",)),
        QueueQuota("nlp", H100, 4, None, ("nlp",), ("nlp",)),
    ]
    fields = {"cluster": "gpu-west", "cycle_label": CYCLE, "capacity": {H100: 16}, "quotas": quotas}
    return QuotaPlan(**(fields | changes))


def documents(text, kind=None):
    docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    return [doc for doc in docs if kind is None or doc["kind"] == kind]


def by_name(docs):
    return {doc["metadata"]["name"]: doc for doc in docs}


def flavor_resources(cluster_queue):
    """{flavor: the nvidia.com/gpu resource entry} of a ClusterQueue."""
    (group,) = cluster_queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu"]
    result = {}
    for flavor in group["flavors"]:
        (resource,) = flavor["resources"]
        assert resource["name"] == "nvidia.com/gpu"
        result[flavor["name"]] = resource
    return result


def script_commands(script):
    """The script's command lines as argv lists; the qos guard line gives its two halves."""
    commands = []
    body = script.split("\n}\n", 1)[1]  # after the qos_exists helper
    for line in body.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        words = shlex.split(line)
        if "||" in words:
            split = words.index("||")
            commands += [words[:split], words[split + 1 :]]
        else:
            commands.append(words)
    return commands


# --- GPU types and the shared pool ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA L40S", "l40s"),
        ("Tesla V100-SXM2-32GB", "v100"),
        ("NVIDIA RTX A6000", "a6000"),
    ],
)
def test_gpu_type_is_the_short_product_name(model, expected):
    assert gpu_type(model) == expected


def test_gpu_type_falls_back_to_a_slug_of_the_whole_name():
    assert gpu_type("NVIDIA GeForce RTX 4090") == "nvidia-geforce-rtx-4090"


def test_shared_pool_is_capacity_minus_everything_guaranteed():
    assert shared_pool(two_model_plan()) == {H100: 12, A100: 6}


def test_shared_pool_refuses_guarantees_beyond_capacity_and_names_the_model():
    plan = two_model_plan(capacity={H100: 16, A100: 16})
    with pytest.raises(ValueError, match=r"NVIDIA H100 80GB HBM3.*20 GPUs guaranteed.*only 16"):
        shared_pool(plan)


def test_a_quota_for_a_model_the_cluster_lacks_is_refused():
    plan = two_model_plan(capacity={H100: 32})
    with pytest.raises(ValueError, match="A100-SXM4-80GB"):
        shared_pool(plan)


# --- Kueue ---------------------------------------------------------------------------------------


def test_kueue_output_has_only_known_kinds_of_the_v1beta1_api():
    docs = documents(kueue_manifests(two_model_plan()))
    assert {doc["apiVersion"] for doc in docs} == {"kueue.x-k8s.io/v1beta1"}
    counts = defaultdict(int)
    for doc in docs:
        counts[doc["kind"]] += 1
    # 2 models; 3 departments + the shared pool; namespaces: vision 2, nlp 1, 数据 1.
    assert counts == {"ResourceFlavor": 2, "ClusterQueue": 4, "LocalQueue": 4}


def test_kueue_has_one_flavor_per_model_pinned_by_the_gpu_product_label():
    flavors = by_name(documents(kueue_manifests(two_model_plan()), "ResourceFlavor"))
    assert flavors["h100"]["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert flavors["a100"]["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def test_kueue_cluster_queues_share_one_cohort_and_nominal_quotas_add_up_to_capacity():
    queues = documents(kueue_manifests(two_model_plan()), "ClusterQueue")
    assert {queue["spec"]["cohort"] for queue in queues} == {"gpu-east-gpu"}
    total = defaultdict(int)
    for queue in queues:
        for flavor, resource in flavor_resources(queue).items():
            assert isinstance(resource["nominalQuota"], int)
            total[flavor] += resource["nominalQuota"]
    assert dict(total) == {"h100": 32, "a100": 16}


def test_kueue_department_guarantee_is_never_lent_and_borrowing_limits_are_kept():
    queues = by_name(documents(kueue_manifests(two_model_plan()), "ClusterQueue"))
    vision = queues["vision"]
    assert vision["spec"]["namespaceSelector"] == {}
    assert vision["spec"]["queueingStrategy"] == "StrictFIFO"
    assert vision["spec"]["preemption"]["reclaimWithinCohort"] == "Never"
    assert flavor_resources(vision) == {
        "h100": {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4, "lendingLimit": 0},
        # No limit: may borrow the whole pool, so the field is left out.
        "a100": {"name": "nvidia.com/gpu", "nominalQuota": 4, "lendingLimit": 0},
    }
    for name, queue in queues.items():
        if name != "gpu-east-shared-pool":
            assert all(r["lendingLimit"] == 0 for r in flavor_resources(queue).values()), name


def test_kueue_department_without_a_model_gets_nominal_quota_zero():
    nlp = by_name(documents(kueue_manifests(two_model_plan()), "ClusterQueue"))["nlp"]
    assert flavor_resources(nlp)["a100"] == {"name": "nvidia.com/gpu", "nominalQuota": 0, "lendingLimit": 0}


def test_kueue_shared_pool_only_lends_and_admits_no_namespace():
    pool = by_name(documents(kueue_manifests(two_model_plan()), "ClusterQueue"))["gpu-east-shared-pool"]
    assert flavor_resources(pool) == {
        "h100": {"name": "nvidia.com/gpu", "nominalQuota": 12, "borrowingLimit": 0},
        "a100": {"name": "nvidia.com/gpu", "nominalQuota": 6, "borrowingLimit": 0},
    }
    # Kueue reads a missing namespaceSelector as "no namespace"; {} would mean all of them.
    assert "namespaceSelector" not in pool["spec"]


def test_kueue_local_queues_point_each_namespace_at_its_department():
    docs = documents(kueue_manifests(two_model_plan()))
    cluster_queues = by_name(d for d in docs if d["kind"] == "ClusterQueue")
    local = {d["metadata"]["namespace"]: d for d in docs if d["kind"] == "LocalQueue"}
    targets = {namespace: queue["spec"]["clusterQueue"] for namespace, queue in local.items()}
    data_queue = local["data"]["spec"]["clusterQueue"]
    assert targets == {"vision-train": "vision", "vision-dev": "vision", "nlp": "nlp", "data": data_queue}
    assert cluster_queues[data_queue]["metadata"]["annotations"]["gpu-efficiency-portal/department-code"] == (
        "数据"
    )


def test_kueue_objects_note_the_cycle_and_that_the_portal_generated_them():
    for doc in documents(kueue_manifests(two_model_plan())):
        assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-efficiency-portal"
        assert doc["metadata"]["annotations"]["gpu-efficiency-portal/cycle"] == CYCLE


def test_names_are_dns_labels_even_for_odd_department_codes():
    codes = ["Vision_Team", "数据", "数据 2", "Ops & Infra!!", "x" * 100]
    quotas = [QueueQuota(code, H100, 1, namespaces=(f"ns-{i}",)) for i, code in enumerate(codes)]
    plan = QuotaPlan("GPU East", CYCLE, {H100: 16, A100: 8}, quotas)
    docs = documents(kueue_manifests(plan)) + documents(volcano_queues(plan))
    names = [doc["metadata"]["name"] for doc in docs] + [
        doc["spec"]["cohort"] for doc in docs if doc["kind"] == "ClusterQueue"
    ]
    for name in names:
        assert DNS_LABEL.match(name), name
        assert len(name) <= 63, name
    cluster_queues = [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterQueue"]
    assert len(set(cluster_queues)) == len(codes) + 1
    assert "vision-team" in cluster_queues


def test_department_codes_that_become_the_same_name_are_refused():
    quotas = [QueueQuota("Vision_Team", H100, 1), QueueQuota("vision-team", H100, 1)]
    with pytest.raises(ValueError, match="vision-team"):
        kueue_manifests(one_model_plan(quotas=quotas))


def test_a_namespace_that_is_not_a_kubernetes_name_is_refused():
    quotas = [QueueQuota("vision", H100, 1, namespaces=("Vision Lab",))]
    with pytest.raises(ValueError, match="namespace"):
        kueue_manifests(one_model_plan(quotas=quotas))


# --- Volcano -------------------------------------------------------------------------------------


def test_volcano_has_a_queue_per_department_and_model_with_hand_checked_numbers():
    queues = by_name(documents(volcano_queues(two_model_plan()), "Queue"))
    assert {q["apiVersion"] for q in queues.values()} == {"scheduling.volcano.sh/v1beta1"}
    data = next(name.removesuffix("-a100") for name in queues if name.startswith("dept-") and "a100" in name)
    numbers = {
        name: (
            q["spec"]["guarantee"]["resource"]["nvidia.com/gpu"],
            q["spec"]["deserved"]["nvidia.com/gpu"],
            q["spec"]["capability"]["nvidia.com/gpu"],
        )
        for name, q in queues.items()
    }
    # capability = guaranteed + borrowing limit, or + the whole pool (12 H100, 6 A100).
    assert numbers == {
        "vision-h100": (8, 8, 12),
        "vision-a100": (4, 4, 10),
        "nlp-h100": (12, 12, 24),
        "nlp-a100": (0, 0, 6),
        f"{data}-h100": (0, 0, 12),
        f"{data}-a100": (6, 6, 6),
    }
    for q in queues.values():
        assert q["spec"]["reclaimable"] is False
        assert q["spec"]["weight"] == 1
        assert q["metadata"]["annotations"]["gpu-efficiency-portal/cycle"] == CYCLE
    assert queues["vision-a100"]["metadata"]["annotations"]["gpu-efficiency-portal/gpu-model"] == A100


def test_volcano_single_model_cluster_has_one_queue_per_department():
    queues = by_name(documents(volcano_queues(one_model_plan()), "Queue"))
    # Pool: 16 - 8 - 4 = 4.
    assert {name: q["spec"]["capability"]["nvidia.com/gpu"] for name, q in queues.items()} == {
        "vision": 12,
        "nlp": 8,
    }


def test_volcano_borrowing_limit_above_the_pool_is_capped_at_the_pool():
    quotas = [QueueQuota("vision", H100, 8, 100), QueueQuota("nlp", H100, 4)]
    vision = by_name(documents(volcano_queues(one_model_plan(quotas=quotas))))["vision"]
    assert vision["spec"]["capability"]["nvidia.com/gpu"] == 12


# --- Slurm ---------------------------------------------------------------------------------------


def test_slurm_script_follows_the_sacctmgr_grammar_with_hand_checked_caps():
    script = slurm_qos_commands(two_model_plan())
    assert script.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in script
    commands = script_commands(script)
    data_qos = next(c[1] for c in commands if c[0] == "qos_exists" and c[1].startswith("quota-dept-"))
    grtres = {}
    accounts = defaultdict(list)
    for argv in commands:
        match argv:
            case ["qos_exists", name]:
                assert re.fullmatch(r"[a-z0-9_-]+", name)
            case ["sacctmgr", "-i", "add", "qos", name]:
                assert re.fullmatch(r"[a-z0-9_-]+", name)
            case ["sacctmgr", "-i", "modify", "qos", "where", name, "set", tres]:
                grtres[name.removeprefix("name=")] = tres.removeprefix("GrpTRES=")
            case ["sacctmgr", "-i", "modify", "account", "where", account, "set", qos, default]:
                assert qos.removeprefix("qos+=") == default.removeprefix("defaultqos=")
                accounts[qos.removeprefix("qos+=")].append(account.removeprefix("name="))
            case _:
                pytest.fail(f"unexpected command {argv}")
    # Ceilings: vision h100 8+4, a100 4+6 (pool); nlp h100 12+12 (pool), a100 0+6; 数据 h100 0+12, a100 6+0.
    assert grtres == {
        "quota-vision": "gres/gpu=22,gres/gpu:a100=10,gres/gpu:h100=12",
        "quota-nlp": "gres/gpu=30,gres/gpu:a100=6,gres/gpu:h100=24",
        data_qos: "gres/gpu=18,gres/gpu:a100=6,gres/gpu:h100=12",
    }
    assert accounts == {"quota-vision": ["vision-lab"], "quota-nlp": ["nlp"], data_qos: ["data"]}
    assert "#   AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:h100\n" in script


def test_slurm_single_model_cluster_has_no_typed_gres():
    script = slurm_qos_commands(one_model_plan())
    assert "gres/gpu:" not in script
    assert "AccountingStorageTRES" not in script
    assert "GrpTRES=gres/gpu=12" in script  # vision: 8 + 4
    assert "GrpTRES=gres/gpu=8" in script  # nlp: 4 + the pool of 4


def test_slurm_export_says_it_enforces_the_ceiling_not_the_guarantee():
    assert "cannot guarantee GPUs" in slurm_qos_commands(one_model_plan())
    docstring = " ".join(scheduler_config.__doc__.split())
    assert "Slurm cannot hold GPUs for an account without preemption" in docstring
    assert "only the ceiling is enforced" in docstring


HOSTILE = ["vision; rm -rf /", "$(reboot)", "`reboot`", "it's", "a b"]


def test_slurm_hostile_account_names_stay_one_argument():
    quotas = [QueueQuota("vision", H100, 8, slurm_accounts=tuple(HOSTILE))]
    commands = script_commands(slurm_qos_commands(one_model_plan(quotas=quotas)))
    names = [argv[5] for argv in commands if argv[:4] == ["sacctmgr", "-i", "modify", "account"]]
    assert names == [f"name={account}" for account in HOSTILE]
    assert all(len(argv) == 9 for argv in commands if argv[:4] == ["sacctmgr", "-i", "modify", "account"])


def test_slurm_account_with_a_line_break_is_refused():
    quotas = [QueueQuota("vision", H100, 8, slurm_accounts=("vision\nreboot",))]
    with pytest.raises(ValueError, match="control characters"):
        slurm_qos_commands(one_model_plan(quotas=quotas))


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_slurm_script_is_valid_bash():
    quotas = [QueueQuota("vision", H100, 8, slurm_accounts=tuple(HOSTILE))]
    for plan in (two_model_plan(), one_model_plan(quotas=quotas)):
        subprocess.run([BASH, "-n"], input=slurm_qos_commands(plan), text=True, check=True)


def run_with_stub_sacctmgr(tmp_path, script, *, existing_qos=""):
    """Run ``script`` with a fake ``sacctmgr`` first on PATH; return the argv of each call.

    The stub stands in for Slurm here; issue 7 runs the script against a real slurmdbd.
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.jsonl"
    stub = bin_dir / "sacctmgr"
    stub.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "with open(os.environ['SACCTMGR_LOG'], 'a') as log:\n"
        "    log.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "if 'show' in sys.argv and os.environ['SACCTMGR_EXISTING']:\n"
        "    print(os.environ['SACCTMGR_EXISTING'])\n"
    )
    stub.chmod(0o755)
    (tmp_path / "quotas.sh").write_text(script)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SACCTMGR_LOG": str(log), "SACCTMGR_EXISTING": existing_qos}
    subprocess.run([BASH, "quotas.sh"], cwd=tmp_path, env=env, check=True, timeout=60)
    return [json.loads(line) for line in log.read_text().splitlines()]


QOS_ARGS = ["qos+=quota-vision", "defaultqos=quota-vision"]


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_slurm_script_run_passes_hostile_values_to_sacctmgr_verbatim(tmp_path):
    # Injections that would leave a file behind if the shell ever interpreted them.
    accounts = ("vision; touch pwned1", "$(touch pwned2)", "`touch pwned3`", "it's")
    quotas = [QueueQuota("vision", H100, 8, 4, slurm_accounts=accounts)]
    plan = one_model_plan(quotas=quotas, cycle_label="cycle\ntouch pwned4")
    calls = run_with_stub_sacctmgr(tmp_path, slurm_qos_commands(plan))
    assert calls == [
        ["-n", "-P", "show", "qos", "where", "name=quota-vision", "format=name"],
        ["-i", "add", "qos", "quota-vision"],
        ["-i", "modify", "qos", "where", "name=quota-vision", "set", "GrpTRES=gres/gpu=12"],
        *(["-i", "modify", "account", "where", f"name={account}", "set", *QOS_ARGS] for account in accounts),
    ]
    assert not list(tmp_path.glob("pwned*"))


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_slurm_script_does_not_add_a_qos_that_exists(tmp_path):
    quotas = [QueueQuota("vision", H100, 8, 4)]
    calls = run_with_stub_sacctmgr(
        tmp_path, slurm_qos_commands(one_model_plan(quotas=quotas)), existing_qos="quota-vision"
    )
    assert [call[:3] for call in calls] == [["-n", "-P", "show"], ["-i", "modify", "qos"]]
