"""Names that say what they hold: an incident's ``title`` held the id of its root evidence's
signature (``xid-79``), so it is ``root_signature_id``; a cycle's ``origin`` was free text compared
with magic strings, so it is a choice of ``QuotaCycleOrigin``."""

from django.db import migrations, models


def origins_known(apps, schema_editor):
    QuotaCycle = apps.get_model("efficiency", "QuotaCycle")
    QuotaCycle.objects.exclude(origin__in=["fixed_partition", "proposal"]).update(origin="proposal")


class Migration(migrations.Migration):
    dependencies = [("efficiency", "0019_day_zone")]

    operations = [
        migrations.RenameField("incident", "title", "root_signature_id"),
        migrations.RenameField("historicalincident", "title", "root_signature_id"),
        migrations.AlterField(
            model_name="incident",
            name="root_signature_id",
            field=models.CharField(max_length=300, verbose_name="root signature"),
        ),
        migrations.AlterField(
            model_name="historicalincident",
            name="root_signature_id",
            field=models.CharField(max_length=300, verbose_name="root signature"),
        ),
        migrations.RunPython(origins_known, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="quotacycle",
            name="origin",
            field=models.CharField(
                choices=[("fixed_partition", "Fixed partition"), ("proposal", "Proposal")],
                max_length=20,
                verbose_name="origin",
            ),
        ),
        migrations.AlterField(
            model_name="historicalquotacycle",
            name="origin",
            field=models.CharField(
                choices=[("fixed_partition", "Fixed partition"), ("proposal", "Proposal")],
                max_length=20,
                verbose_name="origin",
            ),
        ),
    ]
