"""Machine-written fault text: stored as facts, shown in the reader's language."""

import pytest
from django.utils import translation

from efficiency.actuators import ActionRequest, CommandActuator, WebhookActuator
from efficiency.fault_messages import MESSAGES, duration_text, message, render

REQUEST = ActionRequest(
    kind="isolate_node", incident_id=7, node="gpu-001", category="hardware_gpu", reason="x"
)


@pytest.mark.parametrize(
    "result",
    [
        CommandActuator(["scontrol", "update", "NodeName={node}", "State=DRAIN"]).run(REQUEST, dry_run=True),
        CommandActuator(["scontrol", "requeue", "{job_id}"]).run(REQUEST, dry_run=True),
        CommandActuator(["true"]).run(REQUEST, dry_run=False),
        CommandActuator(["false"]).run(REQUEST, dry_run=False),
        CommandActuator(["/nonexistent/drain"]).run(REQUEST, dry_run=False),
        WebhookActuator(url="https://chat.example.com/hook/T0K3N").run(REQUEST, dry_run=True),
    ],
    ids=["would-run", "refused", "ran", "failed", "not-found", "would-post"],
)
def test_every_actuator_outcome_is_a_known_message_that_reads_like_its_summary(result):
    assert result.code in MESSAGES
    stored = {"code": result.code, "params": dict(result.params)}
    with translation.override("en"):
        english = render(stored)
    assert english
    assert english.split()[0] == result.summary.split()[0]
    with translation.override("zh-hans"):
        assert render(stored) != english


def test_a_row_stored_before_messages_had_codes_shows_its_text():
    assert render({}, "closed by hand") == "closed by hand"
    assert render({"code": "gone-since", "params": {}}, "old text") == "old text"


def test_an_action_kind_is_shown_by_its_label():
    stored = message(
        "webhook_posted", kind="resume_node", incident=3, target="https://hooks.example.com", status=200
    )
    with translation.override("en"):
        assert (
            render(stored)
            == "Posted return node to service for incident 3 to https://hooks.example.com: HTTP 200."
        )


@pytest.mark.parametrize(
    ("seconds", "english", "chinese"),
    [
        (45, "45 s", "45 秒"),
        (150, "2.5 min", "2.5 分钟"),
        (3120, "52 min", "52 分钟"),
        (5400, "1.5 h", "1.5 小时"),
    ],
)
def test_durations_are_said_in_the_readers_language(seconds, english, chinese):
    with translation.override("en"):
        assert duration_text(seconds) == english
    with translation.override("zh-hans"):
        assert duration_text(seconds) == chinese
