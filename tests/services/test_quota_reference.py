"""The claim behind quota planning, checked on the reference scenario (DESIGN.md, car maker A).

Three weeks of the simulated cluster's Slurm accounting go through the production path
(``sacct --parsable2`` text → parser → job ingest); the portal then proposes the next cycle's
quotas from the last 14 days and backtests them. Guaranteed + shared must clearly beat the fixed
partition: more of the cluster allocated, far shorter waits.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.test import override_settings

from efficiency.choices import JobSource
from efficiency.collectors.slurm import parse_sacct
from efficiency.models import Cluster
from efficiency.services.ingest import jobs_ingest
from efficiency.services.organisation import DEMO_CLUSTER_SLUG, demo_organisation_create
from efficiency.services.quotas import (
    local_midnight,
    quota_backtest_run,
    quota_cycle_initial_create,
    quota_proposal_create,
)
from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes

START = datetime(2026, 11, 1, tzinfo=UTC)
UNTIL = START + timedelta(days=21)


pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def reference_backtest(django_db_setup, django_db_blocker):
    """Built once for the module (three weeks of jobs, a proposal and its backtest) inside a
    transaction that is rolled back after the module's last test."""
    with (
        django_db_blocker.unblock(),
        transaction.atomic(),
        override_settings(PORTAL_CYCLE_DAYS=14, PORTAL_QUOTA_FLOOR_GPUS=8),
    ):
        demo_organisation_create(password="pw")
        cluster = Cluster.objects.get(slug=DEMO_CLUSTER_SLUG)
        sim = ClusterSimulator(reference_nodes(), seed=7, start=START)
        parsed = parse_sacct(sim.sacct_text(START, UNTIL, timezone=UTC), timezone=UTC)
        assert not parsed.rejected
        jobs_ingest(cluster=cluster, source=JobSource.SLURM, records=parsed.records, now=UNTIL)
        first_start = local_midnight(UNTIL) - timedelta(days=14)
        quota_cycle_initial_create(cluster=cluster, start=first_start, now=UNTIL)
        cycle = quota_proposal_create(cluster=cluster, now=UNTIL)
        backtest = quota_backtest_run(cycle=cycle, now=UNTIL)
        yield cycle, {result["key"]: result for result in backtest.results}
        transaction.set_rollback(True)


def test_guaranteed_plus_shared_allocates_clearly_more_than_the_fixed_partition(reference_backtest):
    _, results = reference_backtest
    fixed, proposal = results["fixed"], results["cycle"]
    # Before the first approval the quotas in force are the fixed partition itself.
    assert results["current"]["allocation_rate"] == pytest.approx(fixed["allocation_rate"])
    # At least 4 points more of the cluster allocated (seed 7 gives 55.1% -> 59.9%; seeds 3 and
    # 11 give +6.5 and +6.4). Under the fixed partition hundreds of jobs wait until their users
    # give up (the replay cancels each after the wait its user really stood); under the proposal
    # most of them start in time, and waits and unmet demand fall by more than half.
    assert proposal["allocation_rate"] >= fixed["allocation_rate"] + 0.04, (fixed, proposal)
    assert fixed["jobs_cancelled"] > 100
    assert proposal["jobs_cancelled"] < fixed["jobs_cancelled"] / 4
    assert proposal["jobs_waiting_at_end"] == 0
    assert proposal["wait_p95_s"] < fixed["wait_p95_s"] / 2
    assert proposal["unmet_gpu_hours"] < fixed["unmet_gpu_hours"] / 2


def test_reference_proposal_favours_departments_short_of_gpus_and_fits_the_guaranteed_share(
    reference_backtest,
):
    cycle, _ = reference_backtest
    quotas = list(cycle.quotas.select_related("department"))
    # Starting from a fixed partition (everything guaranteed), 20% must become the shared pool:
    # departments that need fewer GPUs than they own give them up first, down to what they need
    # (or the floor); those short of GPUs keep a larger share of theirs.
    short = [q for q in quotas if q.explanation["target_gpus"] > q.previous_gpus]
    spare = [q for q in quotas if q.explanation["target_gpus"] < q.previous_gpus]
    assert short
    assert spare
    assert {q.department.code for q in short} >= {"vision", "sim"}
    for hot in short:
        for idle in spare:
            if hot.gpu_model == idle.gpu_model:
                assert hot.guaranteed_gpus / hot.previous_gpus > idle.guaranteed_gpus / idle.previous_gpus
                # Fair by construction: a short department is cut only once no other keeps more
                # than it needs.
                needs = max(idle.explanation["target_gpus"], 8)
                assert hot.guaranteed_gpus >= hot.previous_gpus or idle.guaranteed_gpus <= needs
    for model, capacity in cycle.capacity.items():
        guaranteed = sum(q.guaranteed_gpus for q in quotas if q.gpu_model == model)
        assert guaranteed <= 0.8 * capacity
