"""Ticket pages as each role sees them: the board (by state, overdue first, SLA badges, filters and
their CSV), "My tickets", a ticket's page with its moves, edits, comments, history and verification,
opening a ticket by hand or from an incident, and the tickets on the home, department, incident and
recommendation pages. Refused input is a 4xx with the reason beside the field, and nothing changes.

The clock is Monday 2026-11-30 10:00 in Shanghai (the working calendar's zone, 9–18 on weekdays).
"""

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from efficiency.choices import TicketOrigin, TicketState
from efficiency.models import Incident, Ticket, TicketComment
from efficiency.services.tickets import (
    ticket_comment,
    ticket_create,
    ticket_from_recommendation,
    ticket_transition,
)
from tests.factories import RecommendationFactory

NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # Monday 10:00 Shanghai


@pytest.fixture(autouse=True)
def clock():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def tickets(org):
    """Department A: one overdue (critical, opened last Thursday 10:00, due 14:00 that day), one due
    soon (in progress, due at noon today: 2 business hours left), one on time (low: 90 business hours);
    department B: one on time."""
    overdue = ticket_create(
        user=org.admin,
        title="Replace the failing GPU",
        department=org.dept_a,
        severity="critical",
        assignee=org.head_a,
        now=NOW - timedelta(days=4),
    )
    soon = ticket_create(
        user=org.admin,
        title="Turn on NCCL over RDMA",
        department=org.dept_a,
        severity="medium",
        due_at=NOW + timedelta(hours=2),
        now=NOW - timedelta(hours=1),
    )
    ticket_transition(soon, "start", user=org.head_a, now=NOW - timedelta(minutes=30))
    later = ticket_create(
        user=org.head_a, title="Cache full data on the PFS", department=org.dept_a, severity="low", now=NOW
    )
    radar = ticket_create(
        user=org.admin, title="Radar data loader", department=org.dept_b, severity="medium", now=NOW
    )
    return type(
        "Tickets",
        (),
        {
            "overdue": Ticket.objects.get(pk=overdue.pk),
            "soon": Ticket.objects.get(pk=soon.pk),
            "later": later,
            "radar": radar,
        },
    )


def _ids(response) -> list[int]:
    return [ticket.pk for ticket in response.context["page"].object_list]


def _csv(response) -> list[list[str]]:
    text = b"".join(response.streaming_content).decode("utf-8-sig")
    return list(csv.reader(io.StringIO(text)))


# --- The board -------------------------------------------------------------------------------------------


def test_the_board_puts_overdue_tickets_first_then_the_soonest_due_with_badges(client, org, tickets):
    client.force_login(org.committee)
    response = client.get(reverse("efficiency:ticket-list"))
    assert response.status_code == 200
    # Grouped by state in workflow order: open (overdue first, then by due), then in progress.
    assert _ids(response) == [tickets.overdue.pk, tickets.radar.pk, tickets.later.pk, tickets.soon.pk]
    body = response.content.decode()
    row = body[body.index(f'data-ticket="{tickets.overdue.pk}"') :]
    assert "Overdue" in row[: row.index("</tr>")]
    row = body[body.index(f'data-ticket="{tickets.soon.pk}"') :]
    assert "Due soon" in row[: row.index("</tr>")]
    row = body[body.index(f'data-ticket="{tickets.later.pk}"') :]
    assert "Overdue" not in row[: row.index("</tr>")]
    assert "Due soon" not in row[: row.index("</tr>")]
    # Each state's count, for a one-click filter.
    assert 'data-state="open">Open <strong>3</strong>' in body
    assert 'data-state="in_progress">In progress <strong>1</strong>' in body


def test_a_head_sees_only_their_departments_tickets(client, org, tickets):
    client.force_login(org.head_a)
    assert set(_ids(client.get("/tickets/"))) == {tickets.overdue.pk, tickets.soon.pk, tickets.later.pk}
    client.force_login(org.head_b)
    response = client.get("/tickets/")
    assert _ids(response) == [tickets.radar.pk]
    assert "Replace the failing GPU" not in response.content.decode()
    # Another department is not even a filter choice.
    assert client.get("/tickets/", {"department": "vision"}).status_code == 400


@pytest.mark.parametrize(
    ("role", "status"), [("no_role", 403), ("head_a", 200), ("committee", 200), ("admin", 200)]
)
def test_every_ticket_page_needs_a_portal_role(client, org, tickets, role, status):
    client.force_login(getattr(org, role))
    for name, args in [
        ("efficiency:ticket-list", []),
        ("efficiency:ticket-mine", []),
        ("efficiency:ticket-create", []),
        ("efficiency:ticket-detail", [tickets.overdue.pk]),
    ]:
        assert client.get(reverse(name, args=args)).status_code == status, name


def test_anonymous_readers_are_sent_to_log_in(client, tickets):
    response = client.get(reverse("efficiency:ticket-detail", args=[tickets.overdue.pk]))
    assert response.status_code == 302
    assert "/login/" in response["Location"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"sla": "overdue"}, ["overdue"]),
        ({"sla": "due_soon"}, ["soon"]),
        ({"sla": "on_time"}, ["radar", "later"]),
        ({"state": "in_progress"}, ["soon"]),
        ({"state": ["open", "in_progress"], "department": "vision"}, ["overdue", "later", "soon"]),
        ({"severity": "critical"}, ["overdue"]),
        ({"assignee": "head-a"}, ["overdue"]),
        ({"assignee": "null", "department": "vision"}, ["later", "soon"]),
        ({"origin": "manual", "q": "nccl"}, ["soon"]),
        ({"sort": "-created"}, ["later", "radar", "soon", "overdue"]),
    ],
)
def test_board_filters(client, org, tickets, params, expected):
    client.force_login(org.admin)
    response = client.get("/tickets/", params)
    assert response.status_code == 200
    assert _ids(response) == [getattr(tickets, name).pk for name in expected]


def test_a_search_for_a_ticket_number_finds_it(client, org, tickets):
    client.force_login(org.admin)
    assert _ids(client.get("/tickets/", {"q": f"#{tickets.later.pk}"})) == [tickets.later.pk]


@pytest.mark.parametrize(
    "params", [{"sla": "late"}, {"state": "burning"}, {"severity": "x"}, {"sort": "title"}]
)
def test_a_bad_filter_is_a_400_naming_it(client, org, tickets, params):
    client.force_login(org.admin)
    response = client.get("/tickets/", params)
    assert response.status_code == 400
    assert "Some filters are not valid" in response.content.decode()


def test_the_csv_holds_the_filtered_rows_and_the_link_keeps_the_filters(client, org, tickets):
    client.force_login(org.admin)
    page = client.get("/tickets/", {"sla": "overdue", "department": "vision"}).content.decode()
    assert 'href="?sla=overdue&amp;department=vision&amp;export=csv"' in page
    rows = _csv(client.get("/tickets/", {"sla": "overdue", "department": "vision", "export": "csv"}))
    assert rows[0][:3] == ["Ticket", "Title", "State"]
    assert [row[0] for row in rows[1:]] == [str(tickets.overdue.pk)]
    header = rows[0]
    assert rows[1][header.index("Due date")] == "Overdue"
    assert rows[1][header.index("Due")] == "2026-11-26T14:00:00+08:00"
    assert rows[1][header.index("Assignee")] == "head-a"
    everything = _csv(client.get("/tickets/", {"export": "csv"}))
    assert len(everything) == 5


def test_my_tickets_are_those_assigned_to_me(client, org, tickets):
    client.force_login(org.head_a)
    response = client.get(reverse("efficiency:ticket-mine"))
    assert _ids(response) == [tickets.overdue.pk]
    assert "My tickets" in response.content.decode()
    client.force_login(org.committee)
    assert _ids(client.get(reverse("efficiency:ticket-mine"))) == []


def test_every_role_finds_tickets_in_the_navigation(client, org):
    for role in ("head_a", "committee", "admin"):
        client.force_login(getattr(org, role))
        assert 'id="nav-tickets"' in client.get("/").content.decode()


# --- A ticket ---------------------------------------------------------------------------------------------


def test_the_ticket_page_shows_its_facts_with_the_sla_badge(client, org, tickets):
    client.force_login(org.head_a)
    response = client.get(reverse("efficiency:ticket-detail", args=[tickets.overdue.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    facts = body[body.index('id="ticket-facts"') :]
    assert "2026-11-26 14:00" in facts[: facts.index('id="ticket-due"') + 200]
    assert 'class="sla sla-overdue">Overdue' in body
    assert "Vehicle vision" in body
    # A head may start, wait or resolve, but not decline: that is the committee's and admins'.
    assert 'id="action-start"' in body
    assert 'id="action-wait"' in body
    assert 'id="action-wont_fix"' not in body
    # A head edits the assignee only.
    form = body[body.index('id="edit-form"') : body.index("</form>", body.index('id="edit-form"'))]
    assert 'name="assignee"' in form
    assert 'name="title"' not in form
    assert 'name="due_at"' not in form


def test_a_head_of_another_department_gets_a_404_everywhere(client, org, tickets):
    client.force_login(org.head_b)
    pk = tickets.overdue.pk
    assert client.get(reverse("efficiency:ticket-detail", args=[pk])).status_code == 404
    assert client.post(reverse("efficiency:ticket-move", args=[pk, "start"])).status_code == 404
    assert client.post(reverse("efficiency:ticket-comment", args=[pk]), {"text": "hi"}).status_code == 404
    assert (
        client.post(reverse("efficiency:ticket-edit", args=[pk]), {"assignee": "head-b"}).status_code == 404
    )
    assert Ticket.objects.get(pk=pk).state == TicketState.OPEN
    assert not TicketComment.objects.exists()


def test_a_move_changes_the_state_and_the_history_shows_from_and_to(client, org, tickets):
    client.force_login(org.head_a)
    response = client.post(reverse("efficiency:ticket-move", args=[tickets.later.pk, "start"]))
    assert response.status_code == 302
    assert Ticket.objects.get(pk=tickets.later.pk).state == TicketState.IN_PROGRESS
    body = client.get(response["Location"]).content.decode()
    assert "is now in progress" in body
    history = body[body.index('id="history-table"') :]
    assert '<li data-field="state"><strong>State</strong>: Open → In progress</li>' in history
    assert "head-a" in history


def test_an_illegal_move_is_a_400_with_the_reason_and_changes_nothing(client, org, tickets):
    client.force_login(org.admin)
    before = Ticket.objects.get(pk=tickets.later.pk)
    response = client.post(reverse("efficiency:ticket-move", args=[tickets.later.pk, "resolve"]))
    assert response.status_code == 400
    body = response.content.decode()
    assert "cannot be moved by “Resolve”; allowed now: Start work, Wait on department, Won&#x27;t fix" in body
    after = Ticket.objects.get(pk=tickets.later.pk)
    assert (after.state, after.updated_at, after.history.count()) == (
        before.state,
        before.updated_at,
        before.history.count(),
    )


def test_declining_needs_a_reason_and_a_head_may_not_decline(client, org, tickets):
    url = reverse("efficiency:ticket-move", args=[tickets.later.pk, "wont_fix"])
    client.force_login(org.head_a)
    assert client.post(url, {"reason": "Not worth it"}).status_code == 403
    client.force_login(org.admin)
    response = client.post(url, {"reason": "  "})
    assert response.status_code == 400
    assert "Won&#x27;t fix needs a reason." in response.content.decode()
    assert Ticket.objects.get(pk=tickets.later.pk).state == TicketState.OPEN
    assert client.post(url, {"reason": "The job family was retired."}).status_code == 302
    ticket = Ticket.objects.get(pk=tickets.later.pk)
    assert ticket.state == TicketState.WONT_FIX
    history = client.get(reverse("efficiency:ticket-detail", args=[ticket.pk])).content.decode()
    assert "The job family was retired." in history
    assert "Open → Won&#x27;t fix" in history


def test_an_unknown_action_is_a_400(client, org, tickets):
    client.force_login(org.admin)
    response = client.post(reverse("efficiency:ticket-move", args=[tickets.later.pk, "explode"]))
    assert response.status_code == 400
    assert "Unknown action explode" in response.content.decode()


def test_moves_are_posts_only(client, org, tickets):
    client.force_login(org.admin)
    assert client.get(reverse("efficiency:ticket-move", args=[tickets.later.pk, "start"])).status_code == 405


# --- Comments ------------------------------------------------------------------------------------------


def test_a_comment_is_added_and_shown(client, org, tickets):
    client.force_login(org.head_a)
    url = reverse("efficiency:ticket-comment", args=[tickets.later.pk])
    response = client.post(url, {"text": "We switch the cache mode on Wednesday."})
    assert response.status_code == 302
    assert response["Location"].endswith("#comments")
    body = client.get(reverse("efficiency:ticket-detail", args=[tickets.later.pk])).content.decode()
    assert "We switch the cache mode on Wednesday." in body


def test_a_comment_too_long_is_a_400_and_nothing_is_stored(client, org, tickets):
    client.force_login(org.head_a)
    response = client.post(
        reverse("efficiency:ticket-comment", args=[tickets.later.pk]), {"text": "x" * 4001}
    )
    assert response.status_code == 400
    assert "The comment is 4001 characters long; at most 4000 are kept." in response.content.decode()
    assert not TicketComment.objects.exists()


def test_an_empty_comment_is_a_400(client, org, tickets):
    client.force_login(org.head_a)
    assert (
        client.post(reverse("efficiency:ticket-comment", args=[tickets.later.pk]), {"text": " "}).status_code
        == 400
    )
    assert not TicketComment.objects.exists()


def test_a_head_may_not_write_an_internal_note_nor_read_one(client, org, tickets):
    client.force_login(org.head_a)
    url = reverse("efficiency:ticket-comment", args=[tickets.later.pk])
    response = client.post(url, {"text": "psst", "internal": "on"})
    assert response.status_code == 403
    assert "Internal notes are written by the committee and platform admins." in response.content.decode()
    assert not TicketComment.objects.exists()
    assert (
        'name="internal"'
        not in client.get(reverse("efficiency:ticket-detail", args=[tickets.later.pk])).content.decode()
    )
    ticket_comment(tickets.later, user=org.admin, text="Budget is tight this quarter.", internal=True)
    ticket_comment(tickets.later, user=org.admin, text="Please update us on Friday.")
    page = client.get(reverse("efficiency:ticket-detail", args=[tickets.later.pk])).content.decode()
    assert "Please update us on Friday." in page
    assert "Budget is tight this quarter." not in page
    client.force_login(org.committee)
    page = client.get(reverse("efficiency:ticket-detail", args=[tickets.later.pk])).content.decode()
    assert "Budget is tight this quarter." in page
    assert "Internal note" in page


def test_the_committee_writes_an_internal_note(client, org, tickets):
    client.force_login(org.committee)
    client.post(
        reverse("efficiency:ticket-comment", args=[tickets.later.pk]),
        {"text": "For the meeting.", "internal": "on"},
    )
    assert TicketComment.objects.get().internal is True


# --- Edits ------------------------------------------------------------------------------------------------


def _edit(ticket, **changes) -> dict:
    values = {
        "title": ticket.title,
        "description": ticket.description,
        "severity": ticket.severity,
        "assignee": ticket.assignee.get_username() if ticket.assignee else "",
        "due_at": timezone.localtime(ticket.due_at).strftime("%Y-%m-%dT%H:%M"),  # as the browser sends it
        "meeting": ticket.meeting,
    }
    values.update(changes)
    return values


def test_a_manager_edits_every_field_and_the_history_names_them(client, org, tickets):
    client.force_login(org.committee)
    ticket = tickets.later
    response = client.post(
        reverse("efficiency:ticket-edit", args=[ticket.pk]),
        _edit(
            ticket,
            title="Cache full data",
            severity="high",
            meeting="GPU committee 2026-12-01",
            due_at="2026-12-04T18:00",
        ),
    )
    assert response.status_code == 302
    ticket = Ticket.objects.get(pk=ticket.pk)
    assert (ticket.title, ticket.severity, ticket.meeting) == (
        "Cache full data",
        "high",
        "GPU committee 2026-12-01",
    )
    # The browser's time is the display zone's (Shanghai).
    assert ticket.due_at == datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
    history = client.get(reverse("efficiency:ticket-detail", args=[ticket.pk])).content.decode()
    assert "<strong>Severity</strong>: Low → High" in history
    assert "<strong>Committee meeting</strong>: — → GPU committee 2026-12-01" in history
    assert "<strong>Due</strong>: 2026-12-14 10:00 → 2026-12-04 18:00" in history


def test_an_overdue_ticket_can_be_retitled_without_touching_its_due_date(client, org, tickets):
    client.force_login(org.admin)
    ticket = tickets.overdue
    response = client.post(
        reverse("efficiency:ticket-edit", args=[ticket.pk]),
        {**_edit(ticket, title="Replace GPU 3"), "due_at": "2026-11-26T14:00"},
    )
    assert response.status_code == 302, response.content.decode()[:500]
    assert Ticket.objects.get(pk=ticket.pk).title == "Replace GPU 3"


def test_a_due_date_in_the_past_is_a_400_beside_the_field_and_nothing_changes(client, org, tickets):
    client.force_login(org.admin)
    ticket = tickets.later
    response = client.post(
        reverse("efficiency:ticket-edit", args=[ticket.pk]),
        _edit(ticket, title="New title", due_at="2026-11-01T10:00"),
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert (
        '<small class="field-error" role="alert" id="error-due_at">'
        "The due date must be in the future.</small>" in body
    )
    after = Ticket.objects.get(pk=ticket.pk)
    assert (after.title, after.due_at) == (ticket.title, ticket.due_at)


def test_an_assignee_outside_the_department_is_a_400_and_nothing_changes(client, org, tickets):
    client.force_login(org.admin)
    ticket = tickets.later
    response = client.post(
        reverse("efficiency:ticket-edit", args=[ticket.pk]), _edit(ticket, assignee="head-b")
    )
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert Ticket.objects.get(pk=ticket.pk).assignee is None


def test_a_head_reassigns_within_the_department_only(client, org, tickets):
    client.force_login(org.head_a)
    ticket = tickets.later
    url = reverse("efficiency:ticket-edit", args=[ticket.pk])
    assert client.post(url, {"assignee": "head-b"}).status_code == 400
    # Fields a head may not change are not in their form: posting them changes nothing.
    assert (
        client.post(url, {"assignee": "head-a", "title": "Mine now", "severity": "critical"}).status_code
        == 302
    )
    ticket = Ticket.objects.get(pk=ticket.pk)
    assert (ticket.assignee, ticket.title, ticket.severity) == (
        org.head_a,
        "Cache full data on the PFS",
        "low",
    )
    history = client.get(reverse("efficiency:ticket-detail", args=[ticket.pk])).content.decode()
    assert "<strong>Assignee</strong>: — → head-a" in history


def test_saving_an_unchanged_form_changes_nothing(client, org, tickets):
    client.force_login(org.admin)
    ticket = tickets.later
    response = client.post(reverse("efficiency:ticket-edit", args=[ticket.pk]), _edit(ticket), follow=True)
    assert "Nothing changed." in response.content.decode()
    assert Ticket.objects.get(pk=ticket.pk).history.count() == ticket.history.count()


# --- Opening tickets --------------------------------------------------------------------------------------


def test_a_head_opens_a_ticket_for_their_department(client, org):
    client.force_login(org.head_a)
    page = client.get(reverse("efficiency:ticket-create")).content.decode()
    assert 'value="vision"' in page
    assert 'value="radar"' not in page
    response = client.post(
        reverse("efficiency:ticket-create"),
        {
            "department": "vision",
            "title": "Move checkpoints to the PFS",
            "severity": "high",
            "description": "Slow saves.",
        },
    )
    assert response.status_code == 302
    ticket = Ticket.objects.get()
    assert (ticket.department, ticket.severity, ticket.origin, ticket.created_by) == (
        org.dept_a,
        "high",
        TicketOrigin.MANUAL,
        org.head_a,
    )
    # High: 18 business hours from Monday 10:00 → Wednesday 10:00 Shanghai.
    assert ticket.due_at == datetime(2026, 12, 2, 2, 0, tzinfo=UTC)
    assert response["Location"] == reverse("efficiency:ticket-detail", args=[ticket.pk])


def test_a_head_cannot_open_a_ticket_for_another_department(client, org):
    client.force_login(org.head_a)
    response = client.post(
        reverse("efficiency:ticket-create"), {"department": "radar", "title": "x", "severity": "low"}
    )
    assert response.status_code == 400
    assert not Ticket.objects.exists()


def test_opening_a_ticket_due_in_the_past_is_refused_beside_the_field(client, org):
    client.force_login(org.admin)
    response = client.post(
        reverse("efficiency:ticket-create"),
        {"department": "radar", "title": "Fix", "severity": "low", "due_at": "2026-11-29T10:00"},
    )
    assert response.status_code == 400
    assert 'id="error-due_at">The due date must be in the future.' in response.content.decode()
    assert not Ticket.objects.exists()


def _incident(org) -> Incident:
    return Incident.objects.create(
        cluster=org.cluster, job=org.job_a, department=org.dept_a, node=org.node_a, category="hardware_gpu",
        severity="critical", code="79", root_signature_id="xid-79", occurred_at=NOW, detected_at=NOW,
    )  # fmt: skip


def test_the_incident_page_opens_a_follow_up_ticket_and_links_it(client, org):
    incident = _incident(org)
    client.force_login(org.head_a)
    page = client.get(reverse("efficiency:incident-detail", args=[incident.pk])).content.decode()
    assert 'id="follow-up-button"' in page
    assert 'id="no-related-tickets"' in page
    response = client.post(f"{reverse('efficiency:ticket-create')}?incident={incident.pk}")
    assert response.status_code == 302
    ticket = Ticket.objects.get()
    assert (ticket.origin, ticket.incident, ticket.severity, ticket.department) == (
        TicketOrigin.INCIDENT,
        incident,
        "critical",
        org.dept_a,
    )
    assert list(ticket.nodes.all()) == [org.node_a]
    assert list(ticket.jobs.all()) == [org.job_a]
    page = client.get(reverse("efficiency:incident-detail", args=[incident.pk])).content.decode()
    assert f"Ticket #{ticket.pk} · Open" in page
    detail = client.get(response["Location"]).content.decode()
    assert (
        f'href="{reverse("efficiency:incident-detail", args=[incident.pk])}" id="origin-incident"' in detail
    )
    assert "gpu-a01" in detail[detail.index('id="linked-nodes"') :]
    # The history names the linked node as added.
    history = detail[detail.index('id="history-table"') :]
    assert "<strong>Nodes</strong>: added gpu-a01" in history


def test_a_follow_up_ticket_can_be_filled_in_first(client, org):
    incident = _incident(org)
    client.force_login(org.admin)
    url = f"{reverse('efficiency:ticket-create')}?incident={incident.pk}"
    form = client.get(url).content.decode()
    assert f"Follow up incident #{incident.pk}" in form
    response = client.post(
        url, {"department": "vision", "title": "Swap GPU 3 of gpu-a01", "severity": "high"}
    )
    assert response.status_code == 302
    ticket = Ticket.objects.get()
    assert (ticket.title, ticket.severity, ticket.incident) == ("Swap GPU 3 of gpu-a01", "high", incident)


def test_another_departments_head_cannot_follow_up_an_incident(client, org):
    incident = _incident(org)
    client.force_login(org.head_b)
    assert client.post(f"{reverse('efficiency:ticket-create')}?incident={incident.pk}").status_code == 404
    assert client.get(f"{reverse('efficiency:ticket-create')}?incident=abc").status_code == 404
    assert not Ticket.objects.exists()


def test_the_recommendation_page_links_the_ticket_it_became(client, org):
    recommendation = RecommendationFactory(cluster=org.cluster, department=org.dept_a, state="accepted")
    ticket = ticket_from_recommendation(recommendation, user=org.admin, now=NOW)
    client.force_login(org.head_a)
    page = client.get(reverse("efficiency:recommendation-detail", args=[recommendation.pk])).content.decode()
    assert f"Ticket #{ticket.pk} · Open" in page
    detail = client.get(reverse("efficiency:ticket-detail", args=[ticket.pk])).content.decode()
    assert f'href="/recommendations/{recommendation.pk}/" id="origin-recommendation"' in detail


# --- Verification ------------------------------------------------------------------------------------


def test_the_verification_block_shows_the_verdict_numbers_and_both_windows(client, org, tickets):
    Ticket.objects.filter(pk=tickets.later.pk).update(
        state=TicketState.VERIFIED_GAIN,
        expected_gain_pct=50.0,
        measured_gain_pct=48.0,
        verification={
            "outcome": "verified_gain",
            "metric": "iteration_s",
            "before": 2.0,
            "after": 1.04,
            "gain_pct": 48.0,
            "interval": {"low": 45.5, "high": 50.5},
            "shortfalls": [],
            "windows": {
                "before": {
                    "days": [{"day": "2026-11-20", "value": 2.1}, {"day": "2026-11-21", "value": 1.9}]
                },
                "after": {
                    "days": [{"day": "2026-11-27", "value": 1.05}, {"day": "2026-11-28", "value": 1.03}]
                },
            },
        },
    )
    client.force_login(org.head_a)
    response = client.get(reverse("efficiency:ticket-detail", args=[tickets.later.pk]))
    body = response.content.decode()
    assert 'id="verdict">Gain verified' in body
    assert "measured by Seconds per iteration" in body
    assert 'id="verification-before">2.000' in body
    assert 'id="verification-after">1.040' in body
    assert "48.0%" in body
    assert "interval 45.5% to 50.5%" in body
    figure = response.context["verification_figure"]
    names = [trace.name for trace in figure.data]
    assert names[:2] == ["Before the fix", "After the fix"]
    expected = next(trace for trace in figure.data if trace.name == "Expected after the fix")
    # Half the time per iteration: 2.0 s → 1.0 s expected.
    assert list(expected.y) == [1.0, 1.0]


def test_the_verification_block_reads_what_the_verification_service_stores(client, org, tickets):
    # The keys of efficiency.services.tickets.verification's record: per-run series, the interval in
    # percent, the windows' bounds and sizes; SM activity is stored as a share (0–1).
    Ticket.objects.filter(pk=tickets.later.pk).update(
        state=TicketState.NO_GAIN,
        expected_gain_pct=30.0,
        verification={
            "outcome": "no_gain",
            "reason": "",
            "metric": "sm_activity",
            "before": 0.4,
            "after": 0.42,
            "gain_pct": 4.762,
            "interval_low_pct": -1.5,
            "interval_high_pct": 9.1,
            "shortfalls": [],
            "windows": {
                "before": {"start": "2026-11-16T02:00:00+00:00", "end": "2026-11-23T02:00:00+00:00",
                           "jobs": 6, "gpu_hours": 120.0},
                "after": {"start": "2026-11-24T02:00:00+00:00", "end": "2026-11-30T02:00:00+00:00",
                          "jobs": 5, "gpu_hours": 96.5},
            },
            "series": {
                "before": [{"job": "1", "start": "2026-11-17T01:00:00+00:00", "iteration": None,
                            "sm_activity": 0.39, "gpu_hours": 20.0}],
                "after": [{"job": "2", "start": "2026-11-25T01:00:00+00:00", "iteration": None,
                           "sm_activity": 0.43, "gpu_hours": 19.0}],
            },
            "checked_at": "2026-11-30T01:00:00+00:00",
        },
    )  # fmt: skip
    client.force_login(org.admin)
    response = client.get(reverse("efficiency:ticket-detail", args=[tickets.later.pk]))
    body = response.content.decode()
    assert 'id="verdict">No gain measured' in body
    assert 'id="verification-before">40.000' in body
    assert "interval -1.5% to 9.1%" in body
    windows = body[body.index('id="verification-windows"') :]
    assert "2026-11-16 10:00" in windows
    assert "96.5" in windows
    figure = response.context["verification_figure"]
    before, after = figure.data[0], figure.data[1]
    assert list(before.y) == [39.0]
    assert list(after.y) == [43.0]
    # Times on the page's clock: 01:00 UTC is 09:00 in Shanghai.
    assert after.x[0].hour == 9
    expected = next(trace for trace in figure.data if trace.name == "Expected after the fix")
    # Activity at a fixed amount of work: saving 30% of the time needs 40% / 0.7 ≈ 57.1% busy.
    assert round(expected.y[0], 1) == 57.1


def test_a_verification_still_measuring_lists_what_it_waits_for(client, org, tickets):
    Ticket.objects.filter(pk=tickets.later.pk).update(
        state=TicketState.VERIFYING,
        verification={
            "outcome": "verifying",
            "shortfalls": [{"what": "gpu_hours", "have": 3.0, "need": 8.0, "missing": 5.0}],
            "windows": "garbage",
        },
    )
    client.force_login(org.admin)
    response = client.get(reverse("efficiency:ticket-detail", args=[tickets.later.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    assert "Still measuring" in body
    assert "GPU-hours of the job family since the fix: 3 of 8" in body
    assert response.context.get("verification_figure") is None


# --- Home and department pages -------------------------------------------------------------------------


def test_a_heads_home_and_department_page_list_open_tickets_overdue_first(client, org, tickets):
    client.force_login(org.head_a)
    home = client.get("/")
    assert [t.pk for t in home.context["open_tickets"]] == [
        tickets.overdue.pk,
        tickets.soon.pk,
        tickets.later.pk,
    ]
    body = home.content.decode()
    section = body[body.index('id="home-tickets"') :]
    assert "Overdue" in section
    assert "Due soon" in section
    assert "Radar data loader" not in body
    department = client.get(reverse("efficiency:department-detail", args=["vision"]))
    assert [t.pk for t in department.context["open_tickets"]] == [
        tickets.overdue.pk,
        tickets.soon.pk,
        tickets.later.pk,
    ]
    assert "?department=vision&amp;state=open" in department.content.decode()


@pytest.mark.parametrize("role", ["committee", "admin"])
def test_the_committee_and_admins_see_the_overdue_count_on_their_home(client, org, tickets, role):
    client.force_login(getattr(org, role))
    body = client.get("/").content.decode()
    assert 'href="/tickets/?sla=overdue" id="overdue-tickets-link">Overdue tickets: 1</a>' in body


# --- Languages ---------------------------------------------------------------------------------------


def test_the_ticket_pages_render_in_chinese(client, org, tickets):
    client.force_login(org.admin)
    client.cookies["django_language"] = "zh-hans"
    for url in ["/tickets/", f"/tickets/{tickets.overdue.pk}/", "/tickets/new/", "/tickets/mine/"]:
        response = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans")
        assert response.status_code == 200, url
        assert '<html lang="zh-hans"' in response.content.decode()
