from datetime import UTC, date, datetime, timedelta

import pytest
from django.template import Context, Template
from django.test import RequestFactory
from django.urls import NoReverseMatch, reverse

from efficiency.choices import ActionStatus, MeetingStatus, QuotaCycleStatus, Role
from efficiency.models import Action, AuditEntry, Decision, QuotaCycle, ReviewMeeting
from efficiency.services import quotas as quota_services
from efficiency.services.committee.meetings import meeting_create
from tests.factories import ClusterFactory, UserFactory
from tests.quota_fixtures import NOW, SETTINGS, make_planning
from tests.services.committee_meeting_fixtures import PERIOD_START, make_pack

WHEN = datetime(2026, 11, 17, 2, 0, tzinfo=UTC)


@pytest.fixture
def chair(db):
    return UserFactory(username="chair", role=Role.COMMITTEE)


@pytest.fixture
def meeting(chair):
    return meeting_create(make_pack(ClusterFactory()), chair, WHEN, [chair], "guest from finance")


def _decision_post(**fields):
    data = {
        "decision-kind": "other",
        "decision-title": "Keep the weekly review",
        "decision-options": "keep\ndrop",
        "decision-outcome": "keep",
        "decision-decided_by": "unanimous",
    }
    data.update({f"decision-{key}": value for key, value in fields.items()})
    return data


def test_meeting_page_shows_header_agenda_and_forms(client, chair, meeting):
    client.force_login(chair)
    body = client.get(f"/committee/meetings/{meeting.pk}/").content.decode()
    assert meeting.title in body
    assert f'href="/committee/packs/{meeting.pack_id}/"' in body
    assert "guest from finance" in body
    assert "Summary and key figures" in body
    assert 'id="decision-form"' in body
    assert 'id="action-form"' in body
    assert 'id="minutes-form"' in body


def test_record_decision_then_supersede_through_the_page(client, chair, meeting):
    client.force_login(chair)
    response = client.post(f"/committee/meetings/{meeting.pk}/decide/", _decision_post())
    assert response.status_code == 302
    first = Decision.objects.get()
    assert first.options == ["keep", "drop"]
    response = client.post(
        f"/committee/meetings/{meeting.pk}/decide/", _decision_post(outcome="drop", supersedes=str(first.pk))
    )
    assert response.status_code == 302
    body = client.get(f"/committee/meetings/{meeting.pk}/").content.decode()
    assert "superseded by #2" in body
    # Superseding the same decision again is refused beside the field.
    response = client.post(
        f"/committee/meetings/{meeting.pk}/decide/", _decision_post(supersedes=str(first.pk))
    )
    assert response.status_code == 400
    assert Decision.objects.count() == 2


def test_decisions_have_no_edit_url():
    for name in ("decision-edit", "decision-update", "meeting-decision-edit"):
        with pytest.raises(NoReverseMatch):
            reverse(f"efficiency:{name}", args=[1])


def test_capacity_decision_needs_its_numbers(client, chair, meeting):
    client.force_login(chair)
    response = client.post(f"/committee/meetings/{meeting.pk}/decide/", _decision_post(kind="capacity"))
    assert response.status_code == 400
    assert 'id="error-decision-capacity_gpu_model"' in response.content.decode()
    response = client.post(
        f"/committee/meetings/{meeting.pk}/decide/",
        _decision_post(kind="capacity", capacity_gpu_model="H200", capacity_gpus="8"),
    )
    assert response.status_code == 302
    assert Decision.objects.get().capacity_gpus == 8


def test_quota_decision_from_the_page_approves_the_cycle(client, db, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    settings.PORTAL_CYCLE_DAYS = 14
    planning = make_planning()
    proposal = quota_services.quota_proposal_create(
        cluster=planning.cluster, actor=planning.committee, now=NOW, settings_override=SETTINGS
    )
    meeting = meeting_create(make_pack(planning.cluster, cycle_id=proposal.pk), planning.committee, WHEN)
    client.force_login(planning.committee)
    body = client.get(f"/committee/meetings/{meeting.pk}/").content.decode()
    assert f"Approve the proposed quotas of cycle #{proposal.pk}" in body
    response = client.post(
        f"/committee/meetings/{meeting.pk}/decide/",
        _decision_post(kind="quota", quota_cycle=str(proposal.pk), quota_approve="on", outcome="approve"),
    )
    assert response.status_code == 302
    assert QuotaCycle.objects.get(pk=proposal.pk).status == QuotaCycleStatus.APPROVED


def test_actions_hold_minutes_and_approval(client, chair, meeting):
    client.force_login(chair)
    response = client.post(
        f"/committee/meetings/{meeting.pk}/actions/",
        {"action-title": "Replace the PSU", "action-owner": "chair", "action-due_on": "2026-11-20"},
    )
    assert response.status_code == 302
    action = Action.objects.get()
    assert (action.owner, action.due_on) == (chair, date(2026, 11, 20))
    assert client.post(f"/committee/meetings/{meeting.pk}/hold/").status_code == 302
    assert (
        client.post(f"/committee/meetings/{meeting.pk}/minutes/", {"minutes": "Kept it."}).status_code == 302
    )
    nxt = meeting_create(
        make_pack(meeting.cluster, start=PERIOD_START + timedelta(days=14)), chair, WHEN + timedelta(days=14)
    )
    body = client.get(f"/committee/meetings/{nxt.pk}/").content.decode()
    assert "carried 1×" in body
    assert body.index("Replace the PSU") < body.index("Summary and key figures")
    response = client.post(f"/committee/meetings/{nxt.pk}/approve-minutes/")
    assert response.status_code == 302
    meeting.refresh_from_db()
    assert meeting.status == MeetingStatus.APPROVED
    assert client.post(f"/committee/meetings/{nxt.pk}/approve-minutes/").status_code == 400
    # Approved minutes are frozen.
    assert client.post(f"/committee/meetings/{meeting.pk}/minutes/", {"minutes": "x"}).status_code == 400
    # Close the carried action from the new meeting.
    response = client.post(
        f"/committee/actions/{action.pk}/close/", {"status": "done", "meeting": str(nxt.pk)}
    )
    assert response.status_code == 302
    assert Action.objects.get().status == ActionStatus.DONE


def test_audit_page_shows_verified_then_broken(client, chair, meeting):
    client.force_login(chair)
    body = client.get("/committee/audit/").content.decode()
    assert "Chain verified (1 entry)" in body
    entry = AuditEntry.objects.get()
    AuditEntry.objects.filter(pk=entry.pk).update(payload={"title": "forged"})
    body = client.get("/committee/audit/").content.decode()
    assert f"Broken at #{entry.seq}" in body


def test_department_head_is_refused(client, db, meeting):
    from tests.factories import DepartmentFactory

    head = UserFactory(role=(Role.DEPARTMENT_HEAD, DepartmentFactory(code="x").code))
    client.force_login(head)
    assert client.get(f"/committee/meetings/{meeting.pk}/").status_code == 403
    assert client.get("/committee/audit/").status_code == 403


def test_pack_partial_lists_meetings_and_offers_to_start_one(chair, meeting):
    request = RequestFactory().get("/")
    request.user = chair
    html = Template("{% load committee_meetings %}{% pack_meetings pack %}").render(
        Context({"request": request, "pack": meeting.pack})
    )
    assert meeting.title in html
    assert "Start a meeting from this pack" in html
    assert f'value="{meeting.pack_id}"' in html
    request.user = UserFactory(username="nobody")
    html = Template("{% load committee_meetings %}{% pack_meetings pack %}").render(
        Context({"request": request, "pack": meeting.pack})
    )
    assert "Start a meeting" not in html


def test_start_meeting_form_posts(client, chair, meeting):
    client.force_login(chair)
    pack = make_pack(meeting.cluster, start=PERIOD_START + timedelta(days=14))
    response = client.post(
        "/committee/meetings/new/",
        {"pack": str(pack.pk), "scheduled_for": "2026-12-01T10:00", "attendees": ["chair"], "guests": ""},
    )
    assert response.status_code == 302
    created = ReviewMeeting.objects.get(pack=pack)
    assert created.previous == meeting
    # A meeting before the previous one is refused beside the field.
    response = client.post(
        "/committee/meetings/new/", {"pack": str(pack.pk), "scheduled_for": "2026-01-01T10:00"}
    )
    assert response.status_code == 400
    assert 'id="error-scheduled_for"' in response.content.decode()
