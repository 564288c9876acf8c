"""sacct's AdminComment column: a site's job_submit plugin may keep each job's setup there as JSON
(image, env, mounts, dataset cache mode, launcher arguments), which becomes the job's config
snapshot, redacted. Anything else in the column (free text, other JSON, wrong types, an oversized or
hostile document) contributes nothing, and the row is still a job. sacct does not escape "|" in
the comment: with JobName and AdminComment both in the output, a row holding an extra "|" cannot
be put back together and is rejected with the reason, the other rows kept."""

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from efficiency.collectors.records import job_record_check
from efficiency.collectors.slurm import ADMIN_COMMENT_KEYS, MAX_ADMIN_COMMENT_CHARS, parse_sacct
from efficiency.redaction import REDACTED, config_redact

SHANGHAI = ZoneInfo("Asia/Shanghai")
COLUMNS = "JobID|JobName|Account|User|Partition|State|Submit|Start|End|Elapsed|AllocTRES|NodeList|NNodes"
HEADER = COLUMNS + "|AdminComment"
TRES = "billing=64,cpu=64,gres/gpu=8,mem=500G,node=1"
SETUP = {
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "env": {
        "NCCL_IB_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": "eth0",
        "WORLD_SIZE": 16,
        "OMP_NUM_THREADS": 8.0,
        "HF_TOKEN": "hf_AbCdEf0123456789",
        "NCCL_IB_PASSWORD": "not-a-real-nccl-variable",
        "DB_PASS": "hunter2",
        "DATASET_ROOT": "/mnt/datasets/nuscenes",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
    },
    "mounts": ["/mnt/datasets:/data:ro", "s3://u:pw@bucket/ckpt:/ckpt"],
    "storage_cache_mode": "metadata",
    "launcher_args": ["--nproc_per_node=8", "--hf-token", "hf_secret", "--db-password=pw", "train.py"],
}


def row(job_id="7001", *, comment="", name="bev-train", state="COMPLETED") -> str:
    return (
        f"{job_id}|{name}|vision|zhang.wei|gpu|{state}|2026-11-02T08:00:00|2026-11-02T08:00:01|"
        f"2026-11-02T09:00:01|01:00:00|{TRES}|gpu-001|1|{comment}"
    )


def parse(*rows: str, header: str = HEADER):
    return parse_sacct("\n".join([header, *rows]) + "\n", timezone=SHANGHAI)


def config_of(comment: str) -> dict:
    outcome = parse(row(comment=comment))
    assert outcome.rejected == [], outcome.rejected
    (record,) = outcome.records
    return record.config


BASE = {"partition": "gpu", "elapsed_s": 3600}  # what the other columns put in the config


def admin_keys(config: dict) -> dict:
    return {key: value for key, value in config.items() if key in ADMIN_COMMENT_KEYS}


# --- A valid setup document --------------------------------------------------------------------


def test_a_json_setup_becomes_the_config_snapshot_with_secrets_redacted():
    config = config_of(json.dumps(SETUP))
    assert {k: config[k] for k in BASE} == BASE
    assert config["image"] == SETUP["image"]
    assert config["storage_cache_mode"] == "metadata"
    assert config["env"] == {
        "NCCL_IB_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": "eth0",
        "WORLD_SIZE": "16",  # numbers become text, as every other source stores env values
        "OMP_NUM_THREADS": "8.0",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        # Names kept (that a variable is set is evidence), values not on the allow list redacted.
        "HF_TOKEN": REDACTED,
        "NCCL_IB_PASSWORD": REDACTED,  # an allowed prefix does not save a credential word
        "DB_PASS": REDACTED,
        "DATASET_ROOT": REDACTED,
    }
    assert config["mounts"] == ["/mnt/datasets:/data:ro", f"s3://u:{REDACTED}@bucket/ckpt:/ckpt"]
    assert config["launcher_args"] == [
        "--nproc_per_node=8",
        "--hf-token",
        REDACTED,
        f"--db-password={REDACTED}",
        "train.py",
    ]
    # Nothing secret survives anywhere in the stored snapshot, and redacting again changes nothing.
    text = json.dumps(config)
    for secret in ("hf_AbCdEf0123456789", "hunter2", "hf_secret", ":pw@", "=pw", "nuscenes"):
        assert secret not in text
    assert config_redact(config) == config


def test_only_the_setup_keys_are_taken_and_they_cannot_overwrite_what_other_columns_say():
    comment = json.dumps(
        {
            "image": "pytorch/pytorch:2.3.1",
            "partition": "evil",
            "elapsed_s": 1,
            "pending_reason": "x",
            "array_job_id": "1",
            "jobstats": {"gpu_util": 3},
        }
    )
    outcome = parse(row("7001_3", comment=comment))
    (record,) = outcome.records
    assert record.config == {
        "array_job_id": "7001",
        "array_task": "3",
        **BASE,
        "image": "pytorch/pytorch:2.3.1",
    }


def test_the_older_parsable_output_with_a_bar_after_the_last_field_is_read_too():
    outcome = parse(row(comment=json.dumps({"image": "a/b:1"})) + "|", header=HEADER + "|")
    (record,) = outcome.records
    assert record.config["image"] == "a/b:1"


# --- Anything else contributes nothing, and the job is kept --------------------------------------


@pytest.mark.parametrize(
    "comment",
    [
        "",
        "   ",
        "requeued by admin after node failure on gpu-017",
        # Princeton's jobstats keeps its own summary in AdminComment: not a setup.
        "JS1:H4sIAAAAAAAAA6tWSkksSVSyUqiuVcpMUbIyNNBRyi9KSS1SslJKTi0qSi3KVNJRKi1OLYrPTFGyMjQEAL1mMrMuAAAA",
        "null",
        "42",
        '"image"',
        "[1, 2, 3]",
        '[{"image": "a"}]',
        "{not json}",
        '{"image": "a"',  # cut short
        "{}",
        '{"jobstats": {"gpu_util": 3}}',
        "{\"image\": 'single quotes'}",
    ],
)
def test_free_text_and_other_json_contribute_nothing(comment):
    assert config_of(comment) == BASE


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            {"image": 5, "env": ["NCCL_IB_DISABLE=1"], "mounts": "/data", "storage_cache_mode": ["x"],
             "launcher_args": "--nproc_per_node=8"},
            {},
        ),
        ({"image": None, "env": None, "mounts": None}, {}),
        ({"image": {"repo": "a"}, "env": {"NCCL_IB_DISABLE": "1"}}, {"env": {"NCCL_IB_DISABLE": "1"}}),
        # Inside the right container, values of the wrong kind are dropped one by one.
        (
            {"env": {"NCCL_A": {"x": 1}, "NCCL_B": None, "NCCL_C": ["1"], "NCCL_D": "1", "NCCL_E": 2}},
            {"env": {"NCCL_D": "1", "NCCL_E": "2"}},
        ),
        (
            {"mounts": ["/a", {"b": 1}, ["c"], None, 3], "launcher_args": [None, ["--x"], "--y", 1.5]},
            {"mounts": ["/a", "3"], "launcher_args": ["--y", "1.5"]},
        ),
    ],
)  # fmt: skip
def test_values_of_the_wrong_type_contribute_nothing_and_the_row_is_kept(document, expected):
    assert admin_keys(config_of(json.dumps(document))) == expected


def test_an_oversized_comment_contributes_nothing():
    padding = "x" * MAX_ADMIN_COMMENT_CHARS
    comment = json.dumps({"image": "a/b:1", "env": {"NCCL_IB_DISABLE": "1"}, "notes": padding})
    assert len(comment) > MAX_ADMIN_COMMENT_CHARS
    assert config_of(comment) == BASE
    # Just under the limit it is read.
    fits = json.dumps({"image": "a/b:1", "notes": "x" * (MAX_ADMIN_COMMENT_CHARS - 40)})
    assert len(fits) <= MAX_ADMIN_COMMENT_CHARS
    assert config_of(fits)["image"] == "a/b:1"


@pytest.mark.parametrize(
    "comment",
    [
        '{"image": "a", "x": ' + "[" * 5000 + "]" * 5000 + "}",  # nested past the recursion limit
        '{"env": ' + '{"a": ' * 3000 + "1" + "}" * 3000 + "}",
        '{"env": {"NCCL_IB_DISABLE": ' + "9" * 5000 + "}}",  # past int()'s digit limit
        '{"image": "a", "image": 5}',  # a repeated key: the last one wins, and it is no text
    ],
    ids=["deep-arrays", "deep-objects", "huge-number", "repeated-key"],
)
def test_hostile_documents_contribute_nothing_and_the_row_is_kept(comment):
    config = config_of(comment)
    assert admin_keys(config) == {}
    json.dumps(config, allow_nan=False).encode("utf-8")  # storable as strict JSON and UTF-8


LONE_SURROGATE = '{"image": "a/b:1", "env": {"NCCL_IB_DISABLE": "1", "NCCL_DEBUG": "\\ud800"}}'


def test_a_lone_surrogate_escape_in_the_comment_contributes_nothing_and_the_job_is_kept():
    (record,) = parse(row(comment=LONE_SURROGATE)).records
    assert job_record_check(record, now=datetime(2026, 11, 3, tzinfo=UTC)).record is not None


def test_nan_and_infinity_are_not_taken_as_env_values():
    config = config_of('{"env": {"NCCL_IB_DISABLE": NaN, "NCCL_NSOCKS_PERTHREAD": Infinity}}')
    assert "env" not in config or config["env"] == {}


def test_a_nul_in_the_comment_rejects_the_row_with_the_reason_and_keeps_the_others():
    outcome = parse(row("7001", comment='{"image": "a\x00b"}'), row("7002", comment="{}"))
    assert [r.external_id for r in outcome.records] == ["7002"]
    assert [(r.reason, r.line_no) for r in outcome.rejected] == [("row contains a NUL character", 2)]


# --- "|" in the comment -------------------------------------------------------------------------


def test_a_bar_in_the_comment_rejects_that_row_with_the_reason_and_keeps_the_others():
    piped = json.dumps({"image": "a/b:1", "launcher_args": ["bash", "-c", "python train.py | tee log"]})
    outcome = parse(
        row("7001", comment=json.dumps({"image": "a/b:1"})),
        row("7002", comment=piped),
        row("7003", comment="moved to partition a|b by admin"),
        row("7004"),
    )
    assert [r.external_id for r in outcome.records] == ["7001", "7004"]
    assert [r.line_no for r in outcome.rejected] == [3, 4]
    for rejected in outcome.rejected:
        assert rejected.reason.startswith("expected 14 fields as in the header, got 15")
        assert "JobName" in rejected.reason
        assert "may hold '|'" in rejected.reason
        assert "AdminComment".lower() in rejected.reason.lower()


def test_with_the_comment_in_the_output_a_bar_in_the_job_name_is_no_longer_put_back():
    # Without AdminComment a "|" in JobName is recovered (tests/collectors/test_slurm.py); with two
    # free-text columns the extra field could belong to either, so the row is rejected instead.
    with_comment = parse(row("7001", name="sweep|lr=3e-4", comment="{}"), row("7002"))
    assert [r.external_id for r in with_comment.records] == ["7002"]
    assert "may hold '|'" in with_comment.rejected[0].reason
    without = parse_sacct(
        "\n".join([COLUMNS, row("7001", name="sweep|lr=3e-4").rsplit("|", 1)[0]]) + "\n", timezone=SHANGHAI
    )
    assert [r.name for r in without.records] == ["sweep|lr=3e-4"]


def test_a_bar_in_the_comment_is_rejected_even_when_it_is_the_only_free_text_column():
    header = "JobID|State|Submit|AdminComment"
    outcome = parse(
        '7001|COMPLETED|2026-11-02T08:00:00|{"image": "a|b"}',
        "7002|COMPLETED|2026-11-02T08:00:00|",
        header=header,
    )
    assert [r.external_id for r in outcome.records] == ["7002"]
    assert outcome.rejected[0].reason.startswith("expected 4 fields as in the header, got 5")
