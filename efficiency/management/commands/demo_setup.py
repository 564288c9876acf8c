from django.core.management.base import BaseCommand

from efficiency.services.organisation import DEMO_LOGINS, demo_organisation_create

DEFAULT_DEMO_PASSWORD = "portal-demo"  # noqa: S105 -- printed at start; demo only


class Command(BaseCommand):
    help = "Create the demo organisation (reference scenario) and one user per role; idempotent."

    def add_arguments(self, parser):
        parser.add_argument("--password", default=DEFAULT_DEMO_PASSWORD, help="Password for new demo users.")

    def handle(self, *args, password: str, **options):
        demo_organisation_create(password=password)
        logins_write(self.stdout, password=password)


def logins_write(stdout, *, password: str) -> None:
    """The demo logins, as a block that stands out in the console."""
    stdout.write("Demo organisation ready. Sign in as:")
    for login in DEMO_LOGINS:
        scope = ", ".join(login.departments) or "all departments"
        stdout.write(f"  {login.username:<12} / {password:<12}  {login.role.label} ({scope})")
