"""Login throttling (django-axes): ten wrong passwords for a username from one address lock that
pair out for the cool-off, whatever password comes next; the login page says so in the reader's
language, a JSON client gets a 429 with the wait; platform admins see and lift lockouts."""

import base64
from datetime import timedelta

import pytest
import time_machine
from axes.models import AccessAttempt
from django.conf import settings as django_settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.choices import Role
from efficiency.services.organisation import demo_organisation_create
from tests.conftest import PASSWORD
from tests.factories import UserFactory

LIMIT = 10


def sign_in(client, password, username="head-a", **extra):
    return client.post("/login/", {"username": username, "password": password}, **extra)


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_ten_wrong_passwords_then_the_right_one_is_refused_with_the_reason(client, org):
    for _ in range(LIMIT - 1):
        assert sign_in(client, "guess").status_code == 200
    assert sign_in(client, "guess").status_code == 429  # the tenth
    response = sign_in(client, PASSWORD)
    assert response.status_code == 429
    assert not signed_in(client)
    body = response.content.decode()
    assert "Too many failed sign-ins for this username from your address. Try again in 15 minutes." in body
    assert 'value="head-a"' in body  # the username is kept in the form
    assert response["Retry-After"] == "900"


def test_after_the_cool_off_without_tries_the_right_password_works_again(client, org):
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        for _ in range(LIMIT):
            sign_in(client, "guess")
        assert sign_in(client, PASSWORD).status_code == 429
    with time_machine.travel(start + timedelta(minutes=14)):
        assert sign_in(client, PASSWORD).status_code == 429
    # A try during the lockout starts the wait again: 20 minutes after the tenth is 6 after it.
    with time_machine.travel(start + timedelta(minutes=20)):
        assert sign_in(client, PASSWORD).status_code == 429
    with time_machine.travel(start + timedelta(minutes=36)):
        response = sign_in(client, PASSWORD)
        assert response.status_code == 302
        assert signed_in(client)


def test_nine_wrong_then_the_right_one_signs_in_and_starts_the_count_again(client, org):
    for _ in range(LIMIT - 1):
        sign_in(client, "guess")
    assert sign_in(client, PASSWORD).status_code == 302
    client.logout()
    for _ in range(LIMIT - 1):
        sign_in(client, "guess")
    assert sign_in(client, PASSWORD).status_code == 302


def test_the_lock_is_per_username_and_address(client, org):
    for _ in range(LIMIT):
        sign_in(client, "guess")
    # The same person from another address, and another user from the same address, still sign in.
    assert sign_in(Client(REMOTE_ADDR="10.0.0.9"), PASSWORD).status_code == 302
    assert sign_in(Client(), PASSWORD, username="head-b").status_code == 302


def test_a_json_client_gets_a_429_with_the_wait(client, org):
    for _ in range(LIMIT):
        sign_in(client, "guess")
    response = sign_in(client, PASSWORD, HTTP_ACCEPT="application/json")
    assert response.status_code == 429
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "detail": "Too many failed sign-ins for this username from your address. Try again in 15 minutes.",
        "retry_after_s": 900,
    }


def test_the_lockout_message_is_in_the_readers_language(client, org):
    client.cookies["django_language"] = "zh-hans"
    for _ in range(LIMIT):
        sign_in(client, "guess")
    body = sign_in(client, PASSWORD).content.decode()
    assert "登录失败次数过多" in body


def test_the_admin_login_is_throttled_too(client, org):
    for _ in range(LIMIT):
        client.post(reverse("admin:login"), {"username": "admin", "password": "guess"})
    response = client.post(reverse("admin:login"), {"username": "admin", "password": PASSWORD})
    assert response.status_code == 429
    assert not signed_in(client)


def test_a_platform_admin_sees_the_lockout_in_the_admin_and_lifts_it(client, org):
    for _ in range(LIMIT):
        sign_in(client, "guess")
    ops = Client()
    ops.force_login(UserFactory(username="ops", role=Role.PLATFORM_ADMIN))
    page = ops.get(reverse("admin:axes_accessattempt_changelist")).content.decode()
    assert "head-a" in page
    attempt = AccessAttempt.objects.get(username="head-a")
    response = ops.post(reverse("admin:axes_accessattempt_delete", args=[attempt.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert sign_in(client, PASSWORD).status_code == 302


def test_the_demo_logins_still_sign_in(client, db):
    demo_organisation_create(password="portal-demo")
    for username in ("admin", "committee", "head-vision", "head-radar"):
        assert sign_in(Client(), "portal-demo", username=username).status_code == 302, username


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(attempts=st.lists(st.booleans(), max_size=12))
def test_a_right_password_signs_in_exactly_when_fewer_than_the_limit_failed_since_the_last_success(
    org, attempts
):
    """Any sequence of right (True) and wrong (False) passwords, with a limit of three: the
    right one works as long as fewer than three wrong ones came since the last success."""
    AccessAttempt.objects.all().delete()
    limit, failed = 3, 0
    previous, django_settings.AXES_FAILURE_LIMIT = django_settings.AXES_FAILURE_LIMIT, limit
    try:
        for right in attempts:
            client = Client()
            response = sign_in(client, PASSWORD if right else "guess")
            if failed >= limit:
                assert response.status_code == 429
                failed += not right
            elif right:
                assert response.status_code == 302
                failed = 0
            else:
                assert response.status_code == (429 if failed + 1 >= limit else 200)
                failed += 1
    finally:
        django_settings.AXES_FAILURE_LIMIT = previous


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/usage/?range=7d"])
def test_the_api_has_no_password_sign_in_to_guess_at(client, org, path):
    # A username and password in Basic auth are not accepted: the API takes tokens only.
    credentials = base64.b64encode(f"head-a:{PASSWORD}".encode()).decode()
    assert client.get(path, HTTP_AUTHORIZATION=f"Basic {credentials}").status_code == 401
