"""The decisions a review pack asks the committee for, in the reader's language.

A pack stores each request as facts (``kind``, ``ref``, ``params``); the pack page, its PDF and the
meeting's agenda all word it here, so the three say the same thing.
"""

from collections.abc import Mapping
from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from efficiency.choices import CapacityAlertKind

# The pack summary's key figures, named once for the page, the presentation and the PDF.
KPI_LABELS = {
    "utilization": gettext_lazy("Utilization"),
    "allocation_rate": gettext_lazy("Allocation rate"),
    "idle_gpu_hours": gettext_lazy("Idle GPU-hours"),
    "mttr_s": gettext_lazy("Mean time to recover"),
    "ettr": gettext_lazy("Effective training time ratio"),
    "overdue_tickets": gettext_lazy("Overdue tickets"),
}


def _day(stamp) -> str:
    if not stamp:
        return "?"
    try:
        moment = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return "?"
    return timezone.localtime(moment).strftime("%Y-%m-%d")


def decision_request_text(request: Mapping) -> str:
    """One requested decision as a sentence: what to decide, and on which numbers."""
    kind = request.get("decision_kind") or request.get("kind")  # an agenda item, or the pack's request
    params = request.get("params") or {}
    ref = request.get("ref")
    if kind == "quota":
        return _("Approve the proposed quotas of cycle #%(ref)s (%(start)s to %(end)s)") % {
            "ref": ref,
            "start": _day(params.get("start")),
            "end": _day(params.get("end")),
        }
    if kind == "capacity":
        reason = dict(CapacityAlertKind.choices).get(params.get("kind"), params.get("kind") or "")
        if params.get("gpus_needed"):
            return _("Decide on a capacity order for %(model)s: %(reason)s, %(gpus)s GPUs needed") % {
                "model": params.get("gpu_model") or "?",
                "reason": reason,
                "gpus": params["gpus_needed"],
            }
        return _("Decide on a capacity order for %(model)s: %(reason)s") % {
            "model": params.get("gpu_model") or "?",
            "reason": reason,
        }
    if kind == "ticket":
        return _("Overdue remediation ticket #%(ref)s of %(department)s: %(title)s") % {
            "ref": ref,
            "department": params.get("department") or "?",
            "title": params.get("title") or "",
        }
    return str(request.get("title_key") or kind or "")
