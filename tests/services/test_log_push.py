"""The NDJSON log push endpoint: authenticated, idempotent, bad lines rejected one by one."""

import json

import pytest
from django.contrib.auth.models import Permission

from efficiency.models import LogChunk, SourceRun
from efficiency.services.tokens import api_token_issue
from tests.factories import UserFactory


def ndjson(*objects) -> bytes:
    return "\n".join(json.dumps(o) if not isinstance(o, str) else o for o in objects).encode()


@pytest.fixture
def shipper(org):
    user = UserFactory(username="fluent-bit")
    user.user_permissions.add(Permission.objects.get(codename="add_logchunk"))
    return api_token_issue(user=user, name="fluent-bit").key


def post(client, org, body, token):
    return client.post(
        f"/api/v1/sources/{org.source.pk}/logs/",
        data=body,
        content_type="application/x-ndjson",
        HTTP_AUTHORIZATION=f"Token {token}",
    )


def test_shipper_pushes_lines_and_a_retry_is_not_stored_twice(client, org, shipper):
    body = ndjson(
        {
            "stream": "/var/log/job-7/rank-0.log",
            "offset": 0,
            "line": "iteration 1 | lm loss: 2.1",
            "job": "7",
        },
        {
            "stream": "/var/log/job-7/rank-0.log",
            "offset": 27,
            "line": "iteration 2 | lm loss: 2.0",
            "job": "7",
        },
    )
    first = post(client, org, body, shipper).json()
    second = post(client, org, body, shipper).json()
    assert (first["received"], first["stored"], first["rejected"]) == (1, 1, 0)
    assert (second["stored"], second["duplicates"]) == (0, 1)
    assert LogChunk.objects.get().text.count("\n") == 2
    assert SourceRun.objects.filter(source=org.source).count() == 2


def test_bad_lines_are_rejected_with_reasons_and_good_ones_kept(client, org, shipper):
    body = ndjson(
        {"stream": "s", "offset": 0, "line": "good"},
        "{not json",
        {"stream": "s", "offset": -5, "line": "negative offset"},
        [1, 2, 3],
    )
    answer = post(client, org, body, shipper).json()
    assert answer["stored"] == 1
    assert answer["rejected"] == 3
    assert [item["line"] for item in answer["rejects"]] == [2, 3, 4]
    assert answer["status"] == "partial"


def test_a_user_without_the_permission_cannot_push(client, org):
    token = api_token_issue(user=org.committee, name="t").key
    assert post(client, org, ndjson({"stream": "s", "offset": 0, "line": "x"}), token).status_code == 403


def test_pushing_to_a_source_of_another_kind_is_404(client, org, shipper):
    org.source.kind = "log_files"
    org.source.save()
    assert post(client, org, b"", shipper).status_code == 404
