"""Review: committee edits and approval, department heads' objections and their answers."""

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from efficiency.choices import QuotaCycleStatus, QuotaEventKind
from efficiency.models import Department, Quota, QuotaCycle, QuotaObjection
from efficiency.services.quotas.cycles import QuotaError, cycle_event


def _must_be_proposed(cycle: QuotaCycle) -> None:
    if cycle.status != QuotaCycleStatus.PROPOSED:
        raise QuotaError(_("This cycle is approved; its quotas can no longer change."))


def _require_comment(comment: str) -> str:
    comment = comment.strip()
    if not comment:
        raise ValidationError({"comment": _("Say why: a comment is required.")})
    return comment


class QuotaOverCapacity(ValidationError):
    """Guarantees of some GPU models exceed their capacity (the shared pool would be negative).

    ``by_model`` maps each to its message with the numbers. With ``field``, the messages belong
    to that field (``guaranteed_gpus`` for an edit).
    """

    def __init__(self, messages: dict[str, str], *, field: str | None = None) -> None:
        self.by_model = dict(messages)
        texts = [messages[model] for model in sorted(messages)]
        super().__init__({field: texts} if field else texts)


def _over_capacity(capacity: dict, guaranteed: dict[str, int]) -> dict[str, str]:
    return {
        model: _("%(model)s: %(guaranteed)d GPUs guaranteed but only %(capacity)d in the cluster.")
        % {"model": model, "guaranteed": gpus, "capacity": capacity.get(model, 0)}
        for model, gpus in guaranteed.items()
        if gpus > capacity.get(model, 0)
    }


def _guaranteed_per_model(quotas) -> dict[str, int]:
    guaranteed: dict[str, int] = defaultdict(int)
    for quota in quotas:
        guaranteed[quota.gpu_model] += quota.guaranteed_gpus
    return guaranteed


def check_within_capacity(cycle: QuotaCycle) -> None:
    """QuotaOverCapacity naming each GPU model whose guarantees exceed its capacity.

    The one check behind both edits and approval: a shared pool is never negative.
    """
    errors = _over_capacity(cycle.capacity, _guaranteed_per_model(cycle.quotas.all()))
    if errors:
        raise QuotaOverCapacity(errors)


@transaction.atomic
def quota_cycle_edit(
    *,
    cycle: QuotaCycle,
    actor,
    numbers: Mapping[int, tuple[int, int | None]],
    comment: str,
    now: datetime | None = None,
) -> int:
    """A committee member sets proposed quotas of one cycle; returns how many changed.

    ``numbers`` maps a quota's id to its (guaranteed GPUs, borrowing limit or None). Every change
    is recorded with who, when and the comment, which is required. The numbers are checked
    together, as approval checks them: when a GPU model's guarantees would exceed its capacity
    (a negative shared pool) nothing changes and QuotaOverCapacity names the field and numbers.
    """
    now = now or timezone.now()
    cycle = QuotaCycle.objects.select_for_update().get(pk=cycle.pk)
    _must_be_proposed(cycle)
    for guaranteed_gpus, borrowing_limit_gpus in numbers.values():
        if guaranteed_gpus < 0 or (borrowing_limit_gpus is not None and borrowing_limit_gpus < 0):
            raise QuotaError(_("GPU numbers cannot be negative."))
    quotas = list(cycle.quotas.select_for_update().select_related("department").order_by("pk"))
    changed = [
        (quota, *numbers[quota.pk])
        for quota in quotas
        if quota.pk in numbers
        and (quota.guaranteed_gpus, quota.borrowing_limit_gpus) != tuple(numbers[quota.pk])
    ]
    if not changed:
        return 0
    comment = _require_comment(comment)
    after = {quota.pk: quota.guaranteed_gpus for quota in quotas}
    after.update({quota.pk: gpus for quota, gpus, _limit in changed})
    guaranteed: dict[str, int] = defaultdict(int)
    for quota in quotas:
        guaranteed[quota.gpu_model] += after[quota.pk]
    errors = _over_capacity(cycle.capacity, guaranteed)
    if errors:
        raise QuotaOverCapacity(errors, field="guaranteed_gpus")
    for quota, guaranteed_gpus, borrowing_limit_gpus in changed:
        detail = {}
        if quota.borrowing_limit_gpus != borrowing_limit_gpus:
            detail = {
                "borrowing_limit_from_gpus": quota.borrowing_limit_gpus,
                "borrowing_limit_to_gpus": borrowing_limit_gpus,
            }
        cycle_event(
            cycle,
            QuotaEventKind.EDITED,
            actor=actor,
            at=now,
            department=quota.department,
            gpu_model=quota.gpu_model,
            from_gpus=quota.guaranteed_gpus,
            to_gpus=guaranteed_gpus,
            comment=comment,
            detail=detail,
        )
        quota.guaranteed_gpus = guaranteed_gpus
        quota.borrowing_limit_gpus = borrowing_limit_gpus
        quota.save(update_fields=["guaranteed_gpus", "borrowing_limit_gpus"])
    return len(changed)


def quota_update(
    *,
    quota: Quota,
    actor,
    guaranteed_gpus: int,
    borrowing_limit_gpus: int | None,
    comment: str,
    now: datetime | None = None,
) -> bool:
    """A committee member sets one proposed quota (see quota_cycle_edit); whether it changed."""
    changed = quota_cycle_edit(
        cycle=quota.cycle,
        actor=actor,
        numbers={quota.pk: (guaranteed_gpus, borrowing_limit_gpus)},
        comment=comment,
        now=now,
    )
    return changed > 0


@transaction.atomic
def quota_cycle_approve(*, cycle: QuotaCycle, actor, comment: str, now: datetime | None = None) -> QuotaCycle:
    """A committee member approves a proposal: its quotas come into force at its start.

    Needs a comment; refused (QuotaOverCapacity) while a GPU model's guarantees exceed its capacity.
    """
    now = now or timezone.now()
    cycle = QuotaCycle.objects.select_for_update().get(pk=cycle.pk)
    _must_be_proposed(cycle)
    comment = _require_comment(comment)
    check_within_capacity(cycle)
    cycle.status = QuotaCycleStatus.APPROVED
    cycle.approved_at, cycle.approved_by, cycle.approval_comment = now, actor, comment
    cycle.save(update_fields=["status", "approved_at", "approved_by", "approval_comment"])
    cycle_event(cycle, QuotaEventKind.APPROVED, actor=actor, at=now, comment=comment)
    return cycle


@transaction.atomic
def quota_objection_file(
    *, cycle: QuotaCycle, department: Department, author, text: str, now: datetime | None = None
) -> QuotaObjection:
    """A department head objects to their department's proposal (the committee sees it)."""
    now = now or timezone.now()
    text = text.strip()
    if not text:
        raise QuotaError(_("Say what you object to."))
    _must_be_proposed(cycle)
    objection = QuotaObjection.objects.create(
        cycle=cycle, department=department, author=author, text=text, created_at=now
    )
    cycle_event(cycle, QuotaEventKind.OBJECTION, actor=author, at=now, department=department, comment=text)
    return objection


@transaction.atomic
def quota_objection_answer(
    *, objection: QuotaObjection, actor, response: str, now: datetime | None = None
) -> QuotaObjection:
    now = now or timezone.now()
    response = response.strip()
    if not response:
        raise QuotaError(_("Write an answer."))
    objection.response, objection.responded_by, objection.responded_at = response, actor, now
    objection.save(update_fields=["response", "responded_by", "responded_at"])
    cycle_event(
        objection.cycle,
        QuotaEventKind.ANSWERED,
        actor=actor,
        at=now,
        department=objection.department,
        comment=response,
    )
    return objection
