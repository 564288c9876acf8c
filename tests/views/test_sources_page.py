"""The Data sources page shows each source's health, lag, last hour and rejected input."""

from datetime import timedelta

from django.utils import timezone

from efficiency.choices import RunStatus, SourceKind
from efficiency.models import DataSource, SourceRun


def test_admin_sees_lag_rows_in_the_last_hour_and_the_offending_excerpt(
    client, org, django_assert_max_num_queries
):
    now = timezone.now()
    source = DataSource.objects.create(
        cluster=org.cluster,
        kind=SourceKind.DCGM_SCRAPE,
        name="dcgm-rack1",
        watermark=now - timedelta(minutes=3),
        last_success_at=now - timedelta(minutes=3),
        last_error="2 rejected; first: unknown node 'ghost-9'",
        last_error_at=now,
    )
    SourceRun.objects.create(
        source=source, started_at=now - timedelta(minutes=30), status=RunStatus.OK, stored=800
    )
    SourceRun.objects.create(
        source=source,
        started_at=now - timedelta(minutes=3),
        status=RunStatus.PARTIAL,
        stored=760,
        rejected=2,
        rejects=[
            {
                "kind": "rejected",
                "reason": "unclosed label brace",
                "excerpt": 'DCGM_FI_DEV_GPU_TEMP{gpu="0" 41',
                "line": 17,
            }
        ],
    )
    SourceRun.objects.create(source=source, started_at=now - timedelta(hours=3), stored=999_999)  # too old
    client.force_login(org.admin)
    with django_assert_max_num_queries(8):
        body = client.get("/sources/").content.decode()
    assert "dcgm-rack1" in body
    assert ">1560<" in body  # rows stored in the last hour
    assert "00:03:0" in body  # lag of three minutes
    assert "unknown node &#x27;ghost-9&#x27;" in body

    detail = client.get(f"/sources/{source.pk}/?problems=1").content.decode()
    assert "line 17: unclosed label brace" in detail
    assert "DCGM_FI_DEV_GPU_TEMP{gpu=&quot;0&quot; 41" in detail
    assert ">800<" not in detail  # the clean run is filtered out


def test_department_head_and_committee_are_refused(client, org):
    for user in (org.head_a, org.committee):
        client.force_login(user)
        assert client.get("/sources/").status_code == 403
