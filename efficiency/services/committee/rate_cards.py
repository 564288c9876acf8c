"""The showback's rate cards: prices per GPU-hour by GPU model, one write-once version each.

A new price is a new version (``rate_card_create``), in force from its ``effective_from``; the
old versions stay, and a sealed pack names the version it priced with. Prices are decimal
strings ("12.50"): a float would turn 0.1 into 0.1000000000000000055.
"""

import re
from decimal import Decimal, InvalidOperation

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from efficiency.models import RateCard
from efficiency.services.committee.audit import audit_append

PRICE_FORMAT = re.compile(r"^\d{1,12}(\.\d{1,4})?$")
CURRENCY_FORMAT = re.compile(r"^[A-Z]{3}$")
MAX_MODEL_NAME = 100
ATTEMPTS = 5


class RateCardError(ValueError):
    """The new rate card is not valid; nothing was saved."""


def price_check(text: str) -> str:
    """``text`` as a canonical positive decimal string ("12.5" stays "12.5"); RateCardError if not."""
    text = (text or "").strip()
    if not PRICE_FORMAT.match(text):
        raise RateCardError(f"{text!r} is not a price: write digits with at most 4 decimals, like 12.50")
    try:
        value = Decimal(text)
    except InvalidOperation as error:  # pragma: no cover - the pattern admits only decimals
        raise RateCardError(f"{text!r} is not a price") from error
    if value <= 0:
        raise RateCardError(f"{text!r} is not a positive price")
    return text


def rate_card_list():
    """Every version, the one in force last (newest first)."""
    return RateCard.objects.select_related("created_by").order_by("-effective_from", "-version")


def rate_card_create(
    *, actor, effective_from, currency: str, rates: dict[str, str], default_rate: str = "", note: str = ""
) -> RateCard:
    """Save the next version of the rate card (and its audit entry) or raise RateCardError."""
    currency = (currency or "").strip().upper()
    if not CURRENCY_FORMAT.match(currency):
        raise RateCardError(f"{currency!r} is not a three-letter currency code")
    if not rates and not default_rate:
        raise RateCardError("a rate card needs a price for at least one GPU model, or a default price")
    checked = {}
    for model, price in rates.items():
        name = (model or "").strip()
        if not name or len(name) > MAX_MODEL_NAME:
            raise RateCardError(f"{model!r} is not a GPU model name")
        checked[name] = price_check(price)
    default = price_check(default_rate) if (default_rate or "").strip() else ""
    for _attempt in range(ATTEMPTS):
        try:
            with transaction.atomic():
                latest = RateCard.objects.aggregate(top=Max("version"))["top"] or 0
                card = RateCard.objects.create(
                    version=latest + 1,
                    effective_from=effective_from,
                    currency=currency,
                    rates=dict(sorted(checked.items())),
                    default_rate=default,
                    note=note,
                    created_at=timezone.now(),
                    created_by=actor if actor is not None and actor.is_authenticated else None,
                )
                audit_append(
                    actor=actor,
                    verb="rate_card.create",
                    obj=card,
                    payload={
                        "version": card.version,
                        "effective_from": card.effective_from.isoformat(),
                        "currency": currency,
                        "rates": ", ".join(f"{k}={v}" for k, v in card.rates.items()),
                        "default_rate": default,
                    },
                )
                return card
        except IntegrityError:
            continue  # another version was saved at the same moment: take the next number
    raise RateCardError("the rate card could not be saved: too many versions saved at once")
