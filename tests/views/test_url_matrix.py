"""Every URL, as every role: who gets in, who is sent to log in, who is told it does not exist.

A department head must never reach another department's objects (404, so that the portal does
not even confirm they exist). A new URL that is not in ``MATRIX`` fails
``test_every_url_is_in_the_matrix``: decide who may see it before it ships.
"""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

ROLES = ["anonymous", "no_role", "head_a", "head_b", "committee", "admin"]

PAGE = {"anonymous": 302, "no_role": 200, "head_a": 200, "head_b": 200, "committee": 200, "admin": 200}
API = {**PAGE, "anonymous": 401}
A_ONLY = {"anonymous": 302, "no_role": 404, "head_a": 200, "head_b": 404, "committee": 200, "admin": 200}
API_A_ONLY = {**A_ONLY, "anonymous": 401}
PUBLIC = dict.fromkeys(ROLES, 200)
ADMIN_ONLY = {**dict.fromkeys(ROLES, 302), "admin": 200}
COMMITTEE_PAGE = {**dict.fromkeys(ROLES, 403), "anonymous": 302, "committee": 200, "admin": 200}
ADMIN_PAGE = {**dict.fromkeys(ROLES, 403), "anonymous": 302, "admin": 200}
ADMIN_API = {**ADMIN_PAGE, "anonymous": 401}

VIEWER_PAGE = {**PAGE, "no_role": 403}
COMMITTEE_ACTION = {**dict.fromkeys(ROLES, 403), "anonymous": 302, "committee": 302}
HEAD_FORM = {**dict.fromkeys(ROLES, 403), "anonymous": 302, "head_a": 400, "head_b": 400}
VIEWER_API = {**VIEWER_PAGE, "anonymous": 401}
COMMITTEE_API = {**COMMITTEE_PAGE, "anonymous": 401}
COMMITTEE_API_ACTION = {**dict.fromkeys(ROLES, 403), "anonymous": 401, "committee": 200}
HEAD_API_FORM = {**HEAD_FORM, "anonymous": 401}
MEETING_ACTION = {**dict.fromkeys(ROLES, 403), "anonymous": 302, "committee": 302, "admin": 302}
MEETING_FORM = {**MEETING_ACTION, "committee": 400, "admin": 400}


def _proposal(o):
    """The org's proposed quota cycle (made on first use; the fixed partition is in force)."""
    from efficiency.models import QuotaCycle
    from efficiency.services.quotas import quota_proposal_create

    return QuotaCycle.objects.filter(status="proposed").first() or quota_proposal_create(cluster=o.cluster)


def _approved(o):
    return _proposal(o).cluster.quota_cycles.get(status="approved")


def _objection(o):
    from efficiency.services.quotas import quota_objection_file

    return quota_objection_file(
        cycle=_proposal(o), department=o.dept_a, author=o.head_a, text="Too few GPUs."
    )


def _incident(o):
    """An incident of department A's job on A's node."""
    from django.utils import timezone

    from efficiency.models import Incident

    now = timezone.now()
    return Incident.objects.filter(job=o.job_a).first() or Incident.objects.create(
        cluster=o.cluster, job=o.job_a, department=o.dept_a, node=o.node_a, category="hardware_gpu",
        severity="critical", code="79", root_signature_id="xid-79", occurred_at=now, detected_at=now,
    )  # fmt: skip


def _signal(o):
    from efficiency.models import FaultSignal

    incident = _incident(o)
    return FaultSignal.objects.filter(incident=incident).first() or FaultSignal.objects.create(
        cluster=o.cluster, evidence_key="test:1", source="log", signature_id="xid-79",
        category="hardware_gpu", severity="critical", job=o.job_a, department=o.dept_a, node=o.node_a,
        occurred_at=incident.occurred_at, detected_at=incident.detected_at,
        message="NVRM: Xid (PCI:0000:18:00): 79", incident=incident,
    )  # fmt: skip


def _recommendation(o):
    """A proposed recommendation on a job family of department A."""
    from efficiency.models import Recommendation
    from tests.factories import RecommendationFactory

    return Recommendation.objects.filter(department=o.dept_a).first() or RecommendationFactory(
        cluster=o.cluster, department=o.dept_a
    )


ADMIN_ACTION = {**dict.fromkeys(ROLES, 403), "anonymous": 302, "admin": 302}
A_ONLY_VIEWER = {**A_ONLY, "no_role": 403}
API_A_ONLY_VIEWER = {**API_A_ONLY, "no_role": 403}
API_VIEWER = {**API, "no_role": 403}
API_ADMIN_ACTION = {**dict.fromkeys(ROLES, 403), "anonymous": 401, "admin": 200}


# url name -> (method, path built from the org fixture, expected status per role)
MATRIX = {
    "efficiency:home": ("get", lambda o: "/", PAGE),
    "efficiency:usage-overview": ("get", lambda o: "/usage/", COMMITTEE_PAGE),
    "efficiency:department-list": ("get", lambda o: "/departments/", PAGE),
    "efficiency:department-detail": ("get", lambda o: f"/departments/{o.dept_a.code}/", A_ONLY),
    "efficiency:department-heatmap": ("get", lambda o: f"/departments/{o.dept_a.code}/heatmap/", A_ONLY),
    "efficiency:department-jobs": ("get", lambda o: f"/departments/{o.dept_a.code}/jobs/", A_ONLY),
    "efficiency:node-list": ("get", lambda o: "/nodes/", PAGE),
    "efficiency:node-detail": ("get", lambda o: f"/nodes/{o.node_a.pk}/", A_ONLY),
    "efficiency:job-list": ("get", lambda o: "/jobs/", PAGE),
    "efficiency:job-detail": ("get", lambda o: f"/jobs/{o.job_a.pk}/", A_ONLY),
    "login": ("get", lambda o: "/login/", {**PUBLIC, **dict.fromkeys(ROLES[1:], 302)}),
    "logout": ("post", lambda o: "/logout/", dict.fromkeys(ROLES, 302)),
    "set_language": ("post", lambda o: "/i18n/setlang/", dict.fromkeys(ROLES, 302)),
    "healthz": ("get", lambda o: "/healthz", {}),  # 200 or 503 by health; asserted below
    "api:api-root": ("get", lambda o: "/api/v1/", API),
    "api:schema": ("get", lambda o: "/api/v1/schema/", API),
    "api:docs": ("get", lambda o: "/api/v1/docs/", API),
    "api:department-list": ("get", lambda o: "/api/v1/departments/", API),
    "api:department-detail": ("get", lambda o: f"/api/v1/departments/{o.dept_a.code}/", API_A_ONLY),
    "api:node-list": ("get", lambda o: "/api/v1/nodes/", API),
    "api:node-detail": ("get", lambda o: f"/api/v1/nodes/{o.node_a.pk}/", API_A_ONLY),
    "api:job-list": ("get", lambda o: "/api/v1/jobs/", API),
    "api:job-detail": ("get", lambda o: f"/api/v1/jobs/{o.job_a.pk}/", API_A_ONLY),
    "efficiency:source-list": ("get", lambda o: "/sources/", ADMIN_PAGE),
    "efficiency:source-detail": ("get", lambda o: f"/sources/{o.source.pk}/", ADMIN_PAGE),
    # A push source is not collected: refused with a message on the sources page (a redirect).
    "efficiency:source-collect": ("post", lambda o: f"/sources/{o.source.pk}/collect/", ADMIN_ACTION),
    "api:usage-summary": ("get", lambda o: "/api/v1/usage/?range=24h", API),
    "api:idle-allocations": ("get", lambda o: "/api/v1/usage/idle-allocations/", API),
    # The client posts an empty multipart form: admitted, and refused as not NDJSON (no good line).
    "api:log-push": ("post", lambda o: f"/api/v1/sources/{o.source.pk}/logs/", {**ADMIN_API, "admin": 400}),
    "admin:index": ("get", lambda o: "/admin/", ADMIN_ONLY),
    "efficiency:quota-overview": ("get", lambda o: "/quotas/", VIEWER_PAGE),
    "efficiency:fault-overview": ("get", lambda o: "/faults/", VIEWER_PAGE),
    "efficiency:incident-detail": ("get", lambda o: f"/faults/incidents/{_incident(o).pk}/", A_ONLY_VIEWER),
    "efficiency:incident-report": (
        "get",
        lambda o: f"/faults/incidents/{_incident(o).pk}/report/",
        A_ONLY_VIEWER,
    ),
    # Closing without a reason is refused with a message on the incident page (a redirect).
    "efficiency:incident-action": (
        "post",
        lambda o: f"/faults/incidents/{_incident(o).pk}/close/",
        ADMIN_ACTION,
    ),
    "efficiency:node-return-to-service": (
        "post",
        lambda o: f"/faults/nodes/{o.node_a.pk}/return-to-service/",
        ADMIN_ACTION,
    ),
    "api:incident-list": ("get", lambda o: "/api/v1/incidents/", API_VIEWER),
    "api:incident-detail": ("get", lambda o: f"/api/v1/incidents/{_incident(o).pk}/", API_A_ONLY_VIEWER),
    "api:incident-isolate": (
        "post",
        lambda o: f"/api/v1/incidents/{_incident(o).pk}/isolate/",
        API_ADMIN_ACTION,
    ),
    "api:incident-restart": (
        "post",
        lambda o: f"/api/v1/incidents/{_incident(o).pk}/restart/",
        API_ADMIN_ACTION,
    ),
    # Without a reason a close is a 400; the node is in service, so returning it is a 409.
    "api:incident-close": (
        "post",
        lambda o: f"/api/v1/incidents/{_incident(o).pk}/close/",
        {**API_ADMIN_ACTION, "admin": 400},
    ),
    "api:incident-return-to-service": (
        "post",
        lambda o: f"/api/v1/incidents/{_incident(o).pk}/return-to-service/",
        {**API_ADMIN_ACTION, "admin": 409},
    ),
    "api:fault-signal-list": ("get", lambda o: "/api/v1/fault-signals/", API_VIEWER),
    "api:fault-signal-detail": (
        "get",
        lambda o: f"/api/v1/fault-signals/{_signal(o).pk}/",
        API_A_ONLY_VIEWER,
    ),
    "efficiency:quota-cycle-list": ("get", lambda o: "/quotas/cycles/", VIEWER_PAGE),
    "efficiency:quota-cycle-detail": ("get", lambda o: f"/quotas/cycles/{_proposal(o).pk}/", VIEWER_PAGE),
    # An empty edit form is a 400 naming the missing numbers; an empty objection likewise.
    "efficiency:quota-cycle-edit": (
        "post",
        lambda o: f"/quotas/cycles/{_proposal(o).pk}/edit/",
        {**COMMITTEE_ACTION, "committee": 400},
    ),
    # Approval needs a comment: an empty form is a 400 naming it.
    "efficiency:quota-cycle-approve": (
        "post",
        lambda o: f"/quotas/cycles/{_proposal(o).pk}/approve/",
        {**COMMITTEE_ACTION, "committee": 400},
    ),
    "efficiency:quota-objection-create": (
        "post",
        lambda o: f"/quotas/cycles/{_proposal(o).pk}/objections/",
        HEAD_FORM,
    ),
    "efficiency:quota-objection-answer": (
        "post",
        lambda o: f"/quotas/objections/{_objection(o).pk}/answer/",
        COMMITTEE_ACTION,
    ),
    "efficiency:quota-propose": ("post", lambda o: "/quotas/propose/", COMMITTEE_ACTION),
    "efficiency:quota-backtest": (
        "get",
        lambda o: f"/quotas/cycles/{_proposal(o).pk}/backtest/",
        COMMITTEE_PAGE,
    ),
    "efficiency:quota-export": (
        "get",
        lambda o: f"/quotas/cycles/{_approved(o).pk}/export/kueue/",
        COMMITTEE_PAGE,
    ),
    "api:quota-cycle-list": ("get", lambda o: "/api/v1/quota-cycles/", VIEWER_API),
    "api:quota-cycle-detail": ("get", lambda o: f"/api/v1/quota-cycles/{_proposal(o).pk}/", VIEWER_API),
    # Approval needs a comment: an empty body is a 400 naming it.
    "api:quota-cycle-approve": (
        "post",
        lambda o: f"/api/v1/quota-cycles/{_proposal(o).pk}/approve/",
        {**COMMITTEE_API_ACTION, "committee": 400},
    ),
    # POST runs a backtest (committee only); reading one is for committee and admins.
    "api:quota-cycle-backtest": (
        "post",
        lambda o: f"/api/v1/quota-cycles/{_proposal(o).pk}/backtest/",
        {**COMMITTEE_API_ACTION, "committee": 201},
    ),
    "api:quota-cycle-export": (
        "get",
        lambda o: f"/api/v1/quota-cycles/{_approved(o).pk}/export/?format=kueue",
        COMMITTEE_API,
    ),
    # Only department heads object; an empty objection is a 400 naming the missing fields.
    "api:quota-cycle-objections": (
        "post",
        lambda o: f"/api/v1/quota-cycles/{_proposal(o).pk}/objections/",
        HEAD_API_FORM,
    ),
    "api:quota-cycle-propose": (
        "post",
        lambda o: "/api/v1/quota-cycles/propose/",
        {**COMMITTEE_API_ACTION, "committee": 201},
    ),
    "api:quota-detail": (
        "get",
        lambda o: f"/api/v1/quotas/{_proposal(o).quotas.get(department=o.dept_a).pk}/",
        {**API_A_ONLY, "no_role": 403},
    ),
    # An empty answer is a 400.
    "api:quota-objection-answer": (
        "post",
        lambda o: f"/api/v1/quota-objections/{_objection(o).pk}/answer/",
        {**COMMITTEE_API_ACTION, "committee": 400},
    ),
    # Heads get an empty list: capacity alerts compare every department.
    "api:capacity-alert-list": ("get", lambda o: "/api/v1/capacity-alerts/", VIEWER_API),
    "api:quota-overview": ("get", lambda o: "/api/v1/quota-overview/", VIEWER_API),
    "efficiency:recommendation-list": ("get", lambda o: "/recommendations/", VIEWER_PAGE),
    "efficiency:notification-settings": ("get", lambda o: "/notifications/", VIEWER_PAGE),
    "efficiency:recommendation-queue": ("get", lambda o: "/recommendations/queue/", ADMIN_PAGE),
    "efficiency:recommendation-detail": (
        "get",
        lambda o: f"/recommendations/{_recommendation(o).pk}/",
        A_ONLY_VIEWER,
    ),
    # An empty comment is refused with a message on the recommendation's page (a redirect).
    "efficiency:recommendation-decide": (
        "post",
        lambda o: f"/recommendations/{_recommendation(o).pk}/comment/",
        {**A_ONLY_VIEWER, "head_a": 302, "committee": 302, "admin": 302},
    ),
    "efficiency:department-what-to-fix": (
        "get",
        lambda o: f"/departments/{o.dept_a.code}/what-to-fix/",
        A_ONLY_VIEWER,
    ),
    "api:recommendation-list": ("get", lambda o: "/api/v1/recommendations/", API_VIEWER),
    "api:recommendation-detail": (
        "get",
        lambda o: f"/api/v1/recommendations/{_recommendation(o).pk}/",
        API_A_ONLY_VIEWER,
    ),
    # The client posts an empty form: the API takes JSON only (415). Roles are checked first.
    "api:recommendation-accept": (
        "post",
        lambda o: f"/api/v1/recommendations/{_recommendation(o).pk}/accept/",
        {**API_ADMIN_ACTION, "admin": 415},
    ),
    "api:recommendation-reject": (
        "post",
        lambda o: f"/api/v1/recommendations/{_recommendation(o).pk}/reject/",
        {**API_ADMIN_ACTION, "admin": 415},
    ),
    "api:recommendation-snooze": (
        "post",
        lambda o: f"/api/v1/recommendations/{_recommendation(o).pk}/snooze/",
        {**API_ADMIN_ACTION, "admin": 415},
    ),
    # Heads of other departments do not see it (404).
    "api:recommendation-comment": (
        "post",
        lambda o: f"/api/v1/recommendations/{_recommendation(o).pk}/comment/",
        {**API_A_ONLY_VIEWER, "head_a": 415, "committee": 415, "admin": 415},
    ),
    "api:ticket-list": ("get", lambda o: "/api/v1/tickets/", API_VIEWER),
    "api:ticket-detail": ("get", lambda o: f"/api/v1/tickets/{_ticket(o).pk}/", API_A_ONLY_VIEWER),
    "api:ticket-comments": ("get", lambda o: f"/api/v1/tickets/{_ticket(o).pk}/comments/", API_A_ONLY_VIEWER),
    "api:ticket-history": ("get", lambda o: f"/api/v1/tickets/{_ticket(o).pk}/history/", API_A_ONLY_VIEWER),
    # The client posts an empty form: the API takes JSON only (415), after the role and the scope.
    "api:ticket-transition": (
        "post",
        lambda o: f"/api/v1/tickets/{_ticket(o).pk}/transition/",
        {**API_A_ONLY_VIEWER, "head_a": 415, "committee": 415, "admin": 415},
    ),
    "efficiency:ticket-list": ("get", lambda o: "/tickets/", VIEWER_PAGE),
    "efficiency:ticket-mine": ("get", lambda o: "/tickets/mine/", VIEWER_PAGE),
    # An empty form is a 400 naming the missing fields.
    "efficiency:ticket-create": (
        "post",
        lambda o: "/tickets/new/",
        {**VIEWER_PAGE, **dict.fromkeys(ROLES[2:], 400)},
    ),
    "efficiency:ticket-detail": ("get", lambda o: f"/tickets/{_ticket(o).pk}/", A_ONLY_VIEWER),
    # An empty edit form is a 400 (a head's: no assignee is a change to nobody, allowed: a redirect).
    "efficiency:ticket-edit": (
        "post",
        lambda o: f"/tickets/{_ticket(o).pk}/edit/",
        {**A_ONLY_VIEWER, "head_a": 302, "committee": 400, "admin": 400},
    ),
    # An empty comment is a 400.
    "efficiency:ticket-comment": (
        "post",
        lambda o: f"/tickets/{_ticket(o).pk}/comment/",
        {**A_ONLY_VIEWER, "head_a": 400, "committee": 400, "admin": 400},
    ),
    # Resolving an open ticket is not a legal move: a 400 with the moves that are.
    "efficiency:ticket-move": (
        "post",
        lambda o: f"/tickets/{_ticket(o).pk}/move/resolve/",
        {**A_ONLY_VIEWER, "head_a": 400, "committee": 400, "admin": 400},
    ),
    # Committee meetings: committee members and platform admins only; an empty form is a 400.
    "efficiency:meeting-create": ("post", lambda o: "/committee/meetings/new/", MEETING_FORM),
    "efficiency:meeting-detail": ("get", lambda o: f"/committee/meetings/{_meeting(o).pk}/", COMMITTEE_PAGE),
    "efficiency:meeting-decide": (
        "post",
        lambda o: f"/committee/meetings/{_meeting(o).pk}/decide/",
        MEETING_FORM,
    ),
    "efficiency:meeting-action-create": (
        "post",
        lambda o: f"/committee/meetings/{_meeting(o).pk}/actions/",
        MEETING_FORM,
    ),
    "efficiency:meeting-hold": (
        "post",
        lambda o: f"/committee/meetings/{_meeting(o).pk}/hold/",
        MEETING_ACTION,
    ),
    # Empty minutes are minutes too: saved (nothing changes), back to the meeting.
    "efficiency:meeting-minutes": (
        "post",
        lambda o: f"/committee/meetings/{_meeting(o).pk}/minutes/",
        MEETING_ACTION,
    ),
    # The first meeting has no previous minutes to approve.
    "efficiency:meeting-approve-minutes": (
        "post",
        lambda o: f"/committee/meetings/{_meeting(o).pk}/approve-minutes/",
        MEETING_FORM,
    ),
    "efficiency:action-close": (
        "post",
        lambda o: f"/committee/actions/{_committee_action(o).pk}/close/",
        MEETING_FORM,
    ),
    "efficiency:committee-audit": ("get", lambda o: "/committee/audit/", COMMITTEE_PAGE),
    # Review packs: a head opens any pack, as their department's copy.
    "efficiency:committee-home": ("get", lambda o: "/committee/", VIEWER_PAGE),
    "efficiency:pack-detail": ("get", lambda o: f"/committee/packs/{_pack(o).pk}/", VIEWER_PAGE),
    "efficiency:pack-present": ("get", lambda o: f"/committee/packs/{_pack(o).pk}/present/", VIEWER_PAGE),
    "efficiency:pack-print": ("get", lambda o: f"/committee/packs/{_pack(o).pk}/print/", VIEWER_PAGE),
    # Generation is queued (or refused with a message): a redirect to the committee's page.
    "efficiency:pack-generate": (
        "post",
        lambda o: "/committee/packs/generate/",
        {**COMMITTEE_ACTION, "admin": 302},
    ),
    # A correction without a reason is refused with a message on the pack page (a redirect).
    "efficiency:pack-correct": (
        "post",
        lambda o: f"/committee/packs/{_pack(o).pk}/correct/",
        {**COMMITTEE_ACTION, "admin": 302},
    ),
    # A head downloads their copy of any pack; no_role is refused.
    "efficiency:pack-pdf": ("get", lambda o: f"/committee/packs/{_pack(o).pk}/pdf/", VIEWER_PAGE),
    "efficiency:pack-csv": ("get", lambda o: f"/committee/packs/{_pack(o).pk}/csv/", VIEWER_PAGE),
    "efficiency:rate-card-list": ("get", lambda o: "/committee/rate-cards/", COMMITTEE_PAGE),
}


def _pack(o):
    """A sealed review pack of both departments."""
    from django.utils import timezone

    from efficiency.analysis.committee.seal import seal
    from efficiency.models import ReviewPack
    from tests.views.committee_content import pack_content

    existing = ReviewPack.objects.first()
    if existing:
        return existing
    content = pack_content([(o.dept_a.code, o.dept_a.name, 8), (o.dept_b.code, o.dept_b.name, 8)])
    text, digest = seal(content)
    now = timezone.now()
    return ReviewPack.objects.create(
        cluster=o.cluster, period_start=now, period_end=now, definitions_version="2026-12.1",
        time_zone="Asia/Shanghai", content_json=text, content_hash=digest, generated_at=now,
    )  # fmt: skip
    """A sealed review pack of the org's two departments."""
    from efficiency.models import ReviewPack
    from tests.services.committee_sample import sample_content, store_pack

    return ReviewPack.objects.first() or store_pack(
        sample_content([(o.dept_a.code, o.dept_a.name), (o.dept_b.code, o.dept_b.name)], hours=4),
        cluster=o.cluster,
    )


def _ticket(o):
    """An open ticket of department A."""
    from efficiency.models import Ticket
    from efficiency.services.tickets import ticket_create

    return Ticket.objects.filter(department=o.dept_a).first() or ticket_create(
        user=o.admin, title="Fix NCCL", department=o.dept_a, severity="medium"
    )


def _meeting(o):
    """A planned committee meeting of the org's cluster, run from a small sealed pack."""
    from datetime import timedelta

    from django.utils import timezone

    from efficiency.models import ReviewMeeting
    from efficiency.services.committee.meetings import meeting_create
    from tests.services.committee_meeting_fixtures import make_pack

    return ReviewMeeting.objects.first() or meeting_create(
        make_pack(o.cluster), o.committee, timezone.now() + timedelta(days=1)
    )


def _committee_action(o):
    from datetime import date

    from efficiency.models import Action
    from efficiency.services.committee.meetings import action_create

    return Action.objects.first() or action_create(
        _meeting(o), o.committee, "Write it up", o.committee, date(2030, 1, 1)
    )


def _named_urls(patterns=None, namespace=""):
    for pattern in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            if pattern.namespace == "admin":
                continue  # Django's own admin guards itself; admin:index stands for it.
            yield from _named_urls(pattern.url_patterns, inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield f"{namespace}{pattern.name}"


def test_every_url_is_in_the_matrix():
    missing = sorted(set(_named_urls()) - set(MATRIX))
    assert not missing, f"URLs without an access rule in MATRIX: {missing}"


def _client_as(client, org, role):
    if role != "anonymous":
        client.force_login(getattr(org, role))
    return client


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", [name for name in MATRIX if name != "healthz"])
def test_url_access_by_role(client, org, name, role):
    method, build, expected = MATRIX[name]
    client = _client_as(client, org, role)
    response = getattr(client, method)(build(org))
    assert response.status_code == expected[role], (
        f"{role} on {name} got {response.status_code}, expected {expected[role]}"
    )
    if role == "anonymous" and expected[role] == 302 and not name.startswith(("login", "logout", "set_")):
        assert "/login/" in response["Location"]


@pytest.mark.parametrize("role", ROLES)
def test_healthz_needs_no_login(client, org, role):
    response = _client_as(client, org, role).get("/healthz")
    assert response.status_code in (200, 503)
    assert response.json()["status"] in ("ok", "degraded")


@pytest.mark.parametrize(
    ("path", "key", "expected"),
    [
        ("/api/v1/departments/", "code", {"vision"}),
        ("/api/v1/nodes/", "hostname", {"gpu-a01"}),
        ("/api/v1/jobs/", "name", {"vision-train"}),
    ],
)
def test_department_head_lists_only_their_departments_rows(client, org, path, key, expected):
    client.force_login(org.head_a)
    assert {row[key] for row in client.get(path).json()["results"]} == expected
    client.force_login(org.committee)
    assert len(client.get(path).json()["results"]) == 2


@pytest.mark.parametrize("path", ["/departments/", "/nodes/", "/jobs/", "/"])
def test_department_head_pages_never_mention_another_department(client, org, path):
    client.force_login(org.head_a)
    body = client.get(path).content.decode()
    assert "Radar perception" not in body
    assert "gpu-b01" not in body
    assert "radar-train" not in body


def test_committee_sees_both_departments_on_the_department_list(client, org):
    client.force_login(org.committee)
    body = client.get("/departments/").content.decode()
    assert "Vehicle vision" in body
    assert "Radar perception" in body
