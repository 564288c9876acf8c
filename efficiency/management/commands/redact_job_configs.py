from django.core.management.base import BaseCommand

from efficiency.services.ingest import job_configs_redact


class Command(BaseCommand):
    help = (
        "Redact secrets in stored job config snapshots with the current rules (efficiency/redaction.py). "
        "Safe to run twice; run it after widening the rules."
    )

    def handle(self, *args, **options):
        checked, changed = job_configs_redact()
        self.stdout.write(f"{checked} config snapshots checked, {changed} redacted")
