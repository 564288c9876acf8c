from datetime import datetime, timedelta

from efficiency.models import Notification
from efficiency.tasks import notification_route_task, notifications_deliver_task


def route_all() -> int:
    """What the route worker does after each emitting transaction commits."""
    pending = Notification.objects.filter(routed_at__isnull=True).order_by("pk")
    return sum(notification_route_task(pk)["targets"] for pk in pending.values_list("pk", flat=True))


def deliver(at: datetime, after_s: float = 61) -> dict:
    """The deliver worker, ``after_s`` seconds after ``at`` (by default: once the window is over)."""
    return notifications_deliver_task((at + timedelta(seconds=after_s)).isoformat())
