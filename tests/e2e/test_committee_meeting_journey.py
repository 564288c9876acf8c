"""A committee meeting in a real browser: approve the quota proposal by a decision, raise an action,
hold the meeting and write its minutes; the next meeting carries the open action first on its agenda
and approves the previous minutes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from efficiency.models import QuotaCycle
from efficiency.services.committee.meetings import meeting_create
from efficiency.services.quotas import quota_proposal_create
from tests.conftest import PASSWORD
from tests.e2e.conftest import log_in
from tests.quota_fixtures import make_planning
from tests.services.committee_meeting_fixtures import make_pack

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def planning(transactional_db, settings):
    settings.PORTAL_QUOTA_FLOOR_GPUS = 0
    settings.PORTAL_QUOTA_GUARANTEED_SHARE = 0.8
    settings.PORTAL_QUOTA_PERCENTILE = 75.0
    settings.PORTAL_QUOTA_MAX_CHANGE_PCT = 25.0
    return make_planning()


def test_committee_meeting_decides_acts_and_carries(page, planning, screenshot):
    proposal = quota_proposal_create(cluster=planning.cluster, actor=planning.committee)
    now = timezone.now().replace(microsecond=0)
    first_pack = make_pack(planning.cluster, start=now - timedelta(days=14), cycle_id=proposal.pk)
    meeting = meeting_create(first_pack, planning.committee, now, [planning.committee], "Finance (observer)")

    log_in(page, "chair", PASSWORD)
    page.goto(f"/committee/meetings/{meeting.pk}/")
    assert page.locator("#meeting-status").inner_text() == "Planned"
    assert f"Approve the proposed quotas of cycle #{proposal.pk}" in page.locator("#agenda").inner_text()
    screenshot("committee-meeting-planned")

    # The committee approves the proposal by a decision.
    page.locator("#decision-form-box summary").click()
    page.locator("#id_decision-kind").select_option("quota")
    page.locator("#id_decision-title").fill("Quotas for the next cycle")
    page.locator("#id_decision-options").fill("Approve as proposed\nKeep the current quotas")
    page.locator("#id_decision-outcome").fill("Approve as proposed")
    page.locator("#id_decision-decided_by").fill("The committee, unanimous")
    page.locator("#id_decision-quota_cycle").select_option(str(proposal.pk))
    page.locator("#id_decision-quota_approve").check()
    screenshot("committee-meeting-decision-form")
    page.locator("#decision-button").click()
    page.wait_for_url(f"**/committee/meetings/{meeting.pk}/#decision-1")
    record = page.locator("#decision-1")
    assert "Quotas for the next cycle" in record.inner_text()
    assert "Approve as proposed" in record.inner_text()
    assert QuotaCycle.objects.get(pk=proposal.pk).status == "approved"
    page.goto(f"/quotas/cycles/{proposal.pk}/")
    assert page.locator("#cycle-status").inner_text() == "Approved"
    page.goto(f"/committee/meetings/{meeting.pk}/")

    # An action with an owner and a due date.
    page.locator("#id_action-title").fill("Tell the radar team about the new quota")
    page.locator("#id_action-owner").select_option("head-radar")
    page.locator("#id_action-due_on").fill((now + timedelta(days=7)).date().isoformat())
    page.locator("#action-button").click()
    page.wait_for_url(f"**/committee/meetings/{meeting.pk}/#actions")
    assert "Tell the radar team" in page.locator("#action-table").inner_text()

    # Hold the meeting and write the minutes.
    page.locator("#hold-button").click()
    page.wait_for_url(f"**/committee/meetings/{meeting.pk}/")
    assert page.locator("#meeting-status").inner_text() == "Held"
    page.locator("#id_minutes").fill("Quotas approved as proposed. Radar to be told.")
    page.locator("#minutes-button").click()
    page.wait_for_url(f"**/committee/meetings/{meeting.pk}/#minutes")
    screenshot("committee-meeting-held")

    # The next meeting, from the next pack: the open action comes first, carried once.
    second_pack = make_pack(planning.cluster, start=now)
    second = meeting_create(second_pack, planning.committee, now + timedelta(days=14), [planning.committee])
    page.goto(f"/committee/meetings/{second.pk}/")
    first_item = page.locator("#agenda li").first
    assert "Tell the radar team" in first_item.inner_text()
    assert "carried 1×" in first_item.inner_text()
    assert "Tell the radar team" in page.locator("#carried-actions").inner_text()
    page.locator("#approve-minutes-button").click()
    page.wait_for_url(f"**/committee/meetings/{second.pk}/")
    assert page.locator("#previous-approved").is_visible()
    screenshot("committee-meeting-next")

    page.goto(f"/committee/meetings/{meeting.pk}/")
    assert page.locator("#meeting-status").inner_text() == "Minutes approved"
    assert page.locator("#decision-form").count() == 0  # its records are closed

    page.goto("/committee/audit/")
    assert page.locator("#chain-status").inner_text().startswith("Chain verified")
    screenshot("committee-audit")
