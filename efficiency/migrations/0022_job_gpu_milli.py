"""Job.gpu_milli: the share of GPUs a job holds, in thousandths (GPU sharing, MIG slices).

Existing jobs held whole GPUs: filled with gpu_count x 1000 before the column becomes required.
"""

from django.db import migrations, models
from django.db.models import F


def whole_gpus(apps, schema_editor):
    Job = apps.get_model("efficiency", "Job")
    Job.objects.update(gpu_milli=F("gpu_count") * 1000)


class Migration(migrations.Migration):
    dependencies = [("efficiency", "0020_names_say_what_they_hold")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="gpu_milli",
            field=models.PositiveIntegerField(null=True),
        ),
        migrations.RunPython(whole_gpus, migrations.RunPython.noop),
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
