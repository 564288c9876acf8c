"""Recommendation pages from source to page: jobs with their config, logs and hours → the engine →
the list, the admins' queue, a recommendation with its evidence, a department's "What to fix", the
review decisions, and their scoping, in both languages."""

import csv
import io
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from efficiency.choices import RecommendationAction, RecommendationState
from efficiency.models import Recommendation, RecommendationDecision
from efficiency.services.recommendations import recommendations_refresh
from tests.factories import JobHourFactory, LogChunkFactory, NodeFactory

# Real NCCL channel lines of a multi-node run over sockets (NVIDIA/nccl#952, corpus README).
SOCKET_LOG = (
    Path(__file__).resolve().parents[1] / "fixtures" / "recommendations" / "nccl-952-socket-channels.log"
).read_text()


@pytest.fixture
def recs(org):
    """Department A's job runs on two RDMA nodes over sockets; department B's on a stock image."""
    now = timezone.now()
    org.node_a.rdma_capable = True
    org.node_a.save()
    second = NodeFactory(
        hostname="gpu-a02", owner_department=org.dept_a, cluster=org.cluster, rdma_capable=True
    )
    job_a, job_b = org.job_a, org.job_b
    job_a.nodes.add(second)
    job_a.node_count, job_a.gpu_count = 2, 16
    job_a.config = {
        "env": {"NCCL_IB_DISABLE": "1", "NCCL_DEBUG": "INFO"},
        "image": "registry.internal/ai-platform/accel-train:24.05",
    }
    job_a.save()
    job_b.config = {"image": "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime"}
    job_b.save()
    LogChunkFactory(
        source=org.source,
        job=job_a,
        job_external_id=job_a.external_id,
        stream=f"{job_a.external_id}/rank-0.log",
        text="step 1\n" * 5 + SOCKET_LOG,
        start_offset=0,  # the stream's beginning: its line numbers are known at once
    )
    for job in (job_a, job_b):
        for hours_ago in (1, 2, 3):
            JobHourFactory(
                job=job, hour=(now - timedelta(hours=hours_ago)).replace(minute=0, second=0, microsecond=0)
            )
    recommendations_refresh(now=now, full=True)
    socket = Recommendation.objects.get(rule="network.nccl-socket-on-rdma")
    stock = Recommendation.objects.get(rule="kernels.stock-framework")
    return socket, stock


def test_engine_made_one_recommendation_per_family_with_evidence(recs):
    socket, stock = recs
    assert socket.department.code == "vision"
    assert stock.department.code == "radar"
    # The evidence lines are the log's own, with their line numbers in the stream (5 lines before).
    first = SOCKET_LOG.splitlines()
    assert socket.evidence
    for row in socket.evidence:
        assert row["text"] == first[row["line"] - 6]
    assert [d.action for d in socket.decisions.all()] == [RecommendationAction.PROPOSED]


def test_list_queue_and_detail_for_an_admin(client, org, recs):
    socket, _stock = recs
    client.force_login(org.admin)
    page = client.get(reverse("efficiency:recommendation-list")).content.decode()
    assert 'data-rule="network.nccl-socket-on-rdma"' in page
    assert 'data-rule="kernels.stock-framework"' in page
    queue = client.get(reverse("efficiency:recommendation-queue"))
    assert queue.status_code == 200
    detail = client.get(reverse("efficiency:recommendation-detail", args=[socket.pk])).content.decode()
    assert "via NET/Socket/0" in detail  # the evidence, with its context lines
    assert "NCCL_IB_DISABLE" in detail  # the config side by side with the ideal
    assert 'id="accept-form"' in detail
    assert 'id="reject-form"' in detail


def test_heads_see_only_their_departments(client, org, recs):
    socket, stock = recs
    client.force_login(org.head_b)
    listing = client.get(reverse("efficiency:recommendation-list")).content.decode()
    assert 'data-rule="kernels.stock-framework"' in listing
    assert 'data-rule="network.nccl-socket-on-rdma"' not in listing
    assert client.get(reverse("efficiency:recommendation-detail", args=[socket.pk])).status_code == 404
    assert client.get(reverse("efficiency:department-what-to-fix", args=["vision"])).status_code == 404
    assert client.get(reverse("efficiency:recommendation-queue")).status_code == 403
    # A head may not decide, only comment on their own department's.
    url = reverse("efficiency:recommendation-decide", args=[stock.pk, "accept"])
    assert client.post(url, {"text": "x"}).status_code == 403
    url = reverse("efficiency:recommendation-decide", args=[socket.pk, "comment"])
    assert client.post(url, {"text": "x"}).status_code == 404


def test_what_to_fix_ranks_by_gain_in_plain_language(client, org, recs):
    _socket, _ = recs
    client.force_login(org.head_a)
    page = client.get(reverse("efficiency:department-what-to-fix", args=["vision"])).content.decode()
    assert "NCCL runs over TCP sockets on RDMA nodes" in page
    assert "Put the NCCL RDMA settings into the job" in page
    assert "unset NCCL_IB_DISABLE" in page
    home = client.get(reverse("efficiency:department-detail", args=["vision"])).content.decode()
    assert reverse("efficiency:department-what-to-fix", args=["vision"]) in home


def test_accept_reject_snooze_comment_are_recorded(client, org, recs):
    socket, stock = recs
    client.force_login(org.admin)
    decide = lambda rec, action, **data: client.post(  # noqa: E731
        reverse("efficiency:recommendation-decide", args=[rec.pk, action]), data, follow=True
    )
    page = decide(socket, "accept", department="vision", text="ticket to follow").content.decode()
    assert "Accepted" in page
    socket.refresh_from_db()
    assert socket.state == RecommendationState.ACCEPTED
    assert socket.assignee_department == org.dept_a
    # Reject without a reason: refused, nothing written.
    before = RecommendationDecision.objects.count()
    page = decide(stock, "reject", text="  ").content.decode()
    assert "A reason is required." in page
    assert RecommendationDecision.objects.count() == before
    stock.refresh_from_db()
    assert stock.state == RecommendationState.PROPOSED
    # Snooze to a past date: refused.
    page = decide(
        stock, "snooze", until=(timezone.localdate() - timedelta(days=1)).isoformat()
    ).content.decode()
    assert "The snooze date must be after today." in page
    page = decide(stock, "snooze", until="not-a-date").content.decode()
    assert "YYYY-MM-DD" in page
    decide(stock, "reject", text="we keep the stock image for this benchmark")
    stock.refresh_from_db()
    assert stock.state == RecommendationState.REJECTED
    # An accepted one cannot be accepted again.
    page = decide(socket, "accept").content.decode()
    assert "A recommendation that is accepted cannot be accepted." in page
    # The head comments on their department's; the comment shows in the history.
    client.force_login(org.head_a)
    decide(socket, "comment", text="Container fixed in our image v3.")
    page = client.get(reverse("efficiency:recommendation-detail", args=[socket.pk])).content.decode()
    assert "Container fixed in our image v3." in page
    too_long = decide(socket, "comment", text="x" * 2001).content.decode()
    assert "at most 2000 are kept" in too_long


def test_a_rejected_recommendation_stays_rejected_until_its_evidence_changes(org, recs):
    _socket, stock = recs
    stock.state, stock.rejected_fingerprint = RecommendationState.REJECTED, stock.fingerprint
    stock.save()
    recommendations_refresh(full=True)
    stock.refresh_from_db()
    assert stock.state == RecommendationState.REJECTED
    org.job_b.config = {"image": "pytorch/pytorch:2.5.0-cuda12.4-cudnn9-runtime"}
    org.job_b.save()
    recommendations_refresh(full=True)
    stock.refresh_from_db()
    assert stock.state == RecommendationState.PROPOSED
    assert stock.decisions.last().action == RecommendationAction.REOPENED


def test_fixed_condition_closes_by_itself(org, recs):
    _socket, stock = recs
    job = org.job_b
    # The family's next run uses the acceleration library's image.
    later = type(job).objects.create(
        cluster=job.cluster, source=job.source, external_id="9999", department=job.department,
        user_name=job.user_name, name=job.name, state="running", gpu_count=8, node_count=1,
        submitted_at=timezone.now() - timedelta(minutes=30),
        started_at=timezone.now() - timedelta(minutes=20),
        config={"image": "registry.internal/ai-platform/accel-train:24.05-py3"},
    )  # fmt: skip
    JobHourFactory(job=later, hour=timezone.now().replace(minute=0, second=0, microsecond=0))
    recommendations_refresh(full=True)
    stock.refresh_from_db()
    assert stock.state == RecommendationState.CLOSED
    assert stock.closed_at is not None
    assert stock.decisions.last().action == RecommendationAction.CLOSED


def test_csv_keeps_the_filters(client, org, recs):
    client.force_login(org.committee)
    response = client.get(reverse("efficiency:recommendation-list"), {"department": "radar", "export": "csv"})
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
    assert len(rows) == 2
    assert rows[1][1] == "kernels.stock-framework"
    bad = client.get(reverse("efficiency:recommendation-list"), {"min_gain": "-3"})
    assert bad.status_code == 400


def test_pages_in_chinese(client, org, recs):
    socket, _ = recs
    client.force_login(org.admin)
    client.cookies["django_language"] = "zh-hans"
    page = client.get(
        reverse("efficiency:recommendation-detail", args=[socket.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans"
    )
    text = page.content.decode()
    assert page.status_code == 200
    assert "NCCL runs over TCP sockets on RDMA nodes" not in text
