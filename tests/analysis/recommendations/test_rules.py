"""The rule catalog, rule by rule: real NCCL output and configs from public reports (the corpus in
tests/fixtures/recommendations, sources in its README), including healthy logs that look alarming,
and hand-checked metric windows for the rules that judge metrics."""

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from efficiency.analysis.recommendations.envfile import parse_env
from efficiency.analysis.recommendations.families import JobFindings, group_findings, name_pattern
from efficiency.analysis.recommendations.logfacts import LogFactsBuilder
from efficiency.analysis.recommendations.rules import (
    ALL_RULE_IDS,
    JOB_RULES,
    FamilyWindow,
    JobMetrics,
    JobView,
    Settings,
    audit_job,
    checkpoint_waste,
    guarantee_finding,
    low_efficiency,
    node_class_finding,
    young_daly_interval_s,
)

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "recommendations"
SETTINGS = Settings()

SOCKET = "network.nccl-socket-on-rdma"
GDR = "network.gdrdma-off"
P2P = "network.p2p-disabled"
DEBUG = "network.nccl-debug-overrides"

# (fixture, what the inventory says of RDMA, the rules that must fire: exactly these among the
# network rules). The corpus README gives each file's source; the reason is the report's own.
CASES = [
    # Multi-node data over sockets, NCCL found no IB device: on RDMA nodes (or unknown) a finding.
    ("nccl-952-socket-channels.log", None, {SOCKET}),
    ("nccl-952-socket-channels.log", True, {SOCKET}),
    # The same log from nodes without RDMA: sockets are all there is; nothing to recommend.
    ("nccl-952-socket-channels.log", False, set()),
    ("nccl-226-ring-socket-aws.log", False, set()),
    ("nccl-1232-socket-shm-rank-prefix.log", True, {SOCKET}),
    ("nccltests-166-nsocks-socket.log", True, {SOCKET}),
    # IB with GPUDirect RDMA: healthy, whatever NCCL_NET_GDR_LEVEL says.
    ("nccl-707-ib-gdrdma.log", True, set()),
    ("nccl-820-p2p-and-ib-gdrdma.log", True, set()),
    ("aks-rdma-36-gdr-level-sys.log", True, set()),
    # IB without /GDRDMA in the channel lines.
    ("nccl-1814-ibext-no-gdrdma.log", True, {GDR}),
    ("nccl-392-roce-ring-no-gdrdma.log", True, {GDR}),
    # Data over IBext without GDRDMA, and P2P kept within the node by NCCL_P2P_LEVEL=LOC.
    ("nccltests-373-p2p-level-loc-ibext.log", True, {GDR, P2P}),
    # Healthy IB runs whose init prints Bootstrap / NET/Socket probe lines: no channel lines, no finding.
    ("nvpeermem-56-socket-then-ib-init.log", True, set()),
    ("nccltests-29-socket-and-ib-init.log", True, set()),
    ("nccltests-293-ibext-sharp-init.log", True, set()),
    ("nccl-988-ibext-sharp-2-12.log", True, set()),
    ("nccl-1536-ib-in-use.log", True, set()),
    ("nccl-1537-roce-gdr-disabled.log", True, set()),
    # "Using network Socket" without channel lines says nothing about where data goes.
    ("nccl-941-no-ib-device.log", None, set()),
    ("llamafactory-6111-one-line-socket.log", None, set()),
    ("nccltests-179-two-nodes-socket.log", None, set()),
    # NCCL_P2P_LEVEL=LOC / NCCL_P2P_DISABLE=1 set by environment or in the job's env.
    ("returnn-1469-ib-disabled-p2p-loc.log", None, {P2P}),
    ("nccl-1637-p2p-disabled-no-ib.log", None, {P2P}),
    # Single node: P2P / SHM only, no network needed ("Using network Socket" on lo included).
    ("nccl-1190-direct-shared-memory.log", None, set()),
    ("nccl-671-p2p-direct-pointer.log", None, set()),
    ("nccl-1773-p2p-direct-8gpu.log", None, set()),
    # Comm lines with nNodes only; NCCL_CROSS_NIC is tuning, not a debugging override.
    ("nccl-1189-nnodes-2.log", True, set()),
    ("nccl-1453-h100-nnodes-3-cross-nic.log", True, set()),
]
NETWORK = {SOCKET, GDR, P2P, DEBUG}


def _job(name: str, *, rdma: bool | None = None, metrics: JobMetrics | None = None, **kwargs) -> JobView:
    path = CORPUS / name
    builder = LogFactsBuilder()
    builder.feed_text(name, 1, path.read_text(encoding="utf-8"))
    env_path = path.with_suffix(".env")
    env = parse_env(env_path.read_text(encoding="utf-8")).values if env_path.exists() else {}
    return JobView(key=name, config={"env": env}, log=builder.facts(), rdma=rdma, metrics=metrics, **kwargs)


@pytest.mark.parametrize(("name", "rdma", "expected"), CASES, ids=[f"{c[0]}-rdma={c[1]}" for c in CASES])
def test_network_rules_on_real_logs(name, rdma, expected):
    findings = audit_job(_job(name, rdma=rdma), SETTINGS)
    assert {f.rule for f in findings} & NETWORK == expected
    for finding in findings:
        # Every finding shows its lines as written, with their place, or the config values.
        assert finding.evidence or finding.config, finding.rule
        text = (CORPUS / name).read_text(encoding="utf-8").splitlines()
        for line in finding.evidence:
            assert line.file == name
            assert line.text.strip() in text[line.line - 1] or text[line.line - 1].strip() in line.text


def test_socket_finding_quotes_the_channel_lines_and_the_ideal():
    (finding,) = [f for f in audit_job(_job("nccl-952-socket-channels.log", rdma=True)) if f.rule == SOCKET]
    assert finding.confidence == "high"
    assert any("via NET/Socket" in line.text for line in finding.evidence)
    assert "NCCL_IB_HCA" in finding.change
    assert finding.gain_share == pytest.approx(0.5)  # fintech Y: twice as fast


def test_socket_unknown_rdma_is_medium_confidence():
    (finding,) = [f for f in audit_job(_job("nccl-952-socket-channels.log")) if f.rule == SOCKET]
    assert finding.confidence == "medium"
    assert finding.params["rdma_known"] is False


def test_forced_sockets_by_config_on_a_multi_node_job_without_logs():
    job = JobView(key="1", node_count=2, gpu_count=16, rdma=True, config={"env": {"NCCL_IB_DISABLE": "1"}})
    (finding,) = [f for f in audit_job(job) if f.rule == SOCKET]
    assert finding.confidence == "medium"
    assert ("NCCL_IB_DISABLE", "1", "unset") in finding.config
    # A single-node job needs no network transport.
    single = JobView(key="2", node_count=1, gpu_count=8, rdma=True, config={"env": {"NCCL_IB_DISABLE": "1"}})
    assert SOCKET not in {f.rule for f in audit_job(single)}


def test_debug_overrides_from_config():
    job = JobView(
        key="1",
        gpu_count=8,
        config={
            "env": {"NCCL_ALGO": "Ring", "NCCL_DEBUG": "TRACE", "NCCL_PROTO": "Simple", "NCCL_CROSS_NIC": "1"}
        },
    )
    (finding,) = [f for f in audit_job(job) if f.rule == DEBUG]
    assert finding.change == "unset NCCL_ALGO NCCL_DEBUG NCCL_PROTO"
    # NCCL_DEBUG=INFO (needed to see the transports) and a blocking wait of 0 are fine.
    fine = JobView(
        key="2", gpu_count=8, config={"env": {"NCCL_DEBUG": "INFO", "TORCH_NCCL_BLOCKING_WAIT": "0"}}
    )
    assert DEBUG not in {f.rule for f in audit_job(fine)}


def _metrics(allocated: float, busy: float, sm: float | None = None, **kwargs) -> JobMetrics:
    return JobMetrics(
        start=None, end=None, allocated_gpu_h=allocated, busy_gpu_h=busy, sm_busy_gpu_h=sm, **kwargs
    )


def test_metadata_only_cache_needs_starved_gpus():
    config = {"storage_cache_mode": "metadata-only"}
    starved = JobView(key="1", gpu_count=8, config=config, metrics=_metrics(100, 20, 7))
    (finding,) = [f for f in audit_job(starved) if f.rule == "storage.cache-metadata-only"]
    # SM activity 7% (not the engine's 20%) against the 35% line: 80% of the time waiting,
    # 97.5% of it saved at 40× → 78% of the GPU time.
    assert finding.params["activity_pct"] == 7.0
    assert finding.gain_share == pytest.approx((1 - 0.07 / 0.35) * (1 - 1 / 40))
    busy = JobView(key="2", gpu_count=8, config=config, metrics=_metrics(100, 80, 50))
    assert not [f for f in audit_job(busy) if f.rule == "storage.cache-metadata-only"]
    full = JobView(
        key="3", gpu_count=8, config={"storage_cache_mode": "full-data"}, metrics=_metrics(100, 20, 7)
    )
    assert not [f for f in audit_job(full) if f.rule.startswith("storage")]


def test_activity_is_sm_not_gpu_util():
    # Engine activity 90% (GPU_UTIL-like), SM activity 10%: the GPU is starved.
    metrics = _metrics(100, 90, 10)
    assert metrics.activity == pytest.approx(0.10)
    # No SM data: engine activity is all there is.
    assert _metrics(100, 90, None).activity == pytest.approx(0.9)


def test_input_pipeline_from_a_real_trainer_dump():
    # ezpz: HF TrainingArguments with dataloader_num_workers=0 (pin_memory True).
    starved = _job("ezpz-hf-trainer-bf16.log", metrics=_metrics(50, 10, 8), gpu_count=8)
    (finding,) = [f for f in audit_job(starved) if f.rule == "input.pipeline-starved"]
    assert ("num_workers", "0", "≥ 4 (a few per GPU)") in finding.config
    assert "dataloader_num_workers" in finding.evidence[0].text
    # The same job keeping its GPUs busy: num_workers=0 is then no problem worth a change.
    busy = _job("ezpz-hf-trainer-bf16.log", metrics=_metrics(50, 45, 40), gpu_count=8)
    assert not [f for f in audit_job(busy) if f.rule == "input.pipeline-starved"]
    # Megatron's dump with num_workers 2 and starved GPUs: not the data loader's workers.
    megatron = _job("megatron-91-num-workers-2-fp16-params.log", metrics=_metrics(50, 10, 8), gpu_count=8)
    assert not [f for f in audit_job(megatron) if f.rule == "input.pipeline-starved"]


def test_precision_rules_on_real_dumps_do_not_fire_for_mixed_precision():
    for name in (
        "megatron-91-num-workers-2-fp16-params.log",
        "megatron-511-fp16-params-bf16-false.log",
        "bigcode-86-megatron-fp16-true.log",
        "ezpz-hf-trainer-bf16.log",
    ):
        assert not [f for f in audit_job(_job(name, gpu_model="A100")) if f.rule.startswith("precision")]


def test_fp32_on_tensor_cores():
    # A Megatron dump with both half precisions off (the shape of megatron-511's dump lines).
    builder = LogFactsBuilder()
    builder.feed_text(
        "rank-0.log",
        1,
        "  bf16 ............................................ False\n"
        "  fp16 ............................................ False\n",
    )
    job = JobView(key="1", gpu_model="NVIDIA H100 80GB HBM3", gpu_count=8, log=builder.facts())
    (finding,) = [f for f in audit_job(job) if f.rule == "precision.fp32-on-tensor-cores"]
    assert finding.evidence
    # A GPU without tensor cores (Pascal) or a launcher asking for bf16: nothing.
    assert not [
        f
        for f in audit_job(JobView(key="2", gpu_model="Tesla P100", log=builder.facts()))
        if f.rule.startswith("precision")
    ]
    with_flag = JobView(
        key="3", gpu_model="A100", log=builder.facts(), config={"launcher_args": ["train.py", "--bf16"]}
    )
    assert not [f for f in audit_job(with_flag) if f.rule.startswith("precision")]


def test_stock_framework_by_image():
    stock = JobView(key="1", gpu_count=8, config={"image": "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime"})
    (finding,) = [f for f in audit_job(stock) if f.rule == "kernels.stock-framework"]
    assert finding.config[0][1] == "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime"
    accelerated = JobView(key="2", config={"image": "registry.internal/ai-platform/accel-train:24.05-py3"})
    assert not [f for f in audit_job(accelerated) if f.rule.startswith("kernels")]
    # A repository that merely starts with the same letters is not the stock image.
    lookalike = JobView(key="3", config={"image": "pytorch/pytorch-extras:1"})
    assert not [f for f in audit_job(lookalike) if f.rule.startswith("kernels")]
    notebook = JobView(
        key="4", config={"image": "pytorch/pytorch:2.3.1", "launcher_args": ["jupyter", "lab"]}
    )
    assert not [f for f in audit_job(notebook) if f.rule.startswith("kernels")]


@pytest.mark.parametrize(
    ("minutes", "level"),
    [(59, None), (60, "warning"), (104, "warning"), (105, "final-warning"), (120, "release")],
)
def test_idle_thresholds_of_job_defense_shield(minutes, level):
    job = JobView(key="1", gpu_count=4, metrics=_metrics(10, 1, 1, idle_minutes=minutes))
    found = [f for f in audit_job(job) if f.rule == "allocation.idle-held"]
    if level is None:
        assert not found
    else:
        assert found[0].params["level"] == level
        assert found[0].gain_gpu_h == pytest.approx(4 * minutes / 60)


def test_overrequested():
    job = JobView(key="1", gpu_count=8, metrics=_metrics(80, 10, 10, gpus_active=1))
    (finding,) = [f for f in audit_job(job) if f.rule == "allocation.overrequested"]
    assert finding.gain_gpu_h == pytest.approx(70)
    assert finding.change == "--gres=gpu:1"
    fine = JobView(key="2", gpu_count=8, metrics=_metrics(80, 60, 50, gpus_active=8))
    assert not [f for f in audit_job(fine) if f.rule == "allocation.overrequested"]


def test_low_efficiency_over_days():
    # 200 GPU-hours at 10% engine activity over 7 days: below 25%, above 50 GPU-hours.
    finding = low_efficiency(
        FamilyWindow(days=7, allocated_gpu_h=200, busy_gpu_h=20, sm_busy_gpu_h=12), SETTINGS
    )
    assert finding is not None
    assert finding.gain_gpu_h == pytest.approx(200 * (1 - 0.10 / 0.25))
    # Too few GPU-hours to matter.
    assert (
        low_efficiency(FamilyWindow(days=7, allocated_gpu_h=40, busy_gpu_h=0, sm_busy_gpu_h=0), SETTINGS)
        is None
    )
    # Engine busy 60% with SM at 20% is healthy fine-tuning, not low efficiency.
    assert (
        low_efficiency(FamilyWindow(days=7, allocated_gpu_h=200, busy_gpu_h=120, sm_busy_gpu_h=40), SETTINGS)
        is None
    )


def test_young_daly_by_hand():
    # MTBF 24 h, a checkpoint costs 60 s: √(2 · 86400 · 60) = 3219.9 s ≈ 53.7 min.
    assert young_daly_interval_s(86_400, 60) == pytest.approx(3219.94, abs=0.01)
    # At the optimum both parts of the waste are equal.
    optimum = young_daly_interval_s(86_400, 60)
    assert 60 / optimum == pytest.approx(optimum / (2 * 86_400))


@given(
    mtbf_h=st.floats(min_value=1, max_value=10_000),
    cost_s=st.floats(min_value=1, max_value=3_600),
    factor=st.floats(min_value=0.05, max_value=20),
)
def test_young_daly_minimises_first_order_waste(mtbf_h, cost_s, factor):
    optimum = young_daly_interval_s(mtbf_h * 3600, cost_s)
    assert checkpoint_waste(optimum * factor, mtbf_h * 3600, cost_s) >= checkpoint_waste(
        optimum, mtbf_h * 3600, cost_s
    ) * (1 - 1e-9)


def test_checkpoint_interval_rule():
    # Saves every 6 hours, each 120 s, failures every 12 h on jobs this size:
    # optimum √(2·43200·120) = 3220 s (54 min); 6 h is 6.7× too long.
    builder = LogFactsBuilder()
    lines = []
    for i in range(4):
        hour = 6 * i
        lines.append(
            f"[2024-05-01 {hour:02d}:00:00] saving checkpoint at iteration {1000 * (i + 1):7d} to /ckpt"
        )
        lines.append(
            f"[2024-05-01 {hour:02d}:02:00]   successfully saved checkpoint from iteration "
            f"{1000 * (i + 1):7d} to /ckpt"
        )
    builder.feed_text("rank-7.log", 1, "\n".join(lines) + "\n")
    facts = builder.facts()
    assert facts.checkpoint_cost_s == pytest.approx(120)
    job = JobView(key="1", gpu_count=16, node_count=2, log=facts, checkpoint_mtbf_h=12)
    (finding,) = [f for f in audit_job(job) if f.rule == "reliability.checkpoint-interval"]
    assert finding.params["ratio"] == pytest.approx(
        6 * 3600 / young_daly_interval_s(12 * 3600, 120), abs=0.01
    )
    waste_now = checkpoint_waste(6 * 3600, 12 * 3600, 120)
    waste_best = checkpoint_waste(young_daly_interval_s(12 * 3600, 120), 12 * 3600, 120)
    assert finding.gain_share == pytest.approx(waste_now - waste_best)
    # Without a measured failure rate, nothing is claimed.
    assert not [f for f in audit_job(JobView(key="2", log=facts)) if f.rule.startswith("reliability")]


def test_capacity_findings():
    idle = node_class_finding(
        hostname="gpu-a-01", node_class="idle", gpu_count=8, util_pct=0.4, cycle_days=14
    )
    assert idle.rule == "capacity.idle-node"
    assert idle.gain_gpu_h == 8 * 24 * 14
    assert (
        node_class_finding(hostname="x", node_class="steady", gpu_count=8, util_pct=50, cycle_days=14) is None
    )
    high = guarantee_finding(department="bev", guaranteed_gpus=64, demand_p90_gpus=20, proposed_gpus=40)
    assert high.params["direction"] == "above"
    assert high.gain_gpu_h == 44 * 24 * 7
    assert (
        guarantee_finding(department="bev", guaranteed_gpus=64, demand_p90_gpus=50, proposed_gpus=60) is None
    )


def test_every_rule_has_an_id_once():
    assert len(set(ALL_RULE_IDS)) == len(ALL_RULE_IDS)
    assert {rule.id for rule in JOB_RULES} <= set(ALL_RULE_IDS)


# --- Families ----------------------------------------------------------------------------------


def test_name_pattern():
    assert name_pattern("bev-exp12") == "bev-exp*"
    assert name_pattern("bev-exp31") == "bev-exp*"
    assert name_pattern("llama2-7b-sft") == "llama*-*b-sft"


def _item(name, user, *, start_day, gpu_h, findings_from=None):
    job = JobView(
        key=f"{name}-{start_day}",
        name=name,
        user=user,
        department="3",
        gpu_count=8,
        config={"image": "pytorch/pytorch:2.3.1"} if findings_from else {},
    )
    return JobFindings(
        job=job,
        job_id=start_day,
        findings=tuple(audit_job(job)),
        allocated_gpu_h=gpu_h,
        start=datetime(2026, 11, start_day, tzinfo=UTC),
        end=datetime(2026, 11, start_day, 12, tzinfo=UTC),
    )


def test_family_gain_per_week_by_hand():
    # Two stock-framework jobs of one family (100 + 40 GPU-hours) and a healthy one (60) over 14
    # days: the family's recommendation gains 50% of 140 GPU-hours in two weeks = 35 a week.
    items = [
        _item("vit-exp3", "alice", start_day=1, gpu_h=100, findings_from=True),
        _item("vit-exp7", "alice", start_day=5, gpu_h=40, findings_from=True),
        _item("vit-exp9", "bob", start_day=6, gpu_h=60),
    ]
    (draft,) = group_findings(items, window_days=14)
    assert draft.subject_key == "3/alice/vit-exp*"
    assert draft.gain_gpu_h_week == pytest.approx(35)
    assert draft.gpu_h_week == pytest.approx(70)
    assert draft.gain_pct == pytest.approx(50)
    assert draft.first_seen.day == 1
    assert draft.last_seen.day == 5
    assert draft.job_ids == [1, 5]


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.floats(min_value=0, max_value=1000), st.booleans()),
        max_size=12,
    )
)
def test_family_gain_never_exceeds_its_gpu_hours(jobs):
    items = [
        _item(f"run{i}", user, start_day=1 + i % 27, gpu_h=gpu_h, findings_from=bad)
        for i, (user, gpu_h, bad) in enumerate(jobs)
    ]
    for draft in group_findings(items, window_days=14):
        assert 0 <= draft.gain_gpu_h_week <= draft.gpu_h_week + 1e-9
        assert 0 <= draft.gain_pct <= 100 + 1e-9


def test_env_file_keeps_good_lines_and_reports_bad_ones():
    parsed = parse_env(
        "export NCCL_IB_DISABLE=1\n# comment\nNCCL_ALGO='Ring'\nnot a line\n9BAD=1\nNCCL_DEBUG=INFO \n"
    )
    assert parsed.values == {"NCCL_IB_DISABLE": "1", "NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO"}
    assert [number for number, _ in parsed.errors] == [4, 5]
