"""Remediation tickets in a real browser. The server's clock is moved with time-machine (the live
server runs in this process, so its ``timezone.now()`` follows): on Monday 2026-11-30 10:00 in
Shanghai a critical ticket due at 14:00 is "Due soon"; at 15:00 it is "Overdue" and tops the board.
The vision head starts it and comments, the committee declines another with a reason, the radar head
cannot open it; a follow-up ticket is opened from an incident's page. Every page is photographed."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from efficiency.models import Incident, Ticket
from efficiency.services.tickets import ticket_comment, ticket_create, ticket_from_recommendation
from tests.conftest import PASSWORD
from tests.e2e.conftest import log_in
from tests.factories import RecommendationFactory

pytestmark = pytest.mark.django_db(transaction=True)

MONDAY_10 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 10:00 in Shanghai
MONDAY_15 = MONDAY_10 + timedelta(hours=5)


def _errors(page) -> list[str]:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
    page.on("console", lambda message: message.type == "error" and errors.append(f"console: {message.text}"))
    return errors


def test_tickets_from_due_soon_to_overdue_and_through_the_workflow(page, live_server, org, screenshot):
    errors = _errors(page)
    with time_machine.travel(MONDAY_10, tick=True) as clock:
        gpu = ticket_create(
            user=org.admin,
            title="Replace GPU 3 of gpu-a01 (Xid 79)",
            department=org.dept_a,
            severity="critical",
            assignee=org.head_a,
            description="The GPU fell off the bus twice this week.",
        )
        pfs = ticket_create(
            user=org.committee, title="Cache full data on the PFS", department=org.dept_a, severity="low"
        )
        ticket_create(user=org.admin, title="Radar data loader", department=org.dept_b, severity="medium")
        recommendation = RecommendationFactory(cluster=org.cluster, department=org.dept_a, state="accepted")
        fixed = ticket_from_recommendation(recommendation, user=org.admin)
        Ticket.objects.filter(pk=fixed.pk).update(
            state="verified_gain",
            expected_gain_pct=50.0,
            measured_gain_pct=47.0,
            verification={  # as efficiency.services.tickets.verification records it
                "outcome": "verified_gain",
                "metric": "iteration_s",
                "before": 2.0,
                "after": 1.06,
                "gain_pct": 47.0,
                "interval_low_pct": 44.0,
                "interval_high_pct": 50.0,
                "shortfalls": [],
                "windows": {
                    "before": {"start": "2026-11-16T01:00:00+00:00", "end": "2026-11-23T01:00:00+00:00",
                               "jobs": 7, "gpu_hours": 180.0},
                    "after": {"start": "2026-11-24T01:00:00+00:00", "end": "2026-11-30T01:00:00+00:00",
                              "jobs": 6, "gpu_hours": 98.0},
                },
                "series": {
                    "before": [{"job": f"b{d}", "start": f"2026-11-{d}T03:00:00+00:00",
                                "iteration": 2.0 + (d % 3) * 0.05} for d in range(16, 23)],
                    "after": [{"job": f"a{d}", "start": f"2026-11-{d}T03:00:00+00:00",
                               "iteration": 1.05 + (d % 2) * 0.02} for d in range(24, 30)],
                },
                "checked_at": "2026-11-30T01:00:00+00:00",
            },
        )  # fmt: skip
        ticket_comment(Ticket.objects.get(pk=fixed.pk), user=org.admin, text="Budget note.", internal=True)
        incident = Incident.objects.create(
            cluster=org.cluster, job=org.job_a, department=org.dept_a, node=org.node_a,
            category="hardware_gpu", severity="critical", code="79", root_signature_id="xid-79",
            occurred_at=MONDAY_10, detected_at=MONDAY_10,
        )  # fmt: skip

        # --- 10:00: the critical ticket is due at 14:00, within the 4 business hours of "due soon".
        log_in(page, "head-a", PASSWORD)
        page.locator("#nav-tickets").click()
        page.wait_for_url("**/tickets/")
        row = page.locator(f"#ticket-table tr[data-ticket='{gpu.pk}']")
        assert "Due soon" in row.inner_text()
        assert "Radar data loader" not in page.content()
        screenshot("tickets-board-due-soon")

        # --- 15:00: it is overdue and comes first.
        clock.move_to(MONDAY_15)
        page.reload()
        first = page.locator("#ticket-table tbody tr[data-ticket]").first
        assert first.get_attribute("data-ticket") == str(gpu.pk)
        assert "Overdue" in first.inner_text()
        screenshot("tickets-board-overdue")
        page.goto("/tickets/?sla=overdue")
        assert page.locator("#ticket-table tbody tr[data-ticket]").count() == 1
        assert "sla=overdue" in page.locator("#tickets-csv").get_attribute("href")

        # The head starts the work and comments.
        page.locator(f"#ticket-table a[href='/tickets/{gpu.pk}/']").click()
        page.wait_for_url(f"**/tickets/{gpu.pk}/")
        assert "Overdue" in page.locator("#ticket-due").inner_text()
        page.locator("#action-start").click()
        page.wait_for_url(f"**/tickets/{gpu.pk}/")
        assert page.locator("#ticket-state").inner_text() == "In progress"
        page.locator("#id_text").fill("Spare GPU arrives tomorrow morning.")
        page.locator("#comment-button").click()
        page.wait_for_url(f"**/tickets/{gpu.pk}/#comments")
        assert "Spare GPU arrives tomorrow morning." in page.locator("#comments").inner_text()
        assert "State: Open → In progress" in page.locator("#history-table").inner_text()
        screenshot("ticket-detail-head")

        page.goto("/tickets/mine/")
        assert page.locator("#ticket-table tbody tr[data-ticket]").count() == 1
        screenshot("tickets-mine")
        page.goto("/")
        assert "Overdue" in page.locator("#home-tickets").inner_text()
        screenshot("home-head-tickets")
        page.goto("/departments/vision/")
        assert page.locator("#department-tickets tr[data-ticket]").count() == 2  # the verified one is done
        screenshot("department-tickets")

        # A follow-up ticket from the incident's page.
        page.goto(f"/faults/incidents/{incident.pk}/")
        page.locator("#follow-up-button").click()
        page.wait_for_url("**/tickets/*/")
        assert f"Incident {incident.pk}" in page.locator("#ticket-origin").inner_text()
        page.goto(f"/faults/incidents/{incident.pk}/")
        assert "· Open" in page.locator("#related-tickets").inner_text()
        screenshot("incident-follow-up")

        # A head's view of the verified ticket: no internal notes.
        page.goto(f"/tickets/{fixed.pk}/")
        page.locator("#verification-chart .main-svg").first.wait_for()
        assert "Budget note." not in page.content()
        assert "Gain verified" in page.locator("#verification").inner_text()
        screenshot("ticket-detail-verified")
        page.goto("/tickets/new/")
        screenshot("ticket-new")

        # --- The radar head cannot open vision's ticket.
        page.context.clear_cookies()
        log_in(page, "head-b", PASSWORD)
        assert page.goto(f"/tickets/{gpu.pk}/").status == 404
        errors.clear()  # the browser logs the 404 it was meant to get

        # --- The committee declines the PFS ticket with a reason, and sees the internal note.
        page.context.clear_cookies()
        log_in(page, "committee", PASSWORD)
        assert "Overdue tickets: 1" in page.locator("#overdue-tickets").inner_text()
        screenshot("home-committee-overdue")
        page.goto(f"/tickets/{pfs.pk}/")
        page.locator("#action-wont_fix").click()  # the browser asks for the reason first
        assert page.url.endswith(f"/tickets/{pfs.pk}/")
        page.locator("#reason-wont_fix").fill("The job family moved to the new cluster.")
        page.locator("#action-wont_fix").click()
        page.wait_for_url(f"**/tickets/{pfs.pk}/")
        assert page.locator("#ticket-state").inner_text() == "Won't fix"
        assert "The job family moved to the new cluster." in page.locator("#history-table").inner_text()
        page.goto(f"/tickets/{fixed.pk}/")
        assert "Budget note." in page.locator("#comments").inner_text()
        page.goto(f"/recommendations/{recommendation.pk}/")
        assert f"Ticket #{fixed.pk} · Verified gain" in page.locator("#rec-tickets").inner_text()
        screenshot("recommendation-ticket-link")
        page.goto("/tickets/")
        screenshot("tickets-board-committee")

        # --- In Chinese.
        page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": live_server.url}])
        page.goto(f"/tickets/{gpu.pk}/")
        assert page.locator("html").get_attribute("lang") == "zh-hans"
        screenshot("ticket-detail-zh")
    assert errors == []
