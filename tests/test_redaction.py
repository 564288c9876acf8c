"""Secrets never reach a stored config snapshot; the variables the config audit reads do."""

import importlib
import io
import json

import pytest
from django.apps import apps
from django.core.management import call_command
from hypothesis import given
from hypothesis import strategies as st

from efficiency.choices import Role, SourceKind
from efficiency.models import Job
from efficiency.redaction import REDACTED, args_redact, config_redact, env_redact, text_redact
from efficiency.services.sources import source_collect
from tests.factories import ClusterFactory, DataSourceFactory, JobFactory, UserFactory

SECRET = "s3cr3t-Pa55w0rd"


def test_a_kubernetes_jobs_secrets_are_redacted_and_its_audit_variables_kept():
    config = {
        "env": {
            "DB_PASS": SECRET,
            "DATABASE_URL": f"postgres://app:{SECRET}@db:5432/app",
            "AUTH": f"bearer {SECRET}",
            "NCCL_IB_HCA": "mlx5_0,mlx5_1",
            "NCCL_DEBUG": "INFO",
            "CUDA_DEVICE_MAX_CONNECTIONS": "1",
            "MASTER_ADDR": "trainer-0.trainer",
            "WORLD_SIZE": "16",
            "HF_TOKEN": "<from secretKeyRef>",
        },
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "command": ["bash", "-c", f"DB_PASS={SECRET} torchrun train.py --password={SECRET}"],
                "args": ["--hf-token", SECRET, "--db", f"postgres://u:{SECRET}@h/db", "--nnodes=2"],
            }
        ],
        "launcher_args": ["curl", "-H", f"Authorization: Bearer {SECRET}", "https://api.example/v1"],
    }
    redacted = config_redact(config)
    assert SECRET not in repr(redacted)
    assert redacted["env"] == {
        "DB_PASS": REDACTED,
        "DATABASE_URL": REDACTED,
        "AUTH": REDACTED,
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "NCCL_DEBUG": "INFO",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "MASTER_ADDR": "trainer-0.trainer",
        "WORLD_SIZE": "16",
        "HF_TOKEN": "<from secretKeyRef>",
    }
    container = redacted["containers"][0]
    assert container["command"] == [
        "bash",
        "-c",
        "DB_PASS=<redacted> torchrun train.py --password=<redacted>",
    ]
    assert container["args"] == ["--hf-token", REDACTED, "--db", "postgres://u:<redacted>@h/db", "--nnodes=2"]
    assert redacted["launcher_args"][2] == "Authorization: Bearer <redacted>"
    assert config_redact(redacted) == redacted  # twice changes nothing


def test_launcher_settings_and_urls_without_credentials_are_kept():
    argv = ["torchrun", "--nnodes=4", "--rdzv_endpoint=trainer-0:29500", "--tokenizer-type", "gpt2",
            "train.py", "lr=3e-4", "https://mirror.example/data.tar"]  # fmt: skip
    assert args_redact(argv) == argv


def test_a_url_user_alone_is_taken_for_a_token():
    assert text_redact("git clone https://ghp_abc123@github.com/x/y") == (
        "git clone https://<redacted>@github.com/x/y"
    )


@pytest.mark.parametrize(
    "template",
    [
        "postgres://user:{s}@db:5432/app",
        "mysql://{s}@db/app",
        "--password={s}",
        "--db-pass {s}",
        "Authorization: Bearer {s}",
        "authorization:basic {s}",
        "X-Api-Key: {s}",
        "AUTH=bearer {s}",
        "SOME_SETTING={s} python train.py",
        "python train.py db.password={s}",
        "https://h/x?token={s}&a=1",
    ],
)
def test_each_kind_of_credential_in_a_command_is_redacted(template):
    assert SECRET not in text_redact(template.format(s=SECRET))


_UNSAFE = "'\";&|@/\\ ,:#?<"
secrets = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=_UNSAFE),
    min_size=6,
    max_size=30,
).filter(lambda s: not s.startswith("-"))
templates = st.sampled_from(
    [
        "postgres://u:{s}@h/db",
        "--password={s}",
        "--api-key {s}",
        "Authorization: Bearer {s}",
        "DB_PASS={s}",
        "X_SECRET={s} torchrun x.py",
    ]
)
env_names = st.from_regex(r"[A-Z][A-Z0-9_]{0,20}", fullmatch=True)
CREDENTIAL_WORDS = {
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "SECRET",
    "TOKEN",
    "KEY",
    "APIKEY",
    "AUTH",
    "DSN",
    "COOKIE",
}


@given(secret=secrets, template=templates, before=st.sampled_from(["", "bash -c '", "run "]))
def test_no_credential_survives_text_redaction(secret, template, before):
    assert secret not in text_redact(before + template.format(s=secret))


@given(name=env_names, value=secrets)
def test_an_env_value_is_kept_only_for_audit_names_without_a_credential_word(name, value):
    kept = env_redact({name: value})[name]
    words = set(name.split("_"))
    audit = name.startswith(("NCCL_", "CUDA_", "NVIDIA_", "OMP_", "TORCH_")) or name == "WORLD_SIZE"
    credential = bool(words & CREDENTIAL_WORDS)
    assert kept == (value if audit and not credential else REDACTED)


@pytest.mark.django_db
def test_stored_snapshots_are_redacted_by_the_migration_and_the_command():
    leaky = {"env": {"DB_PASS": SECRET, "NCCL_DEBUG": "INFO"}, "launcher_args": ["x", f"--token={SECRET}"]}
    first, second = JobFactory(config=leaky), JobFactory(config=leaky)
    migration = importlib.import_module("efficiency.migrations.0016_ingest")
    migration.redact_stored_configs(apps, None)
    first.refresh_from_db()
    assert first.config == {
        "env": {"DB_PASS": REDACTED, "NCCL_DEBUG": "INFO"},
        "launcher_args": ["x", "--token=<redacted>"],
    }
    second.config = leaky
    second.save()
    out = io.StringIO()
    call_command("redact_job_configs", stdout=out)
    second.refresh_from_db()
    assert SECRET not in repr(second.config)
    assert out.getvalue().strip().endswith("1 redacted")


@pytest.mark.django_db
def test_a_kubernetes_jobs_password_never_shows_on_its_page_or_in_the_api(client, settings, tmp_path):
    settings.PORTAL_SOURCE_ROOTS = [str(tmp_path)]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train-0", "namespace": "ml", "creationTimestamp": "2026-11-29T08:00:00Z"},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "pytorch:2.4",
                    "env": [{"name": "DB_PASS", "value": SECRET}, {"name": "NCCL_IB_HCA", "value": "mlx5_0"}],
                    "args": [f"--db=postgres://app:{SECRET}@db/app"],
                }
            ]
        },
        "status": {"phase": "Running", "startTime": "2026-11-29T08:01:00Z"},
    }
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"kind": "List", "items": [pod]}))
    cluster = ClusterFactory()
    source = DataSourceFactory(
        cluster=cluster, kind=SourceKind.KUBERNETES, name="k8s", config={"path": str(path)}
    )
    source_collect(source_id=source.pk)
    job = Job.objects.get()
    client.force_login(UserFactory(role=Role.PLATFORM_ADMIN))
    for url in (f"/jobs/{job.pk}/", f"/api/v1/jobs/{job.pk}/"):
        body = client.get(url).content.decode()
        assert SECRET not in body, url
    assert job.config["env"] == {"DB_PASS": REDACTED, "NCCL_IB_HCA": "mlx5_0"}
