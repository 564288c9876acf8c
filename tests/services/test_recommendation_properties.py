"""The recommendation workflow and engine as properties, on the database, through the real services.

- Any sequence of decisions (accept, reject, snooze, comment, and unknown ones; valid and invalid
  input; by any role) leaves a recommendation in the state its last state-changing decision says,
  never loses a decision row, and a refused decision writes nothing. Which decisions are refused
  is predicted independently of ``recommendation_actions``.
- Re-running the engine (full, or incremental) any number of times on unchanged data creates no
  row and changes no state; moving only the clock forward (full or incremental runs), with every
  job's data still inside every window the engine reads (the 7-day low-efficiency window is the
  shortest), keeps the same recommendations in the same states.
- A department head never sees, through the list, detail, queue or "What to fix" selectors, a
  recommendation of another department unless it was assigned to theirs (or, for a node, the node
  is their department's).
"""

from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from efficiency.choices import (
    Confidence,
    RecommendationAction,
    RecommendationState,
    RecommendationSubject,
    Role,
)
from efficiency.models import JobLogFacts, Recommendation, RecommendationDecision
from efficiency.selectors import recommendations as selectors
from efficiency.services.recommendations import (
    ACCEPT,
    COMMENT,
    REJECT,
    SNOOZE,
    RecommendationDecisionRefused,
    recommendation_decide,
    recommendations_refresh,
)
from tests.factories import JobFactory, JobHourFactory, LogChunkFactory, NodeFactory

SOCKET_LOG = (
    Path(__file__).resolve().parents[1] / "fixtures" / "recommendations" / "nccl-952-socket-channels.log"
).read_text()
# Noon in the portal's zone and in UTC alike far from midnight: "today" is the same for both.
T0 = datetime(2026, 11, 4, 4, 0, tzinfo=UTC)


def _settings(examples: int):
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@contextmanager
def rolled_back():
    """Each example starts from the fixture's world: its writes are undone afterwards."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


# --- 1. Decisions ------------------------------------------------------------------------------

STATE_OF_ACTION = {
    RecommendationAction.PROPOSED: RecommendationState.PROPOSED,
    RecommendationAction.REOPENED: RecommendationState.PROPOSED,
    RecommendationAction.ACCEPTED: RecommendationState.ACCEPTED,
    RecommendationAction.REJECTED: RecommendationState.REJECTED,
    RecommendationAction.SNOOZED: RecommendationState.SNOOZED,
    RecommendationAction.CLOSED: RecommendationState.CLOSED,
}
TEXTS = st.sampled_from(
    [None, "", "   ", "ok", "\tship it in v3\n", "x" * 2000, " " + "x" * 2000 + " ", "x" * 2001, "中文理由"]
)
UNTIL_DAYS = st.sampled_from([None, -3, 0, 1, 30, 366, 367, 2000])
decision_strategy = st.fixed_dictionaries(
    {
        "user": st.sampled_from(["admin", "committee", "head_a", "head_b", "no_role"]),
        "action": st.sampled_from([ACCEPT, REJECT, SNOOZE, COMMENT, "close", ""]),
        "text": TEXTS,
        "until_days": UNTIL_DAYS,
        "assignee": st.sampled_from([None, "dept_a", "dept_b"]),
    }
)


def _row(rec: Recommendation) -> dict:
    """Everything stored about a recommendation but the write stamp."""
    values = Recommendation.objects.filter(pk=rec.pk).values().get()
    values.pop("updated_at")
    return values


def _refused(rec: Recommendation, role: str, department: str | None, step: dict) -> bool:
    """Whether the workflow must refuse ``step``, from the rules as the docs state them."""
    action, state = step["action"], rec.state
    text = (step["text"] or "").strip()
    if role != "admin" and action in (ACCEPT, REJECT, SNOOZE):
        return True  # deciding is the platform admins'
    proposed, accepted, rejected, snoozed = (
        RecommendationState.PROPOSED,
        RecommendationState.ACCEPTED,
        RecommendationState.REJECTED,
        RecommendationState.SNOOZED,
    )
    if action == ACCEPT:
        if state not in (proposed, snoozed, rejected):
            return True
        return len(text) > 2000 or (step["assignee"] is None and department is None)
    if action == REJECT:
        if state not in (proposed, snoozed, accepted):
            return True
        return not text or len(text) > 2000
    if action == SNOOZE:
        if state not in (proposed, accepted):
            return True
        days = step["until_days"]
        return days is None or days <= 0 or days > 366 or len(text) > 2000
    if action == COMMENT:
        if role == "head_a":
            mine = "dept_a" in (department, rec_assignee_name(rec))
        elif role == "head_b":
            mine = "dept_b" in (department, rec_assignee_name(rec))
        else:
            mine = role in ("admin", "committee")
        return not mine or not text or len(text) > 2000
    return True  # not a decision


_ASSIGNEE_NAMES: dict[int, str] = {}


def rec_assignee_name(rec: Recommendation) -> str | None:
    return _ASSIGNEE_NAMES.get(rec.assignee_department_id) if rec.assignee_department_id else None


@pytest.fixture
def decision_world(org):
    _ASSIGNEE_NAMES.clear()
    _ASSIGNEE_NAMES.update({org.dept_a.pk: "dept_a", org.dept_b.pk: "dept_b"})
    return org


def _recommendation(org, *, department: str | None, state: str) -> Recommendation:
    dept = getattr(org, department) if department else None
    rec = Recommendation.objects.create(
        rule="kernels.stock-framework",
        subject_kind=RecommendationSubject.JOB_FAMILY,
        subject_key=f"{dept.pk if dept else '-'}/alice/train-*",
        department=dept,
        user_name="alice",
        name_pattern="train-*",
        observed="pytorch/pytorch:2.3.1",
        ideal="accel",
        change="image: accel",
        confidence=Confidence.HIGH,
        fingerprint="kernels.stock-framework|pytorch/pytorch:2.3.1",
        first_seen=T0 - timedelta(days=2),
        last_seen=T0 - timedelta(days=1),
        gain_gpu_h_week=10.0,
        state=state,
        # An accepted one always has the department that makes the change.
        assignee_department=(dept or org.dept_a) if state == RecommendationState.ACCEPTED else None,
        snoozed_until=(T0 + timedelta(days=5)).date() if state == RecommendationState.SNOOZED else None,
        closed_at=T0 - timedelta(hours=1) if state == RecommendationState.CLOSED else None,
    )
    at = T0 - timedelta(days=2)
    RecommendationDecision.objects.create(recommendation=rec, action=RecommendationAction.PROPOSED, at=at)
    if state != RecommendationState.PROPOSED:
        action = {
            RecommendationState.ACCEPTED: RecommendationAction.ACCEPTED,
            RecommendationState.REJECTED: RecommendationAction.REJECTED,
            RecommendationState.SNOOZED: RecommendationAction.SNOOZED,
            RecommendationState.CLOSED: RecommendationAction.CLOSED,
        }[state]
        RecommendationDecision.objects.create(
            recommendation=rec,
            action=action,
            at=at + timedelta(hours=1),
            assignee_department=rec.assignee_department,
            snoozed_until=rec.snoozed_until,
        )
    return rec


@_settings(40)
@given(
    department=st.sampled_from(["dept_a", "dept_b", None]),
    start=st.sampled_from(list(RecommendationState.values)),
    steps=st.lists(decision_strategy, min_size=1, max_size=10),
)
def test_any_decision_sequence_leaves_the_state_of_the_last_decision_and_refusals_write_nothing(
    decision_world, department, start, steps
):
    org = decision_world
    with rolled_back():
        rec = _recommendation(org, department=department, state=start)
        today = timezone.localdate(T0)
        for index, step in enumerate(steps):
            now = T0 + timedelta(minutes=index + 1)
            rec.refresh_from_db()
            before_row = _row(rec)
            before_ids = list(rec.decisions.order_by("at", "pk").values_list("pk", flat=True))
            before_total = RecommendationDecision.objects.count()
            expect_refused = _refused(rec, step["user"], department, step)
            until = None if step["until_days"] is None else today + timedelta(days=step["until_days"])
            refusal = None
            try:
                decision = recommendation_decide(
                    rec,
                    user=getattr(org, step["user"]),
                    action=step["action"],
                    text=step["text"],
                    until=until,
                    assignee_department=getattr(org, step["assignee"]) if step["assignee"] else None,
                    now=now,
                )
            except RecommendationDecisionRefused as refused:
                refusal = str(refused)
            if refusal is not None:
                assert expect_refused, (step, rec.state, refusal)
                assert refusal  # a reason for the page
                assert _row(rec) == before_row
                assert RecommendationDecision.objects.count() == before_total
                continue
            assert not expect_refused, (step, before_row["state"])
            after_ids = list(rec.decisions.order_by("at", "pk").values_list("pk", flat=True))
            assert after_ids == [*before_ids, decision.pk]  # appended, nothing lost or rewritten
            assert RecommendationDecision.objects.count() == before_total + 1
            assert decision.user == getattr(org, step["user"])
            assert decision.text == (step["text"] or "").strip()
            if step["action"] == COMMENT:
                assert _row(rec) == before_row  # a comment changes nothing but the history

        rec.refresh_from_db()
        history = list(rec.decisions.order_by("at", "pk"))
        last = [d for d in history if d.action in STATE_OF_ACTION][-1]
        assert rec.state == STATE_OF_ACTION[last.action]
        if rec.state == RecommendationState.ACCEPTED:
            assert rec.assignee_department_id == last.assignee_department_id is not None
        if rec.state == RecommendationState.SNOOZED:
            assert rec.snoozed_until == last.snoozed_until
        else:
            assert rec.snoozed_until is None
        if last.user is not None:  # a decision by a person: its text is the note
            assert rec.decision_note == last.text
        if any(d.action == RecommendationAction.REJECTED and d.user for d in history):
            assert rec.rejected_fingerprint == rec.fingerprint


# --- 2. The engine is idempotent ---------------------------------------------------------------

job_strategy = st.fixed_dictionaries(
    {
        "department": st.sampled_from(["a", "b"]),
        "user": st.sampled_from(["alice", "bob"]),
        "name": st.sampled_from(["bev-exp12", "bev-exp31", "occ-pretrain", "lidar-seg"]),
        "setup": st.sampled_from(["socket", "stock", "accel", "none"]),
        "busy": st.sampled_from([0.0, 0.1, 0.6]),
        "hours": st.integers(1, 4),
        "ended_hours_ago": st.sampled_from([None, 0, 1]),
    }
)
review_strategy = st.lists(st.sampled_from([None, ACCEPT, REJECT, SNOOZE]), max_size=6)


@pytest.fixture
def engine_world(org):
    org.node_a2 = NodeFactory(hostname="gpu-a02", cluster=org.cluster, owner_department=org.dept_a)
    org.node_b2 = NodeFactory(hostname="gpu-b02", cluster=org.cluster, owner_department=org.dept_b)
    return org


def _jobs_create(org, drawn: list[dict], now: datetime) -> None:
    for index, spec in enumerate(drawn):
        department = org.dept_a if spec["department"] == "a" else org.dept_b
        nodes = [org.node_a, org.node_a2] if spec["department"] == "a" else [org.node_b, org.node_b2]
        if spec["setup"] != "socket":
            nodes = nodes[:1]
        config = {
            "socket": {"env": {"NCCL_IB_DISABLE": "1"}},
            "stock": {"image": "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime"},
            "accel": {"image": "registry.internal/ai-platform/accel-train:24.05"},
            "none": {},
        }[spec["setup"]]
        started = now - timedelta(hours=spec["hours"] + 1)
        ended = None if spec["ended_hours_ago"] is None else now - timedelta(hours=spec["ended_hours_ago"])
        job = JobFactory(
            cluster=org.cluster,
            department=department,
            user_name=spec["user"],
            name=spec["name"],
            external_id=str(50_000 + index),
            gpu_count=8 * len(nodes),
            node_count=len(nodes),
            config=config,
            submitted_at=started - timedelta(minutes=5),
            started_at=started,
            ended_at=ended,
            state="running" if ended is None else "completed",
        )
        job.nodes.add(*nodes)
        for hour in range(spec["hours"]):
            JobHourFactory(
                job=job,
                hour=(started + timedelta(hours=hour)).replace(minute=0, second=0, microsecond=0),
                busy_gpu_s=spec["busy"] * job.gpu_count * 3600.0,
            )
        if spec["setup"] == "socket":
            LogChunkFactory(
                source=org.source,
                job=job,
                job_external_id=job.external_id,
                stream=f"{job.external_id}/rank-0.log",
                text="step 1\n" + SOCKET_LOG,
                received_at=started,
                start_offset=0,
            )


def _snapshot(*, ignore: tuple[str, ...] = ()) -> dict:
    rows = {}
    for rec in Recommendation.objects.order_by("pk"):
        values = _row(rec)
        for name in ignore:
            values.pop(name)
        values["jobs"] = sorted(rec.jobs.values_list("pk", flat=True))
        rows[rec.pk] = values
    return rows


def _counts() -> tuple[int, ...]:
    return (
        Recommendation.objects.count(),
        RecommendationDecision.objects.count(),
        Recommendation.jobs.through.objects.count(),
        JobLogFacts.objects.count(),
    )


@_settings(12)
@given(
    drawn=st.lists(job_strategy, min_size=1, max_size=6),
    reviews=review_strategy,
    reruns=st.lists(st.booleans(), min_size=1, max_size=3),
    shifts=st.lists(st.tuples(st.integers(1, 6 * 24 * 60 - 6 * 60), st.booleans()), min_size=1, max_size=3),
)
def test_the_engine_on_unchanged_data_changes_nothing_and_time_alone_keeps_the_recommendations(
    engine_world, drawn, reviews, reruns, shifts
):
    org = engine_world
    now = timezone.now().replace(microsecond=0)
    with rolled_back():
        _jobs_create(org, drawn, now)
        recommendations_refresh(now=now, full=True)
        # Some decisions, as admins take them (a snooze beyond every clock shift below).
        for rec, action in zip(Recommendation.objects.order_by("pk"), reviews, strict=False):
            if action is not None and rec.state == RecommendationState.PROPOSED:
                recommendation_decide(
                    rec,
                    user=org.admin,
                    action=action,
                    text="because",
                    until=timezone.localdate(now) + timedelta(days=30),
                    now=now,
                )
        first, counts = _snapshot(), _counts()

        for full in reruns:  # the same clock, full or incremental: nothing at all changes
            summary = recommendations_refresh(now=now, full=full)
            assert (summary.created, summary.reopened, summary.closed) == (0, 0, 0)
            assert _counts() == counts
            assert _snapshot() == first

        # Only the clock moves, full or incremental runs (every job's hours stay inside the 7- and
        # 14-day windows): the same recommendations, in the same states, from the same evidence.
        stable = ("last_seen",)  # a running job is seen "now"
        expected = {pk: {k: v for k, v in row.items() if k not in stable} for pk, row in first.items()}
        for minutes, full in sorted(shifts):
            summary = recommendations_refresh(now=now + timedelta(minutes=minutes), full=full)
            assert (summary.created, summary.reopened, summary.closed) == (0, 0, 0), minutes
            assert _counts() == counts
            assert _snapshot(ignore=stable) == expected, minutes


# --- 3. Scoping --------------------------------------------------------------------------------

rec_strategy = st.fixed_dictionaries(
    {
        "kind": st.sampled_from([RecommendationSubject.JOB_FAMILY, RecommendationSubject.NODE]),
        "department": st.sampled_from(["a", "b", None]),
        "assignee": st.sampled_from(["a", "b", None]),
        "state": st.sampled_from(list(RecommendationState.values)),
        "gain": st.sampled_from([0.0, 3.5]),
    }
)


@_settings(25)
@given(drawn=st.lists(rec_strategy, min_size=1, max_size=8))
def test_a_head_sees_another_departments_recommendation_only_when_assigned_to_theirs(org, drawn):
    departments = {"a": org.dept_a, "b": org.dept_b, None: None}
    nodes = {"a": org.node_a, "b": org.node_b, None: None}
    with rolled_back():
        for index, spec in enumerate(drawn):
            node = nodes[spec["department"]] if spec["kind"] == RecommendationSubject.NODE else None
            Recommendation.objects.create(
                rule="nodes.idle" if node else "kernels.stock-framework",
                subject_kind=spec["kind"],
                subject_key=f"subject-{index}",
                # The engine gives a node's recommendation the node's owner as its department.
                department=departments[spec["department"]],
                node=node,
                assignee_department=departments[spec["assignee"]],
                state=spec["state"],
                observed="o",
                ideal="i",
                change="c",
                confidence=Confidence.LOW,
                fingerprint=f"f{index}",
                first_seen=T0,
                last_seen=T0,
                gain_gpu_h_week=spec["gain"],
            )
        everything = set(Recommendation.objects.values_list("pk", flat=True))
        for head, own, other in ((org.head_a, org.dept_a, org.dept_b), (org.head_b, org.dept_b, org.dept_a)):
            allowed = {
                rec.pk
                for rec in Recommendation.objects.all()
                if own.pk in (rec.department_id, rec.assignee_department_id)
            }
            listed = set(selectors.recommendation_list(user=head).values_list("pk", flat=True))
            assert listed == allowed
            for pk in everything:
                if pk in allowed:
                    assert selectors.recommendation_get(user=head, pk=pk).pk == pk
                else:
                    with pytest.raises(Recommendation.DoesNotExist):
                        selectors.recommendation_get(user=head, pk=pk)
            queued = set(selectors.recommendation_queue(user=head).values_list("pk", flat=True))
            assert queued <= allowed
            for department in (own, other):
                fix = set(
                    selectors.department_open_recommendations(
                        user=head, department_id=department.pk
                    ).values_list("pk", flat=True)
                )
                assert fix <= allowed
                for rec in Recommendation.objects.filter(pk__in=fix):
                    assert rec.state in RecommendationState.open()
                    assert rec.gain_gpu_h_week > 0
                    assert department.pk in (rec.department_id, rec.assignee_department_id)
                    # Of the other department's list, only what is the head's own department's
                    # or was assigned to it.
                    if department == other:
                        assert own.pk in (rec.department_id, rec.assignee_department_id)
            summary = selectors.what_to_fix_summary(user=head, department_ids=[own.pk, other.pk])
            assert summary[other.pk][0] == len(
                [
                    rec
                    for rec in Recommendation.objects.filter(pk__in=allowed)
                    if rec.state in RecommendationState.open()
                    and rec.gain_gpu_h_week > 0
                    and other.pk in (rec.department_id, rec.assignee_department_id)
                ]
            )
        # The committee and admins see everything; a user without a role nothing.
        committee = selectors.recommendation_list(user=org.committee)
        assert set(committee.values_list("pk", flat=True)) == everything
        assert not selectors.recommendation_list(user=org.no_role).exists()


def test_role_fixture_matches_the_roles_the_property_assumes(org):
    # The oracle above reads roles from the fixture's names; make that assumption explicit.
    from efficiency.scoping import user_role

    assert user_role(org.admin) == Role.PLATFORM_ADMIN
    assert user_role(org.committee) == Role.COMMITTEE
    assert user_role(org.head_a) == Role.DEPARTMENT_HEAD
    assert user_role(org.no_role) is None
