"""The recommendation engine on the demo's replayed history, against the simulator's ground truth:
every misconfigured job of the reference scenario (NCCL on sockets on RDMA nodes, a metadata-only
dataset cache, a stock framework) yields the right recommendation with its evidence, and no
healthy job yields one of them. Precision and recall are printed and held to a floor.

A job counts when the portal could judge it: it ran at least a GPU-hour in the window (the
storage rule measures activity) and, for the network rule, its NCCL set-up lines were collected
(the demo keeps two days of logs) or its config forces sockets.
"""

from datetime import UTC, datetime, timedelta

from efficiency.choices import RecommendationState
from efficiency.models import Cluster, Job, JobLogFacts, Recommendation
from efficiency.services.demo import demo_history_backfill, demo_simulator
from efficiency.services.organisation import DEMO_CLUSTER_SLUG, demo_organisation_create
from efficiency.services.recommendations import recommendations_refresh

RULE_OF = {
    "nccl_socket": "network.nccl-socket-on-rdma",
    "storage_metadata_only": "storage.cache-metadata-only",
    "stock_framework": "kernels.stock-framework",
}
UNTIL = datetime(2026, 11, 3, 18, 0, tzinfo=UTC)


def _judgeable(job: Job, kind: str, facts: dict[int, dict]) -> bool:
    held_h = sum(h.allocated_gpu_s for h in job.hours.all()) / 3600
    if kind == "storage_metadata_only":
        return held_h >= 1.0
    if kind == "nccl_socket":
        env = (job.config or {}).get("env", {})
        return bool(facts.get(job.pk, {}).get("net_socket")) or env.get("NCCL_IB_DISABLE") == "1"
    return True


def test_demo_misconfigurations_are_recommended_and_healthy_jobs_are_not(db, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    demo_organisation_create(password="pw")
    sim = demo_simulator(days=2, now=UNTIL)
    cluster = Cluster.objects.get(slug=DEMO_CLUSTER_SLUG)
    demo_history_backfill(sim=sim, cluster=cluster, until=UNTIL, step=timedelta(minutes=30))
    # The backfill ends with the nightly full run, as a fresh demo does.
    assert Recommendation.objects.exists()

    truth = {
        job.external_id: job.misconfig for job in sim._jobs_between(sim.start.timestamp(), UNTIL.timestamp())
    }
    facts = dict(JobLogFacts.objects.values_list("job_id", "facts"))
    recommended: dict[str, set[str]] = {}
    for rec in Recommendation.objects.prefetch_related("jobs"):
        for job in rec.jobs.all():
            recommended.setdefault(job.external_id, set()).add(rec.rule)
    jobs = list(Job.objects.filter(started_at__isnull=False).prefetch_related("hours"))
    report = []
    for kind, rule in RULE_OF.items():
        flagged = {job.external_id for job in jobs if rule in recommended.get(job.external_id, set())}
        wrong = {key for key in flagged if truth.get(key) != kind}
        should = {
            job.external_id
            for job in jobs
            if truth.get(job.external_id) == kind and _judgeable(job, kind, facts)
        }
        found = flagged & should
        precision = (len(flagged) - len(wrong)) / len(flagged) if flagged else 1.0
        recall = len(found) / len(should) if should else 1.0
        report.append(
            f"{rule}: {len(should)} judgeable, {len(flagged)} flagged, precision {precision:.2f}, "
            f"recall {recall:.2f}"
        )
        assert should, f"the demo has no judgeable {kind} job"
        assert not wrong, f"{rule} flagged jobs without that misconfiguration: {sorted(wrong)[:5]}"
        assert recall == 1.0, f"{rule} missed {sorted(should - found)[:5]}"
    print("\n".join(report))

    # Evidence: the socket recommendations quote NCCL's channel lines where logs were collected.
    sockets = Recommendation.objects.filter(rule=RULE_OF["nccl_socket"])
    assert any("via NET/Socket" in row["text"] for rec in sockets for row in rec.evidence)
    # Nothing proposed twice: a second run updates, it does not duplicate.
    count = Recommendation.objects.count()
    again = recommendations_refresh(now=UNTIL, full=True)
    assert again.created == 0
    assert Recommendation.objects.count() == count
    assert not Recommendation.objects.exclude(state=RecommendationState.PROPOSED).exists()
