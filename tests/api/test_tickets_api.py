"""The tickets API: scoped like the pages (a head sees their departments' tickets, another's is a
404, and never an internal note), filtered and ordered overdue first, created by hand or from an
accepted recommendation or an incident, edited, moved along the workflow and commented on through
the ticket services. Every refusal is a 4xx with a clear body and writes nothing: the row, its
history, the comments are compared before and after."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from efficiency.analysis.tickets.workflow import PORTAL_ACTIONS, TRANSITIONS, Action, State
from efficiency.choices import RecommendationState, Severity, TicketState
from efficiency.models import Ticket, TicketComment
from efficiency.services.tickets import (
    MAX_COMMENT,
    ticket_comment,
    ticket_create,
    working_calendar,
)
from efficiency.services.tokens import api_token_issue
from tests.factories import DepartmentFactory, IncidentFactory, RecommendationFactory

URL = "/api/v1/tickets/"
PEOPLE_ACTIONS = [action.value for action in Action if action not in PORTAL_ACTIONS]
ALL_STATES = ", ".join(state.value for state in State)


def snapshot() -> tuple:
    """Everything a ticket request could write: the rows, their history, the comments."""
    return (
        list(Ticket.objects.order_by("pk").values()),
        list(TicketComment.objects.order_by("pk").values()),
        Ticket.history.count(),
    )


@pytest.fixture
def tk(org):
    """Vision's NCCL ticket (high, assigned to its head, with an internal note and a comment) and
    radar's node repair (medium, unassigned)."""
    vision = ticket_create(
        user=org.admin,
        title="Fix NCCL transport",
        department=org.dept_a,
        severity="high",
        assignee=org.head_a,
    )
    ticket_comment(vision, user=org.committee, text="Budget agreed in the meeting.", internal=True)
    ticket_comment(vision, user=org.head_a, text="We start on Monday.")
    radar = ticket_create(user=org.admin, title="Repair gpu-b01", department=org.dept_b, severity="medium")
    return type("Tickets", (), {"vision": vision, "radar": radar})


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content[:300]
    return [row["id"] for row in response.json()["results"]]


def post(client, path: str, body):
    return client.post(f"{URL}{path}", body, content_type="application/json")


def patch(client, ticket, body):
    return client.patch(f"{URL}{ticket.pk}/", body, content_type="application/json")


def move(client, ticket, action: str, reason: str = ""):
    return post(client, f"{ticket.pk}/transition/", {"action": action, "reason": reason})


def set_state(ticket, state: str) -> None:
    """Put a ticket straight into ``state`` (as if it got there), the clock fields to match."""
    now = timezone.now()
    fields = {"state": state, "paused_at": None, "resolved_at": None, "closed_at": None}
    if state == TicketState.WAITING_ON_DEPARTMENT:
        fields["paused_at"] = now
    if state not in TicketState.active():
        fields["resolved_at"] = now
    if state in (TicketState.CLOSED, TicketState.WONT_FIX):
        fields["closed_at"] = now
    Ticket.objects.filter(pk=ticket.pk).update(**fields)
    ticket.refresh_from_db()


# --- Roles and scoping ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["committee", "admin"])
def test_the_committee_and_admins_list_every_ticket(client, org, tk, role):
    client.force_login(getattr(org, role))
    assert sorted(ids(client.get(URL))) == sorted([tk.vision.pk, tk.radar.pk])


def test_a_head_lists_their_departments_tickets_only(client, org, tk):
    client.force_login(org.head_a)
    assert ids(client.get(URL)) == [tk.vision.pk]
    client.force_login(org.head_b)
    assert ids(client.get(URL)) == [tk.radar.pk]


def test_no_role_is_forbidden_and_anonymous_callers_get_401(client, org, tk):
    before = snapshot()
    assert client.get(URL).status_code == 401
    assert move(client, tk.vision, "start").status_code == 401
    client.force_login(org.no_role)
    for response in (
        client.get(URL),
        client.get(f"{URL}{tk.vision.pk}/"),
        client.get(f"{URL}{tk.vision.pk}/history/"),
        post(client, "", {"title": "x", "department": "vision"}),
        move(client, tk.vision, "start"),
        post(client, f"{tk.vision.pk}/comments/", {"text": "hi"}),
    ):
        assert response.status_code == 403
    assert snapshot() == before


def test_another_departments_ticket_is_not_found_for_a_head_and_nothing_is_written(client, org, tk):
    client.force_login(org.head_a)
    before = snapshot()
    pk = tk.radar.pk
    assert client.get(f"{URL}{pk}/").status_code == 404
    assert client.get(f"{URL}{pk}/comments/").status_code == 404
    assert client.get(f"{URL}{pk}/history/").status_code == 404
    assert move(client, tk.radar, "start").status_code == 404
    assert post(client, f"{pk}/comments/", {"text": "Hello"}).status_code == 404
    assert patch(client, tk.radar, {"assignee": "head-a"}).status_code == 404
    assert snapshot() == before


ENDPOINTS = ["list", "detail", "comments", "history", "comment", "transition", "edit", "create"]
STATUSES = {
    "head_a": [200, 200, 200, 200, 201, 200, 200, 201],
    "head_b": [200, 404, 404, 404, 404, 404, 404, 403],
    "committee": [200, 200, 200, 200, 201, 200, 200, 201],
    "admin": [200, 200, 200, 200, 201, 200, 200, 201],
    "no_role": [403] * 8,
}


@pytest.mark.parametrize("role", list(STATUSES))
def test_every_endpoint_as_each_role(client, org, tk, role):
    """Vision's ticket, open and assigned to head_a, through every endpoint in turn."""
    client.force_login(getattr(org, role))
    pk = tk.vision.pk
    calls = {
        "list": lambda: client.get(URL),
        "detail": lambda: client.get(f"{URL}{pk}/"),
        "comments": lambda: client.get(f"{URL}{pk}/comments/"),
        "history": lambda: client.get(f"{URL}{pk}/history/"),
        "comment": lambda: post(client, f"{pk}/comments/", {"text": "Looked at it."}),
        "transition": lambda: move(client, tk.vision, "start"),
        "edit": lambda: patch(client, tk.vision, {"assignee": "admin"}),
        "create": lambda: post(client, "", {"title": "Another fix", "department": "vision"}),
    }
    assert [calls[name]().status_code for name in ENDPOINTS] == STATUSES[role]


@pytest.mark.parametrize("path", ["abc/", "0/", "999999/", "1.5/"])
def test_no_such_ticket_is_a_404(client, org, tk, path):
    client.force_login(org.admin)
    assert client.get(f"{URL}{path}").status_code == 404


def test_put_and_delete_are_not_offered(client, org, tk):
    client.force_login(org.admin)
    before = snapshot()
    assert client.delete(f"{URL}{tk.vision.pk}/").status_code == 405
    assert client.put(f"{URL}{tk.vision.pk}/", {}, content_type="application/json").status_code == 405
    assert snapshot() == before


# --- List: order and filters ----------------------------------------------------------------------


def _due(ticket, due, state=None):
    Ticket.objects.filter(pk=ticket.pk).update(due_at=due, **({"state": state} if state else {}))


@pytest.fixture
def dated(org, tk):
    """Four tickets by their due dates: radar's overdue by a day, a closed one overdue long ago
    (closed: its clock stopped, not overdue), vision's due in two days, a third due in a week."""
    now = timezone.now()
    later = ticket_create(user=org.admin, title="Later", department=org.dept_a, severity="low")
    done = ticket_create(user=org.admin, title="Done", department=org.dept_a, severity="low")
    _due(tk.radar, now - timedelta(days=1))
    _due(done, now - timedelta(days=30), TicketState.CLOSED)
    _due(tk.vision, now + timedelta(days=2))
    _due(later, now + timedelta(days=7))
    return type("Dated", (), {"overdue": tk.radar, "done": done, "soon": tk.vision, "later": later})


def test_overdue_tickets_come_first_then_by_due_date(client, org, dated):
    client.force_login(org.committee)
    rows = client.get(URL).json()["results"]
    assert [row["id"] for row in rows] == [dated.overdue.pk, dated.done.pk, dated.soon.pk, dated.later.pk]
    assert [row["sla"] for row in rows][:2] == ["overdue", None]


def test_a_waiting_ticket_is_overdue_when_it_began_to_wait_after_its_due_date(client, org, dated):
    now = timezone.now()
    Ticket.objects.filter(pk=dated.later.pk).update(
        state=TicketState.WAITING_ON_DEPARTMENT,
        due_at=now - timedelta(days=3),
        paused_at=now - timedelta(days=2),
    )
    Ticket.objects.filter(pk=dated.soon.pk).update(
        state=TicketState.WAITING_ON_DEPARTMENT,
        due_at=now - timedelta(days=1),
        paused_at=now - timedelta(days=2),
    )
    client.force_login(org.committee)
    # "later" began to wait a day after its due date: overdue; "soon" began to wait a day before it
    # was due, and its clock stands still since: not overdue.
    assert ids(client.get(f"{URL}?overdue=true")) == [dated.later.pk, dated.overdue.pk]
    assert dated.soon.pk in ids(client.get(f"{URL}?overdue=false"))


def test_due_soon_counts_business_hours_left(client, org, dated):
    calendar = working_calendar()
    now = timezone.now()
    # Two business hours left is due soon (at most 4), twenty is not, whatever the day of the week.
    _due(dated.soon, calendar.add_business_seconds(now, 2 * 3600) + timedelta(seconds=1))
    _due(dated.later, calendar.add_business_seconds(now, 20 * 3600))
    client.force_login(org.committee)
    assert ids(client.get(f"{URL}?due_soon=true")) == [dated.soon.pk]
    rows = {row["id"]: row["sla"] for row in client.get(URL).json()["results"]}
    assert (rows[dated.soon.pk], rows[dated.later.pk], rows[dated.overdue.pk]) == (
        "due_soon",
        "ok",
        "overdue",
    )
    assert ids(client.get(f"{URL}?due_soon=false")) == [dated.overdue.pk, dated.done.pk, dated.later.pk]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=closed", ["done"]),
        ("state=open", ["overdue", "soon", "later"]),
        ("department=radar", ["overdue"]),
        ("assignee=head-a", ["soon"]),
        ("severity=low", ["done", "later"]),
        ("origin=manual", ["overdue", "done", "soon", "later"]),
        ("origin=recommendation", []),
        ("overdue=true", ["overdue"]),
        ("overdue=false", ["done", "soon", "later"]),
        ("state=open&department=vision", ["soon", "later"]),
    ],
)
def test_the_list_filters(client, org, dated, query, expected):
    client.force_login(org.committee)
    assert ids(client.get(f"{URL}?{query}")) == [getattr(dated, name).pk for name in expected]


def test_an_unknown_state_is_a_400_that_lists_the_states(client, org, tk):
    client.force_login(org.committee)
    response = client.get(f"{URL}?state=done")
    assert response.status_code == 400
    assert response.json() == {"state": [f"Unknown value done; choose one of: {ALL_STATES}."]}


@pytest.mark.parametrize(
    "query",
    [
        "severity=urgent", "origin=email", "overdue=maybe", "due_soon=1", "department=nowhere",
        "ordering=due_at", "sort=due", "search=nccl", "page_size=0", "assignee=head%00a", "state=op%00en",
        "department=vi%00sion",
    ],
)  # fmt: skip
def test_a_bad_filter_value_is_a_400_naming_the_parameter(client, org, tk, query):
    client.force_login(org.committee)
    response = client.get(f"{URL}?{query}")
    assert response.status_code == 400
    assert list(response.json()) == [query.split("=")[0]]


def test_a_head_cannot_filter_by_another_department(client, org, tk):
    client.force_login(org.head_a)
    response = client.get(f"{URL}?department=radar")
    assert response.status_code == 400
    assert list(response.json()) == ["department"]


# --- Detail ---------------------------------------------------------------------------------------


def test_the_detail_has_the_facts_links_sla_and_gains(client, org):
    rec = RecommendationFactory(
        department=org.dept_a, cluster=org.cluster, state=RecommendationState.ACCEPTED, gain_pct=30.0,
        gain_gpu_h_week=120.0, user_name="alice", name_pattern="vision-train", node=org.node_a,
    )  # fmt: skip
    rec.jobs.add(org.job_a)
    client.force_login(org.admin)
    created = post(client, "", {"recommendation": rec.pk})
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    Ticket.objects.filter(pk=pk).update(verification={"metric": "iteration_s", "before": 1.2, "after": 0.9})
    data = client.get(f"{URL}{pk}/").json()
    assert (data["origin"], data["recommendation"], data["incident"], data["department"]) == (
        "recommendation", rec.pk, None, "vision"
    )  # fmt: skip
    assert (data["family_user"], data["family_pattern"]) == ("alice", "vision-train")
    assert data["expected_gain"] == {"percent": 30.0, "gpu_hours_per_week": 120.0}
    assert data["measured_gain"] == {"percent": None, "gpu_hours_per_week": None}
    assert data["verification"] == {"metric": "iteration_s", "before": 1.2, "after": 0.9}
    assert (data["jobs"], data["nodes"], data["incidents"]) == ([org.job_a.pk], [org.node_a.pk], [])
    # 120 GPU-hours a week to gain is "medium" (24 to 168), due in 45 business hours: not yet soon.
    assert (data["severity"], data["state"], data["sla"]) == ("medium", "open", "ok")
    assert data["actions"] == ["start", "wait", "wont_fix"]
    assert data["created_by"] == "admin"


@pytest.mark.parametrize(
    ("state", "role", "actions"),
    [
        ("open", "admin", ["start", "wait", "wont_fix"]),
        ("open", "committee", ["start", "wait", "wont_fix"]),
        ("open", "head_a", ["start", "wait"]),
        ("in_progress", "head_a", ["wait", "resolve"]),
        ("resolved", "head_a", ["reopen"]),
        ("resolved", "admin", ["reopen", "close"]),
        ("closed", "head_a", []),
        ("closed", "admin", ["reopen"]),
        ("verifying", "admin", ["reopen"]),
    ],
)
def test_the_actions_are_those_the_caller_may_take_now(client, org, tk, state, role, actions):
    set_state(tk.vision, state)
    client.force_login(getattr(org, role))
    assert client.get(f"{URL}{tk.vision.pk}/").json()["actions"] == actions
    assert client.get(URL).json()["results"][0]["actions"] == actions


def test_the_list_leaves_out_the_long_fields(client, org, tk):
    client.force_login(org.committee)
    row = client.get(URL).json()["results"][0]
    assert not {"description", "verification", "jobs"} & set(row)
    assert {"id", "title", "state", "severity", "department", "assignee", "due_at", "sla", "actions"} <= set(
        row
    )


# --- Create ---------------------------------------------------------------------------------------


def test_an_admin_opens_a_ticket_by_hand(client, org):
    client.force_login(org.admin)
    due = (timezone.now() + timedelta(days=10)).replace(microsecond=0)
    response = post(
        client,
        "",
        {
            "title": "  Move vision to RoCE  ",
            "description": "See the November review.",
            "department": "vision",
            "severity": "low",
            "assignee": "head-a",
            "due_at": due.isoformat(),
            "origin": "committee",
            "meeting": "2026-11 committee",
        },
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["title"], data["department"], data["severity"], data["assignee"], data["origin"]) == (
        "Move vision to RoCE", "vision", "low", "head-a", "committee"
    )  # fmt: skip
    assert (data["state"], data["meeting"], data["created_by"]) == ("open", "2026-11 committee", "admin")
    ticket = Ticket.objects.get(pk=data["id"])
    assert ticket.due_at == due
    history = client.get(f"{URL}{ticket.pk}/history/").json()
    assert [(row["kind"], row["by"], row["state"], row["changes"]) for row in history] == [
        ("created", "admin", "open", [])
    ]


def test_the_due_date_comes_from_the_severitys_sla_unless_given(client, org):
    client.force_login(org.committee)
    data = post(client, "", {"title": "Critical fix", "department": "radar", "severity": "critical"}).json()
    ticket = Ticket.objects.get(pk=data["id"])
    # Critical: 4 business hours on the working calendar from the moment it was opened.
    assert working_calendar().business_seconds_between(ticket.created_at, ticket.due_at) == 4 * 3600
    assert data["severity"] == "critical"
    default = post(client, "", {"title": "Some fix", "department": "radar"}).json()
    assert default["severity"] == "medium"


def test_a_head_opens_tickets_only_for_a_department_they_head(client, org):
    client.force_login(org.head_a)
    assert post(client, "", {"title": "Ours", "department": "vision"}).status_code == 201
    before = snapshot()
    response = post(client, "", {"title": "Theirs", "department": "radar"})
    assert response.status_code == 403
    assert response.json() == {"detail": "You open tickets only for a department you head."}
    assert snapshot() == before


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"department": "vision"}, "title", "A title is required."),
        ({"title": "   ", "department": "vision"}, "title", "A title is required."),
        ({"title": "x" * 201, "department": "vision"}, "title",
         "The title is 201 characters long; at most 200 are kept."),
        ({"title": "Fix"}, "department", "Choose the department that owns the ticket."),
        ({"title": "Fix", "department": "nowhere"}, "department", None),
        ({"title": "Fix", "department": 5}, "department", None),
        ({"title": "Fix", "department": "retired"}, "department", "Retired lab is no longer active."),
        ({"title": "Fix", "department": "vision", "severity": "urgent"}, "severity", None),
        ({"title": "Fix", "department": "vision", "assignee": "head-b"}, "assignee",
         "head-b is not a head of Vehicle vision nor a platform admin; assign the ticket to someone who is."),
        ({"title": "Fix", "department": "vision", "assignee": "nobody-at-all"}, "assignee", None),
        ({"title": "Fix", "department": "vision", "due_at": "2020-01-01T00:00:00Z"}, "due_at",
         "The due date must be in the future."),
        ({"title": "Fix", "department": "vision", "due_at": "2999-01-01T00:00:00Z"}, "due_at",
         "The due date must be within a year."),
        ({"title": "Fix", "department": "vision", "due_at": "next week"}, "due_at", None),
        ({"title": "Fix", "department": "vision", "due_at": 12}, "due_at", None),
        ({"title": "Fix", "department": "vision", "origin": "recommendation"}, "origin", None),
        ({"title": ["Fix"], "department": "vision"}, "title", None),
        ({"title": {"a": 1}, "department": "vision"}, "title", None),
        ({"title": "Fi\x00x", "department": "vision"}, "title", None),
        ({"title": "Fix", "department": "vi\x00sion"}, "department", None),
        ({"title": "Fix", "department": "vision", "assignee": "head\x00-a"}, "assignee", None),
        ({"title": "Fix", "department": "vision", "meeting": "m" * 201}, "meeting", None),
        ({"recommendation": "one"}, "recommendation", None),
        ({"incident": -1}, "incident", None),
    ],
)  # fmt: skip
def test_bad_input_to_create_is_a_400_naming_the_field_and_writes_nothing(client, org, body, field, message):
    DepartmentFactory(code="retired", name="Retired lab", is_active=False)
    client.force_login(org.committee)
    before = snapshot()
    response = post(client, "", body)
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]
    if message:
        assert response.json()[field] == [message]
    assert snapshot() == before


@pytest.mark.parametrize("body", ["{", "[1, 2]", '"title"', "null"])
def test_a_malformed_or_non_object_body_is_a_400_and_writes_nothing(client, org, body):
    client.force_login(org.admin)
    before = snapshot()
    response = client.post(URL, body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()
    assert snapshot() == before


def test_bodies_are_json_only(client, org):
    client.force_login(org.admin)
    before = snapshot()
    assert client.post(URL, {"title": "Fix", "department": "vision"}).status_code == 415
    assert snapshot() == before


def test_an_accepted_recommendation_becomes_its_ticket_once(client, org):
    rec = RecommendationFactory(
        department=org.dept_a, cluster=org.cluster, state=RecommendationState.ACCEPTED
    )
    client.force_login(org.admin)
    first = post(client, "", {"recommendation": rec.pk})
    assert first.status_code == 201
    before = snapshot()
    again = post(client, "", {"recommendation": rec.pk})
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert snapshot() == before


@pytest.mark.parametrize("state", ["proposed", "rejected", "snoozed", "closed"])
def test_only_an_accepted_recommendation_becomes_a_ticket(client, org, state):
    rec = RecommendationFactory(department=org.dept_a, cluster=org.cluster, state=state)
    client.force_login(org.admin)
    before = snapshot()
    response = post(client, "", {"recommendation": rec.pk})
    assert response.status_code == 400
    assert list(response.json()) == ["recommendation"]
    assert "Only an accepted recommendation becomes a ticket" in response.json()["recommendation"][0]
    assert snapshot() == before


def test_a_recommendation_the_caller_cannot_see_or_with_extra_fields_is_a_400(client, org):
    rec = RecommendationFactory(
        department=org.dept_b, cluster=org.cluster, state=RecommendationState.ACCEPTED
    )
    before = snapshot()
    client.force_login(org.head_a)
    response = post(client, "", {"recommendation": rec.pk})
    assert (response.status_code, list(response.json())) == (400, ["recommendation"])
    client.force_login(org.admin)
    response = post(client, "", {"recommendation": rec.pk, "title": "Mine"})
    assert (response.status_code, list(response.json())) == (400, ["title"])
    response = post(client, "", {"recommendation": rec.pk, "incident": 1})
    assert (response.status_code, list(response.json())) == (400, ["incident"])
    assert snapshot() == before


def test_a_head_opens_the_ticket_of_their_departments_accepted_recommendation_only(client, org):
    ours = RecommendationFactory(
        department=org.dept_a, cluster=org.cluster, state=RecommendationState.ACCEPTED
    )
    client.force_login(org.head_a)
    before = snapshot()
    # Assigned to radar: head_a still sees it (it is vision's) but does not open radar's tickets.
    ours.assignee_department = org.dept_b
    ours.save()
    assert post(client, "", {"recommendation": ours.pk}).status_code == 403
    assert snapshot() == before
    ours.assignee_department = None
    ours.save()
    response = post(client, "", {"recommendation": ours.pk})
    assert response.status_code == 201
    assert response.json()["department"] == "vision"


def test_an_incident_gets_a_follow_up_ticket(client, org):
    incident = IncidentFactory(
        cluster=org.cluster, department=org.dept_b, node=org.node_b, job=org.job_b, severity=Severity.ERROR
    )
    client.force_login(org.admin)
    response = post(client, "", {"incident": incident.pk, "assignee": "head-b"})
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["origin"], data["incident"], data["incidents"], data["department"]) == (
        "incident", incident.pk, [incident.pk], "radar"
    )  # fmt: skip
    assert (data["severity"], data["assignee"]) == ("high", "head-b")
    assert data["title"] == f"Follow up incident #{incident.pk}: GPU hardware on gpu-b01"
    assert (data["nodes"], data["jobs"]) == ([org.node_b.pk], [org.job_b.pk])


def test_an_incident_the_caller_cannot_see_is_a_400_and_writes_nothing(client, org):
    incident = IncidentFactory(cluster=org.cluster, department=org.dept_b, node=org.node_b, job=org.job_b)
    client.force_login(org.head_a)
    before = snapshot()
    response = post(client, "", {"incident": incident.pk})
    assert (response.status_code, list(response.json())) == (400, ["incident"])
    client.force_login(org.admin)
    response = post(client, "", {"incident": incident.pk, "origin": "manual"})
    assert (response.status_code, list(response.json())) == (400, ["origin"])
    assert snapshot() == before


# --- Edit -----------------------------------------------------------------------------------------


def test_the_committee_edits_every_editable_field_and_the_history_shows_from_and_to(client, org, tk):
    client.force_login(org.committee)
    due = (timezone.now() + timedelta(days=20)).replace(microsecond=0)
    response = patch(
        client,
        tk.vision,
        {"title": "Fix NCCL over IB", "severity": "low", "due_at": due.isoformat(), "assignee": "admin",
         "description": "Unset NCCL_IB_DISABLE.", "meeting": "2026-12"},
    )  # fmt: skip
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["title"], data["severity"], data["assignee"], data["meeting"]) == (
        "Fix NCCL over IB", "low", "admin", "2026-12"
    )  # fmt: skip
    last = client.get(f"{URL}{tk.vision.pk}/history/").json()[-1]
    assert (last["kind"], last["by"], last["reason"]) == ("changed", "committee", "")
    changes = {change["field"]: (change["from"], change["to"]) for change in last["changes"]}
    assert changes["title"] == ("Fix NCCL transport", "Fix NCCL over IB")
    assert changes["severity"] == ("high", "low")
    assert changes["assignee"] == ("head-a", "admin")
    assert changes["meeting"] == ("", "2026-12")
    assert set(changes) == {"title", "severity", "assignee", "due_at", "description", "meeting"}


def test_a_head_may_only_reassign_within_the_department(client, org, tk):
    client.force_login(org.head_a)
    before = snapshot()
    response = patch(client, tk.vision, {"title": "Ours now"})
    assert response.status_code == 403
    assert response.json() == {"detail": "Only the committee and platform admins change title."}
    response = patch(client, tk.vision, {"assignee": "head-b"})
    assert (response.status_code, list(response.json())) == (400, ["assignee"])
    assert snapshot() == before
    response = patch(client, tk.vision, {"assignee": "admin"})
    assert response.status_code == 200
    assert response.json()["assignee"] == "admin"
    assert patch(client, tk.vision, {"assignee": None}).json()["assignee"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"state": "closed"}, "state"),
        ({"department": "radar"}, "department"),
        ({"title": "Fine", "origin": "committee"}, "origin"),
        ({}, "non_field_errors"),
        ({"title": ""}, "title"),
        ({"severity": "urgent"}, "severity"),
        ({"due_at": "2020-01-01T00:00:00Z"}, "due_at"),
        ({"due_at": None}, "due_at"),
        ({"assignee": "nobody-at-all"}, "assignee"),
        ({"assignee": "head-b"}, "assignee"),
        ({"title": ["x"]}, "title"),
    ],
)
def test_bad_edits_are_a_400_naming_the_field_and_write_nothing(client, org, tk, body, field):
    client.force_login(org.admin)
    before = snapshot()
    response = patch(client, tk.vision, body)
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]
    assert snapshot() == before


# --- Transitions ----------------------------------------------------------------------------------

MOVES = [(state, action) for state in State for action in PEOPLE_ACTIONS]


@pytest.mark.parametrize(("state", "action"), MOVES)
def test_every_move_from_every_state_is_taken_or_refused_as_the_workflow_says(client, org, tk, state, action):
    set_state(tk.vision, state)
    client.force_login(org.admin)
    before = snapshot()
    history = tk.vision.history.count()
    response = move(client, tk.vision, action, reason="Agreed with the department.")
    target = TRANSITIONS.get((State(state), Action(action)))
    tk.vision.refresh_from_db()
    if target is None:
        assert response.status_code == 400
        message = response.json()["non_field_errors"][0]
        assert "cannot be moved by" in message
        assert "allowed now:" in message
        assert snapshot() == before
    else:
        assert response.status_code == 200, response.content
        assert response.json()["state"] == target == tk.vision.state
        assert tk.vision.history.count() == history + 1
        assert tk.vision.history.first().history_change_reason == "Agreed with the department."


def test_a_move_the_state_does_not_allow_names_the_allowed_ones(client, org, tk):
    client.force_login(org.admin)
    response = move(client, tk.vision, "resolve")
    assert response.status_code == 400
    assert response.json() == {
        "non_field_errors": [
            "A ticket that is open cannot be moved by “Resolve”; "
            "allowed now: Start work, Wait on department, Won't fix."
        ]
    }


@pytest.mark.parametrize("action", ["measure_gain", "verify", "finish", "", None, 3, ["start"]])
def test_an_unknown_or_portal_action_is_a_400_that_lists_the_actions(client, org, tk, action):
    client.force_login(org.admin)
    before = snapshot()
    response = post(client, f"{tk.vision.pk}/transition/", {"action": action})
    assert response.status_code == 400
    [message] = response.json()["action"]
    if action is not None:
        assert message.endswith("choose one of: start, wait, resume, resolve, close, reopen, wont_fix.")
    assert snapshot() == before


@pytest.mark.parametrize(
    ("state", "action"),
    [("open", "wont_fix"), ("resolved", "close"), ("closed", "reopen"), ("wont_fix", "reopen")],
)
def test_a_head_may_not_decline_close_or_reopen_a_finished_ticket(client, org, tk, state, action):
    set_state(tk.vision, state)
    client.force_login(org.head_a)
    before = snapshot()
    response = move(client, tk.vision, action, reason="We think so.")
    assert response.status_code == 403
    assert "Only the committee and platform admins may" in response.json()["detail"]
    assert snapshot() == before


def test_declining_and_reopening_need_a_reason_of_at_most_2000_characters(client, org, tk):
    client.force_login(org.committee)
    before = snapshot()
    for reason in ("", "   "):
        response = move(client, tk.vision, "wont_fix", reason)
        assert response.status_code == 400
        assert response.json() == {"reason": ["Won't fix needs a reason."]}
    response = move(client, tk.vision, "wont_fix", "x" * 2001)
    assert (response.status_code, list(response.json())) == (400, ["reason"])
    response = post(client, f"{tk.vision.pk}/transition/", {"action": "wont_fix", "reason": ["why"]})
    assert (response.status_code, list(response.json())) == (400, ["reason"])
    assert snapshot() == before
    response = move(client, tk.vision, "wont_fix", "The team moves to RoCE.")
    assert response.status_code == 200
    assert (response.json()["state"], response.json()["sla"]) == ("wont_fix", None)
    assert response.json()["closed_at"] is not None


def test_a_head_works_the_ticket_through_and_the_history_says_who_when_and_why(client, org, tk):
    client.force_login(org.head_a)
    for action, state in [("start", "in_progress"), ("wait", "waiting_on_department"),
                          ("resume", "in_progress"), ("resolve", "resolved")]:  # fmt: skip
        response = move(client, tk.vision, action)
        assert (response.status_code, response.json()["state"]) == (200, state)
    assert move(client, tk.vision, "reopen", "Still slow on the new image.").json()["state"] == "in_progress"
    history = client.get(f"{URL}{tk.vision.pk}/history/").json()
    moves = [(row["by"], row["state"], row["reason"]) for row in history]
    assert moves == [
        ("admin", "open", ""),
        ("head-a", "in_progress", ""),
        ("head-a", "waiting_on_department", ""),
        ("head-a", "in_progress", ""),
        ("head-a", "resolved", ""),
        ("head-a", "in_progress", "Still slow on the new image."),
    ]
    states = [next(change for change in row["changes"] if change["field"] == "state") for row in history[1:]]
    assert [(change["from"], change["to"]) for change in states] == [
        ("open", "in_progress"),
        ("in_progress", "waiting_on_department"),
        ("waiting_on_department", "in_progress"),
        ("in_progress", "resolved"),
        ("resolved", "in_progress"),
    ]
    assert all(row["at"] for row in history)


def test_resolving_a_family_ticket_starts_its_verification(client, org, tk):
    Ticket.objects.filter(pk=tk.vision.pk).update(family_pattern="vision-train", family_user="alice")
    client.force_login(org.head_a)
    move(client, tk.vision, "start")
    data = move(client, tk.vision, "resolve").json()
    assert data["state"] == "verifying"
    assert data["verification"]["outcome"] == "verifying"
    history = client.get(f"{URL}{tk.vision.pk}/history/").json()
    assert [(row["by"], row["state"], row["reason"]) for row in history[-2:]] == [
        ("head-a", "resolved", ""),
        (None, "verifying", ""),  # the portal started measuring: no person, no reason
    ]


# --- Comments -------------------------------------------------------------------------------------


def test_heads_never_get_internal_notes(client, org, tk):
    client.force_login(org.head_a)
    rows = client.get(f"{URL}{tk.vision.pk}/comments/").json()
    assert [(row["by"], row["text"], row["internal"]) for row in rows] == [
        ("head-a", "We start on Monday.", False)
    ]
    for role in ("committee", "admin"):
        client.force_login(getattr(org, role))
        rows = client.get(f"{URL}{tk.vision.pk}/comments/").json()
        assert [(row["by"], row["internal"]) for row in rows] == [("committee", True), ("head-a", False)]


def test_a_comment_and_an_internal_note_are_added(client, org, tk):
    client.force_login(org.head_a)
    response = post(client, f"{tk.vision.pk}/comments/", {"text": "  Done on gpu-a01.  "})
    assert response.status_code == 201
    assert (response.json()["by"], response.json()["text"], response.json()["internal"]) == (
        "head-a", "Done on gpu-a01.", False
    )  # fmt: skip
    client.force_login(org.committee)
    response = post(client, f"{tk.vision.pk}/comments/", {"text": "Check the budget.", "internal": True})
    assert (response.status_code, response.json()["internal"]) == (201, True)
    client.force_login(org.head_a)
    texts = [row["text"] for row in client.get(f"{URL}{tk.vision.pk}/comments/").json()]
    assert texts == ["We start on Monday.", "Done on gpu-a01."]


def test_a_head_cannot_write_an_internal_note(client, org, tk):
    client.force_login(org.head_a)
    before = snapshot()
    response = post(client, f"{tk.vision.pk}/comments/", {"text": "Secret", "internal": True})
    assert response.status_code == 403
    assert response.json() == {"detail": "Internal notes are written by the committee and platform admins."}
    assert snapshot() == before


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            {"text": "x" * (MAX_COMMENT + 1)},
            "text",
            "The comment is 4001 characters long; at most 4000 are kept.",
        ),
        ({"text": ""}, "text", "A comment is required."),
        ({"text": "   "}, "text", "A comment is required."),
        ({}, "text", None),
        ({"text": None}, "text", None),
        ({"text": ["a"]}, "text", None),
        ({"text": "ok", "internal": "maybe"}, "internal", None),
        ({"text": "ok", "internal": [True]}, "internal", None),
    ],
)
def test_a_bad_comment_is_a_400_naming_the_field_and_writes_nothing(client, org, tk, body, field, message):
    client.force_login(org.committee)
    before = snapshot()
    response = post(client, f"{tk.vision.pk}/comments/", body)
    assert response.status_code == 400
    assert list(response.json()) == [field]
    if message:
        assert response.json()[field] == [message]
    assert snapshot() == before


def test_a_comment_of_exactly_the_limit_is_kept(client, org, tk):
    client.force_login(org.committee)
    response = post(client, f"{tk.vision.pk}/comments/", {"text": "x" * MAX_COMMENT})
    assert response.status_code == 201
    assert len(response.json()["text"]) == MAX_COMMENT


# --- Nothing half-written, CSRF -----------------------------------------------------------------


def test_a_failure_after_the_ticket_is_saved_leaves_no_ticket_and_no_history(client, org, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the notifier is down")

    monkeypatch.setattr("efficiency.services.tickets.core.notification_emit", broken)
    client.force_login(org.admin)
    before = snapshot()
    with pytest.raises(RuntimeError):
        post(client, "", {"title": "Fix", "department": "vision", "assignee": "head-a"})
    assert snapshot() == before


def test_a_failure_while_starting_verification_leaves_the_ticket_as_it_was(client, org, tk, monkeypatch):
    set_state(tk.vision, TicketState.IN_PROGRESS)

    def broken(ticket):
        raise RuntimeError("verification could not start")

    monkeypatch.setattr("efficiency.services.tickets.core.measurable", broken)
    client.force_login(org.head_a)
    before = snapshot()
    with pytest.raises(RuntimeError):
        move(client, tk.vision, "resolve")
    assert snapshot() == before


def test_session_writes_need_the_csrf_token_and_a_token_does_not(org, tk):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(org.head_a)
    before = snapshot()
    for response in (
        move(browser, tk.vision, "start"),
        post(browser, "", {"title": "Fix", "department": "vision"}),
        post(browser, f"{tk.vision.pk}/comments/", {"text": "hi"}),
        patch(browser, tk.vision, {"assignee": "admin"}),
    ):
        assert response.status_code == 403
        assert "CSRF" in response.json()["detail"]
    assert snapshot() == before
    assert browser.get(f"{URL}{tk.vision.pk}/").status_code == 200  # reading needs no token
    key = api_token_issue(user=org.head_a, name="script").key
    response = Client(enforce_csrf_checks=True).post(
        f"{URL}{tk.vision.pk}/transition/",
        {"action": "start"},
        content_type="application/json",
        headers={"authorization": f"Token {key}"},
    )
    assert (response.status_code, response.json()["state"]) == (200, "in_progress")


# --- OpenAPI --------------------------------------------------------------------------------------

TICKET_CALLS = [
    ("/api/v1/tickets/", "GET", {}, None),
    ("/api/v1/tickets/", "GET", {"state": "open", "overdue": "false", "due_soon": "true"}, None),
    ("/api/v1/tickets/", "GET", {"state": "done"}, None),
    ("/api/v1/tickets/{id}/", "GET", {}, None),
    ("/api/v1/tickets/{id}/", "PATCH", {}, {"assignee": "admin"}),
    ("/api/v1/tickets/{id}/", "PATCH", {}, {"title": ""}),
    ("/api/v1/tickets/{id}/comments/", "GET", {}, None),
    ("/api/v1/tickets/{id}/comments/", "POST", {}, {"text": "Checked the image."}),
    ("/api/v1/tickets/{id}/comments/", "POST", {}, {"text": "Note", "internal": True}),
    ("/api/v1/tickets/{id}/transition/", "POST", {}, {"action": "start"}),
    ("/api/v1/tickets/{id}/transition/", "POST", {}, {"action": "close"}),
    ("/api/v1/tickets/{id}/transition/", "POST", {}, {"action": "wont_fix", "reason": "Not needed."}),
    ("/api/v1/tickets/{id}/history/", "GET", {}, None),
    ("/api/v1/tickets/", "POST", {}, {"title": "By hand", "department": "vision"}),
    ("/api/v1/tickets/", "POST", {}, {"title": "By hand", "department": "radar"}),
    ("/api/v1/tickets/", "POST", {}, {"title": "x" * 300, "department": "vision"}),
]


@pytest.fixture
def _keep_the_test_connection():
    """As in test_schemathesis: a WSGI call must not close the test's database connection."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.mark.usefixtures("_keep_the_test_connection")
@pytest.mark.parametrize("role", ["head_a", "committee", "admin"])
def test_ticket_answers_on_stored_rows_conform_to_the_schema(org, tk, role):
    from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

    from tests.api.test_schemathesis import schema

    key = api_token_issue(user=getattr(org, role), name="schema").key
    rec = RecommendationFactory(
        department=org.dept_a, cluster=org.cluster, state=RecommendationState.ACCEPTED
    )
    rec.jobs.add(org.job_a)
    calls = [*TICKET_CALLS, ("/api/v1/tickets/", "POST", {}, {"recommendation": rec.pk})]
    statuses = set()
    for pk in (tk.vision.pk, tk.radar.pk):
        for path, method, query, body in calls:
            case = schema[path][method].Case(
                path_parameters={"id": pk} if "{id}" in path else None,
                query=query or None,
                **({"body": body, "media_type": "application/json"} if body is not None else {}),
            )
            response = case.call_and_validate(
                headers={"Authorization": f"Token {key}", "Host": "localhost"},
                checks=[response_schema_conformance, status_code_conformance],
            )
            statuses.add(response.status_code)
    assert {200, 201, 400} <= statuses


# --- Pages and queries ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["head_a", "committee"])
def test_the_list_is_paginated_and_its_query_count_does_not_grow_with_rows(client, org, tk, role):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(getattr(org, role))

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(f"{URL}?page_size=100").status_code == 200
        return len(captured)

    few = queries()
    for n in range(12):
        ticket_create(
            user=org.admin, title=f"Fix {n}", department=org.dept_a, severity="low", assignee=org.head_a
        )
    assert queries() == few
    body = client.get(f"{URL}?page_size=5").json()
    assert (body["count"], len(body["results"])) == (13 if role == "head_a" else 14, 5)
    assert "page=2" in body["next"]
