"""Machine-written fault text, stored as facts and read in the reader's language.

What the portal itself writes about a fault (an actuator's outcome, a detector's finding, a metric's
reading, why an action was or was not taken) is stored as ``{"code": …, "params": {…}}`` and
rendered here through gettext when a page, report or API response shows it. A log line is not
machine text of ours: it is evidence, kept and shown as written.

Rows stored before a message had a code have none: ``render`` then returns the stored text.
"""

from collections.abc import Mapping
from typing import Any

from django.utils import translation
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from efficiency.charts.toolkit import duration_text  # noqa: F401  (re-exported: the one duration text)

MESSAGES = {
    # Actuators (efficiency.actuators): what ran, or would have run, and how it went.
    "command_would_run": _("Would run: %(command)s"),
    "command_ran": _("Ran %(command)s: exit code 0."),
    "command_failed": _("%(command)s failed with exit code %(exit_code)s: %(stderr)s"),
    "command_failed_silently": _("%(command)s failed with exit code %(exit_code)s (no stderr)."),
    "command_timed_out": _("%(command)s timed out after %(timeout_s)s s and was killed."),
    "command_not_found": _("Cannot run %(command)s: %(program)s not found."),
    "command_not_executable": _("Cannot run %(command)s: %(program)s is not executable."),
    "command_os_error": _("Cannot run %(command)s: %(error)s."),
    "command_refused_missing": _(
        "Refused to run %(program)s: the request has no value for {%(placeholder)s}."
    ),
    "command_refused_line_break": _(
        "Refused to run %(program)s: the value %(value)s for {%(placeholder)s} contains a line break."
    ),
    "command_refused_not_a_name": _(
        "Refused to run %(program)s: %(value)s is not a plain name (letters, digits and . _ : @ / - only, "
        "not starting with -)."
    ),
    "webhook_would_post": _(
        "Would POST %(kind)s for incident %(incident)s to %(target)s (%(bytes)s bytes of JSON)."
    ),
    "webhook_would_post_signed": _(
        "Would POST %(kind)s for incident %(incident)s to %(target)s (%(bytes)s bytes of JSON, signed)."
    ),
    "webhook_posted": _("Posted %(kind)s for incident %(incident)s to %(target)s: HTTP %(status)s."),
    "webhook_redirect": _(
        "%(target)s answered HTTP %(status)s (a redirect, not followed; fix the URL) "
        "(%(kind)s for incident %(incident)s)."
    ),
    "webhook_http_error": _("%(target)s answered HTTP %(status)s (%(kind)s for incident %(incident)s)."),
    "webhook_timeout": _(
        "%(target)s did not answer within %(timeout_s)s s (%(kind)s for incident %(incident)s)."
    ),
    "webhook_unreachable": _("Cannot reach %(target)s (%(error)s) (%(kind)s for incident %(incident)s)."),
    "webhook_send_failed": _(
        "Cannot send the request to %(target)s (%(error)s) (%(kind)s for incident %(incident)s)."
    ),
    # The fault service: actions without an actuator, by hand, closing.
    "bad_actuator_config": _("Bad actuator configuration: %(error)s"),
    "no_isolate_actuator": _("No isolation actuator is configured: %(node)s stays in service."),
    "no_restart_actuator": _("No restart actuator is configured: job %(job)s was not restarted."),
    "no_resume_actuator": _("No return-to-service actuator is configured: %(node)s stays isolated."),
    "no_notify_actuator": _("No notification actuator is configured: nobody was notified."),
    "isolated_by_hand": _("%(node)s recorded as isolated by hand (no isolation actuator is configured)."),
    "restart_by_hand": _(
        "Restart of job %(job)s recorded as requested by hand (no restart actuator is configured)."
    ),
    "resumed_by_hand": _(
        "%(node)s recorded as back in service by hand (no return-to-service actuator is configured)."
    ),
    # The rules of trust: what a job's own output cannot do.
    "job_output_only": _(
        "From the job's own output: a suspicion until the node's kernel log or the exporter's metrics "
        "confirm it."
    ),
    "node_not_of_job": _(
        "The job's output named node %(node)s, which is not one of job %(job)s's nodes: node refused."
    ),
    "node_without_job": _(
        "Job output named node %(node)s, but no job the scheduler reported vouches for it: node refused."
    ),
    "closed": _("Closed: %(reason)s"),
    "closed_not_run_again": _("Closed: the job ended and did not run again within a day."),
    # Evidence the portal derived (detectors, metrics); log lines are kept as written.
    "slowdown": _(
        "Iteration time %(median_s).2f s from iteration %(step)d, %(ratio).2fx the job's baseline of "
        "%(baseline_s).2f s"
    ),
    "loss_spike": _(
        "Loss %(loss).4g at iteration %(step)d, above the robust limit %(limit).4g "
        "(rolling median %(median).4g)"
    ),
    "gpus_flat": _(
        "SM activity of all %(gpus)d GPUs below 1%% for %(flat_s).0f s (highest %(peak_pct).2f%%)"
    ),
    "no_progress": _(
        "No iteration logged for %(silent_s).0f s (%(threshold_s).0f s = 10 median intervals between its "
        "iteration lines)"
    ),
    "metric_xid_last": _("DCGM_FI_DEV_XID_ERRORS = %(xid)s on GPU %(gpu)s"),
    "metric_xid_count": _('DCGM_EXP_XID_ERRORS_COUNT{xid="%(xid)s"} > 0 on GPU %(gpu)s'),
    "metric_ecc_dbe": _("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL rose by %(errors)g on GPU %(gpu)s"),
}

# ``params["kind"]`` holds an action kind; it is shown by its label.
_KIND_LABELS = {
    "isolate_node": pgettext_lazy("action", "isolate node"),
    "restart_job": pgettext_lazy("action", "restart job"),
    "notify": pgettext_lazy("action", "notify"),
    "resume_node": pgettext_lazy("action", "return node to service"),
}


def message(code: str, **params: Any) -> dict:
    """The stored form of a message: its code and the facts it needs."""
    if code not in MESSAGES:
        raise KeyError(f"unknown fault message code {code!r}")
    return {"code": code, "params": params}


def render(stored: Mapping | None, fallback: str = "") -> str:
    """A stored message in the active language; ``fallback`` (the text stored before messages had
    codes) when it has none, or its code is not known any more."""
    if not stored or stored.get("code") not in MESSAGES:
        return fallback
    params = dict(stored.get("params") or {})
    if params.get("kind") in _KIND_LABELS:
        params["kind"] = _KIND_LABELS[params["kind"]]
    try:
        return str(MESSAGES[stored["code"]]) % params
    except (KeyError, TypeError, ValueError):
        return fallback or str(MESSAGES[stored["code"]])


def render_english(stored: Mapping) -> str:
    """The message in English: what is kept in the text columns for logs and older clients."""
    with translation.override("en"):
        return render(stored)
