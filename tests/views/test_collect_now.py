"""The Data sources page's "Collect now": platform admins queue one collection of a source."""

import pytest

from efficiency import tasks
from efficiency.choices import SourceKind
from efficiency.models import DataSource


@pytest.fixture
def queued(monkeypatch):
    """The source ids whose collection was queued (instead of reaching a broker)."""
    ids: list[int] = []
    monkeypatch.setattr(tasks.collect_source_task, "delay", lambda source_id: ids.append(source_id))
    return ids


@pytest.fixture
def prometheus(org):
    return DataSource.objects.create(
        cluster=org.cluster, kind=SourceKind.PROMETHEUS, name="prom-main", config={"url": "http://prom:9090"}
    )


def test_admin_sees_the_button_for_collected_sources_only(client, org, prometheus):
    client.force_login(org.admin)
    body = client.get("/sources/").content.decode()
    assert f'action="/sources/{prometheus.pk}/collect/"' in body
    assert f'action="/sources/{org.source.pk}/collect/"' not in body  # a push source receives
    assert 'name="csrfmiddlewaretoken"' in body


def test_collect_now_queues_the_collection_after_commit_and_says_so(
    client, org, prometheus, queued, django_capture_on_commit_callbacks
):
    client.force_login(org.admin)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/sources/{prometheus.pk}/collect/", follow=True)
    assert queued == [prometheus.pk]
    assert response.redirect_chain[-1][0] == "/sources/"
    assert "Collection of prom-main queued" in response.content.decode()


@pytest.mark.parametrize("role", ["head_a", "committee"])
def test_heads_and_committee_neither_see_nor_may_post_it(client, org, prometheus, queued, role):
    client.force_login(getattr(org, role))
    assert client.get("/sources/").status_code == 403
    assert client.post(f"/sources/{prometheus.pk}/collect/").status_code == 403
    assert queued == []


def test_a_get_is_not_allowed_and_a_disabled_source_is_refused(
    client, org, prometheus, queued, django_capture_on_commit_callbacks
):
    client.force_login(org.admin)
    assert client.get(f"/sources/{prometheus.pk}/collect/").status_code == 405
    prometheus.enabled = False
    prometheus.save()
    assert f'action="/sources/{prometheus.pk}/collect/"' not in client.get("/sources/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/sources/{prometheus.pk}/collect/", follow=True)
    assert "prom-main is disabled; enable it in the administration first." in response.content.decode()
    assert queued == []


def test_posting_without_the_csrf_token_is_refused(org, prometheus, queued):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(org.admin)
    assert browser.post(f"/sources/{prometheus.pk}/collect/").status_code == 403
    assert queued == []
