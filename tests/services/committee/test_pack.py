"""The review pack: its figures are the live selectors' for the same range, it stays sealed when
the data changes, corrections are new versions, and the scheduled task makes it once."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db.models import Sum

from efficiency.analysis.committee.seal import verify
from efficiency.choices import IncidentStatus, NotificationEvent, Role, TicketState
from efficiency.models import AuditEntry, ImmutableRecord, NodeHour, Notification, ReviewPack, ScopeHour
from efficiency.selectors.committee import pack_content_for, pack_list_current
from efficiency.selectors.faults import fault_summary, incident_list
from efficiency.selectors.tickets import ticket_list
from efficiency.selectors.usage import cluster_usage, department_usage_list
from efficiency.services.committee.pack import pack_generate, pack_period_for
from efficiency.tasks import committee_pack_generate_task
from efficiency.timeranges import TimeRange
from tests.factories import (
    ClusterFactory,
    DepartmentFactory,
    DepartmentHourFactory,
    IncidentFactory,
    NodeFactory,
    NodeHourFactory,
    QuotaCycleFactory,
    QuotaFactory,
    TicketFactory,
    UserFactory,
)

START = datetime(2026, 11, 16, 16, 0, tzinfo=UTC)  # midnight in Asia/Shanghai
END = START + timedelta(hours=24)
NOW = END + timedelta(hours=2)
H = timedelta(hours=1)


def _scope_hours(cluster, departments, hours):
    """ScopeHour rows as the rollups make them: the cluster's sums, and per department the
    capacity of the nodes it owns with its own jobs' use."""
    for hour in hours:
        nodes = NodeHour.objects.filter(cluster=cluster, hour=hour)
        sums = nodes.aggregate(
            a=Sum("available_gpu_s"), al=Sum("allocated_gpu_s"), s=Sum("sampled_gpu_s"), b=Sum("busy_gpu_s")
        )
        ScopeHour.objects.create(
            cluster=cluster, hour=hour, department=None, available_gpu_s=sums["a"] or 0,
            allocated_gpu_s=sums["al"] or 0, sampled_gpu_s=sums["s"] or 0, busy_gpu_s=sums["b"] or 0,
        )  # fmt: skip
        for department in departments:
            owned = nodes.filter(owner_department=department).aggregate(
                a=Sum("available_gpu_s"), s=Sum("sampled_gpu_s")
            )
            used = department.hours.filter(hour=hour).aggregate(
                al=Sum("allocated_gpu_s"), b=Sum("busy_gpu_s")
            )
            ScopeHour.objects.create(
                cluster=cluster, hour=hour, department=department, available_gpu_s=owned["a"] or 0,
                allocated_gpu_s=used["al"] or 0, sampled_gpu_s=owned["s"] or 0, busy_gpu_s=used["b"] or 0,
            )  # fmt: skip


@pytest.fixture
def world(db):
    cluster = ClusterFactory(slug="ad", name="AD platform")
    vision = DepartmentFactory(code="vision", name="Vision")
    radar = DepartmentFactory(code="radar", name="Radar")
    v_nodes = [NodeFactory(cluster=cluster, hostname=f"gpu-v{i}", owner_department=vision) for i in range(2)]
    r_node = NodeFactory(cluster=cluster, hostname="gpu-r0", owner_department=radar)
    hours = [START + H * i for i in range(24)]
    for i, hour in enumerate(hours):
        for node in v_nodes:
            # vision holds all 8 GPUs, 60% busy
            NodeHourFactory(node=node, hour=hour)
            DepartmentHourFactory(node=node, hour=hour, department=vision)
        # radar's node: 4 GPUs held by vision in odd hours (borrowing), nothing otherwise
        held = 4 * 3600.0 if i % 2 else 0.0
        NodeHourFactory(node=r_node, hour=hour, allocated_gpu_s=held, busy_gpu_s=held * 0.5)
        if held:
            DepartmentHourFactory(node=r_node, hour=hour, department=vision, allocated_gpu_s=held)
    _scope_hours(cluster, [vision, radar], hours)
    cycle = QuotaCycleFactory(cluster=cluster, start=START - timedelta(days=1), end=END + timedelta(days=13))
    QuotaFactory(cycle=cycle, department=vision, guaranteed_gpus=16)
    QuotaFactory(cycle=cycle, department=radar, guaranteed_gpus=8)
    incident = IncidentFactory(
        cluster=cluster, department=vision, node=r_node, occurred_at=START + 2 * H,
        detected_at=START + 2 * H + timedelta(minutes=2), recovered_at=START + 4 * H,
        status=IncidentStatus.RESOLVED,
    )  # fmt: skip
    TicketFactory(department=radar, created_at=START, due_at=START + 3 * H)  # overdue at END
    TicketFactory(department=vision, created_at=START, due_at=END + timedelta(days=3))
    committee = UserFactory(username="chair", role=Role.COMMITTEE, email="chair@example.com")
    return {
        "cluster": cluster,
        "vision": vision,
        "radar": radar,
        "incident": incident,
        "committee": committee,
    }


def _generate(world, **kwargs):
    with time_machine.travel(NOW, tick=False):
        return pack_generate(cluster=world["cluster"], start=START, end=END, **kwargs)


def test_figures_equal_the_live_selectors(world):
    pack = _generate(world)
    content = pack.content
    user = world["committee"]
    time_range = TimeRange("custom", START, END)
    live = cluster_usage(user=user, time_range=time_range, cluster=world["cluster"])
    totals = content["cluster_section"]["totals"]
    assert totals["utilization"] == round(live.utilization, 6)
    assert totals["allocation_rate"] == round(live.allocation_rate, 6)
    kpis = {row["key"]: row for row in content["summary"]["kpis"]}
    assert kpis["utilization"]["value"] == round(live.utilization, 6)
    assert kpis["utilization"]["target"] == 0.45
    assert kpis["allocation_rate"]["value"] == round(live.allocation_rate, 6)
    for item in department_usage_list(user=user, time_range=time_range, cluster=world["cluster"]):
        (entry,) = [d for d in content["departments"] if d["code"] == item.department.code]
        assert entry["totals"]["allocated_gpu_hours"] == round(item.totals.allocated_gpu_hours, 3)
        assert entry["totals"]["busy_gpu_hours"] == round(item.totals.busy_gpu_hours, 3)
    incidents = list(incident_list(user=user, time_range=time_range).filter(cluster=world["cluster"]))
    assert content["reliability"]["mttr_s"] == fault_summary(incidents).mttr_median_s == 7200.0
    assert kpis["mttr_s"]["value"] == 7200.0
    open_tickets = ticket_list(user=user).filter(state__in=TicketState.active()).count()
    assert content["tickets"]["open"] == open_tickets == 2
    assert content["tickets"]["overdue"] == kpis["overdue_tickets"]["value"] == 1


def test_gpu_hour_categories_add_up_to_capacity(world):
    content = _generate(world).content
    states = content["cluster_section"]["states"]
    assert len(states["hours"]) == 24
    for i in range(24):
        parts = sum(states[name][i] for name in ("busy", "allocated_idle", "unallocated", "down"))
        assert parts == pytest.approx(24.0, abs=1e-9)  # 3 nodes × 8 GPUs
    totals = content["cluster_section"]["totals"]
    assert totals["capacity_gpu_hours"] == 576.0
    # radar's node (8 GPUs) down 02:00-04:00: all 8 idle in hour 2, 4 held by vision in hour 3
    assert totals["down"] == 12.0
    parts = totals["busy"] + totals["allocated_idle"] + totals["unallocated"] + totals["down"]
    assert parts == pytest.approx(576.0)
    waterfall = {row["key"]: row["gpu_hours"] for row in content["cluster_section"]["capacity_waterfall"]}
    assert waterfall["capacity"] == 576.0
    showback = content["showback"]
    charged = sum(d["charged_gpu_hours"] for d in showback["departments"])
    assert charged + showback["central"]["gpu_hours"] == pytest.approx(showback["capacity_gpu_hours"])
    vision = next(d for d in content["departments"] if d["code"] == "vision")
    # vision: 16 guaranteed, 20 held in odd hours → 4 borrowed, lent by radar
    assert vision["totals"]["borrowed_gpu_hours"] == 48.0
    radar = next(d for d in content["departments"] if d["code"] == "radar")
    assert radar["totals"]["lent_gpu_hours"] == 48.0


def test_sealed_pack_does_not_change_with_the_data(world):
    pack = _generate(world)
    text, digest = pack.content_json, pack.content_hash
    NodeHour.objects.update(busy_gpu_s=0.0)
    ScopeHour.objects.update(busy_gpu_s=0.0)
    world["incident"].delete()
    stored = ReviewPack.objects.get(pk=pack.pk)
    assert (stored.content_json, stored.content_hash) == (text, digest)
    assert verify(stored.content_json, stored.content_hash)
    entry = AuditEntry.objects.get(verb="pack_sealed", object_id=pack.pk)
    assert entry.payload == {"hash": digest, "version": 1}


def test_correction_is_version_two_and_saving_again_raises(world):
    first = _generate(world)
    second = _generate(world, supersedes=first, reason="late GPU samples", user=world["committee"])
    assert (second.version, second.supersedes_id, second.correction_reason) == (
        2,
        first.pk,
        "late GPU samples",
    )
    assert second.content["previous"] is None  # same period: the previous pack is the prior period's
    assert list(pack_list_current(user=world["committee"])) == [second]
    with pytest.raises(ImmutableRecord):
        first.save()


def test_heatmap_is_bounded_and_copy_is_scoped(world):
    content = _generate(world).content
    heatmap = content["cluster_section"]["heatmap"]
    assert heatmap["rows"] == ["gpu-r0", "gpu-v0", "gpu-v1"]
    assert len(heatmap["columns"]) == 24
    assert heatmap["values"][1][0] == 0.6
    head = UserFactory(username="head-radar", role=(Role.DEPARTMENT_HEAD, "radar"))
    pack = ReviewPack.objects.get()
    copy = pack_content_for(user=head, pack=pack)
    assert [d["code"] for d in copy["departments"]] == ["radar"]
    assert "vision" not in str(copy)


def test_period_for_uses_the_ended_quota_cycle(world):
    cluster = world["cluster"]
    # the cycle of the fixture has not ended: 14 days to the last local midnight
    assert pack_period_for(cluster, NOW) == (END - timedelta(days=14), END)
    ended = QuotaCycleFactory(
        cluster=cluster, start=START - timedelta(days=15), end=START - timedelta(days=1)
    )
    assert pack_period_for(cluster, NOW) == (ended.start, ended.end)


def test_task_is_idempotent_and_notifies(world, django_capture_on_commit_callbacks):
    with time_machine.travel(NOW, tick=False), django_capture_on_commit_callbacks(execute=False):
        first = committee_pack_generate_task()
        second = committee_pack_generate_task()
    assert len(first["packs"]) == 1
    assert second == {"packs": []}
    pack = ReviewPack.objects.get()
    assert (pack.period_start, pack.period_end) == (END - timedelta(days=14), END)
    (notification,) = Notification.objects.filter(event=NotificationEvent.PACK_READY)
    assert notification.payload["id"] == pack.pk


def test_pack_ready_routes_to_the_committee(world):
    from efficiency.services.notifications.routing import notification_users

    with time_machine.travel(NOW, tick=False):
        committee_pack_generate_task()
    notification = Notification.objects.get(event=NotificationEvent.PACK_READY)
    assert [user.username for user in notification_users(notification)] == ["chair"]


def test_pack_readers_are_scoped(world):
    from efficiency.selectors.committee import pack_get, pack_versions

    pack = _generate(world)
    nobody = UserFactory(username="nobody")
    with pytest.raises(ReviewPack.DoesNotExist):
        pack_get(user=nobody, pk=pack.pk)
    assert pack_get(user=world["committee"], pk=pack.pk) == pack
    assert pack_content_for(user=world["committee"], pack=pack) == pack.content
    assert list(pack_versions(user=world["committee"], pack=pack)) == [pack]


def test_sections_without_data_say_so(db):
    cluster = ClusterFactory(slug="empty")
    with time_machine.travel(NOW, tick=False):
        content = pack_generate(cluster=cluster, start=START, end=END).content
    assert content["cluster_section"]["available"] is False
    assert content["proposals"]["available"] is False
    assert content["capacity"]["available"] is False
    assert content["previous"] is None


def test_heatmap_stays_bounded_at_fleet_size(db):
    from efficiency.models import Node
    from efficiency.selectors.committee import pack_heatmap

    cluster = ClusterFactory(slug="fleet")
    owner = DepartmentFactory(code="fleet-owner")
    Node.objects.bulk_create(
        Node(cluster=cluster, hostname=f"n{i:04d}", gpu_model="H100", gpu_count=8, owner_department=owner)
        for i in range(1250)
    )
    nodes = Node.objects.filter(cluster=cluster).order_by("hostname")
    first = nodes.first()
    NodeHourFactory(node=first, hour=START, busy_gpu_s=0.25 * 8 * 3600)
    heatmap = pack_heatmap(cluster=cluster, start=START, end=START + timedelta(days=14))
    assert (len(heatmap.rows), len(heatmap.columns)) == (179, 168)
    assert (heatmap.row_block, heatmap.column_hours) == (7, 2)
    assert heatmap.rows[0] == "n0000 – n0006"
    # one of 7 nodes sampled in the first 2-hour block: its utilization, not diluted by the others
    assert heatmap.values[0][0] == 0.25
    assert heatmap.values[1][0] is None


def test_committee_pack_is_scheduled_hourly():
    from django.conf import settings

    entry = settings.CELERY_BEAT_SCHEDULE["committee-pack"]
    assert entry["task"] == "efficiency.tasks.committee_pack_generate_task"


def test_pack_ready_message_names_the_pack_and_links_it(world):
    from efficiency.services.notifications.messages import message_build

    with time_machine.travel(NOW, tick=False):
        committee_pack_generate_task()
    notification = Notification.objects.get(event=NotificationEvent.PACK_READY)
    pack = ReviewPack.objects.get()
    message = message_build([notification])
    text = str(message.items[0].headline)
    assert "Review pack" in text
    assert f"version {pack.version}" in text
    assert "Incident" not in text
    assert message.items[0].url.endswith(f"/committee/packs/{pack.pk}/")


def test_a_requested_pack_is_built_once_and_a_correction_supersedes_it(world):
    from efficiency.services.committee.pack import pack_request

    with time_machine.travel(NOW, tick=False):
        first = pack_request(cluster_id=world["cluster"].pk, user_id=world["committee"].pk)
        assert pack_request(cluster_id=world["cluster"].pk) is None  # already built
        fixed = pack_request(cluster_id=world["cluster"].pk, corrects_id=first.pk, reason="late Slurm data")
        assert pack_request(cluster_id=world["cluster"].pk, corrects_id=first.pk, reason="again") is None
    assert (fixed.version, fixed.supersedes, fixed.correction_reason) == (2, first, "late Slurm data")
    assert (fixed.period_start, fixed.period_end) == (first.period_start, first.period_end)
    assert first.generated_by == world["committee"]
