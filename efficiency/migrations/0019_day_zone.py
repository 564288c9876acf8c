"""Portal days: the zone whose midnights cut each day rollup and each node-class cycle.

Classification cycles so far were cut at UTC midnight, so their rows say "UTC". Day rollups were
cut in the display zone of the day they were written, which may have changed since: they say ""
(unknown), and the next rollup run recomputes them from the hourly rows in the current zone.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("efficiency", "0018_history_incident_confirmed"),
    ]

    operations = [
        migrations.AddField(
            model_name="nodeclassification",
            name="day_zone",
            field=models.CharField(default="UTC", max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="nodeday",
            name="day_zone",
            field=models.CharField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.AddIndex(
            model_name="nodeday",
            index=models.Index(fields=["day_zone"], name="efficiency__day_zon_777a14_idx"),
        ),
    ]
