"""Actuators: carry out what an incident policy asks (isolate a node, requeue a job, notify, resume a node).

Plain Python, no Django: the fault service builds one with ``actuator_from_config`` from the JSON an admin
edits, turns the incident into an ``ActionRequest``, and records the ``ActionResult`` on the incident.
``webhook`` POSTs the action as signed JSON; ``command`` runs a program such as ``scontrol`` or ``kubectl``
with the request's values as single arguments, never through a shell.
"""

from efficiency.actuators.base import (
    ACTION_KINDS,
    ActionRequest,
    ActionResult,
    Actuator,
    actuator_config_validate,
    actuator_from_config,
)
from efficiency.actuators.command import CommandActuator, CommandRefused
from efficiency.actuators.webhook import WebhookActuator

__all__ = [
    "ACTION_KINDS",
    "ActionRequest",
    "ActionResult",
    "Actuator",
    "CommandActuator",
    "CommandRefused",
    "WebhookActuator",
    "actuator_config_validate",
    "actuator_from_config",
]
