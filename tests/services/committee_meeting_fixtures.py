"""Small sealed packs and meetings for the committee meeting tests (no pack builder needed)."""

from datetime import UTC, datetime, timedelta

from efficiency.analysis.committee.seal import seal
from efficiency.models import ReviewPack

PERIOD_START = datetime(2026, 11, 2, 16, 0, tzinfo=UTC)


def pack_content(cluster, start, end, *, cycle_id=None) -> dict:
    requested = []
    if cycle_id is not None:
        requested.append(
            {
                "kind": "quota",
                "ref": cycle_id,
                "title_key": "approve_quota_cycle",
                "params": {"cycle_id": cycle_id},
            }
        )
    return {
        "schema": 1,
        "definitions_version": "2026-12.1",
        "cluster": {"slug": cluster.slug, "name": cluster.name},
        "period": {
            "start": start.isoformat(),
            "end": end.isoformat(),
            "time_zone": "Asia/Shanghai",
            "hours": 336,
        },
        "previous": None,
        "generated_at": end.isoformat(),
        "completeness": [],
        "committee": [],
        "summary": {"kpis": [], "decisions_requested": requested},
        "since_last": {"decisions": [], "actions_open": [], "quota_changes": []},
        "proposals": {"available": False, "reason": "no proposal"},
    }


def make_pack(cluster, *, start=PERIOD_START, days=14, cycle_id=None, user=None) -> ReviewPack:
    end = start + timedelta(days=days)
    text, digest = seal(pack_content(cluster, start, end, cycle_id=cycle_id))
    return ReviewPack.objects.create(
        cluster=cluster,
        period_start=start,
        period_end=end,
        definitions_version="2026-12.1",
        time_zone="Asia/Shanghai",
        content_json=text,
        content_hash=digest,
        generated_at=end,
        generated_by=user,
    )
