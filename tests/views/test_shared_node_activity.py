"""Per-GPU activity on a node another department owns: a department head sees only the hours
their own jobs ran there, never what other departments' jobs did on it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from efficiency.collectors.records import GpuReading
from efficiency.services.ingest import gpu_readings_ingest


@pytest.fixture
def shared(org):
    """Radar's node B: radar's job ran on it at 90% for an hour, then vision's job at 20%."""
    now = timezone.now()
    radar_start = (now - timedelta(hours=5)).replace(minute=0, second=0, microsecond=0)
    vision_start = radar_start + timedelta(hours=2)
    for job, start in ((org.job_b, radar_start), (org.job_a, vision_start)):
        job.started_at, job.ended_at = start, start + timedelta(hours=1)
        job.save()
    org.job_a.nodes.add(org.node_b)
    readings = [
        GpuReading(
            "gpu-b01", gpu, int((start + timedelta(minutes=m)).timestamp() * 1000), gr_engine_active_pct=pct
        )
        for start, pct in ((radar_start, 90.0), (vision_start, 20.0))
        for m in range(60)
        for gpu in range(8)
    ]
    gpu_readings_ingest(cluster=org.cluster, readings=readings, interval_s=60, now=now)
    return org


def _gpu_activity(client, node) -> list[str]:
    body = client.get(f"/nodes/{node.pk}/?range=24h").content.decode()
    table = body[body.index('id="gpu-usage"') : body.index("</table>", body.index('id="gpu-usage"'))]
    return [cell.split("<")[0] for cell in table.split('<td class="num">')[2::2]]


def test_a_head_sees_only_their_jobs_hours_on_another_departments_node(client, shared):
    client.force_login(shared.head_a)
    assert _gpu_activity(client, shared.node_b) == ["20.0%"] * 8


@pytest.mark.parametrize("role", ["head_b", "committee", "admin"])
def test_the_owner_and_the_whole_org_roles_see_all_activity(client, shared, role):
    client.force_login(getattr(shared, role))
    assert _gpu_activity(client, shared.node_b) == ["55.0%"] * 8
