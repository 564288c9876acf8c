"""A committee meeting in a real browser: open the sealed pack, start the meeting from it, approve
the quota proposal by a decision, raise an action,
hold the meeting and write its minutes; the next meeting carries the open action first on its agenda
and approves the previous minutes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from efficiency.models import QuotaCycle, ReviewMeeting
from efficiency.services.committee.pack import pack_generate
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
    first_pack = pack_generate(cluster=planning.cluster, start=now - timedelta(days=14), end=now)

    # The committee opens the sealed pack: the proposal is among the decisions requested.
    log_in(page, "chair", PASSWORD)
    page.goto("/committee/")
    page.locator(f"#pack-list a[href='/committee/packs/{first_pack.pk}/']").click()
    page.wait_for_url(f"**/committee/packs/{first_pack.pk}/")
    assert (
        f"Approve the proposed quotas of cycle #{proposal.pk}"
        in page.locator("#decisions-requested").inner_text()
    )
    # ... and starts the meeting from it.
    page.locator("#start-meeting summary").click()
    page.locator("#id_guests").fill("Finance (observer)")
    page.locator("#meeting-button").click()
    page.wait_for_url("**/committee/meetings/*/")
    meeting = ReviewMeeting.objects.get(pack=first_pack)
    assert meeting.guests == "Finance (observer)"
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
    page.goto(f"/committee/packs/{second_pack.pk}/")
    page.locator("#start-meeting summary").click()
    later = timezone.localtime(now + timedelta(days=14))
    page.locator("#id_scheduled_for").fill(f"{later:%Y-%m-%dT%H:%M}")
    page.locator("#meeting-button").click()
    page.wait_for_url("**/committee/meetings/*/")
    second = ReviewMeeting.objects.get(pack=second_pack)
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
