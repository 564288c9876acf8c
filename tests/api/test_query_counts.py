"""Every API list answers in a fixed number of queries, whatever its row count, for every role.

Each list below has several rows the role may see; a serializer field or a permission check
that queries once per row (a missing ``select_related`` or prefetch in the selector) makes its
count grow with the rows, and the budget is set just above what a list of any length needs.
"""

from datetime import timedelta

import pytest
import time_machine

from efficiency.choices import CapacityAlertKind
from efficiency.models import CapacityAlert, FaultSignal, Incident, QuotaObjection
from tests.factories import DepartmentFactory, JobFactory, NodeFactory, RecommendationFactory
from tests.quota_fixtures import NOW, make_planning, past_cycles_make

ROWS = 6
ROLES = ["head_vision", "committee", "admin"]


@pytest.fixture
def world(db):
    """Several rows of every list, each visible to the vision head as well as to the others."""
    planning = make_planning()
    teams = [DepartmentFactory(code=f"vision-{n}", name=f"Vision team {n}") for n in range(ROWS)]
    for team in teams:  # the head heads several departments
        team.heads.add(planning.head_vision)
    nodes = [
        NodeFactory(cluster=planning.cluster, hostname=f"gpu-x{n}", owner_department=planning.vision)
        for n in range(ROWS)
    ]
    for n in range(ROWS):
        job = JobFactory(cluster=planning.cluster, department=planning.vision, name=f"train-{n}")
        job.nodes.add(nodes[n])
        at = NOW - timedelta(hours=n + 1)
        incident = Incident.objects.create(
            cluster=planning.cluster, job=job, department=planning.vision, node=nodes[n],
            category="hardware_gpu", severity="critical", code="79", root_signature_id="xid-79",
            occurred_at=at, detected_at=at, gpu_count=8, closed_by=planning.admin,
        )  # fmt: skip
        FaultSignal.objects.create(
            cluster=planning.cluster, evidence_key=f"t:{n}", source="log", signature_id="xid-79",
            category="hardware_gpu", severity="critical", code="79", job=job, department=planning.vision,
            node=nodes[n], occurred_at=at, detected_at=at, incident=incident,
            message="NVRM: Xid (PCI:0000:18:00): 79",
        )  # fmt: skip
        # A job family assigned to another team, and a rule on a node (no department).
        line = {"file": f"slurm-{job.external_id}.out", "line": 1, "text": "NCCL", "job": job.external_id}
        family = RecommendationFactory(
            cluster=planning.cluster, department=planning.vision, assignee_department=teams[n],
            name_pattern=f"train-{n}", evidence=[line],
        )  # fmt: skip
        node_rule = RecommendationFactory(
            cluster=planning.cluster, department=None, subject_kind="node", subject_key=nodes[n].hostname,
            node=nodes[n], rule="storage.cache-metadata-only", evidence=[line],
        )  # fmt: skip
        family.jobs.add(job)
        node_rule.jobs.add(job)
    *_, cycle = past_cycles_make(planning, ROWS, approved_by=planning.committee, extra_departments=teams)
    for n in range(1, ROWS + 1):
        CapacityAlert.objects.create(
            cluster=planning.cluster, gpu_model=f"GPU model {n}", kind=CapacityAlertKind.POOL_EXHAUSTED,
            raised_at=NOW - timedelta(days=n), checked_at=NOW, gpus_needed=n,
        )  # fmt: skip
    for n in range(ROWS):
        QuotaObjection.objects.create(
            cycle=cycle, department=planning.vision, author=planning.head_vision, text=f"More, please ({n}).",
            created_at=NOW - timedelta(hours=n),
        )  # fmt: skip
    return planning, cycle


def lists(cycle) -> dict[str, int]:
    """Each list and its query budget: session, user, groups (and a head's departments), then the
    list's own: count, page, one per prefetch."""
    return {
        "/api/v1/departments/": 6,
        "/api/v1/nodes/": 6,
        "/api/v1/jobs/": 6,
        "/api/v1/incidents/": 6,
        "/api/v1/fault-signals/": 6,
        # ... the evidence's jobs the caller may see (one query for the page).
        "/api/v1/recommendations/": 7,
        # ... the cluster, and every quota of the cycles on the page for their shared pools.
        "/api/v1/quota-cycles/": 8,
        # ... the cycle with its quotas, objections and events.
        f"/api/v1/quota-cycles/{cycle.pk}/objections/": 8,
        "/api/v1/capacity-alerts/?open=false": 5,
        # ... the cluster, the cycle in force and the next, alerts, quotas, jobs and their hours.
        "/api/v1/quota-overview/": 14,
    }


@pytest.mark.parametrize("role", ROLES)
@time_machine.travel(NOW, tick=False)
def test_every_list_runs_a_fixed_number_of_queries(client, world, role, django_assert_max_num_queries):
    planning, cycle = world
    client.force_login(getattr(planning, role))
    for path, budget in lists(cycle).items():
        # If this fails, a field probably runs a query per row: select or prefetch it in the selector.
        with django_assert_max_num_queries(budget):
            response = client.get(path)
        assert response.status_code == 200, path
        body = response.json()
        rows = body if isinstance(body, list) else body.get("results", body.get("uses"))
        if not (role == "head_vision" and "capacity-alerts" in path):  # heads get none
            assert len(rows) >= 2, (path, "too few rows to show a query per row")
