"""Faults in a real browser: an injected fault from the simulator's logs, collected and scanned by
the production path, shown as an incident with its timeline, evidence and report."""

from datetime import UTC, datetime, timedelta

import pytest

from efficiency.choices import JobSource, SourceKind
from efficiency.collectors.slurm import parse_sacct
from efficiency.models import Cluster, DataSource, Incident
from efficiency.services import faults
from efficiency.services.ingest import jobs_ingest
from efficiency.services.organisation import DEMO_CLUSTER_SLUG, demo_organisation_create
from efficiency.services.sources import source_collect
from efficiency.simulator.model import ClusterSimulator
from efficiency.simulator.scenario import reference_nodes
from tests.e2e.conftest import log_in

pytestmark = pytest.mark.django_db(transaction=True)
START = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def incident(transactional_db, tmp_path):
    demo_organisation_create(password="e2e-password")
    faults.fault_policies_ensure()
    cluster = Cluster.objects.get(slug=DEMO_CLUSTER_SLUG)
    sim = ClusterSimulator(reference_nodes(), seed=7, start=START, fault_rate_per_day=12.0)
    fault = next(
        f for f in sim.faults(START + timedelta(hours=6), START + timedelta(days=6))
        if f.kind == "xid79" and sim.sim_job(f.job_external_id).gpu_count >= 2
    )  # fmt: skip
    until = fault.occurred_at + timedelta(minutes=2)
    jobs = parse_sacct(sim.sacct_text(START, until, timezone=UTC), timezone=UTC)
    jobs_ingest(cluster=cluster, source=JobSource.SLURM, records=jobs.records, now=until)
    source = DataSource.objects.create(
        cluster=cluster, kind=SourceKind.LOG_FILES, name="logs", config={"root": str(tmp_path)}
    )
    sim.write_job_logs(tmp_path, fault.occurred_at - timedelta(minutes=1), until)
    sim.write_kernel_logs(tmp_path, fault.occurred_at - timedelta(minutes=1), until)
    source_collect(source_id=source.pk, now=until)
    faults.fault_scan_source(source=source, now=until)
    return fault, Incident.objects.get(job__external_id=fault.job_external_id)


def test_committee_follows_an_xid_from_the_timeline_to_its_report(page, incident, screenshot):
    fault, incident = incident
    log_in(page, "committee", "e2e-password")
    page.goto("/faults/?range=custom&start=2026-11-01&end=2026-11-08")
    page.locator("#fault-timeline-chart svg.main-svg").first.wait_for()
    assert page.evaluate("document.getElementById('fault-timeline-chart').data.length") >= 1
    screenshot("faults-overview")
    page.locator(f"#incident-list a[href='/faults/incidents/{incident.pk}/']").click()
    page.wait_for_url(f"**/faults/incidents/{incident.pk}/")
    assert fault.node in page.locator("#suspected-node").inner_text()
    assert "GPU hardware" in page.locator("h1").inner_text()
    assert page.locator("#evidence tr.root-signal").count() == 1
    assert "Xid" in page.locator("#evidence tr.root-signal").inner_text()
    page.locator("#phases-chart svg.main-svg").first.wait_for()
    screenshot("incident-detail")
    page.locator("#report-link").click()
    page.wait_for_url(f"**/faults/incidents/{incident.pk}/report/")
    assert f"Fault report, incident {incident.pk}" in page.locator("h1").inner_text()
    screenshot("incident-report")


def test_department_head_of_another_department_cannot_open_the_incident(page, incident):
    _, incident = incident
    other = "head-radar" if incident.department.code != "radar" else "head-vision"
    log_in(page, other, "e2e-password")
    assert page.goto(f"/faults/incidents/{incident.pk}/").status == 404


def test_charts_drawn_wide_follow_a_window_narrowed_to_a_phone(page, incident):
    """The timeline of few nodes is made taller to stay readable, which plotly.js does by pinning
    its width: narrowing the window (a tablet turned, a window dragged) must still narrow it."""
    log_in(page, "committee", "e2e-password")
    page.goto("/faults/?range=custom&start=2026-11-01&end=2026-11-08")
    page.locator("#fault-timeline-chart svg.main-svg").first.wait_for()
    page.wait_for_load_state("networkidle")

    page.set_viewport_size({"width": 390, "height": 900})
    # Polled from here: wait_for_function evaluates a string, which the page's CSP forbids.
    for _ in range(50):
        if page.evaluate("document.documentElement.scrollWidth") <= 392:
            break
        page.wait_for_timeout(200)

    widths = page.evaluate(
        "[...document.querySelectorAll('[data-plotly] .svg-container')]"
        ".map(e => e.getBoundingClientRect().width)"
    )
    assert widths
    assert max(widths) <= 390
