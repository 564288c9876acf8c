"""Redact secrets from config snapshots stored before jobs were redacted at ingest (issue 12)."""

from django.db import migrations


def redact_stored_configs(apps, schema_editor):
    from efficiency.redaction import config_redact

    Job = apps.get_model("efficiency", "Job")
    changed = []
    for job in Job.objects.exclude(config={}).only("pk", "config").iterator(chunk_size=2000):
        redacted = config_redact(job.config)
        if redacted != job.config:
            job.config = redacted
            changed.append(job)
        if len(changed) >= 1000:
            Job.objects.bulk_update(changed, ["config"])
            changed = []
    Job.objects.bulk_update(changed, ["config"])


class Migration(migrations.Migration):
    dependencies = [("efficiency", "0015_logs_trust")]

    # Redaction cannot be undone: the secrets are gone, which is the point.
    operations = [migrations.RunPython(redact_stored_configs, migrations.RunPython.noop)]
