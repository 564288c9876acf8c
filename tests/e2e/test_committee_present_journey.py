"""The committee presents a review pack on the projector: one section per screen, keyboard only."""

import pytest
from playwright.sync_api import expect

from tests.conftest import PASSWORD
from tests.e2e.conftest import log_in
from tests.views.test_committee_pages import make_pack

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_committee_walks_the_pack_with_the_keyboard(page, live_server, org, screenshot):
    pack = make_pack(org)
    log_in(page, "committee", PASSWORD)
    page.goto(f"/committee/packs/{pack.pk}/")
    page.locator("#pack-waterfall svg.main-svg").first.wait_for()
    page.locator("#pack-dept-vision svg.main-svg").first.wait_for()
    screenshot("committee-pack-page")

    page.locator("#present-link").click()
    page.wait_for_url(f"**/committee/packs/{pack.pk}/present/**")
    expect(page.locator("#slide-counter")).to_have_text("1 / 10")
    expect(page.get_by_role("heading", name="0. Cover")).to_be_visible()
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("heading", name="1. Summary")).to_be_visible()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    heading = page.get_by_role("heading", name="3. Cluster")
    expect(heading).to_be_visible()
    expect(page.get_by_role("heading", name="1. Summary")).not_to_be_visible()
    expect(page.locator("#slide-counter")).to_have_text("4 / 10")
    page.locator("#slide-waterfall svg.main-svg").first.wait_for()
    # The chart drawn while its slide was hidden takes the projector's width when shown.
    box = page.locator("#slide-states").bounding_box()
    assert box["width"] > 500
    screenshot("committee-present-cluster")
    page.keyboard.press("End")
    expect(page.get_by_role("heading", name="9. Showback")).to_be_visible()
    page.keyboard.press("Home")
    expect(page.get_by_role("heading", name="0. Cover")).to_be_visible()
    # A link to a section opens on it; PageDown moves on.
    page.goto(f"/committee/packs/{pack.pk}/present/#slide-summary")
    # Only the hash changed: the page shows the section when its hashchange handler has run.
    expect(page.get_by_role("heading", name="1. Summary")).to_be_visible()
    page.keyboard.press("PageDown")
    page.keyboard.press("PageDown")
    expect(page.get_by_role("heading", name="3. Cluster")).to_be_visible()
    page.keyboard.press("PageUp")
    expect(page.get_by_role("heading", name="2. Since the last meeting")).to_be_visible()

    page.keyboard.press("Escape")
    page.wait_for_url(f"**/committee/packs/{pack.pk}/")
    assert page.locator("#pack-title").is_visible()


def test_a_head_reads_and_prints_their_copy(page, live_server, org, screenshot):
    pack = make_pack(org)
    log_in(page, "head-a", PASSWORD)
    page.goto(f"/committee/packs/{pack.pk}/")
    page.locator("#pack-dept-vision svg.main-svg").first.wait_for()
    assert page.locator("#copy-badge").is_visible()
    assert "Radar" not in page.content()
    screenshot("committee-pack-head-copy")
    page.goto(f"/committee/packs/{pack.pk}/print/")
    assert page.get_by_role("heading", name="9. Showback").count() == 1
    assert "Radar" not in page.content()
    page.emulate_media(media="print")
    screenshot("committee-pack-print")
