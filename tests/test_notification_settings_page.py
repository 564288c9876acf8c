"""A person's notification settings page: the events they may choose, saved; bad input refused."""

from efficiency.models import NotificationSubscription
from tests.conftest import PASSWORD

URL = "/notifications/"


def test_a_head_sees_the_defaults_and_saves_their_choice(client, org):
    client.login(username="head-a", password=PASSWORD)
    page = client.get(URL).content.decode()
    assert 'value="ticket_overdue" id="event-ticket_overdue" checked' in page
    assert 'value="incident_opened" id="event-incident_opened">' in page  # opted into by choice only
    assert "Your account has no email address" in page

    response = client.post(URL, {"events": ["ticket_overdue", "incident_opened"], "email": "on"})
    assert response.status_code == 302
    subscription = NotificationSubscription.objects.get(user=org.head_a)
    assert subscription.events == ["ticket_overdue", "incident_opened"]
    assert subscription.email is True
    page = client.get(URL).content.decode()
    assert 'id="event-ticket_assigned">' in page  # now unchecked
    assert "Your notification settings are saved." in page


def test_email_can_be_switched_off(client, org):
    client.login(username="committee", password=PASSWORD)
    client.post(URL, {"events": ["ticket_verified"]})
    subscription = NotificationSubscription.objects.get(user=org.committee)
    assert (subscription.events, subscription.email) == (["ticket_verified"], False)


def test_an_unknown_event_is_refused_and_nothing_is_saved(client, org):
    client.login(username="head-a", password=PASSWORD)
    response = client.post(URL, {"events": ["ticket_overdue", "everything"], "email": "on"})
    assert response.status_code == 400
    assert "These events cannot be chosen: everything." in response.content.decode()
    assert not NotificationSubscription.objects.exists()


def test_each_role_is_offered_the_events_that_can_reach_it(client, org):
    client.login(username="head-a", password=PASSWORD)
    page = client.get(URL).content.decode()
    assert 'id="event-ticket_verified" checked' in page  # their departments': on by default
    assert 'id="event-recommendation_accepted" checked' in page
    client.login(username="committee", password=PASSWORD)
    page = client.get(URL).content.decode()
    assert 'value="ticket_verified" id="event-ticket_verified">' in page  # followed once chosen
    assert "event-recommendation_accepted" not in page  # reaches only the heads
    response = client.post(URL, {"events": ["recommendation_accepted"]})
    assert response.status_code == 400


def test_people_without_a_portal_role_have_no_settings_page(client, org):
    client.login(username="nobody", password=PASSWORD)
    assert client.get(URL).status_code == 403
