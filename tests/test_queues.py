"""Every task of the portal goes to one of its three queues, the one its work belongs to."""

from django.conf import settings

from portal.celery import app


def _queue_of(task_name: str) -> str:
    return app.amqp.router.route({}, task_name)["queue"].name


def test_every_task_goes_to_a_queue_that_a_worker_of_make_run_consumes():
    import efficiency.tasks  # noqa: F401 -- registers the tasks

    names = [name for name in app.tasks if name.startswith("efficiency.tasks.")]
    assert len(names) > 20
    assert {_queue_of(name) for name in names} == set(settings.PORTAL_QUEUES)


def test_collections_analysis_and_actions_go_to_their_own_queues():
    assert _queue_of("efficiency.tasks.collect_source_task") == "collection"
    assert _queue_of("efficiency.tasks.collect_due_sources_task") == "collection"
    assert _queue_of("efficiency.tasks.rollups_refresh_task") == "analysis"
    assert _queue_of("efficiency.tasks.recommendations_refresh_task") == "analysis"
    assert _queue_of("efficiency.tasks.incident_policy_task") == "actions"
    assert _queue_of("efficiency.tasks.notifications_deliver_task") == "actions"
    # A task nobody routed (a new one) goes to the analysis queue, which every deployment runs.
    assert _queue_of("efficiency.tasks.ping_task") == "analysis"


def test_beat_sends_a_heartbeat_to_every_queue():
    queues = {
        entry["options"]["queue"]
        for entry in settings.CELERY_BEAT_SCHEDULE.values()
        if entry["task"] == "efficiency.tasks.worker_heartbeat_task"
    }
    assert queues == set(settings.PORTAL_QUEUES)
