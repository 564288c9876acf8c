"""Tickets in the Django admin: platform admins read them (list with filters, the comments and
internal notes inline, every saved change in the history with its reason) and change nothing
there; the workflow is the portal's."""

import pytest
from django.urls import reverse
from django.utils import timezone

from efficiency.choices import Role
from efficiency.models import Ticket, TicketComment
from efficiency.services.tickets import ticket_comment, ticket_create, ticket_transition
from tests.conftest import PASSWORD
from tests.factories import UserFactory


@pytest.fixture
def platform_admin(client, org):
    user = UserFactory(username="ops", role=Role.PLATFORM_ADMIN)
    assert not user.is_superuser
    client.login(username="ops", password=PASSWORD)
    return user


@pytest.fixture
def tickets(org):
    now = timezone.now()
    nccl = ticket_create(user=org.admin, title="Fix NCCL transport", department=org.dept_a, severity="high")
    ticket_transition(nccl, "wont_fix", user=org.committee, reason="The team moves to RoCE in January.")
    ticket_comment(nccl, user=org.committee, text="Discussed in the November meeting.", internal=True)
    ticket_comment(nccl, user=org.head_a, text="Agreed.")
    radar = ticket_create(
        user=org.admin, title="Repair gpu-b01", department=org.dept_b, severity="critical", now=now
    )
    return type("Tickets", (), {"nccl": nccl, "radar": radar})


def test_the_ticket_list_opens_and_filters(client, org, platform_admin, tickets):
    url = reverse("admin:efficiency_ticket_changelist")

    def listed(query=None) -> tuple[bool, bool]:
        page = client.get(url, query or {}).content.decode()
        return "Fix NCCL transport" in page, "Repair gpu-b01" in page

    assert listed() == (True, True)
    assert listed({"state__exact": "wont_fix"}) == (True, False)
    assert listed({"severity__exact": "critical"}) == (False, True)
    assert listed({"department__id__exact": org.dept_b.pk}) == (False, True)


def test_the_ticket_page_is_read_only_and_shows_the_comments_and_notes(client, platform_admin, tickets):
    page = client.get(reverse("admin:efficiency_ticket_change", args=[tickets.nccl.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Discussed in the November meeting." in html  # the internal note too: this is the admin
    assert "Agreed." in html
    assert 'name="title"' not in html  # nothing to edit
    assert 'name="_save"' not in html


def test_the_history_names_who_moved_the_ticket_and_why(client, platform_admin, tickets):
    page = client.get(reverse("admin:efficiency_ticket_history", args=[tickets.nccl.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "committee" in html
    assert "The team moves to RoCE in January." in html


def test_platform_admins_change_nothing_here(client, org, platform_admin, tickets):
    before = (Ticket.objects.count(), TicketComment.objects.count(), tickets.nccl.history.count())
    assert client.get(reverse("admin:efficiency_ticket_add")).status_code == 403
    assert client.get(reverse("admin:efficiency_ticket_delete", args=[tickets.nccl.pk])).status_code == 403
    response = client.post(
        reverse("admin:efficiency_ticket_change", args=[tickets.nccl.pk]),
        {"title": "Changed in the admin", "state": "closed", "due_at_0": "2030-01-01", "due_at_1": "00:00"},
    )
    assert response.status_code == 403
    comment = TicketComment.objects.first()
    assert client.get(reverse("admin:efficiency_ticketcomment_delete", args=[comment.pk])).status_code == 403
    tickets.nccl.refresh_from_db()
    assert tickets.nccl.title == "Fix NCCL transport"
    assert tickets.nccl.state == "wont_fix"
    assert (Ticket.objects.count(), TicketComment.objects.count(), tickets.nccl.history.count()) == before


def test_committee_and_heads_cannot_read_tickets_in_the_admin(client, org, tickets):
    for user in (org.committee, org.head_a):
        client.force_login(user)
        response = client.get(reverse("admin:efficiency_ticket_changelist"))
        assert response.status_code == 302  # to the admin's login
