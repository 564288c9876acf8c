"""Every API endpoint answers 400 to a query parameter it does not know, naming it, and takes
every parameter it documents; bad ordering and page sizes are a 400 too."""

import string
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIRequestFactory

from efficiency.api.params import KnownQueryParams
from efficiency.models import FaultSignal, Incident
from efficiency.services import quotas as quota_services
from tests.factories import RecommendationFactory
from tests.quota_fixtures import NOW, SETTINGS, make_planning

HYPOTHESIS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture
def world(db):
    """One row behind every detail endpoint, readable by the platform admin."""
    planning = make_planning()
    cycle = quota_services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    quota_services.quota_backtest_run(cycle=cycle, now=NOW)
    job = planning.vision.jobs.first()
    node = planning.cluster.nodes.first()
    now = timezone.now()
    incident = Incident.objects.create(
        cluster=planning.cluster, job=job, department=planning.vision, node=node, category="hardware_gpu",
        severity="critical", code="79", root_signature_id="xid-79", occurred_at=now - timedelta(hours=1),
        detected_at=now - timedelta(hours=1), gpu_count=8,
    )  # fmt: skip
    signal = FaultSignal.objects.create(
        cluster=planning.cluster, evidence_key="t:1", source="log", signature_id="xid-79",
        category="hardware_gpu", severity="critical", code="79", job=job, department=planning.vision,
        node=node, occurred_at=now - timedelta(hours=1), detected_at=now - timedelta(hours=1),
        incident=incident, message="NVRM: Xid (PCI:0000:18:00): 79",
    )  # fmt: skip
    quota = cycle.quotas.first()
    recommendation = RecommendationFactory(cluster=planning.cluster, department=planning.vision)
    return planning, {
        "recommendation": recommendation.pk,
        "cycle": cycle.pk,
        "quota": quota.pk,
        "job": job.pk,
        "node": node.pk,
        "incident": incident.pk,
        "signal": signal.pk,
        "cluster": planning.cluster.slug,
        "job_id": job.external_id,
    }


# Every GET endpoint, with a valid value for each query parameter it knows (besides ?format=).
def endpoints(ids: dict) -> dict[str, dict[str, str]]:
    page = {"page": "1", "page_size": "10"}
    departments = {"q": "vis", "is_active": "true"}
    nodes = {
        "q": "gpu", "cluster": ids["cluster"], "state": "active", "owner": "vision", "shared_pool": "false",
        "gpu_model": "NVIDIA H100 80GB HBM3", "fault_domain": "rack-01", "rdma_capable": "true",
    }  # fmt: skip
    jobs = {
        "q": "train", "cluster": ids["cluster"], "department": "vision", "state": "running",
        "source": "slurm", "user": "alice", "submitted_after": "2026-01-01T00:00:00Z",
        "submitted_before": "2030-01-01T00:00:00Z", "min_gpus": "1",
    }  # fmt: skip
    incidents = {"status": "open", "category": "hardware_gpu", "job": ids["job_id"]}
    signals = {
        "range": "7d",
        "start": "2026-11-01",
        "end": "2026-11-14",
        "category": "hardware_gpu",
        "node": "gpu-v0",
    }
    recommendations = {
        "rule": "network.nccl-socket-on-rdma", "department": "vision", "state": "proposed",
        "confidence": "high", "min_gain": "10", "sort": "-gain",
    }  # fmt: skip
    return {
        "/api/v1/departments/": {**page, **departments, "ordering": "-code"},
        "/api/v1/departments/vision/": departments,
        "/api/v1/nodes/": {
            **page,
            **nodes,
            "ordering": "hostname",
            "sort": "-utilization",
            "range": "custom",
            "start": "2026-11-01",
            "end": "2026-11-14",
        },
        f"/api/v1/nodes/{ids['node']}/": nodes,
        "/api/v1/jobs/": {**page, **jobs, "ordering": "-gpu_count"},
        f"/api/v1/jobs/{ids['job']}/": jobs,
        "/api/v1/incidents/": {**page, **incidents, "ordering": "-occurred_at"},
        f"/api/v1/incidents/{ids['incident']}/": incidents,
        "/api/v1/fault-signals/": {**page, **signals, "ordering": "-occurred_at"},
        f"/api/v1/fault-signals/{ids['signal']}/": signals,
        "/api/v1/quota-cycles/": {**page, "cluster": ids["cluster"], "status": "proposed"},
        f"/api/v1/quota-cycles/{ids['cycle']}/": {},
        f"/api/v1/quota-cycles/{ids['cycle']}/backtest/": {},
        f"/api/v1/quota-cycles/{ids['cycle']}/objections/": {},
        f"/api/v1/quotas/{ids['quota']}/": {},
        "/api/v1/recommendations/": {**page, **recommendations},
        f"/api/v1/recommendations/{ids['recommendation']}/": recommendations,
        "/api/v1/capacity-alerts/": {**page, "open": "false"},
        "/api/v1/quota-overview/": {"cluster": ids["cluster"]},
        "/api/v1/usage/": {
            "range": "custom",
            "start": "2026-11-01",
            "end": "2026-11-14",
            "cluster": ids["cluster"],
        },
        "/api/v1/usage/idle-allocations/": {
            "range": "30d",
            "min_hours": "3",
            "start": "2026-11-01",
            "end": "2026-11-14",
        },
    }


def known_params(path: str, user) -> set[str]:
    """What the endpoint's view says it knows, asked the way a request would."""
    match = resolve(path)
    view_class = match.func.cls
    view = view_class(**getattr(match.func, "initkwargs", {}))
    actions = getattr(match.func, "actions", None)
    request = APIRequestFactory().get(path)
    request.user = user
    view.setup(request, *match.args, **match.kwargs)
    view.format_kwarg = None
    if actions:
        view.action_map = actions
        view.action = actions["get"]
    view.request = view.initialize_request(request, *match.args, **match.kwargs)
    return view.known_query_params()


def test_the_sample_values_cover_exactly_what_each_endpoint_knows(world):
    planning, ids = world
    for path, samples in endpoints(ids).items():
        assert known_params(path, planning.admin) - {"format"} == set(samples), path


def test_every_api_view_checks_its_query_parameters():
    def views(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from views(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern) and prefix.startswith("api/"):
                yield prefix + str(pattern.pattern), pattern.callback

    checked = 0
    for route, callback in views(get_resolver().url_patterns):
        view_class = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
        if view_class is None or view_class.__module__.startswith(("drf_spectacular", "rest_framework")):
            continue  # the schema, its Swagger UI and the router's index page
        assert issubclass(view_class, KnownQueryParams), route
        checked += 1
    assert checked >= 15


@given(name=st.text(alphabet=string.ascii_letters + string.digits + "_-.[]", min_size=1, max_size=20))
@HYPOTHESIS
def test_an_unknown_query_parameter_is_a_400_that_names_it(client, world, name):
    planning, ids = world
    client.force_login(planning.admin)
    for path, samples in endpoints(ids).items():
        if name in samples or name == "format":
            continue
        response = client.get(f"{path}?{urlencode({name: '1'})}")
        assert response.status_code == 400, (path, name)
        assert name in response.json(), (path, name)


@given(data=st.data())
@HYPOTHESIS
def test_known_query_parameters_are_never_refused(client, world, data):
    planning, ids = world
    client.force_login(planning.admin)
    for path, samples in endpoints(ids).items():
        chosen = data.draw(
            st.lists(st.sampled_from(sorted(samples)), unique=True) if samples else st.just([])
        )
        if "range" in chosen and samples["range"] == "custom":
            chosen = sorted({*chosen, "start", "end"})
        query = urlencode({name: samples[name] for name in chosen})
        response = client.get(f"{path}?{query}")
        assert response.status_code != 400, (path, query, response.content[:300])


def test_search_is_not_a_silent_no_op(client, world):
    planning, _ids = world
    client.force_login(planning.admin)
    response = client.get("/api/v1/jobs/?search=train")
    assert response.status_code == 400
    assert response.json() == {"search": ["Unknown query parameter."]}


def test_unknown_parameters_come_after_authentication(client, world):
    assert client.get("/api/v1/jobs/?search=x").status_code in (401, 403)


@pytest.mark.parametrize(
    ("query", "field"),
    [("ordering=bogus", "ordering"), ("ordering=-nope,hostname", "ordering"), ("page_size=ten", "page_size")],
)
def test_bad_ordering_or_page_size_is_a_400_naming_it(client, world, query, field):
    planning, _ids = world
    client.force_login(planning.admin)
    response = client.get(f"/api/v1/nodes/?{query}")
    assert response.status_code == 400
    assert field in response.json()


def test_the_export_takes_its_format_parameter(client, world):
    planning, ids = world
    quota_services.quota_cycle_approve(
        cycle=planning.cluster.quota_cycles.get(pk=ids["cycle"]), actor=planning.committee, comment="Agreed."
    )
    client.force_login(planning.admin)
    response = client.get(f"/api/v1/quota-cycles/{ids['cycle']}/export/?format=kueue")
    assert response.status_code == 200
    response = client.get(f"/api/v1/quota-cycles/{ids['cycle']}/export/?format=kueue&flavour=x")
    assert response.status_code == 400
    assert "flavour" in response.json()
