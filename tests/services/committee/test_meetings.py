import threading
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection

from efficiency.choices import ActionStatus, DecisionKind, MeetingStatus, QuotaCycleStatus, Role, TicketOrigin
from efficiency.models import Action, AuditEntry, Decision, ImmutableRecord, QuotaCycle, ReviewMeeting
from efficiency.selectors import committee_meetings as selectors
from efficiency.services import quotas as quota_services
from efficiency.services.committee.audit import audit_append, audit_verify
from efficiency.services.committee.meetings import (
    CommitteeRefused,
    action_close,
    action_create,
    decision_record,
    meeting_create,
    meeting_hold,
    minutes_approve,
    minutes_save,
)
from tests.factories import ClusterFactory, DepartmentFactory, UserFactory
from tests.quota_fixtures import NOW, SETTINGS, make_planning
from tests.services.committee_meeting_fixtures import PERIOD_START, make_pack

WHEN = datetime(2026, 11, 17, 2, 0, tzinfo=UTC)


@pytest.fixture
def cluster(db):
    return ClusterFactory(slug="ad-platform", name="AD platform")


@pytest.fixture
def chair(db):
    return UserFactory(username="chair", role=Role.COMMITTEE)


def _meeting(cluster, chair, *, offset_days=0, **kwargs):
    pack = make_pack(cluster, start=PERIOD_START + timedelta(days=offset_days))
    return meeting_create(pack, chair, WHEN + timedelta(days=offset_days), [chair], "", **kwargs)


def _decide(meeting, user, **kwargs):
    fields = {
        "kind": DecisionKind.OTHER,
        "title": "Keep the weekly review",
        "options": "keep\ndrop",
        "outcome": "keep",
        "decided_by": "the committee, unanimous",
    }
    fields.update(kwargs)
    return decision_record(meeting, user, **fields)


def test_meeting_create_stores_agenda_and_audits(cluster, chair):
    meeting = _meeting(cluster, chair)
    assert meeting.previous is None
    assert meeting.status == MeetingStatus.PLANNED
    assert list(meeting.attendees.all()) == [chair]
    assert [item["kind"] for item in meeting.agenda][:1] == ["section"]
    entry = AuditEntry.objects.get(verb="meeting_create")
    assert entry.object_id == meeting.pk
    assert entry.payload["pack_hash"] == meeting.pack.content_hash


def test_only_committee_and_admins_keep_records(cluster, db):
    head = UserFactory(role=(Role.DEPARTMENT_HEAD, DepartmentFactory(code="v").code))
    with pytest.raises(CommitteeRefused) as refused:
        meeting_create(make_pack(cluster), head, WHEN)
    assert refused.value.status == 403
    assert not ReviewMeeting.objects.exists()


def test_next_meeting_must_come_after_the_previous(cluster, chair):
    _meeting(cluster, chair)
    with pytest.raises(CommitteeRefused) as refused:
        meeting_create(make_pack(cluster, start=PERIOD_START + timedelta(days=14)), chair, WHEN)
    assert refused.value.field == "scheduled_for"


def test_decisions_are_numbered_and_never_edited(cluster, chair):
    meeting = _meeting(cluster, chair)
    first = _decide(meeting, chair)
    second = _decide(meeting, chair, title="Second")
    assert (first.number, second.number) == (1, 2)
    assert first.options == ["keep", "drop"]
    first.outcome = "drop"
    with pytest.raises(ImmutableRecord):
        first.save()
    assert Decision.objects.get(pk=first.pk).outcome == "keep"


def test_supersede_chain(cluster, chair):
    first_meeting = _meeting(cluster, chair)
    old = _decide(first_meeting, chair)
    later = _meeting(cluster, chair, offset_days=14)
    newer = _decide(later, chair, outcome="drop", supersedes=old)
    assert newer.supersedes == old
    assert Decision.objects.get(pk=old.pk).superseded_by == newer
    with pytest.raises(CommitteeRefused) as refused:
        _decide(later, chair, supersedes=old)
    assert refused.value.field == "supersedes"
    newest = _decide(later, chair, supersedes=newer)  # the newer one may be superseded in turn
    assert newest.supersedes == newer
    assert Decision.objects.filter(meeting=later).count() == 2


def test_cannot_supersede_a_later_meetings_decision(cluster, chair):
    first_meeting = _meeting(cluster, chair)
    later = _meeting(cluster, chair, offset_days=14)
    later_decision = _decide(later, chair)
    with pytest.raises(CommitteeRefused):
        _decide(first_meeting, chair, supersedes=later_decision)


def test_capacity_decision_stores_the_order(cluster, chair):
    meeting = _meeting(cluster, chair)
    with pytest.raises(CommitteeRefused) as refused:
        _decide(meeting, chair, kind=DecisionKind.CAPACITY, capacity_gpu_model="H200")
    assert refused.value.field == "capacity_gpus"
    decision = _decide(
        meeting, chair, kind=DecisionKind.CAPACITY, capacity_gpu_model="H200", capacity_gpus=16
    )
    assert (decision.capacity_gpu_model, decision.capacity_gpus) == ("H200", 16)
    assert AuditEntry.objects.get(verb="decision_record").payload["capacity_gpus"] == 16


def test_ticket_decision_opens_a_committee_ticket(cluster, chair):
    meeting = _meeting(cluster, chair)
    department = DepartmentFactory(code="vision", name="Vehicle vision")
    decision = _decide(
        meeting,
        chair,
        kind=DecisionKind.TICKET,
        new_ticket={"title": "Fix the data loader", "department": department.pk, "severity": "high"},
    )
    ticket = decision.ticket
    assert ticket.origin == TicketOrigin.COMMITTEE
    assert ticket.meeting == meeting.title
    assert ticket.department == department
    with pytest.raises(CommitteeRefused) as refused:
        _decide(
            meeting, chair, kind=DecisionKind.TICKET, new_ticket={"title": "", "department": department.pk}
        )
    assert refused.value.field == "ticket_title"


@pytest.fixture
def planning(db, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    settings.PORTAL_CYCLE_DAYS = 14
    return make_planning()


def test_quota_decision_approves_the_cycle(planning):
    proposal = quota_services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    assert proposal.status == QuotaCycleStatus.PROPOSED
    pack = make_pack(planning.cluster, cycle_id=proposal.pk)
    meeting = meeting_create(pack, planning.committee, WHEN, [planning.committee])
    assert any(item["kind"] == "decision" and item["ref"] == proposal.pk for item in meeting.agenda)
    decision = _decide(
        meeting,
        planning.committee,
        kind=DecisionKind.QUOTA,
        title="Approve the quotas",
        outcome="approve as proposed",
        quota_cycle=proposal,
        quota_approve=True,
    )
    proposal.refresh_from_db()
    assert proposal.status == QuotaCycleStatus.APPROVED
    assert proposal.approved_by == planning.committee
    assert "approve as proposed" in proposal.approval_comment
    assert decision.quota_cycle == proposal
    # Approving again is refused by the quota service, and nothing is recorded.
    with pytest.raises(CommitteeRefused) as refused:
        _decide(
            meeting, planning.committee, kind=DecisionKind.QUOTA, quota_cycle=proposal, quota_approve=True
        )
    assert refused.value.field == "quota_cycle"
    assert meeting.decisions.count() == 1


def test_platform_admin_cannot_approve_quotas_through_a_decision(planning):
    proposal = quota_services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    meeting = meeting_create(make_pack(planning.cluster), planning.admin, WHEN)
    with pytest.raises(CommitteeRefused) as refused:
        _decide(meeting, planning.admin, kind=DecisionKind.QUOTA, quota_cycle=proposal, quota_approve=True)
    assert refused.value.status == 403
    assert QuotaCycle.objects.get(pk=proposal.pk).status == QuotaCycleStatus.PROPOSED


def test_actions_carried_across_two_meetings_get_flagged(cluster, chair):
    owner = UserFactory(username="owner", role=Role.PLATFORM_ADMIN)
    first = _meeting(cluster, chair)
    action = action_create(first, chair, "Replace the PSU", owner, date(2026, 11, 20))
    done = action_create(first, chair, "Send the slides", owner, date(2026, 11, 18))
    action_close(done, chair, ActionStatus.DONE, "sent")
    second = _meeting(cluster, chair, offset_days=14)
    assert Action.objects.get(pk=action.pk).carried == 1
    assert Action.objects.get(pk=done.pk).carried == 0
    assert second.agenda[0] == {
        "kind": "action",
        "ref": action.pk,
        "title": "Replace the PSU",
        "owner": "owner",
        "due_on": "2026-11-20",
        "carried": 1,
        "flagged": False,
    }
    assert second.agenda[1]["kind"] == "minutes"
    third = _meeting(cluster, chair, offset_days=28)
    assert third.agenda[0]["ref"] == action.pk
    assert third.agenda[0]["flagged"] is True
    assert list(selectors.flagged_actions(cluster_id=cluster.pk)) == [Action.objects.get(pk=action.pk)]
    assert AuditEntry.objects.filter(verb="action_carry", object_id=action.pk).count() == 2


def test_action_close_rules(cluster, chair):
    meeting = _meeting(cluster, chair)
    action = action_create(meeting, chair, "Write it up", chair, date(2026, 11, 20))
    with pytest.raises(CommitteeRefused) as refused:
        action_close(action, chair, ActionStatus.DROPPED, "")
    assert refused.value.field == "note"
    action_close(action, chair, ActionStatus.DROPPED, "no longer needed")
    with pytest.raises(CommitteeRefused):
        action_close(action, chair, ActionStatus.DONE, "")


def test_minutes_approval_rules(cluster, chair):
    first = _meeting(cluster, chair)
    second = _meeting(cluster, chair, offset_days=14)
    third = _meeting(cluster, chair, offset_days=28)
    with pytest.raises(CommitteeRefused):  # not held yet
        minutes_approve(first, second, chair)
    meeting_hold(first, chair)
    with pytest.raises(CommitteeRefused):  # held but no minutes
        minutes_approve(first, second, chair)
    minutes_save(first, chair, "We agreed to keep the weekly review.")
    with pytest.raises(CommitteeRefused):  # only in the meeting right after it
        minutes_approve(first, third, chair)
    with pytest.raises(CommitteeRefused):  # not in itself
        minutes_approve(first, first, chair)
    approved = minutes_approve(first, second, chair)
    assert approved.status == MeetingStatus.APPROVED
    assert approved.minutes_approved_in == second
    with pytest.raises(CommitteeRefused):  # once
        minutes_approve(first, second, chair)
    with pytest.raises(CommitteeRefused) as refused:  # then frozen
        minutes_save(first, chair, "Changed afterwards")
    assert refused.value.field == "minutes"
    with pytest.raises(CommitteeRefused):  # and its records are closed
        _decide(first, chair)


def test_audit_chain_verifies_and_detects_tampering(cluster, chair):
    meeting = _meeting(cluster, chair)
    _decide(meeting, chair)
    action_create(meeting, chair, "Write it up", chair, date(2026, 11, 20))
    check = audit_verify()
    assert check.ok
    assert check.entries == 3
    assert selectors.audit_check(user=chair) == check
    decision_entry = AuditEntry.objects.get(verb="decision_record")
    AuditEntry.objects.filter(pk=decision_entry.pk).update(
        payload={**decision_entry.payload, "outcome": "drop"}
    )
    check = audit_verify()
    assert not check.ok
    assert check.first_broken_seq == decision_entry.seq
    assert check.reason == "entry changed after it was written"


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_keep_one_chain():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL")
    cluster = ClusterFactory()
    user = UserFactory(role=Role.COMMITTEE)
    pack = make_pack(cluster)
    errors = []

    def writer():
        try:
            for _ in range(10):
                audit_append(actor=user, verb="test", obj=pack, payload={"n": 1})
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    check = audit_verify()
    assert check.ok
    assert check.entries == 40
