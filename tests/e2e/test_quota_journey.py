"""Quota planning in a real browser: propose → object → edit → approve → backtest → export."""

import pytest
import yaml

from efficiency.models import QuotaCycle, QuotaEvent
from tests.conftest import PASSWORD
from tests.e2e.conftest import log_in
from tests.quota_fixtures import make_planning

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def planning(transactional_db, settings):
    settings.PORTAL_QUOTA_FLOOR_GPUS = 0
    settings.PORTAL_QUOTA_GUARANTEED_SHARE = 0.8
    settings.PORTAL_QUOTA_PERCENTILE = 75.0
    settings.PORTAL_QUOTA_MAX_CHANGE_PCT = 25.0
    return make_planning()


def log_out(page):
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/login/**")


def test_committee_proposes_edits_approves_and_exports_while_a_head_objects(page, planning, screenshot):
    # The committee asks for a proposal: the fixed partition becomes the cycle in force.
    log_in(page, "chair", PASSWORD)
    page.goto("/quotas/")
    page.locator("#propose-button").click()
    page.wait_for_url("**/quotas/cycles/*/")
    cycle = QuotaCycle.objects.get(status="proposed")
    assert page.locator("#cycle-status").inner_text() == "Proposed"
    vision = page.locator("#quota-table tr[data-department='vision']")
    # Hand-checked in tests/services/test_quotas.py: vision 16 -> 20, radar 24 -> 12, pool 8.
    assert vision.locator("input[name$='guaranteed_gpus']").input_value() == "20"
    steps = vision.locator("ol.why-steps li").all_inner_texts()
    assert [step.split(":")[0] for step in steps] == ["Percentile", "Bound", "Floor", "Share", "Rounding"]
    assert steps[0].startswith("Percentile: P75 of hourly demand over 336 h is 32 GPUs")
    assert steps[1] == "Bound: at most ±25% from the current 16, i.e. 12 to 20: capped at 20."
    page.locator("#demand-chart svg.main-svg").first.wait_for()
    screenshot("quota-proposal-committee")
    log_out(page)

    # The radar head sees only radar's proposal, with why, and objects.
    log_in(page, "head-radar", PASSWORD)
    page.goto(f"/quotas/cycles/{cycle.pk}/")
    assert page.locator("#quota-table tr[data-department='vision']").count() == 0
    radar = page.locator("#quota-table tr[data-department='radar']")
    assert "this one keeps the 0 it needs plus at most 12: 12." in radar.inner_text()
    page.get_by_label("Objection").fill("We start lidar fusion training in December.")
    page.locator("#objection-button").click()
    page.wait_for_url(f"**/quotas/cycles/{cycle.pk}/")
    assert "sent to the GPU committee" in page.locator("article.message").inner_text()
    screenshot("quota-proposal-head")
    log_out(page)

    # The committee sees the objection and gives radar more GPUs. Without a comment the browser
    # does not even send the form; 500 GPUs on a 40-GPU cluster are refused with the numbers.
    log_in(page, "chair", PASSWORD)
    page.goto(f"/quotas/cycles/{cycle.pk}/")
    assert "lidar fusion" in page.locator(".objection").inner_text()
    radar = page.locator("#quota-table tr[data-department='radar']")
    radar.locator("input[name$='guaranteed_gpus']").fill("500")
    page.locator("#save-quotas").click()
    comment = page.locator("#quota-edit-form textarea")
    assert comment.evaluate("element => element.validity.valueMissing")
    assert QuotaEvent.objects.filter(kind="edited").count() == 0
    comment.fill("Lidar fusion starts in December.")
    page.locator("#save-quotas").click()
    page.wait_for_url(f"**/quotas/cycles/{cycle.pk}/edit/")
    error = radar.locator(".field-error").inner_text()
    assert error == "NVIDIA H100 80GB HBM3: 520 GPUs guaranteed but only 40 in the cluster."
    assert page.locator(".shared-pool").first.inner_text().startswith("8")
    screenshot("quota-edit-refused")
    radar.locator("input[name$='guaranteed_gpus']").fill("16")
    page.locator("#save-quotas").click()
    page.wait_for_url(f"**/quotas/cycles/{cycle.pk}/")
    assert "1 quotas changed." in page.locator("article.message").inner_text()

    # Approving asks first; dismissed, nothing happens.
    page.locator("#approve-form textarea").fill("Agreed in the review.")
    questions = []

    def dismiss(dialog):
        questions.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.locator("#approve-button").click()
    page.wait_for_timeout(300)
    [question] = questions
    assert question.startswith("Approve these quotas? They come into force on")
    assert page.locator("#cycle-status").inner_text() == "Proposed"
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#approve-button").click()
    page.wait_for_url(f"**/quotas/cycles/{cycle.pk}/")
    assert page.locator("#cycle-status").inner_text() == "Approved"
    assert (
        page.locator("#quota-table tr[data-department='radar'] td.guaranteed").inner_text().startswith("16")
    )
    history = page.locator("#event-list").inner_text()
    assert "Quota edited" in history
    assert "Lidar fusion starts in December." in history
    screenshot("quota-approved")

    # The backtest: fixed partition against this cycle's quotas.
    page.locator("#backtest-link").click()
    page.locator("#rerun-backtest").click()
    page.wait_for_url(f"**/quotas/cycles/{cycle.pk}/backtest/")
    rates = [float(cell.get_attribute("data-value")) for cell in page.locator(".allocation-rate").all()]
    assert len(rates) == 3
    assert rates[2] > rates[0]
    page.locator("#backtest-allocation-chart svg.main-svg").first.wait_for()
    screenshot("quota-backtest")

    # Export for Kueue: what the scheduler will get.
    page.goto(f"/quotas/cycles/{cycle.pk}/")
    with page.expect_download() as download_info:
        page.locator("#export-kueue").click()
    documents = list(yaml.safe_load_all(download_info.value.path().read_text(encoding="utf-8")))
    nominal = {
        d["metadata"]["name"]: d["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
        for d in documents
        if d["kind"] == "ClusterQueue"
    }
    assert nominal == {"vision": 20, "radar": 16, "ad-platform-shared-pool": 4}
    assert QuotaEvent.objects.filter(cycle=cycle, kind="exported").exists()

    # The quotas are in force now (the cycle began at today's local midnight).
    page.goto("/quotas/")
    assert "Cycle in force" in page.locator("#cycle-in-force").inner_text()
    page.locator("#quota-use-chart svg.main-svg").first.wait_for()
    screenshot("quota-overview")
