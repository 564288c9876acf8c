"""schemathesis over the OpenAPI schema, as a department head, a committee member and a platform
admin, against the app itself (WSGI, in this process, on the test database): no server error,
and every documented response matches its schema.

Bounded for CI: ``SCHEMATHESIS_EXAMPLES`` examples per operation and role (default 4; the log
push, owned by the logs area, is left out: its NDJSON body is not an OpenAPI object).
"""

import os

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, settings
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from efficiency.services.tokens import api_token_issue

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "4"))
ROLES = ["head_a", "committee", "admin"]


def _raw_schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


schema = schemathesis.openapi.from_dict(_raw_schema())
schema.app = get_wsgi_application()
schema = schema.exclude(path_regex=r"/logs/$")


@pytest.fixture(params=ROLES)
def token(request, org):
    return api_token_issue(user=getattr(org, request.param), name="schemathesis").key


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """As Django's test client does: a request in the test must not close the test's database
    connection at its start or end (on PostgreSQL that ends the test's transaction)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_api_as_each_role_has_no_server_error_and_conforms_to_its_schema(case, token):
    case.call_and_validate(
        headers={"Authorization": f"Token {token}", "Host": "localhost"},
        checks=[response_schema_conformance, status_code_conformance],
    )
