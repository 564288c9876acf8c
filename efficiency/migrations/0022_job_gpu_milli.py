"""Job.gpu_milli: the share of GPUs a job holds, in thousandths (GPU sharing, MIG slices).

Existing jobs are filled before the column becomes required: gpu_count x 1000 (whole GPUs), or
gpu_count x the per-GPU share the CSV import kept in their config snapshot.
"""

from django.db import migrations, models
from django.db.models import F


def whole_gpus(apps, schema_editor):
    """Whole GPUs for every job, except those the CSV import stored with a per-GPU share in their
    config snapshot (``config["gpu_milli"]``, 0-1000): those hold gpu_count x that share."""
    Job = apps.get_model("efficiency", "Job")
    Job.objects.update(gpu_milli=F("gpu_count") * 1000)
    shared = []
    for job in Job.objects.filter(config__has_key="gpu_milli").only("pk", "gpu_count", "config").iterator():
        share = job.config.get("gpu_milli")
        if isinstance(share, int) and not isinstance(share, bool) and 0 <= share < 1000:
            job.gpu_milli = job.gpu_count * share
            shared.append(job)
    Job.objects.bulk_update(shared, ["gpu_milli"], batch_size=1000)


class Migration(migrations.Migration):
    # The fill commits before the column becomes NOT NULL: PostgreSQL refuses to ALTER a table
    # with the deferred foreign-key checks of the rows just updated still pending.
    atomic = False

    dependencies = [("efficiency", "0021_node_discovery")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="gpu_milli",
            field=models.PositiveIntegerField(null=True),
        ),
        migrations.RunPython(whole_gpus, migrations.RunPython.noop, atomic=True),
        migrations.AlterField(
            model_name="job",
            name="gpu_milli",
            field=models.PositiveIntegerField(
                help_text=(
                    "Thousandths of a GPU the job holds in all: 1000 per whole GPU, 500 for half of "
                    "a shared GPU. GPU-hours and allocation are counted from this."
                ),
                verbose_name="GPU share (thousandths)",
            ),
        ),
        migrations.AlterField(
            model_name="job",
            name="gpu_count",
            field=models.PositiveIntegerField(
                default=0,
                help_text="Whole GPUs the job touches, as the scheduler reports them.",
                verbose_name="GPUs",
            ),
        ),
    ]
