"""Tuning recommendations in a real browser, from the engine's output to a department's work: the
platform admin reviews the queue (accepts one for Vehicle vision with a note, rejects another with
a reason), the vision head finds the accepted change under "What to fix" and comments on it, the
radar head cannot open either; the detail page once in Chinese, chosen with the language switch."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from efficiency.choices import RecommendationAction, RecommendationState
from efficiency.models import Cluster, Department, Node, Recommendation
from efficiency.services.organisation import DEMO_CLUSTER_SLUG, demo_organisation_create
from efficiency.services.recommendations import recommendations_refresh
from tests.e2e.conftest import log_in
from tests.factories import DataSourceFactory, JobFactory, JobHourFactory, LogChunkFactory

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "e2e-password"
# Real NCCL channel lines of a multi-node run over sockets (NVIDIA/nccl#952, corpus README).
SOCKET_LOG = (
    Path(__file__).resolve().parents[1] / "fixtures" / "recommendations" / "nccl-952-socket-channels.log"
).read_text()
STOCK_IMAGE = "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime"
SOCKET_RULE, STOCK_RULE = "network.nccl-socket-on-rdma", "kernels.stock-framework"


@pytest.fixture
def world(transactional_db):
    """On the demo organisation: two vision families (a two-node run with NCCL_IB_DISABLE=1 on RDMA
    nodes, its log showing socket channels; a run on a stock PyTorch image) and one radar family on
    a stock image, each with three hours of GPU time; the engine has run once."""
    demo_organisation_create(password=PASSWORD)
    cluster = Cluster.objects.get(slug=DEMO_CLUSTER_SLUG)
    vision, radar = Department.objects.get(code="vision"), Department.objects.get(code="radar")
    vision_rdma = list(
        Node.objects.filter(cluster=cluster, owner_department=vision, rdma_capable=True).order_by("hostname")
    )
    radar_node = Node.objects.filter(cluster=cluster, owner_department=radar).order_by("hostname").first()
    assert len(vision_rdma) >= 3
    assert radar_node is not None
    now = timezone.now()

    def job(department, name, user, nodes, config):
        made = JobFactory(
            cluster=cluster,
            department=department,
            name=name,
            user_name=user,
            node_count=len(nodes),
            gpu_count=8 * len(nodes),
            config=config,
        )
        made.nodes.add(*nodes)
        for hours_ago in (1, 2, 3):
            JobHourFactory(
                job=made, hour=(now - timedelta(hours=hours_ago)).replace(minute=0, second=0, microsecond=0)
            )
        return made

    socket_job = job(
        vision,
        "bev-ddp-pretrain",
        "alice",
        vision_rdma[:2],
        {
            "env": {"NCCL_IB_DISABLE": "1"},
            "image": "registry.internal/ai-platform/accel-train:24.05",
        },
    )
    job(vision, "occ-finetune", "bob", vision_rdma[2:3], {"image": STOCK_IMAGE})
    job(radar, "radar-det-train", "carol", [radar_node], {"image": STOCK_IMAGE})
    LogChunkFactory(
        source=DataSourceFactory(cluster=cluster),
        job=socket_job,
        job_external_id=socket_job.external_id,
        stream=f"{socket_job.external_id}/rank-0.log",
        text="step 1\n" * 5 + SOCKET_LOG,
        start_offset=0,  # the stream's beginning: its line numbers are known at once
    )
    recommendations_refresh(now=now, full=True)
    recs = Recommendation.objects.filter(state=RecommendationState.PROPOSED)
    by_department = {
        code: sorted(recs.filter(department__code=code).values_list("rule", flat=True))
        for code in ("vision", "radar")
    }
    assert by_department == {"vision": sorted([SOCKET_RULE, STOCK_RULE]), "radar": [STOCK_RULE]}
    return {
        "socket": recs.get(department=vision, rule=SOCKET_RULE),
        "stock": recs.get(department=vision, rule=STOCK_RULE),
        "radar": recs.get(department=radar),
    }


def _watch_errors(page) -> list[str]:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
    page.on("console", lambda message: message.type == "error" and errors.append(f"console: {message.text}"))
    return errors


def _history(page) -> list[tuple[str, str, str]]:
    """The decision history: (row class, by, why) per row."""
    rows = page.locator("#decisions tbody tr")
    return [
        (
            rows.nth(i).get_attribute("class"),
            rows.nth(i).locator("td").nth(2).inner_text().strip(),
            rows.nth(i).locator("td").nth(3).inner_text().strip(),
        )
        for i in range(rows.count())
    ]


def test_admin_reviews_head_acts_other_head_is_kept_out(browser, live_server, world, screenshot, page):
    socket, stock, radar = world["socket"], world["stock"], world["radar"]
    errors = _watch_errors(page)

    # --- The platform admin works through the review queue. -----------------------------------
    log_in(page, "admin", PASSWORD)
    page.goto("/recommendations/")
    page.locator("#queue-link").click()
    page.wait_for_url("**/recommendations/queue/")
    rules = page.locator("#recommendation-table tbody tr").evaluate_all(
        "rows => rows.map(row => row.dataset.rule)"
    )
    assert sorted(rules) == sorted([SOCKET_RULE, STOCK_RULE, STOCK_RULE])
    screenshot("recommendation-queue")

    page.locator(f"#recommendation-table a[href='/recommendations/{socket.pk}/']").click()
    page.wait_for_url(f"**/recommendations/{socket.pk}/")
    assert page.locator("#rec-state").inner_text() == "Proposed"
    assert "via NET/Socket/0" in page.locator("#evidence").inner_text()  # the real log line
    assert "NCCL_IB_DISABLE" in page.locator("#config-table").inner_text()
    assert page.locator("#accept-department").input_value() == "vision"  # its own department first
    page.locator("#accept-department").select_option("vision")
    page.locator("#accept-note").fill("Platform team ships the RDMA env in the launcher template")
    page.locator("#accept-button").click()
    page.wait_for_url(f"**/recommendations/{socket.pk}/")
    body = page.locator("body").inner_text()
    assert "Accepted: the department will make the change." in body
    assert page.locator("#rec-state").inner_text() == "Accepted"
    assert "assigned to Vehicle vision" in page.locator("hgroup").inner_text()
    assert _history(page) == [
        ("decision-proposed", "the portal", ""),
        ("decision-accepted", "admin", "Platform team ships the RDMA env in the launcher template"),
    ]
    assert "→ Vehicle vision" in page.locator("#decisions tr.decision-accepted").inner_text()
    assert page.locator("#accept-form").count() == 0  # accepted: no second accept offered
    screenshot("recommendation-accepted")

    # Back to the queue: the accepted one has left it; open the vision stock-image one.
    page.goto("/recommendations/queue/")
    assert page.locator(f"#recommendation-table a[href='/recommendations/{socket.pk}/']").count() == 0
    page.locator(f"#recommendation-table a[href='/recommendations/{stock.pk}/']").click()
    page.wait_for_url(f"**/recommendations/{stock.pk}/")
    assert STOCK_IMAGE in page.locator("#config-table").inner_text()
    # The reason is required: the browser does not submit an empty one.
    page.locator("#reject-button").click()
    assert page.url.endswith(f"/recommendations/{stock.pk}/")
    assert page.locator("#reject-reason").evaluate("field => field.validity.valueMissing")
    page.locator("#reject-reason").fill("Benchmark baseline: must stay on the stock image")
    page.locator("#reject-button").click()
    page.wait_for_url(f"**/recommendations/{stock.pk}/")
    assert (
        "Rejected: it will not be proposed again unless the evidence changes."
        in page.locator("body").inner_text()
    )
    assert page.locator("#rec-state").inner_text() == "Rejected"
    assert _history(page) == [
        ("decision-proposed", "the portal", ""),
        ("decision-rejected", "admin", "Benchmark baseline: must stay on the stock image"),
    ]
    screenshot("recommendation-rejected")
    stock.refresh_from_db()
    socket.refresh_from_db()
    assert stock.state == RecommendationState.REJECTED
    assert (socket.state, socket.assignee_department.code) == (RecommendationState.ACCEPTED, "vision")
    page.goto("/recommendations/queue/")
    rules = page.locator("#recommendation-table tbody tr").evaluate_all(
        "rows => rows.map(row => row.dataset.rule)"
    )
    assert rules == [STOCK_RULE]  # only radar's is left to decide
    page.context.clear_cookies()

    # --- The vision head: department page → What to fix → the accepted change → a comment. ---
    log_in(page, "head-vision", PASSWORD)
    page.goto("/departments/vision/")
    link = page.locator("#what-to-fix-link")
    assert "What to fix: 1 change" in link.inner_text()
    link.click()
    page.wait_for_url("**/departments/vision/what-to-fix/")
    assert page.locator("article.fix").evaluate_all("items => items.map(item => item.id)") == [
        f"fix-{socket.pk}"
    ]  # the accepted one; the rejected one is not work to do
    assert page.locator(f"#fix-{stock.pk}").count() == 0
    fix = page.locator(f"#fix-{socket.pk}")
    assert "NCCL runs over TCP sockets on RDMA nodes" in fix.inner_text()
    assert "unset NCCL_IB_DISABLE" in fix.inner_text()
    assert page.locator(f"#fix-{socket.pk} .state").inner_text() == "Accepted"
    screenshot("what-to-fix-vision")
    fix.locator(f"a[href='/recommendations/{socket.pk}/']").click()
    page.wait_for_url(f"**/recommendations/{socket.pk}/")
    for form in ("#accept-form", "#reject-form", "#snooze-form"):
        assert page.locator(form).count() == 0  # heads comment, admins decide
    page.locator("#comment-text").fill("Launcher template v3 drops NCCL_IB_DISABLE; rolling out Monday.")
    page.locator("#comment-button").click()
    page.wait_for_url(f"**/recommendations/{socket.pk}/")
    assert "Comment added." in page.locator("body").inner_text()
    assert _history(page)[-1] == (
        "decision-commented",
        "head-vision",
        "Launcher template v3 drops NCCL_IB_DISABLE; rolling out Monday.",
    )
    assert [d.action for d in socket.decisions.all()] == [
        RecommendationAction.PROPOSED,
        RecommendationAction.ACCEPTED,
        RecommendationAction.COMMENTED,
    ]
    # The rejected vision recommendation is still the department's to read, not to see as work.
    assert page.goto(f"/recommendations/{stock.pk}/").status == 200
    assert page.locator("#rec-state").inner_text() == "Rejected"

    # --- Once in Chinese, chosen with the language switch in the header. ---------------------
    page.goto(f"/recommendations/{socket.pk}/")
    with page.expect_navigation():
        page.locator("select[name=language]").select_option("zh-hans")
    page.wait_for_url(f"**/recommendations/{socket.pk}/")
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    assert page.locator("#rec-state").inner_text() == "已接受"
    zh = page.locator("body").inner_text()
    assert "NCCL runs over TCP sockets on RDMA nodes" not in zh
    assert "Launcher template v3 drops NCCL_IB_DISABLE; rolling out Monday." in zh  # their words stay
    screenshot("recommendation-accepted-zh")
    page.goto("/departments/vision/what-to-fix/")
    assert page.locator("article.fix").count() == 1
    assert page.locator(f"#fix-{socket.pk} .state").inner_text() == "已接受"
    screenshot("what-to-fix-vision-zh")
    page.context.clear_cookies()
    assert errors == []

    # --- The radar head may open neither the vision recommendation nor vision's list. ---------
    log_in(page, "head-radar", PASSWORD)
    assert page.goto(f"/recommendations/{socket.pk}/").status == 404
    assert page.goto(f"/recommendations/{stock.pk}/").status == 404
    assert page.goto("/departments/vision/what-to-fix/").status == 404
    assert page.goto(f"/recommendations/{radar.pk}/").status == 200  # their own one opens
    page.goto("/departments/radar/what-to-fix/")
    assert page.locator("article.fix").evaluate_all("items => items.map(item => item.id)") == [
        f"fix-{radar.pk}"
    ]
    # The only console errors are the browser's own notes of the three 404 responses.
    assert len(errors) == 3, errors
    assert all("404" in error for error in errors), errors
