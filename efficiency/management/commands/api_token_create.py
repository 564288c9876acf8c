from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from efficiency.models import DataSource
from efficiency.services.tokens import TokenError, api_token_issue


class Command(BaseCommand):
    help = (
        "Issue an API token for a user and print its key (only this once: the portal stores a "
        "digest). With --source, a push token that can only push log lines to that Log push source."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What uses the token (default: the username).")
        parser.add_argument("--days", type=int, help="Days until it expires (default PORTAL_API_TOKEN_DAYS).")
        parser.add_argument("--source", type=int, metavar="ID", help="Id of the Log push source to push to.")

    def handle(self, *args, username: str, name: str, days: int | None, source: int | None, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        push_source = None
        if source is not None:
            push_source = DataSource.objects.filter(pk=source).first()
            if push_source is None:
                raise CommandError(f"no data source with id {source}")
        try:
            issued = api_token_issue(user=user, name=name or username, days=days, source=push_source)
        except TokenError as error:
            raise CommandError(str(error)) from error
        expires = timezone.localtime(issued.token.expires_at).isoformat(timespec="minutes")
        self.stderr.write(f"Token for {username}, expires {expires}; copy it now, it is not shown again:")
        self.stdout.write(issued.key)
