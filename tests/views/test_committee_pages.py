"""The committee's review pack pages: the packs list, a pack, its presentation and print faces."""

import pytest
from django.test import Client
from django.utils import timezone

from efficiency import dispatch
from efficiency.analysis.committee.seal import seal
from efficiency.models import ReviewPack
from tests.views.committee_content import pack_content

pytestmark = pytest.mark.django_db

FACES = ("", "present/", "print/")


def make_pack(org, *, version=1, supersedes=None, reason="", **content_options):
    content = pack_content(
        [(org.dept_a.code, org.dept_a.name, 8), (org.dept_b.code, org.dept_b.name, 8)], **content_options
    )
    text, digest = seal(content)
    start = timezone.now().replace(microsecond=0)
    return ReviewPack.objects.create(
        cluster=org.cluster,
        period_start=start,
        period_end=start,
        version=version,
        supersedes=supersedes,
        correction_reason=reason,
        definitions_version=content["definitions_version"],
        time_zone="Asia/Shanghai",
        content_json=text,
        content_hash=digest,
        generated_at=start,
    )


def page(client, user, url):
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


@pytest.mark.parametrize("role", ["committee", "admin"])
@pytest.mark.parametrize("face", FACES)
def test_the_committee_sees_every_section_and_both_departments(client, org, role, face):
    pack = make_pack(org)
    html = page(client, getattr(org, role), f"/committee/packs/{pack.pk}/{face}")
    for heading in (
        "0. Cover",
        "1. Summary",
        "3. Cluster",
        "4. Departments",
        "7. Reliability",
        "9. Showback",
    ):
        assert heading in html
    assert "Vehicle vision" in html
    assert "Radar perception" in html
    assert pack.content_hash[:12] in html
    assert "Asia/Shanghai" in html
    # Every section shows its numbers as a table, not only as charts.
    for table in ("kpi-table", "capacity-table", "department-table", "showback-table", "phase-table"):
        assert f'id="{table}"' in html


def test_the_pack_page_draws_its_charts_and_links_its_faces(client, org):
    pack = make_pack(org)
    html = page(client, org.committee, f"/committee/packs/{pack.pk}/")
    for chart in ("waterfall", "states", "heatmap", "node_classes", "dept-vision", "dept-radar", "scatter"):
        assert f'id="pack-{chart}"' in html
    assert f"/committee/packs/{pack.pk}/present/" in html
    assert f"/committee/packs/{pack.pk}/print/" in html
    assert 'id="section-meeting"' in html
    assert "<script>" not in html.replace('<script id="', "")  # no inline script for the CSP


@pytest.mark.parametrize("face", FACES)
def test_a_head_sees_only_their_department_in_their_copy(client, org, face):
    pack = make_pack(org)
    html = page(client, org.head_a, f"/committee/packs/{pack.pk}/{face}")
    assert "Vehicle vision" in html
    assert "Radar perception" not in html
    assert "radar" not in html.lower()
    assert 'id="copy-badge"' in html
    # Cluster-wide sections are the committee's: named on the cover, left out.
    assert 'id="committee-only-note"' in html
    assert "3. Cluster" not in html
    assert "4. Departments" in html
    assert 'id="section-meeting"' not in html


def test_the_committee_home_lists_current_versions_and_folds_older_ones(client, org):
    first = make_pack(org)
    second = make_pack(org, version=2, supersedes=first, reason="Late Slurm data")
    html = page(client, org.committee, "/committee/")
    assert f'data-pack="{second.pk}"' in html
    assert f'data-pack="{first.pk}"' not in html
    assert "1 earlier version" in html
    assert 'id="generate-form"' in html
    assert 'id="generate-form"' not in page(Client(), org.head_a, "/committee/")


def test_a_superseded_version_says_so_and_links_the_current_one(client, org):
    first = make_pack(org)
    second = make_pack(org, version=2, supersedes=first, reason="Late Slurm data")
    html = page(client, org.committee, f"/committee/packs/{first.pk}/")
    assert 'id="superseded-banner"' in html
    assert "superseded by v2" in html
    assert f"/committee/packs/{second.pk}/" in html
    assert 'id="superseded-banner"' not in page(client, org.committee, f"/committee/packs/{second.pk}/")


def test_an_unavailable_section_says_why(client, org):
    pack = make_pack(org, unavailable=("capacity", "reliability"))
    html = page(client, org.committee, f"/committee/packs/{pack.pk}/")
    assert html.count("Not available yet: no data for this area yet") == 2


def test_no_role_is_refused(client, org):
    pack = make_pack(org)
    client.force_login(org.no_role)
    assert client.get(f"/committee/packs/{pack.pk}/").status_code == 403
    assert client.get("/committee/").status_code == 403


@pytest.mark.parametrize("pk", ["0", "999999", "99999999999999999999", "-1", "abc", "1.5"])
@pytest.mark.parametrize("face", FACES)
def test_hostile_pack_ids_are_not_found(client, org, pk, face):
    make_pack(org)
    client.force_login(org.committee)
    assert client.get(f"/committee/packs/{pk}/{face}").status_code == 404


def test_posts_need_the_csrf_token(org):
    pack = make_pack(org)
    client = Client(enforce_csrf_checks=True)
    client.force_login(org.committee)
    assert client.post("/committee/packs/generate/").status_code == 403
    assert client.post(f"/committee/packs/{pack.pk}/correct/", {"reason": "x"}).status_code == 403


def test_generate_queues_the_pack_in_a_worker(client, org, monkeypatch):
    calls = []
    monkeypatch.setattr(dispatch, "committee_pack_generate", lambda **kw: calls.append(kw), raising=False)
    client.force_login(org.committee)
    response = client.post("/committee/packs/generate/", follow=True)
    assert calls == [{"cluster_id": org.cluster.pk, "user_id": org.committee.pk}]
    assert "Generation started" in response.content.decode()


def test_generate_says_so_while_generation_is_missing(client, org, monkeypatch):
    monkeypatch.delattr(dispatch, "committee_pack_generate", raising=False)
    client.force_login(org.admin)
    response = client.post("/committee/packs/generate/", follow=True)
    assert "not available yet" in response.content.decode()


def test_a_correction_needs_a_reason(client, org, monkeypatch):
    calls = []
    monkeypatch.setattr(dispatch, "committee_pack_generate", lambda **kw: calls.append(kw), raising=False)
    pack = make_pack(org)
    client.force_login(org.committee)
    response = client.post(f"/committee/packs/{pack.pk}/correct/", {"reason": "  "}, follow=True)
    assert calls == []
    assert "Say why the pack needs a correction." in response.content.decode()
    client.post(f"/committee/packs/{pack.pk}/correct/", {"reason": "Late Slurm data"})
    assert calls == [
        {
            "cluster_id": org.cluster.pk,
            "user_id": org.committee.pk,
            "corrects_id": pack.pk,
            "reason": "Late Slurm data",
        }
    ]


def test_a_head_may_not_generate_or_correct(client, org):
    pack = make_pack(org)
    client.force_login(org.head_a)
    assert client.post("/committee/packs/generate/").status_code == 403
    assert client.post(f"/committee/packs/{pack.pk}/correct/", {"reason": "x"}).status_code == 403


def test_the_header_links_the_committee_for_heads_and_the_committee(client, org):
    for user in (org.head_a, org.committee, org.admin):
        assert 'id="nav-committee"' in page(Client(), user, "/")


def test_the_proposals_section_explains_each_quota_in_sentences_and_summarises_the_backtest(client, org):
    """Section 5 of a generated pack: each proposed quota's steps as the quota page words them
    (not the stored facts' keys), and the backtest as one row per policy."""
    from datetime import timedelta

    from efficiency.models import QuotaBacktest
    from efficiency.quota_explanation import explanation_steps
    from efficiency.services.committee.pack import pack_generate
    from efficiency.services.quotas import quota_proposal_create

    cycle = quota_proposal_create(cluster=org.cluster)
    QuotaBacktest.objects.create(
        cycle=cycle, computed_at=timezone.now(), window_start=cycle.start - timedelta(days=14),
        window_end=cycle.start, job_count=3, duration_s=0.1,
        results=[
            {"key": "fixed", "allocation_rate": 0.5, "busy_gpu_s": 3600.0, "capacity_gpu_s": 7200.0,
             "jobs_started": 3, "jobs_cancelled": 1,
             "queues": {"vision": {"unmet_gpu_hours": 2.5, "wait_p95_s": 600.0},
                        "radar": {"unmet_gpu_hours": 1.0, "wait_p95_s": 1200.0}}},
        ],
    )  # fmt: skip
    pack = pack_generate(cluster=org.cluster, start=cycle.start - timedelta(days=14), end=cycle.start)
    quota = cycle.quotas.first()
    html = page(client, org.committee, f"/committee/packs/{pack.pk}/")
    sentence = explanation_steps(quota.explanation, cycle.proposal_settings)[0]
    assert sentence in html.replace("&#x27;", "'")
    assert "percentile_gpus" not in html
    backtest = pack.content["proposals"]["backtest"]
    assert backtest == [
        {"policy": "fixed", "allocation_rate": 0.5, "utilization": 0.5, "unmet_gpu_hours": 3.5,
         "jobs_started": 3, "jobs_cancelled": 1, "worst_wait_p95_s": 1200.0}
    ]  # fmt: skip
    assert "Fixed partition" in html
    # The exports of the same pack word the steps the same way.
    import io
    import zipfile

    from efficiency.services.committee.export import pack_csv_bundle

    bundle = zipfile.ZipFile(io.BytesIO(pack_csv_bundle(pack, language="en")))
    assert sentence in bundle.read("proposals.csv").decode("utf-8-sig")


SECTION_KEYS = (
    "summary", "since_last", "cluster_section", "departments", "pareto_idle", "proposals", "capacity",
    "reliability", "recommendations", "tickets", "showback", "completeness", "previous", "committee",
)  # fmt: skip


# Lists in every pack the builder writes: never marked unavailable.
LIST_KEYS = {"departments", "pareto_idle", "completeness", "committee"}
DAMAGES = [
    (key, damage)
    for key in SECTION_KEYS
    for damage in ("missing", "empty", "unavailable")
    if not (damage == "unavailable" and key in LIST_KEYS)
]


@pytest.mark.parametrize(("key", "damage"), DAMAGES)
def test_a_pack_missing_or_emptying_any_section_still_opens_on_every_face(client, org, key, damage):
    """Packs sealed by an older version of the builder, or of a period without data, lack parts:
    every face and export still opens, saying what is not there (a 500 was found this way)."""
    from efficiency.services.committee.export import pack_csv_bundle

    content = pack_content([(org.dept_a.code, org.dept_a.name, 8), (org.dept_b.code, org.dept_b.name, 8)])
    if damage == "missing":
        content.pop(key, None)
    elif damage == "empty":
        content[key] = {} if isinstance(content.get(key), dict) else []
    else:
        content[key] = {"available": False, "reason": "no quota cycle follows this period yet"}
    text, digest = seal(content)
    now = timezone.now().replace(microsecond=0)
    pack = ReviewPack.objects.create(
        cluster=org.cluster, period_start=now, period_end=now, definitions_version="2026-12.1",
        time_zone="Asia/Shanghai", content_json=text, content_hash=digest, generated_at=now,
    )  # fmt: skip
    for user in (org.committee, org.head_a):
        for face in FACES:
            page(client, user, f"/committee/packs/{pack.pk}/{face}")
    assert pack_csv_bundle(pack, language="en")
