"""Verification of a resolved ticket from hand-built job hours and log lines: the family's runs
before and after the fix, what is read from them, and the ticket's move (or why it waits)."""

import math
from datetime import UTC, datetime, timedelta

from efficiency.choices import TicketState
from efficiency.models import Ticket
from efficiency.services.tickets import (
    ticket_from_recommendation,
    ticket_transition,
    ticket_verify,
    ticket_windows,
    tickets_verify,
)
from tests.factories import JobFactory, JobHourFactory, LogChunkFactory, RecommendationFactory

RESOLVED = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)


def _ticket(org, *, resolved=RESOLVED, expected_pct=45.0, pattern="bev-exp*"):
    rec = RecommendationFactory(
        department=org.dept_a,
        cluster=org.cluster,
        user_name="alice",
        name_pattern=pattern,
        gain_pct=expected_pct,
    )
    ticket = ticket_from_recommendation(rec, user=org.admin, now=resolved - timedelta(days=1))
    ticket_transition(ticket, "start", user=org.admin, now=resolved - timedelta(hours=2))
    ticket = ticket_transition(ticket, "resolve", user=org.admin, now=resolved)
    assert ticket.state == TicketState.VERIFYING
    return ticket


def _lines(start: datetime, iteration_s: float, count: int, *, batch: int = 256) -> str:
    """Megatron's iteration lines, one per 10 iterations, ±2% around ``iteration_s``."""
    rows = []
    for n in range(1, count + 1):
        at = start + timedelta(seconds=10 * n * iteration_s)
        ms = 1000 * iteration_s * (1 + 0.02 * math.sin(n))
        rows.append(
            f" [{at:%Y-%m-%d %H:%M:%S}] iteration {10 * n:8d}/  100000 |"
            f" consumed samples: {10 * n * batch:12d} |"
            f" elapsed time per iteration (ms): {ms:.1f} | learning rate: 3.000E-04 |"
        )
    return "\n".join(rows) + "\n"


def _run(org, start, *, hours, iteration_s, lines, activity=0.6, user="alice", name="bev-exp12", gpus=8):
    """A run of the family: its hours (SM activity ``activity``) and its last rank's log."""
    job = JobFactory(
        department=org.dept_a,
        cluster=org.cluster,
        user_name=user,
        name=name,
        gpu_count=gpus,
        node_count=1,
        submitted_at=start - timedelta(minutes=5),
        started_at=start,
        ended_at=start + timedelta(hours=hours),
    )
    whole = int(hours)
    for h in range(math.ceil(hours)):
        share = 1.0 if h < whole else hours - whole
        allocated = gpus * 3600.0 * share
        JobHourFactory(
            job=job,
            hour=start + timedelta(hours=h),
            allocated_gpu_s=allocated,
            busy_gpu_s=0.9 * allocated,
            sm_active_busy_gpu_s=activity * allocated,
        )
    if lines:
        LogChunkFactory(
            source=org.source,
            job=job,
            stream=f"job-{job.external_id}/rank-7.log",
            text=_lines(start, iteration_s, lines),
        )
    return job


def test_a_fix_that_halves_the_iteration_time_is_a_verified_gain_with_its_numbers(org):
    ticket = _ticket(org)
    _run(org, RESOLVED - timedelta(days=3), hours=10, iteration_s=3.0, lines=150, activity=0.3)
    _run(org, RESOLVED - timedelta(days=1), hours=10, iteration_s=3.1, lines=150, activity=0.3)
    # Another user's runs of the same name, and the family's other names, are not the family.
    _run(org, RESOLVED + timedelta(hours=1), hours=10, iteration_s=9.0, lines=300, user="bob")
    _run(org, RESOLVED + timedelta(hours=1), hours=10, iteration_s=9.0, lines=300, name="bev-pretrain")
    _run(org, RESOLVED + timedelta(hours=2), hours=12, iteration_s=1.5, lines=250, activity=0.55)
    now = RESOLVED + timedelta(days=1)

    ticket = ticket_verify(ticket, now)

    assert ticket.state == TicketState.VERIFIED_GAIN
    result = ticket.verification
    assert result["outcome"] == "verified_gain"
    assert result["metric"] == "iteration_s"
    assert result["iteration_metric"] == "elapsed_ms"
    assert abs(result["before"] - 3.05) < 0.1  # seconds per iteration, median of both runs
    assert abs(result["after"] - 1.5) < 0.05
    assert 48 <= result["gain_pct"] <= 53  # 1 - 1.5/3.05 = 50.8%
    assert 45 <= result["interval_low_pct"] <= result["gain_pct"] <= result["interval_high_pct"] <= 56
    assert ticket.measured_gain_pct == result["gain_pct"]
    assert result["expected_gain_pct"] == 45.0
    assert result["shortfalls"] == []
    assert ticket.verified_at == now
    windows = result["windows"]
    assert windows["before"]["jobs"] == 2
    assert windows["after"]["jobs"] == 1
    assert windows["after"]["gpu_hours"] == 96.0
    assert windows["before"]["iteration_lines"] == 300
    assert windows["after"]["activity_hours"] == 12
    assert [round(p["iteration"], 1) for p in result["series"]["before"]] == [3.0, 3.1]
    assert result["series"]["after"][0]["sm_activity"] == 0.55
    activity = next(c for c in result["comparisons"] if c["metric"] == "sm_activity")
    assert (activity["before"], activity["after"]) == (0.3, 0.55)
    # Samples per GPU-hour doubled: the cost of a unit of work halved.
    cost = next(c for c in result["comparisons"] if c["metric"] == "gpu_h_per_unit")
    assert 0.45 <= cost["gain_share"] <= 0.56


def test_too_little_data_after_the_fix_keeps_verifying_and_says_what_is_missing(org):
    ticket = _ticket(org)
    _run(org, RESOLVED - timedelta(days=2), hours=10, iteration_s=3.0, lines=150)
    # A run that started before the fix (old config) is not part of the after window.
    _run(org, RESOLVED - timedelta(hours=1), hours=10, iteration_s=3.0, lines=150)
    _run(org, RESOLVED + timedelta(hours=1), hours=0.5, iteration_s=1.5, lines=20)

    ticket = ticket_verify(ticket, RESOLVED + timedelta(hours=2))

    assert ticket.state == TicketState.VERIFYING
    stored = Ticket.objects.get(pk=ticket.pk)
    assert stored.state == TicketState.VERIFYING
    assert stored.verification["outcome"] == "verifying"
    assert stored.measured_gain_pct is None
    shortfalls = {row["what"]: (row["have"], row["need"]) for row in stored.verification["shortfalls"]}
    assert shortfalls == {"gpu_hours": (4.0, 8.0), "iterations": (20, 200)}
    assert stored.verification["windows"]["before"]["jobs"] == 2
    assert stored.verification["windows"]["after"]["jobs"] == 1
    # The measurement so far is shown while it waits.
    assert 48 <= stored.verification["gain_pct"] <= 52


def test_a_slower_family_after_the_fix_is_a_regression(org):
    ticket = _ticket(org)
    _run(org, RESOLVED - timedelta(days=2), hours=10, iteration_s=2.0, lines=150)
    _run(org, RESOLVED + timedelta(hours=1), hours=12, iteration_s=3.0, lines=250)

    ticket = ticket_verify(ticket, RESOLVED + timedelta(days=1))

    assert ticket.state == TicketState.REGRESSED
    assert -52 <= ticket.measured_gain_pct <= -48  # 1 - 3/2 = -50%: half as much again GPU time
    assert ticket.verification["interval_high_pct"] < -5


def test_the_same_speed_after_the_fix_is_no_gain(org):
    ticket = _ticket(org)
    _run(org, RESOLVED - timedelta(days=2), hours=10, iteration_s=2.0, lines=150)
    _run(org, RESOLVED + timedelta(hours=1), hours=12, iteration_s=2.02, lines=250)

    ticket = ticket_verify(ticket, RESOLVED + timedelta(days=1))

    assert ticket.state == TicketState.NO_GAIN
    assert ticket.verification["reason"] == ""
    assert abs(ticket.measured_gain_pct) < 3


def test_after_the_longest_wait_without_enough_data_the_ticket_ends_as_no_gain(org, settings):
    settings.PORTAL_TICKET_VERIFICATION = {**settings.PORTAL_TICKET_VERIFICATION, "max_days": 14}
    ticket = _ticket(org)
    _run(org, RESOLVED - timedelta(days=2), hours=10, iteration_s=2.0, lines=150)

    assert ticket_verify(ticket, RESOLVED + timedelta(days=13)).state == TicketState.VERIFYING
    ticket = ticket_verify(Ticket.objects.get(pk=ticket.pk), RESOLVED + timedelta(days=14))

    assert ticket.state == TicketState.NO_GAIN
    assert ticket.verification["reason"] == "timed_out"
    assert ticket.verification["outcome"] == "no_gain"
    assert {row["what"] for row in ticket.verification["shortfalls"]} == {"gpu_hours", "iterations"}
    assert ticket.measured_gain_pct is None


def test_odd_data_never_stops_the_run(org):
    """No jobs at all; zero GPU-hours; log lines with junk numbers; a ticket of no family."""
    empty = _ticket(org)
    odd = _ticket(org, pattern="odd-*")
    job = _run(org, RESOLVED - timedelta(days=1), hours=2, iteration_s=1.0, lines=0, name="odd-1")
    job.hours.update(allocated_gpu_s=0.0, busy_gpu_s=0.0, sm_active_busy_gpu_s=0.0)
    LogChunkFactory(
        source=org.source,
        job=job,
        text=(
            "elapsed time per iteration (ms): nan |\n"
            "elapsed time per iteration (ms): 0.0 |\n"
            "elapsed time per iteration (ms): " + "9" * 400 + " |\n"
            "[2026-13-45 99:99:99] consumed samples: 12 | 3.5it/s\n"
            "\n"
        ),
    )
    after = _run(org, RESOLVED + timedelta(hours=1), hours=1, iteration_s=1.0, lines=0, name="odd-2")
    after.hours.update(allocated_gpu_s=0.0)

    counts = tickets_verify(RESOLVED + timedelta(days=1))

    assert counts == {TicketState.VERIFYING: 2}
    for ticket in (empty, odd):
        stored = Ticket.objects.get(pk=ticket.pk)
        assert stored.verification["outcome"] == "verifying"
        assert stored.verification["gain_pct"] is None
        assert {row["what"] for row in stored.verification["shortfalls"]} >= {"gpu_hours"}
    before, after_window = ticket_windows(Ticket.objects.get(pk=odd.pk), RESOLVED + timedelta(days=1))
    assert before.window.gpu_hours == 0.0
    # Only the sane number is kept: 3.5 it/s, read as 0.29 s per iteration.
    assert [round(v, 4) for v in before.window.iteration_s] == [0.2857]
    assert after_window.window.work_units is None


def test_a_failing_ticket_is_logged_and_the_others_still_verified(org, monkeypatch, caplog):
    broken = _ticket(org, pattern="other-*")
    fine = _ticket(org)
    _run(org, RESOLVED - timedelta(days=2), hours=10, iteration_s=2.0, lines=150)
    _run(org, RESOLVED + timedelta(hours=1), hours=12, iteration_s=1.0, lines=250)
    from efficiency.services.tickets import verification

    real = verification.ticket_windows

    def windows(ticket, now=None):
        if ticket.pk == broken.pk:
            raise ValueError("corrupt row")
        return real(ticket, now)

    monkeypatch.setattr(verification, "ticket_windows", windows)
    counts = tickets_verify(RESOLVED + timedelta(days=1))
    assert counts == {"failed": 1, TicketState.VERIFIED_GAIN: 1}
    assert Ticket.objects.get(pk=fine.pk).state == TicketState.VERIFIED_GAIN
    assert Ticket.objects.get(pk=broken.pk).state == TicketState.VERIFYING
    assert "Verification of ticket" in caplog.text


def test_the_worker_task_runs_every_15_minutes_and_verifies(org, settings, monkeypatch):
    from django.utils import timezone

    from efficiency import tasks

    assert settings.CELERY_BEAT_SCHEDULE["tickets-verify"] == {
        "task": "efficiency.tasks.tickets_verify_task",
        "schedule": 900.0,
    }
    ticket = _ticket(org)
    _run(org, RESOLVED - timedelta(days=2), hours=10, iteration_s=2.0, lines=150)
    _run(org, RESOLVED + timedelta(hours=1), hours=12, iteration_s=1.0, lines=250)
    monkeypatch.setattr(timezone, "now", lambda: RESOLVED + timedelta(days=1))
    assert tasks.tickets_verify_task() == {TicketState.VERIFIED_GAIN: 1}
    assert Ticket.objects.get(pk=ticket.pk).state == TicketState.VERIFIED_GAIN
