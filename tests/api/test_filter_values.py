"""A bad filter value on the incidents, fault-signal and quota lists is a 400 that names the
parameter, never a silently unfiltered list."""

import pytest

from tests.quota_fixtures import make_planning


@pytest.fixture
def committee(db):
    return make_planning().committee


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("/api/v1/incidents/?status=bogus", "status"),
        ("/api/v1/incidents/?category=not-a-cause", "category"),
        ("/api/v1/incidents/?job=a%00b", "job"),
        ("/api/v1/fault-signals/?category=nope", "category"),
        ("/api/v1/fault-signals/?node=gpu%00", "node"),
        ("/api/v1/fault-signals/?range=1y", "range"),
        ("/api/v1/fault-signals/?range=custom&start=2026-02-30&end=2026-03-02", "start"),
        ("/api/v1/fault-signals/?range=custom&start=2026-03-02&end=yesterday", "end"),
        ("/api/v1/fault-signals/?range=custom&start=2026-03-02", "end"),
        ("/api/v1/quota-cycles/?status=maybe", "status"),
        ("/api/v1/quota-cycles/?cluster=nowhere", "cluster"),
        ("/api/v1/quota-cycles/?cluster=ad%00platform", "cluster"),
        ("/api/v1/capacity-alerts/?open=perhaps", "open"),
        ("/api/v1/quota-overview/?cluster=nowhere", "cluster"),
        ("/api/v1/recommendations/?state=open", "state"),
        ("/api/v1/recommendations/?rule=no.such-rule", "rule"),
        ("/api/v1/recommendations/?department=ad%00platform", "department"),
        ("/api/v1/recommendations/?min_gain=-5", "min_gain"),
        ("/api/v1/recommendations/?sort=hostname", "sort"),
    ],
)
def test_a_bad_filter_value_is_a_400_naming_the_parameter(client, committee, query, parameter):
    client.force_login(committee)
    response = client.get(query)
    assert response.status_code == 400, response.content[:300]
    assert list(response.json()) == [parameter]
    assert all(isinstance(reason, str) and reason for reason in response.json()[parameter])
