"""The pages' cache (efficiency.selectors.rollup_cache): a page is never older than the rollups
committed before it was asked for, and never crosses scopes, languages, time zones or ranges."""

import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import override_settings
from django.utils import timezone, translation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.collectors.records import GpuReading
from efficiency.models import Job, Node, RollupVersion
from efficiency.selectors.rollup_cache import reader_scope, rollup_cached, rollup_versions
from efficiency.services.ingest import dirty_hours_mark, gpu_readings_ingest
from efficiency.services.rollups import rollup_version_bump, rollups_refresh

PAGES = [
    "/usage/?range=24h",
    "/departments/vision/?range=24h",
    "/departments/vision/heatmap/?range=24h",
    "/departments/vision/jobs/?range=24h",
]
NO_CACHE = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}


def _ingest_hour(org, hours_ago: int, pct: float) -> None:
    """An hour of samples on node A at ``pct`` while job A ran there, rolled up and committed."""
    now = timezone.now()
    start = (now - timedelta(hours=hours_ago)).replace(minute=0, second=0, microsecond=0)
    if org.job_a.started_at is None or org.job_a.started_at > start:
        Job.objects.filter(pk=org.job_a.pk).update(started_at=start)
    readings = [
        GpuReading(
            "gpu-a01", gpu, int((start + timedelta(minutes=m)).timestamp() * 1000), gr_engine_active_pct=pct
        )
        for m in range(60)
        for gpu in range(8)
    ]
    gpu_readings_ingest(cluster=org.cluster, readings=readings, interval_s=60, now=now)
    dirty_hours_mark(cluster=org.cluster, hours=[start], now=now)
    rollups_refresh(now=now)


def _body(client, url: str, **headers) -> str:
    response = client.get(url, **headers)
    assert response.status_code == 200, url
    # What differs between two renders of the same page anyway.
    body = response.content.decode()
    body = re.sub(r'(nonce|value)="[^"]*"', r'\1=""', body)
    return re.sub(r'"X-CSRFToken": "[^"]*"', '"X-CSRFToken": ""', body)


def _uncached(client, url: str, **headers) -> str:
    with override_settings(CACHES=NO_CACHE):
        return _body(client, url, **headers)


@pytest.fixture
def sampled(org):
    _ingest_hour(org, 3, 40.0)
    return org


@pytest.mark.parametrize("url", PAGES)
def test_a_page_asked_after_a_rollup_commit_shows_the_new_rows(client, sampled, url):
    client.force_login(sampled.head_a if "departments" in url else sampled.committee)
    before = _body(client, url)
    assert _body(client, url) == before  # the second request is served from the cache
    _ingest_hour(sampled, 2, 90.0)
    after = _body(client, url)
    assert after != before
    assert after == _uncached(client, url)


def test_the_cache_serves_what_it_built_until_the_version_moves(sampled):
    """The cache is used at all: an unchanged version gives the kept value, not a rebuild."""
    calls = []

    def build():
        calls.append(1)
        return len(calls)

    user = sampled.committee
    assert rollup_cached("t", build, user=user, parts=(1,)) == 1
    assert rollup_cached("t", build, user=user, parts=(1,)) == 1
    rollup_version_bump(sampled.cluster.pk)
    assert rollup_cached("t", build, user=user, parts=(1,)) == 2


def test_a_rollup_run_raises_the_clusters_version_in_its_transaction(sampled):
    before = RollupVersion.objects.get(cluster=sampled.cluster).version
    _ingest_hour(sampled, 2, 90.0)
    assert RollupVersion.objects.get(cluster=sampled.cluster).version == before + 1


def test_a_rollup_that_fails_leaves_the_version_as_it_was(sampled, monkeypatch):
    from efficiency.services import rollups

    before = rollup_versions()

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(rollups, "_node_days_refresh", broken)
    now = timezone.now()
    dirty_hours_mark(cluster=sampled.cluster, hours=[now.replace(minute=0, second=0, microsecond=0)], now=now)
    with pytest.raises(RuntimeError):
        rollups_refresh(now=now)
    assert rollup_versions() == before


def test_heads_the_committee_and_languages_each_get_their_own_page(client, sampled):
    """Requests of every reader and language, interleaved: each page is the one its reader
    would get with no cache at all (a head never sees what was built for the committee or for
    the other department, nor a page in the other language)."""
    overview = ["/usage/?range=24h", "/usage/?range=7d", f"/usage/?range=24h&cluster={sampled.cluster.slug}"]

    def department(code: str) -> list[str]:
        return [
            f"/departments/{code}/{part}?range={r}"
            for part in ("", "heatmap/", "jobs/")
            for r in ("24h", "7d")
        ]

    readers = [
        (sampled.committee, overview + department("vision") + department("radar")),
        (sampled.head_a, department("vision")),
        (sampled.head_b, department("radar")),
        (sampled.admin, overview + department("vision")),
    ]
    seen = {}
    for _round in range(2):
        for language in ("en", "zh-hans"):
            for reader, urls in readers:
                client.force_login(reader)
                for url in urls:
                    body = _body(client, url, HTTP_ACCEPT_LANGUAGE=language)
                    assert body == seen.setdefault((reader.pk, language, url), body)
    for reader, urls in readers:
        client.force_login(reader)
        for language in ("en", "zh-hans"):
            for url in urls:
                expected = _uncached(client, url, HTTP_ACCEPT_LANGUAGE=language)
                assert seen[(reader.pk, language, url)] == expected, (reader.username, language, url)
    assert "利用率" in seen[(sampled.committee.pk, "zh-hans", overview[0])]
    assert "利用率" not in seen[(sampled.committee.pk, "en", overview[0])]


def test_a_department_part_is_not_served_to_another_departments_head(client, sampled):
    client.force_login(sampled.head_a)
    assert client.get("/departments/vision/heatmap/?range=24h").status_code == 200
    client.force_login(sampled.head_b)
    assert client.get("/departments/vision/heatmap/?range=24h").status_code == 404
    assert client.get("/departments/vision/jobs/?range=24h").status_code == 404


def test_names_edited_between_rollup_runs_show_at_once(client, sampled):
    client.force_login(sampled.head_a)
    _body(client, "/departments/vision/jobs/?range=24h")
    _body(client, "/departments/vision/heatmap/?range=24h")
    Job.objects.filter(pk=sampled.job_a.pk).update(name="renamed-job")
    node = Node.objects.get(pk=sampled.node_a.pk)
    node.hostname = "gpu-a01-renamed"
    node.save()
    assert "renamed-job" in _body(client, "/departments/vision/jobs/?range=24h")
    assert "gpu-a01-renamed" in _body(client, "/departments/vision/heatmap/?range=24h")


def test_the_display_time_zone_is_part_of_the_key(client, sampled):
    client.force_login(sampled.committee)
    with timezone.override("UTC"):
        utc = _body(client, "/usage/?range=24h")
    with timezone.override("Asia/Shanghai"):
        shanghai = _body(client, "/usage/?range=24h")
        assert shanghai == _uncached(client, "/usage/?range=24h")
    assert utc != shanghai


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["committee", "head_a", "head_b", "admin", "no_role"]),
            st.sampled_from(["en", "zh-hans"]),
            st.sampled_from(["UTC", "Asia/Shanghai"]),
            st.integers(min_value=0, max_value=2),  # the caller's own arguments
            st.booleans(),  # a rollup run commits before this request
        ),
        min_size=1,
        max_size=25,
    )
)
def test_a_cached_value_is_always_what_building_it_now_would_give(org, steps):
    """Whatever the order of readers, languages, zones, arguments and rollup commits, the value
    from the cache equals a fresh build from what the key stands for."""
    cache.clear()
    for reader_name, language, zone, argument, commit in steps:
        user = getattr(org, reader_name)
        if commit:
            rollup_version_bump(org.cluster.pk)

        def build(user=user, argument=argument):
            return (
                rollup_versions(),
                reader_scope(user),
                translation.get_language(),
                timezone.get_current_timezone_name(),
                argument,
            )

        with translation.override(language), timezone.override(zone):
            assert rollup_cached("property", build, user=user, parts=(argument,)) == build()
