"""File sources read only under PORTAL_SOURCE_ROOTS: checked on save in the admin and on every read."""

from datetime import UTC, datetime

import pytest
from django.conf import settings as django_settings

from efficiency.choices import Role, RunStatus, SourceKind
from efficiency.models import DataSource, Job, SourceRun
from efficiency.services.sources import SourceOutsideRoots, source_collect
from tests.factories import ClusterFactory, UserFactory

NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@pytest.fixture
def confined(db, settings, tmp_path):
    root = tmp_path / "sources"
    root.mkdir()
    settings.PORTAL_SOURCE_ROOTS = [str(root)]
    return root


def test_a_slurm_source_pointed_at_the_secret_key_is_refused_and_shows_none_of_it(confined):
    secret_key = django_settings.VAR_DIR / "secret_key"
    source = DataSource.objects.create(
        cluster=ClusterFactory(), kind=SourceKind.SLURM, name="sacct", config={"path": str(secret_key)}
    )
    with pytest.raises(SourceOutsideRoots, match="is outside the source roots"):
        source_collect(source_id=source.pk, now=NOW)
    run = SourceRun.objects.get()
    assert run.status == RunStatus.FAILED
    assert run.rejects == []
    if secret_key.exists():
        assert secret_key.read_text().strip()[:20] not in run.message
    assert str(confined) in run.message


def test_a_symlink_inside_a_root_to_a_file_outside_is_refused(confined, tmp_path):
    outside = tmp_path / "shadow"
    outside.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    (confined / "sacct.txt").symlink_to(outside)
    source = DataSource.objects.create(
        cluster=ClusterFactory(),
        kind=SourceKind.SLURM,
        name="sacct",
        config={"path": str(confined / "sacct.txt")},
    )
    with pytest.raises(SourceOutsideRoots):
        source_collect(source_id=source.pk, now=NOW)
    assert "secret-hash" not in repr(SourceRun.objects.get().rejects)
    assert "secret-hash" not in SourceRun.objects.get().message


def test_a_file_inside_a_root_is_read(confined):
    (confined / "sacct.txt").write_text(
        "JobID|JobName|Account|State|Submit\n1|train|vision|COMPLETED|2026-11-29T08:00:00\n"
    )
    source = DataSource.objects.create(
        cluster=ClusterFactory(),
        kind=SourceKind.SLURM,
        name="sacct",
        config={"path": str(confined / "sacct.txt")},
    )
    assert source_collect(source_id=source.pk, now=NOW).stored == 1
    assert Job.objects.get().name == "train"


def test_the_admin_refuses_a_log_root_outside_the_roots_naming_them(confined, client):
    client.force_login(UserFactory(role=Role.PLATFORM_ADMIN, is_staff=True, is_superuser=True))
    cluster = ClusterFactory()
    response = client.post(
        "/admin/efficiency/datasource/add/",
        {
            "cluster": cluster.pk,
            "kind": SourceKind.LOG_FILES,
            "name": "logs",
            "config": '{"root": "/etc"}',
            "enabled": "on",
            "interval_s": 60,
            "state": "{}",
        },
    )
    assert response.status_code == 200
    assert "/etc is outside the directories file sources may read" in response.content.decode()
    assert str(confined) in response.content.decode()
    assert not DataSource.objects.exists()
