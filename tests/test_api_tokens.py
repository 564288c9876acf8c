"""API tokens: the database never holds a key, every token expires, a push token pushes to its
own source and does nothing else, and the DRF tokens of existing clients keep working."""

import importlib
import io
import json
from datetime import timedelta

import pytest
import time_machine
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token

from efficiency.choices import Role, SourceKind
from efficiency.models import ApiToken, LogChunk
from efficiency.services.tokens import TokenError, api_token_issue
from tests.factories import DataSourceFactory, UserFactory


def api_get(client, key, path="/api/v1/jobs/"):
    return client.get(path, HTTP_AUTHORIZATION=f"Token {key}")


def push(client, key, source, line="iteration 1 | lm loss: 2.1"):
    body = json.dumps({"stream": "/var/log/job-7/rank-0.log", "offset": 0, "line": line, "job": "7"})
    return client.post(
        f"/api/v1/sources/{source.pk}/logs/",
        data=body.encode(),
        content_type="application/x-ndjson",
        HTTP_AUTHORIZATION=f"Token {key}",
    )


def all_stored_text() -> str:
    """Every value of every column of the token tables, as the database holds them."""
    with connection.cursor() as cursor:
        values = []
        for table in (ApiToken._meta.db_table, Token._meta.db_table):
            cursor.execute(f"SELECT * FROM {table}")  # our own table names
            values += [str(value) for row in cursor.fetchall() for value in row]
    return "\n".join(values)


def test_the_database_holds_a_digest_and_never_the_key(client, org):
    issued = api_token_issue(user=org.head_b, name="notebook")
    assert issued.key not in all_stored_text()
    assert issued.key[8:] not in all_stored_text()
    assert issued.token.prefix == issued.key[:8]
    assert api_get(client, issued.key).status_code == 200


def test_a_token_reads_the_api_until_it_expires_then_says_so(client, org, settings):
    settings.PORTAL_API_TOKEN_DAYS = 30
    issued = api_token_issue(user=org.head_b, name="notebook")
    assert abs(issued.token.expires_at - timezone.now() - timedelta(days=30)) < timedelta(seconds=5)
    with time_machine.travel(issued.token.expires_at - timedelta(minutes=1)):
        assert api_get(client, issued.key).status_code == 200
    with time_machine.travel(issued.token.expires_at + timedelta(seconds=1)):
        response = api_get(client, issued.key)
    assert response.status_code == 401
    assert "expired" in response.json()["detail"]


def test_a_token_of_a_deactivated_user_is_refused(client, org):
    issued = api_token_issue(user=org.head_b, name="notebook")
    org.head_b.is_active = False
    org.head_b.save()
    assert api_get(client, issued.key).status_code == 401


def test_use_is_recorded_at_most_every_few_minutes(client, org):
    issued = api_token_issue(user=org.head_b, name="notebook")
    api_get(client, issued.key)
    first = ApiToken.objects.get().last_used_at
    assert first is not None
    api_get(client, issued.key)
    assert ApiToken.objects.get().last_used_at == first


def test_checking_a_token_costs_one_query_and_recording_its_use_one_more_every_few_minutes(client, org):
    issued = api_token_issue(user=org.head_b, name="notebook")
    for expected in (2, 1):  # the first call records the use; the next one only reads
        with CaptureQueriesContext(connection) as queries:
            assert api_get(client, issued.key).status_code == 200
        token_queries = [q["sql"] for q in queries if ApiToken._meta.db_table in q["sql"]]
        assert len(token_queries) == expected, "why does token authentication need more queries?"


def test_a_push_token_pushes_to_its_source(client, org):
    service = UserFactory(username="fluent-bit")  # no role and no permission: the token is the grant
    issued = api_token_issue(user=service, name="fluent-bit", source=org.source)
    response = push(client, issued.key, org.source)
    assert response.status_code == 200, response.content
    assert LogChunk.objects.filter(source=org.source).count() == 1


def test_a_push_token_of_an_admin_reads_nothing_and_pushes_nowhere_else(client, org):
    other = DataSourceFactory(cluster=org.cluster, kind=SourceKind.LOG_PUSH, name="other push")
    issued = api_token_issue(user=org.admin, name="fluent-bit", source=org.source)
    for path in ("/api/v1/jobs/", "/api/v1/nodes/", "/api/v1/incidents/", "/api/v1/usage/?range=7d"):
        response = api_get(client, issued.key, path)
        assert response.status_code == 403, path
        assert "push token" in response.json()["detail"]
    response = push(client, issued.key, other)
    assert response.status_code == 403
    assert "push" in response.json()["detail"]
    assert not LogChunk.objects.exists()
    # The admin's own (unbound) token still pushes anywhere.
    assert push(client, api_token_issue(user=org.admin, name="ops").key, other).status_code == 200


def test_push_tokens_exist_only_for_log_push_sources(org):
    org.source.kind = SourceKind.LOG_FILES
    org.source.save()
    with pytest.raises(TokenError, match="not a log push source"):
        api_token_issue(user=org.admin, name="x", source=org.source)


def test_existing_drf_tokens_are_moved_over_hashed_and_keep_working(client, org):
    key = Token.objects.create(user=org.head_b).key
    migration = importlib.import_module("efficiency.migrations.0017_auth_audit")
    migration.tokens_hash(apps, None)
    assert not Token.objects.exists()
    assert key not in all_stored_text()
    assert api_get(client, key).status_code == 200
    assert ApiToken.objects.get().expires_at > timezone.now() + timedelta(days=80)


def test_the_command_prints_a_key_that_works_and_refuses_unknowns(client, org):
    out, err = io.StringIO(), io.StringIO()
    call_command("api_token_create", "head-b", "--days", "7", stdout=out, stderr=err)
    key = out.getvalue().strip()
    assert "not shown again" in err.getvalue()
    assert api_get(client, key).status_code == 200
    call_command("api_token_create", "head-b", "--source", str(org.source.pk), stdout=out, stderr=err)
    assert ApiToken.objects.filter(source=org.source).count() == 1
    with pytest.raises(CommandError, match="no user"):
        call_command("api_token_create", "nobody-at-all")
    with pytest.raises(CommandError, match="at least one day"):
        call_command("api_token_create", "head-b", "--days", "0")


def test_a_platform_admin_issues_a_token_in_the_admin_and_sees_the_key_once(client, org):
    platform_admin = UserFactory(username="ops", role=Role.PLATFORM_ADMIN)
    client.force_login(platform_admin)
    response = client.post(
        reverse("admin:efficiency_apitoken_add"),
        {"user": org.head_b.pk, "name": "dashboard script", "source": "", "days": 14},
        follow=True,
    )
    token = ApiToken.objects.get()
    page = response.content.decode()
    key = page.split("The new token is ")[1].split(" ")[0]
    assert key.startswith(token.prefix)
    assert (token.user, token.name) == (org.head_b, "dashboard script")
    assert key not in all_stored_text()
    assert (
        client.get(reverse("admin:efficiency_apitoken_change", args=[token.pk])).content.decode().count(key)
        == 0
    )
    client.logout()
    assert api_get(client, key).status_code == 200


def test_a_platform_admin_cannot_issue_a_token_for_a_superuser(client, org):
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    client.force_login(UserFactory(username="ops", role=Role.PLATFORM_ADMIN))
    response = client.post(
        reverse("admin:efficiency_apitoken_add"), {"user": root.pk, "name": "escalate", "days": 14}
    )
    assert response.status_code == 200  # the form again, with the error
    assert not ApiToken.objects.exists()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=80))
def test_any_other_key_is_a_401_never_a_500(client, org, key):
    api_token_issue(user=org.head_b, name="notebook")
    assert api_get(client, key).status_code == 401
