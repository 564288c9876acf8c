"""Migration 0022_job_gpu_milli fills the GPU share of the jobs already stored: whole GPUs, or the
per-GPU share the CSV import kept in the config snapshot (``config["gpu_milli"]``)."""

from datetime import UTC, datetime

from tests.migrations import around, migrate

T0 = datetime(2026, 11, 2, tzinfo=UTC)


def test_stored_jobs_get_whole_gpus_or_the_share_their_snapshot_kept(transactional_db):
    before, latest = around("_job_gpu_milli")
    apps = migrate(before)
    Cluster = apps.get_model("efficiency", "Cluster")
    Job = apps.get_model("efficiency", "Job")
    cluster = Cluster.objects.create(slug="old", name="old")
    common = {"cluster": cluster, "source": "csv", "state": "completed", "submitted_at": T0}
    snapshots = {
        "whole": (8, {}),
        "shared": (1, {"gpu_milli": 460}),
        "full": (2, {"gpu_milli": 1000}),
        "odd": (1, {"gpu_milli": "half"}),  # not a share the import would have written: whole
        "none": (0, {}),
    }
    for external_id, (gpus, config) in snapshots.items():
        Job.objects.create(external_id=external_id, gpu_count=gpus, config=config, **common)
    apps = migrate(latest)
    shares = dict(apps.get_model("efficiency", "Job").objects.values_list("external_id", "gpu_milli"))
    assert shares == {"whole": 8000, "shared": 460, "full": 2000, "odd": 1000, "none": 0}
