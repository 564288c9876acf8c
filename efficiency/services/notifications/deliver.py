"""Sending deliveries: each pending one whose batching window (or retry delay) has passed goes out
as one message; a failure is recorded on the row and tried again later, then marked failed.

Safe to run on many workers at once: a delivery is claimed with a conditional update (pending →
sending) before it is sent, so each is sent by one worker; one whose worker died while sending is
claimed again after ``STALE_CLAIM`` (at least once: a message may then be sent twice, never lost).
"""

import logging
from collections import Counter
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from efficiency import dispatch
from efficiency.choices import DeliveryState
from efficiency.models import Delivery
from efficiency.services.notifications.channels import ChannelError, channel_send, email_send
from efficiency.services.notifications.messages import clip, message_build

logger = logging.getLogger(__name__)

STALE_CLAIM = timedelta(minutes=15)
BATCH = 500


def notifications_deliver(*, now: datetime | None = None) -> dict[str, int]:
    """Send the deliveries that are due; returns how many were sent, retried later and failed."""
    now = now or timezone.now()
    Delivery.objects.filter(state=DeliveryState.SENDING, claimed_at__lt=now - STALE_CLAIM).update(
        state=DeliveryState.PENDING
    )
    due = Delivery.objects.filter(state=DeliveryState.PENDING, due_at__lte=now).order_by("due_at", "pk")
    outcomes: Counter[str] = Counter()
    for pk in list(due.values_list("pk", flat=True)[:BATCH]):
        outcomes[delivery_send(pk, now=now)] += 1
    return dict(outcomes)


def delivery_send(delivery_id: int, *, now: datetime) -> str:
    """Claim and send one delivery: "sent", "retry" (failed, tried again later), "failed" (no tries
    left) or "skipped" (another worker has it). Never raises: a broken channel stops nothing else."""
    claimed = Delivery.objects.filter(pk=delivery_id, state=DeliveryState.PENDING).update(
        state=DeliveryState.SENDING, claimed_at=now
    )
    if not claimed:
        return "skipped"
    delivery = Delivery.objects.select_related("channel", "user").get(pk=delivery_id)
    notifications = list(delivery.notifications.order_by("created_at", "pk"))
    try:
        if not notifications:
            return _done(delivery, now, digest=False)
        message = message_build(notifications)
        _send(delivery, message)
    except ChannelError as error:
        return _failed(delivery, now, str(error))
    except Exception as error:  # a bug or an unexpected reply: recorded, and the worker goes on
        logger.exception("notification delivery %s failed", delivery.pk)
        return _failed(delivery, now, f"{type(error).__name__}: {clip(error, 300)}")
    return _done(delivery, now, digest=message.digest)


def _send(delivery: Delivery, message) -> None:
    if delivery.channel is not None:
        channel = delivery.channel
        if not channel.is_active:
            raise ChannelError("the channel is switched off")
        channel_send(channel.kind, channel.config, message, timeout_s=settings.PORTAL_NOTIFICATION_TIMEOUT_S)
    else:
        if not delivery.user.email:
            raise ChannelError("the user has no email address")
        email_send([delivery.user.email], message)


def _done(delivery: Delivery, now: datetime, *, digest: bool) -> str:
    Delivery.objects.filter(pk=delivery.pk).update(
        state=DeliveryState.SENT, sent_at=now, attempts=delivery.attempts + 1, digest=digest, last_error=""
    )
    return "sent"


def _failed(delivery: Delivery, now: datetime, error: str) -> str:
    attempts = delivery.attempts + 1
    delays = settings.PORTAL_NOTIFICATION_RETRY_S
    target = delivery.channel or delivery.user
    if attempts > len(delays):
        logger.error(
            "notification delivery %s to %s failed for good after %s tries: %s",
            delivery.pk,
            target,
            attempts,
            error,
        )
        Delivery.objects.filter(pk=delivery.pk).update(
            state=DeliveryState.FAILED, attempts=attempts, last_error=error
        )
        return "failed"
    logger.warning(
        "notification delivery %s to %s failed (try %s), tried again later: %s",
        delivery.pk,
        target,
        attempts,
        error,
    )
    Delivery.objects.filter(pk=delivery.pk).update(
        state=DeliveryState.PENDING,
        attempts=attempts,
        last_error=error,
        due_at=now + timedelta(seconds=delays[attempts - 1]),
    )
    return "retry"


def delivery_retry(delivery: Delivery, *, now: datetime | None = None) -> None:
    """Try a failed (or waiting) delivery again now, with its tries counted afresh."""
    now = now or timezone.now()
    Delivery.objects.filter(pk=delivery.pk).exclude(
        state__in=[DeliveryState.SENT, DeliveryState.SENDING]
    ).update(state=DeliveryState.PENDING, attempts=0, due_at=now)
    dispatch.notifications_deliver()
