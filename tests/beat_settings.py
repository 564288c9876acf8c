"""The portal's settings with a one-second schedule of their own, for the tests of beat.

Everything else (the scheduler class and its lock) is the portal's.
"""

from portal.settings import *  # noqa: F403

TICK_QUEUE = "beat-test"  # no worker consumes it: the messages only pile up

CELERY_BEAT_SCHEDULE = {
    "tick": {"task": "efficiency.tasks.ping_task", "schedule": 1.0, "options": {"queue": TICK_QUEUE}}
}
