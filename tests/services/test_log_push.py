"""The NDJSON log push endpoint: authenticated, idempotent, bad lines rejected one by one."""

import gzip
import json

import pytest
from django.contrib.auth.models import Permission

from efficiency.choices import RunStatus
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


# --- Every loss has a status a shipper acts on (Fluent Bit retries anything but 200-205; Vector
# retries 408, 429 and 5xx and reports the rest) -------------------------------------------------


def lines(count: int, stream: str = "/var/log/job-7/rank-0.log") -> bytes:
    return ndjson(
        *({"stream": stream, "offset": 11 * n, "line": f"step {n:05d}", "job": "7"} for n in range(count))
    )


def test_a_gzip_body_is_stored_like_a_plain_one(client, org, shipper):
    answer = client.post(
        f"/api/v1/sources/{org.source.pk}/logs/", data=gzip.compress(lines(3)),
        content_type="application/x-ndjson", HTTP_CONTENT_ENCODING="gzip",
        HTTP_AUTHORIZATION=f"Token {shipper}",
    )  # fmt: skip
    assert answer.status_code == 200
    assert (answer.json()["status"], answer.json()["rejected"]) == ("ok", 0)
    assert LogChunk.objects.get().text == "step 00000\nstep 00001\nstep 00002\n"


def test_a_body_over_the_limit_is_413_with_the_reason_in_json_and_a_failed_run(
    client, org, shipper, settings
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    answer = post(client, org, lines(200), shipper)
    assert answer.status_code == 413
    assert answer["Content-Type"] == "application/json"
    assert "at most 1000" in answer.json()["detail"]
    assert not LogChunk.objects.exists()
    run = SourceRun.objects.get(source=org.source)
    assert run.status == RunStatus.FAILED
    assert "at most 1000" in run.message


def test_a_gzip_bomb_is_413_and_stores_nothing(client, org, shipper):
    bomb = gzip.compress(b" " * (40 * 1024 * 1024))
    answer = client.post(
        f"/api/v1/sources/{org.source.pk}/logs/", data=bomb, content_type="application/x-ndjson",
        HTTP_CONTENT_ENCODING="gzip", HTTP_AUTHORIZATION=f"Token {shipper}",
    )  # fmt: skip
    assert answer.status_code == 413
    assert "inflates to more than" in answer.json()["detail"]
    assert not LogChunk.objects.exists()


def test_more_than_50000_lines_is_413_and_nothing_is_dropped_silently(client, org, shipper, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 20 * 1024 * 1024
    answer = post(client, org, lines(50_001), shipper)
    assert answer.status_code == 413
    assert answer.json()["detail"].startswith("50001 lines in one body, at most 50000")
    assert not LogChunk.objects.exists()


def test_a_body_with_no_good_line_is_400_with_every_reason(client, org, shipper):
    answer = post(client, org, ndjson("{not json", {"stream": "s", "offset": -1, "line": "x"}), shipper)
    assert answer.status_code == 400
    assert [(r["line"], r["reason"][:12]) for r in answer.json()["rejects"]] == [
        (1, "invalid JSON"),
        (2, "'offset' out"),
    ]


def test_an_empty_body_is_200_with_nothing_received_and_nothing_lost(client, org, shipper):
    # A body that really is empty: nothing was sent, so nothing is lost (a chunked body is read,
    # tests/api/test_log_push_http.py).
    answer = post(client, org, b"", shipper)
    assert answer.status_code == 200
    assert (answer.json()["received"], answer.json()["rejected"]) == (0, 0)


def test_a_retry_of_stored_lines_is_200_not_400(client, org, shipper):
    post(client, org, lines(2), shipper)
    again = post(client, org, lines(2), shipper)
    assert (again.status_code, again.json()["duplicates"]) == (200, 1)


def test_an_encoding_we_do_not_inflate_is_415(client, org, shipper):
    answer = client.post(
        f"/api/v1/sources/{org.source.pk}/logs/", data=b"(\xb5/\xfd", content_type="application/x-ndjson",
        HTTP_CONTENT_ENCODING="zstd", HTTP_AUTHORIZATION=f"Token {shipper}",
    )  # fmt: skip
    assert answer.status_code == 415
