"""A proposed quota's explanation in the reader's language.

The proposal stores its steps as facts (efficiency.analysis.quotas: percentile → bound → floor →
share → rounding, each with its numbers); this turns them into one sentence per step, through
gettext, for the cycle page, its CSV and the API. Explanations stored before the steps existed
keep their one-paragraph form.
"""

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from efficiency.analysis.quotas import Bound, ShareStage
from efficiency.choices import QuotaEventKind


def gpus(value) -> str:
    """A GPU count for a sentence: whole numbers without decimals, others with up to two."""
    if value is None:
        return "—"
    value = round(float(value), 2)
    if value.is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def explanation_steps(explanation: dict, proposal_settings: dict | None = None) -> list[str]:
    """Why a proposed quota is what it is: one sentence per step, each with its numbers."""
    if not explanation:
        return []
    if "steps" not in explanation:
        return [_legacy(explanation, proposal_settings or {})]
    steps = {step["step"]: step for step in explanation["steps"]}
    order = [("percentile", _percentile), ("bound", _bound), ("floor", _floor), ("share", _share)]
    order.append(("rounding", _rounding))
    return [render(steps[name], steps) for name, render in order if name in steps]


def pack_proposal_rows(proposals: dict) -> list[dict]:
    """A review pack's proposal rows with ``why``: their explanation in the reader's language."""
    settings = proposals.get("proposal_settings") or {}
    rows = []
    for row in proposals.get("rows") or []:
        explanation = row.get("explanation") or {}
        # A quota's facts are a dict of steps; text already worded (a list) is shown as it is.
        why = [str(step) for step in explanation] if isinstance(explanation, list) else None
        rows.append({**row, "why": why if why is not None else explanation_steps(explanation, settings)})
    return rows


def _percentile(s: dict, steps: dict) -> str:
    return _(
        "Percentile: P%(percentile)s of hourly demand over %(hours)s h is %(value)s GPUs "
        "(mean %(mean)s, peak %(peak)s); rounded up: %(gpus)s."
    ) % {
        "percentile": f"{s['percentile']:g}",
        "hours": s["hours"],
        "value": gpus(s["percentile_gpus"]),
        "mean": gpus(s["mean_gpus"]),
        "peak": gpus(s["peak_gpus"]),
        "gpus": gpus(s["gpus"]),
    }


def _bound(s: dict, steps: dict) -> str:
    if not s["current_gpus"]:
        return _("Bound: no current guarantee, so no change limit: %(gpus)s.") % {"gpus": gpus(s["gpus"])}
    numbers = {
        "band": _("at most ±%(change)s%% from the current %(current)s, i.e. %(lower)s to %(upper)s")
        % {
            "change": f"{s['max_change_pct']:g}",
            "current": gpus(s["current_gpus"]),
            "lower": gpus(s["lower_gpus"]),
            "upper": gpus(s["upper_gpus"]),
        },
        "gpus": gpus(s["gpus"]),
    }
    before = steps["percentile"]["gpus"]
    if s["gpus"] < before:
        return _("Bound: %(band)s: capped at %(gpus)s.") % numbers
    if s["gpus"] > before:
        return _("Bound: %(band)s: held at %(gpus)s.") % numbers
    return _("Bound: %(band)s: %(gpus)s stays.") % numbers


def _floor(s: dict, steps: dict) -> str:
    numbers = {"floor": gpus(s["floor_gpus"]), "gpus": gpus(s["gpus"])}
    if not s["floor_gpus"]:
        return _("Floor: none: %(gpus)s stays.") % numbers
    if s["gpus"] > steps["bound"]["gpus"]:
        return _("Floor: at least %(floor)s GPUs: raised to %(gpus)s.") % numbers
    return _("Floor: at least %(floor)s GPUs: %(gpus)s stays.") % numbers


SHARE_STAGES = {
    ShareStage.SURPLUS: gettext_lazy(
        "GPUs are taken first from departments keeping more than they need: this one keeps the "
        "%(keep)s it needs plus at most %(allowed)s: %(gpus)s."
    ),
    ShareStage.GROWTH: gettext_lazy(
        "What departments kept beyond their needs was not enough, so growth above the current "
        "guarantees is taken back: this one keeps %(keep)s plus at most %(allowed)s: %(gpus)s."
    ),
    ShareStage.WITHIN_BOUND: gettext_lazy(
        "What departments kept beyond their needs and all growth were not enough, so guarantees "
        "are cut within the change bound: this one keeps %(keep)s plus at most %(allowed)s: %(gpus)s."
    ),
    ShareStage.BEYOND_BOUND: gettext_lazy(
        "Cuts within the change bound were not enough either, so guarantees are cut below it, down "
        "to the floor: this one keeps %(keep)s plus at most %(allowed)s: %(gpus)s."
    ),
    ShareStage.FLOORS: gettext_lazy(
        "The floors alone exceed it, so they shrink too: this one keeps at most %(allowed)s: %(gpus)s."
    ),
}


def _share(s: dict, steps: dict) -> str:
    numbers = {
        "asked": gpus(s["asked_gpus"]),
        "share": f"{s['guaranteed_share'] * 100:g}%",
        "capacity": gpus(s["capacity_gpus"]),
        "budget": gpus(s["budget_gpus"]),
        "keep": gpus(s["keep_gpus"]),
        "allowed": gpus(s["allowed_gpus"]),
        "gpus": gpus(s["gpus"]),
    }
    if s["asked_gpus"] <= s["budget_gpus"]:
        return (
            _(
                "Share: this GPU model's guarantees add up to %(asked)s, within %(share)s of "
                "%(capacity)s GPUs (%(budget)s): %(gpus)s stays."
            )
            % numbers
        )
    text = _(
        "Share: this GPU model's guarantees add up to %(asked)s, more than %(share)s of "
        "%(capacity)s GPUs (%(budget)s)."
    )
    stage = SHARE_STAGES.get(s["stage"]) or gettext_lazy("The GPUs were found elsewhere: %(gpus)s stays.")
    return f"{text} {stage}" % numbers


def _rounding(s: dict, steps: dict) -> str:
    numbers = {
        "exact": gpus(s["exact_gpus"]),
        "gpus": gpus(s["gpus"]),
        "budget": gpus(steps["share"]["budget_gpus"]),
    }
    if s["rounded_up"]:
        return (
            _(
                "Rounding: %(exact)s rounded down, plus one of the GPUs left to meet %(budget)s exactly "
                "(largest remainders first): %(gpus)s."
            )
            % numbers
        )
    if not float(s["exact_gpus"]).is_integer():
        return _("Rounding: %(exact)s rounded down: %(gpus)s.") % numbers
    return _("Rounding: already whole: %(gpus)s.") % numbers


def event_facts(event, cycle) -> str:
    """What the portal recorded beside a person's comment on a cycle's event, as a sentence."""
    if event.kind == QuotaEventKind.CREATED and cycle.is_fixed_partition:
        return _("Fixed partition: owned GPUs.")
    detail = event.detail or {}
    if "borrowing_limit_to_gpus" not in detail:
        return ""

    def limit(value) -> str:
        return _("no limit") if value is None else gpus(value)

    if "borrowing_limit_from_gpus" not in detail:  # recorded before the old value was kept
        return _("Borrowing limit: %(limit)s.") % {"limit": limit(detail["borrowing_limit_to_gpus"])}
    return _("Borrowing limit: %(before)s → %(after)s.") % {
        "before": limit(detail["borrowing_limit_from_gpus"]),
        "after": limit(detail["borrowing_limit_to_gpus"]),
    }


def _legacy(e: dict, settings: dict) -> str:
    """An explanation stored before the steps were (the share was one scaling factor)."""
    text = _(
        "P%(percentile)s of hourly demand over %(hours)s h: %(value)s GPUs (mean %(mean)s, peak %(peak)s), "
        "so the target is %(target)s."
    ) % {
        "percentile": f"{e['percentile']:g}",
        "hours": e["hours"],
        "value": e["percentile_gpus"],
        "mean": e["mean_gpus"],
        "peak": e["peak_gpus"],
        "target": e["target_gpus"],
    }
    change = f"{settings.get('max_change_pct', 0):g}"
    bound = e["bound"]
    if bound == Bound.MAX_INCREASE:
        text += " " + _("Capped at +%(change)s%% of the current %(current)s: %(upper)s.") % {
            "change": change,
            "current": e["current_gpus"],
            "upper": e["upper_gpus"],
        }
    elif bound == Bound.MAX_DECREASE:
        text += " " + _("Lowered by at most %(change)s%% of the current %(current)s: %(lower)s.") % {
            "change": change,
            "current": e["current_gpus"],
            "lower": e["lower_gpus"],
        }
    elif bound == Bound.FLOOR:
        text += " " + _("Raised to the floor of %(floor)s GPUs.") % {"floor": settings.get("floor_gpus")}
    elif bound == Bound.CAPACITY and e.get("capacity_factor") is not None:
        text += " " + _(
            "Guarantees of this GPU model asked for more than %(share)s%% of its capacity, "
            "so every one was scaled by %(factor)s."
        ) % {
            "share": f"{settings.get('guaranteed_share', 0) * 100:g}",
            "factor": f"{e['capacity_factor']:.2f}",
        }
    elif e.get("current_gpus"):
        text += " " + _("Within ±%(change)s%% of the current %(current)s.") % {
            "change": change,
            "current": e["current_gpus"],
        }
    else:
        text += " " + _("No current quota, so no change limit.")
    return text
