"""QuotaEvent.detail: facts beside a person's comment, so that no English the portal wrote is
stored in ``comment``. Moves the borrowing limit and the fixed partition note out of old comments."""

import re

from django.db import migrations, models

LIMIT = re.compile(r"^Borrowing limit: (?P<limit>none|\d+)\.\s*")
FIXED_PARTITION_NOTE = "Fixed partition: owned GPUs."


def move_facts_out_of_comments(apps, schema_editor):
    QuotaEvent = apps.get_model("efficiency", "QuotaEvent")
    for event in QuotaEvent.objects.filter(kind="edited", comment__startswith="Borrowing limit: "):
        match = LIMIT.match(event.comment)
        if match is None:
            continue
        limit = match["limit"]
        # The old comment did not say what the limit was before; only the new value is known.
        event.detail = {"borrowing_limit_to_gpus": None if limit == "none" else int(limit)}
        event.comment = event.comment[match.end() :]
        event.save(update_fields=["detail", "comment"])
    QuotaEvent.objects.filter(kind="created", comment=FIXED_PARTITION_NOTE).update(comment="")


class Migration(migrations.Migration):
    dependencies = [
        ("efficiency", "0012_faults_trust"),
    ]

    operations = [
        migrations.AddField(
            model_name="quotaevent",
            name="detail",
            field=models.JSONField(blank=True, default=dict, verbose_name="detail"),
        ),
        migrations.RunPython(move_facts_out_of_comments, migrations.RunPython.noop),
    ]
