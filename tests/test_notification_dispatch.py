"""The wiring: a service's event is routed after its transaction commits and delivered by the
Celery tasks (run eagerly here), without the request waiting on any network call."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from efficiency.models import Delivery, Notification
from efficiency.services.tickets import ticket_create
from efficiency.tasks import notifications_deliver_task
from portal.celery import app


@pytest.fixture
def eager(monkeypatch):
    monkeypatch.setattr(app.conf, "task_always_eager", True)
    monkeypatch.setattr(app.conf, "task_eager_propagates", True)


def test_an_event_is_routed_on_commit_and_sent_when_its_window_ends(
    org, eager, settings, django_capture_on_commit_callbacks
):
    settings.PORTAL_NOTIFICATION_WINDOW_S = 60
    org.head_a.email = "head-a@example.com"
    org.head_a.save()
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        ticket_create(user=org.admin, title="Fix NCCL", department=org.dept_a, assignee=org.head_a, now=now)
    assert Notification.objects.get().routed_at is None  # nothing ran inside the transaction
    assert len(callbacks) == 1

    with django_capture_on_commit_callbacks(execute=True):
        callbacks[0]()  # the commit: the route task runs (eagerly), and queues the deliver task
    delivery = Delivery.objects.get()
    assert delivery.user == org.head_a
    assert delivery.due_at == now + timedelta(seconds=60)
    assert mail.outbox == []  # the eager deliver task ran at once: the window was not over

    notifications_deliver_task((now + timedelta(seconds=61)).isoformat())
    assert [email.to for email in mail.outbox] == [["head-a@example.com"]]
