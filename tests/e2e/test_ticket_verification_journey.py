"""From a recommendation to a measured gain, in a real browser: the platform admin accepts an "NCCL
on sockets" recommendation of a Vehicle vision job family, which opens a ticket for Vehicle vision;
the vision head finds it on their home page, comments, starts it and resolves it; the workers'
verification measures the family's runs before and after the fix, and the head reads the verified
gain beside the expected one. The radar head gets a 404 for the ticket. The page once in Chinese.

The runs are hand-built (their job hours and Megatron iteration lines), as in the verification
service's tests; the measurement is the real service, run as the worker runs it.
"""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from efficiency.choices import TicketOrigin, TicketState
from efficiency.models import Recommendation, Ticket
from efficiency.services.tickets import tickets_verify
from tests.conftest import PASSWORD
from tests.e2e.conftest import log_in
from tests.factories import RecommendationFactory
from tests.services.tickets.test_verification_service import _run

pytestmark = pytest.mark.django_db(transaction=True)

MONDAY_10 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 10:00 in Shanghai
SOCKET_RULE = "network.nccl-socket-on-rdma"


def test_an_accepted_recommendation_is_worked_and_its_gain_verified(page, live_server, org, screenshot):
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    rec = RecommendationFactory(
        cluster=org.cluster,
        department=org.dept_a,
        rule=SOCKET_RULE,
        user_name="alice",
        name_pattern="bev-exp*",
        gain_pct=50.0,
        gain_gpu_h_week=96.0,
    )
    # The family's runs of the week before: about 3 s an iteration over sockets.
    _run(org, MONDAY_10 - timedelta(days=3), hours=10, iteration_s=3.0, lines=150, activity=0.3)
    _run(org, MONDAY_10 - timedelta(days=1), hours=10, iteration_s=3.1, lines=150, activity=0.3)

    with time_machine.travel(MONDAY_10, tick=True) as clock:
        # --- The admin accepts it for Vehicle vision.
        log_in(page, "admin", PASSWORD)
        page.goto(f"/recommendations/{rec.pk}/")
        page.locator("#accept-department").select_option("vision")
        page.locator("#accept-note").fill("Ship the RDMA env in the launcher template")
        page.locator("#accept-button").click()
        page.wait_for_load_state()
        ticket = Ticket.objects.get(recommendation=rec)
        assert ticket.origin == TicketOrigin.RECOMMENDATION
        assert ticket.department == org.dept_a
        assert ticket.expected_gain_pct == 50.0
        assert f"#{ticket.pk}" in page.locator("main").inner_text()  # the recommendation links its ticket
        page.context.clear_cookies()

        # --- The vision head finds it on their home page, comments, starts and resolves it.
        log_in(page, "head-a", PASSWORD)
        page.locator(f"a[href='/tickets/{ticket.pk}/']").first.click()
        page.wait_for_url(f"**/tickets/{ticket.pk}/")
        assert page.locator("#ticket-state").inner_text() == "Open"
        page.locator("#comment-form textarea[name=text]").fill("The launcher template changes on Tuesday.")
        page.locator("#comment-button").click()
        page.wait_for_url(f"**/tickets/{ticket.pk}/**")
        assert "The launcher template changes on Tuesday." in page.locator("main").inner_text()
        page.locator("#action-start").click()
        page.wait_for_load_state()
        assert page.locator("#ticket-state").inner_text() == "In progress"
        clock.move_to(MONDAY_10 + timedelta(hours=2))
        page.locator("#action-resolve").click()
        page.wait_for_load_state()
        # A job family's fix is measured: the portal takes it from here.
        assert page.locator("#ticket-state").inner_text() == "Verifying"
        # … the head may only take the fix back (reopen, with a reason).
        assert page.locator("#ticket-actions button[id^=action-]").evaluate_all(
            "buttons => buttons.map(button => button.id)"
        ) == ["action-reopen"]
        resolved = Ticket.objects.get(pk=ticket.pk).resolved_at

        # --- A day of runs with the fix, then the workers' verification.
        _run(org, resolved + timedelta(hours=1), hours=12, iteration_s=1.5, lines=250, activity=0.55)
        clock.move_to(resolved + timedelta(days=1))
        assert tickets_verify(resolved + timedelta(days=1))
        page.reload()
        assert page.locator("#ticket-state").inner_text() == "Verified gain"
        assert page.locator("#verdict").inner_text() == "Gain verified"
        gain = float(page.locator("#verification-gain").inner_text().split("%")[0])
        assert 48 <= gain <= 53  # 1 − 1.5 / 3.05 = 50.8%, beside the 50% expected
        assert "50" in page.locator("#ticket-expected-gain").inner_text()
        assert page.locator("#verification .js-plotly-plot, #verification [data-chart]").count() >= 1
        history = page.locator("#history, section:has(h2:text('History'))").first.inner_text()
        assert "head-a" in history
        screenshot("ticket-verified-journey")
        # --- Once in Chinese, chosen with the language switch in the header.
        with page.expect_navigation():
            page.locator("select[name=language]").select_option("zh-hans")
        page.wait_for_url(f"**/tickets/{ticket.pk}/")
        assert page.locator("#ticket-state").inner_text() == "收益已验证"
        zh = page.locator("main").inner_text()
        assert "Before the fix" not in zh
        assert "The launcher template changes on Tuesday." in zh  # their words stay
        screenshot("ticket-verified-journey-zh")
        page.context.clear_cookies()

        # --- The radar head cannot see it.
        log_in(page, "head-b", PASSWORD)
        assert page.goto(f"/tickets/{ticket.pk}/").status == 404
    assert Ticket.objects.get(pk=ticket.pk).state == TicketState.VERIFIED_GAIN
    assert Recommendation.objects.get(pk=rec.pk).state == "accepted"
    assert not errors, errors
