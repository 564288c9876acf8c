"""Reads of the notification area for the pages."""

from efficiency.models import Delivery


def delivery_failed_count() -> int:
    """How many notification deliveries failed for good (the platform admin's home page)."""
    return Delivery.objects.failed().count()
