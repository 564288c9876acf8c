"""``manage.py collect SOURCE`` collects once, now, and says what the run did."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from efficiency.choices import RunStatus, SourceKind
from efficiency.models import DataSource, Job, SourceRun
from tests.factories import ClusterFactory

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "jobs"


def collect(*args) -> str:
    out = StringIO()
    call_command("collect", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def sacct(db):
    """A Slurm source reading a real-format sacct dump with good and malformed rows."""
    cluster = ClusterFactory(slug="ad", name="AD platform")
    return DataSource.objects.create(
        cluster=cluster,
        kind=SourceKind.SLURM,
        name="sacct",
        config={"path": str(FIXTURES / "sacct_bad_rows.txt"), "timezone": "UTC"},
    )


def test_collect_by_name_stores_rows_and_prints_the_rejected_with_their_reasons(sacct):
    text = collect("sacct")
    run = SourceRun.objects.get(source=sacct)
    assert run.status == RunStatus.PARTIAL
    assert f"Run {run.pk}: Partly rejected" in text
    # The dump's 8 rows: 6001, 6002 (a "|" in its name) and 6008 are jobs; 5 are malformed.
    assert "received 3, stored 3, duplicates 0, rejected 5" in text
    assert Job.objects.count() == 3
    assert "rejected: line 4: unknown Slurm state 'REVOKED' in State" in text
    assert "rejected: line 9: expected 15 fields as in the header, got 7" in text
    assert "warning: jobs ran on unknown node 'gpu-001' (1 jobs)" in text


def test_collect_by_id_and_by_cluster_and_name_are_the_same_source(sacct):
    collect(str(sacct.pk))
    second = collect("ad/sacct")
    assert SourceRun.objects.filter(source=sacct).count() == 2
    assert "stored 0" in second  # the same rows again are duplicates, nothing is stored twice


def test_an_unknown_source_names_the_ones_there_are(sacct):
    with pytest.raises(CommandError, match=r"No data source 'nope'\. Sources: .*ad/sacct"):
        collect("nope")


def test_a_name_on_two_clusters_asks_for_cluster_and_name(sacct):
    DataSource.objects.create(cluster=ClusterFactory(slug="lab"), kind=SourceKind.SLURM, name="sacct")
    with pytest.raises(CommandError, match="names several sources"):
        collect("sacct")


def test_a_disabled_source_is_refused_and_not_run(sacct):
    sacct.enabled = False
    sacct.save()
    with pytest.raises(CommandError, match="disabled"):
        collect("sacct")
    assert not SourceRun.objects.exists()


def test_a_failing_source_prints_its_failed_run_and_exits_non_zero(sacct, tmp_path):
    sacct.config = {"path": str(tmp_path / "gone.txt")}
    sacct.save()
    out = StringIO()
    with pytest.raises(CommandError, match="collection failed: SourceUnavailable: cannot read"):
        call_command("collect", "sacct", stdout=out)
    assert "Failed" in out.getvalue()
    assert SourceRun.objects.get(source=sacct).status == RunStatus.FAILED


def test_a_push_source_says_it_is_not_collected(sacct):
    DataSource.objects.create(cluster=sacct.cluster, kind=SourceKind.LOG_PUSH, name="push")
    with pytest.raises(CommandError, match="not collected periodically"):
        collect("push")
