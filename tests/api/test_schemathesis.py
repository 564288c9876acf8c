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


# Generated cases rarely hit a stored row, so the recommendations' answers are also checked on real
# rows: every field filled in or null, evidence left out for a head, each decision and refusal.
RECOMMENDATION_CALLS = [
    ("/api/v1/recommendations/", "GET", {}, None),
    ("/api/v1/recommendations/{id}/", "GET", {}, None),
    ("/api/v1/recommendations/{id}/comment/", "POST", {}, {"text": "We fix it in the next image."}),
    ("/api/v1/recommendations/{id}/comment/", "POST", {}, {"text": ""}),
    ("/api/v1/recommendations/{id}/snooze/", "POST", {}, {"until": "2999-01-01"}),
    ("/api/v1/recommendations/{id}/accept/", "POST", {}, {"department": "radar", "note": "OPS-12"}),
    ("/api/v1/recommendations/{id}/accept/", "POST", {}, {}),
    ("/api/v1/recommendations/{id}/reject/", "POST", {}, {"reason": "Moving to RoCE."}),
    ("/api/v1/recommendations/", "GET", {"state": "rejected", "sort": "-last_seen"}, None),
    ("/api/v1/recommendations/", "GET", {"min_gain": "-1"}, None),
]


@pytest.mark.django_db
def test_recommendation_answers_on_stored_rows_conform_to_the_schema(org, token):
    from tests.factories import RecommendationDecisionFactory, RecommendationFactory

    rec = RecommendationFactory(cluster=org.cluster, department=org.dept_a, closed_at=None)
    rec.jobs.add(org.job_a)
    RecommendationDecisionFactory(recommendation=rec)
    node = RecommendationFactory(
        cluster=org.cluster, department=None, subject_kind="node", subject_key="gpu-a01", node=org.node_a,
        rule="storage.cache-metadata-only", user_name="", name_pattern="",
    )  # fmt: skip
    statuses = set()
    for pk in (rec.pk, node.pk):
        for path, method, query, body in RECOMMENDATION_CALLS:
            case = schema[path][method].Case(
                path_parameters={"id": pk} if "{id}" in path else None,
                query=query or None,
                **({"body": body, "media_type": "application/json"} if body is not None else {}),
            )
            response = case.call_and_validate(
                headers={"Authorization": f"Token {token}", "Host": "localhost"},
                checks=[response_schema_conformance, status_code_conformance],
            )
            statuses.add(response.status_code)
    assert 200 in statuses
