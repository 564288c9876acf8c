"""Migration 0015_logs_trust marks the evidence already stored: metrics, the metric detector and
kernel-log lines are trusted; an incident with only job output becomes a suspicion."""

from datetime import UTC, datetime

from tests.migrations import around, migrate

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def test_stored_evidence_is_marked_by_its_stream_and_job_output_only_incidents_become_suspicions(
    transactional_db,
):
    before, latest = around("_logs_trust")
    apps = migrate(before)
    Cluster = apps.get_model("efficiency", "Cluster")
    Incident = apps.get_model("efficiency", "Incident")
    FaultSignal = apps.get_model("efficiency", "FaultSignal")
    cluster = Cluster.objects.create(slug="old", name="old")
    common = {"cluster": cluster, "category": "hardware_gpu", "severity": "critical"}
    kernel_incident = Incident.objects.create(**common, title="xid-79", occurred_at=T0, detected_at=T0)
    job_incident = Incident.objects.create(**common, title="xid-79", occurred_at=T0, detected_at=T0)
    rows = {
        "kernel": ("log", "xid-79", "kern/gpu-a01.log@120", kernel_incident),
        "rank": ("log", "xid-79", "8812/gpu-b01/rank0.log@0", job_incident),
        "metric": ("metric", "xid-79", "gpu-a01/gpu3", kernel_incident),
        "flat": ("detector", "gpus-flat", "", None),
        "slow": ("detector", "slowdown", "", None),
    }
    for key, (source, signature, location, incident) in rows.items():
        FaultSignal.objects.create(
            **common, evidence_key=key, source=source, signature_id=signature, location=location,
            incident=incident, occurred_at=T0, detected_at=T0, message="m",
        )  # fmt: skip

    apps = migrate(latest)
    FaultSignal = apps.get_model("efficiency", "FaultSignal")
    Incident = apps.get_model("efficiency", "Incident")
    trusted = dict(FaultSignal.objects.values_list("evidence_key", "trusted"))
    assert trusted == {"kernel": True, "rank": False, "metric": True, "flat": True, "slow": False}
    assert Incident.objects.get(pk=kernel_incident.pk).confirmed
    assert not Incident.objects.get(pk=job_incident.pk).confirmed
