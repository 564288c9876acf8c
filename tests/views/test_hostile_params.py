"""Every GET URL (pages and API, from the URL conf) x its declared query parameters x hostile
values: never a 500; a 400 names the parameter (the API's JSON) or shows the form's error (pages).

Run it on PostgreSQL too (``DATABASE_URL=postgres://…``): a NUL byte or a time zone offset beyond
±15:59 only fails there, in the database, which is why the fields refuse them before the query.
The database holds a job with year-1 and year-9999 times, so every page and list that shows it
renders it too.
"""

from datetime import UTC, datetime

import pytest
from django.urls import resolve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.filters import DepartmentFilter, JobFilter, NodeFilter, RecommendationFilter, TicketFilter
from efficiency.forms import ClusterForm, RangeForm
from efficiency.models import Job
from tests.views.test_url_matrix import MATRIX

pytestmark = pytest.mark.django_db

# What each page reads from its query string (the API's endpoints declare theirs:
# KnownQueryParams.known_query_params). A page missing here fails the completeness test below.
PAGE_PARAMS: dict[str, tuple] = {
    "efficiency:home": (RangeForm,),
    "efficiency:usage-overview": (RangeForm, "export"),
    "efficiency:department-list": (DepartmentFilter, "page"),
    "efficiency:department-detail": (RangeForm, "export"),
    "efficiency:department-heatmap": (RangeForm,),
    "efficiency:department-jobs": (RangeForm,),
    "efficiency:node-list": (NodeFilter, "export", "page"),
    "efficiency:node-detail": (RangeForm,),
    "efficiency:job-list": (JobFilter, "export", "page"),
    "efficiency:job-detail": (),
    "efficiency:quota-overview": (ClusterForm, "export"),
    "efficiency:quota-cycle-list": (ClusterForm,),
    "efficiency:quota-cycle-detail": ("export",),
    "efficiency:quota-backtest": ("export",),
    "efficiency:quota-export": (),
    "efficiency:fault-overview": (RangeForm, "export"),
    "efficiency:incident-detail": (),
    "efficiency:incident-report": ("format",),
    "efficiency:source-list": (),
    "efficiency:source-detail": ("problems", "page"),
    "efficiency:recommendation-list": (RecommendationFilter, "export", "page"),
    "efficiency:recommendation-queue": (RecommendationFilter, "export", "page"),
    "efficiency:recommendation-detail": (),
    "efficiency:department-what-to-fix": ("export",),
    "efficiency:ticket-list": (TicketFilter, "export", "page"),
    "efficiency:ticket-mine": (TicketFilter, "export", "page"),
    "efficiency:ticket-detail": (),
    "efficiency:notification-settings": (),
    "efficiency:meeting-detail": (),
    "efficiency:committee-audit": ("page",),
    "efficiency:committee-home": (),
    "efficiency:pack-detail": (),
    "efficiency:pack-present": (),
    "efficiency:pack-print": (),
    "efficiency:pack-pdf": (),
    "efficiency:pack-csv": (),
    "efficiency:rate-card-list": (),
}
NOT_PORTAL_PAGES = {"login", "logout", "set_language", "healthz", "admin:index", "api:schema", "api:docs"}

HOSTILE = [
    "\x00",
    "a\x00b",
    "",
    " ",
    "-1",
    "0",
    "2147483648",
    "99999999999999999999",
    "1e309",
    "NaN",
    "true",
    "custom",
    "24h",
    "csv",
    "jobs",
    "md",
    "json",
    "vision",
    "radar",
    "0001-01-01",
    "0001-01-02",
    "9999-12-30",
    "9999-12-31",
    "1969-12-31",
    "2999-12-31",
    "2026-02-30",
    "2026-01-01T00:00:00-16:35",
    "2026-01-01T00:00:00+15:59",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:59:59-05:00",
    "9999-12-31T23:59:59",
    "' OR '1'='1",
    "<script>alert(1)</script>",
    "%",
    "\u202e名",
    "x" * 3000,
]
values = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12))


def _names(declared) -> set[str]:
    from efficiency.api.params import _names as declared_names

    return declared_names(declared)


def _api_params(path: str) -> set[str]:
    match = resolve(path.split("?")[0])
    cls = getattr(match.func, "cls", None) or getattr(match.func, "view_class", None)
    if cls is None or not hasattr(cls, "known_query_params"):
        return set()
    view = cls(**getattr(match.func, "initkwargs", {}))
    actions = getattr(match.func, "actions", None)
    view.action = actions["get"] if actions else None
    view.kwargs = match.kwargs
    return view.known_query_params() - {"format"}


GET_URLS = sorted(name for name, (method, _path, _rules) in MATRIX.items() if method == "get")


def test_every_page_declares_its_parameters_here():
    pages = {name for name in GET_URLS if not name.startswith("api:")} - NOT_PORTAL_PAGES
    assert pages <= set(PAGE_PARAMS), sorted(pages - set(PAGE_PARAMS))


@pytest.fixture
def extreme_job(org):
    """Department A's job, as a broken source once stored it: year-1 and year-9999 times."""
    Job.objects.filter(pk=org.job_a.pk).update(
        submitted_at=datetime(1, 1, 1, tzinfo=UTC),
        started_at=datetime(1, 1, 1, 0, 30, tzinfo=UTC),
        ended_at=datetime(9999, 12, 31, 23, 0, tzinfo=UTC),
    )
    return org


@pytest.mark.parametrize("name", [n for n in GET_URLS if n not in NOT_PORTAL_PAGES or n == "api:schema"])
def test_hostile_parameters_get_a_200_or_a_400_naming_them(client, extreme_job, name):
    org = extreme_job
    _method, build, _rules = MATRIX[name]
    path = build(org)
    base, _, fixed = path.partition("?")
    is_api = name.startswith("api:")
    declared = sorted(_api_params(path) if is_api else _names(PAGE_PARAMS[name]))
    if not declared:
        pytest.skip("no query parameters")
    client.force_login(org.admin)

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.dictionaries(st.sampled_from(declared), values, min_size=1, max_size=3))
    def check(params):
        query = dict(p.split("=", 1) for p in fixed.split("&") if p)
        query.update(params)
        if ("start" in params or "end" in params) and "range" not in params:
            query["range"] = "custom"
        response = client.get(base, query)
        status = response.status_code
        if is_api and status == 404 and ("page" in params or name.endswith("-detail")):
            # A page past the end, or a filter that leaves the object out (DRF filters a
            # detail lookup too): "not found", with the reason.
            assert "detail" in response.json()
            return
        assert status in (200, 400), (name, query, status)
        if status == 400:
            if is_api:
                # A custom range without its start or end names the one missing.
                companions = {"start", "end"} if query.get("range") == "custom" else set()
                named = set(response.json()) & (set(query) | companions)
                assert named, (name, query, response.json())
            else:
                body = response.content.decode()
                assert 'role="alert"' in body or "field-error" in body, (name, query)

    check()


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/jobs/?submitted_after=2026-01-01T00:00:00-16:35", "submitted_after"),
        ("/api/v1/jobs/?submitted_after=2026-01-01T00:00:00-16:35", "submitted_after"),
        ("/api/v1/jobs/?submitted_before=0001-01-01T00:00:00%2B05:00", "submitted_before"),
        ("/quotas/?cluster=%00", "cluster"),
        ("/quotas/cycles/?cluster=%00", "cluster"),
        ("/nodes/?cluster=%00", "cluster"),
        ("/jobs/?department=a%00b", "department"),
        ("/api/v1/incidents/?status=%00", "status"),
        ("/api/v1/incidents/?job=%00", "job"),
        ("/api/v1/fault-signals/?node=%00", "node"),
        ("/api/v1/quota-cycles/?cluster=%00", "cluster"),
        ("/usage/?range=custom&start=9999-12-30&end=9999-12-31", "start"),
        ("/usage/?range=custom&start=0001-01-01&end=0001-01-02", "start"),
        ("/faults/?range=custom&start=9999-12-30&end=9999-12-31", "start"),
        ("/departments/vision/?range=custom&start=9999-12-30&end=9999-12-31", "start"),
        ("/departments/vision/jobs/?range=custom&start=0001-01-01&end=0001-01-01", "start"),
        ("/api/v1/usage/?range=custom&start=9999-12-30&end=9999-12-31", "start"),
        ("/api/v1/fault-signals/?range=custom&start=9999-12-30&end=9999-12-31", "start"),
        ("/api/v1/usage/?range=custom&start=2026-11-14&end=2026-11-01", "end"),
    ],
)
def test_reported_hostile_urls_are_a_400_naming_the_field(client, org, path, field):
    client.force_login(org.admin)
    response = client.get(path)
    assert response.status_code == 400
    if path.startswith("/api/"):
        assert field in response.json()
    else:
        label = {"start": "From", "end": "To"}.get(field, field).lower()
        assert label in response.content.decode().lower()


def test_a_proposal_naming_a_cluster_with_a_nul_byte_is_a_400_naming_it(client, org):
    client.force_login(org.committee)
    response = client.post(
        "/api/v1/quota-cycles/propose/", {"cluster": "a\x00b"}, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json() == {"cluster": ["Null characters are not allowed."]}


@pytest.mark.parametrize("path", ["/jobs/{job}/", "/jobs/", "/departments/vision/jobs/?range=90d"])
def test_a_job_with_year_1_and_year_9999_times_still_shows_on_its_pages(client, extreme_job, path):
    client.force_login(extreme_job.admin)
    response = client.get(path.format(job=extreme_job.job_a.pk))
    assert response.status_code == 200
    if "{job}" in path:
        # Year 1 fits Asia/Shanghai (its local mean time then); 9999-12-31 23:00 UTC does not.
        assert "0001-01-01 08:05:43" in response.content.decode()
        assert "9999-12-31 23:00:00 UTC" in response.content.decode()


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/jobs/{job}/"])
def test_a_job_with_year_1_and_year_9999_times_is_listed_by_the_api_in_utc(client, extreme_job, path):
    client.force_login(extreme_job.admin)
    response = client.get(path.format(job=extreme_job.job_a.pk))
    assert response.status_code == 200
    body = response.json()
    job = next(j for j in body["results"] if j["id"] == extreme_job.job_a.pk) if "results" in body else body
    assert job["submitted_at"] == "0001-01-01T08:05:43+08:05:43"  # Asia/Shanghai's local mean time
    assert job["ended_at"] == "9999-12-31T23:00:00Z"


def test_a_job_with_year_9999_times_exports_to_csv(client, extreme_job):
    client.force_login(extreme_job.admin)
    response = client.get("/jobs/?export=csv")
    assert response.status_code == 200
    assert "9999-12-31T23:00:00+00:00" in response.getvalue().decode("utf-8-sig")
