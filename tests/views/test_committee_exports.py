"""Downloading a review pack (PDF, CSV bundle) and keeping the showback's rate cards."""

import io
import json
import zipfile
from decimal import Decimal

import pytest
from django.core.cache import cache

from efficiency.models import AuditEntry, RateCard
from efficiency.services.committee import export
from tests.services.committee_sample import sample_content, store_pack

pytestmark = pytest.mark.django_db


@pytest.fixture
def pack(org):
    cache.clear()
    content = sample_content(
        [(org.dept_a.code, org.dept_a.name), (org.dept_b.code, org.dept_b.name), ("lidar", "Lidar")], hours=6
    )
    return store_pack(content, cluster=org.cluster)


@pytest.fixture
def fake_pdf(monkeypatch):
    """pack_pdf replaced by a recorder: the views' rules, not WeasyPrint, are under test here."""
    calls = []

    def pack_pdf(pack, *, language, department_codes=None):
        calls.append((pack.pk, language, department_codes))
        return b"%PDF-1.7 " + repr((pack.pk, language, department_codes)).encode()

    monkeypatch.setattr(export, "pack_pdf", pack_pdf)
    return calls


def _files(response) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_committee_downloads_the_whole_pdf_with_a_dated_filename(client, org, pack, fake_pdf):
    client.force_login(org.committee)
    response = client.get(f"/committee/packs/{pack.pk}/pdf/", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response.content.startswith(b"%PDF")
    expected = f"review-pack-{org.cluster.slug}-20261116-v1-en.pdf"
    assert response["Content-Disposition"] == f'attachment; filename="{expected}"'
    assert fake_pdf == [(pack.pk, "en", None)]


def test_pdf_bytes_are_cached_per_pack_language_and_copy(client, org, pack, fake_pdf):
    client.force_login(org.committee)
    for _ in range(2):
        assert client.get(f"/committee/packs/{pack.pk}/pdf/").status_code == 200
    client.cookies["django_language"] = "zh-hans"
    response = client.get(f"/committee/packs/{pack.pk}/pdf/")
    assert response["Content-Disposition"].endswith('-v1-zh-hans.pdf"')
    client.force_login(org.head_a)
    client.get(f"/committee/packs/{pack.pk}/pdf/")
    assert fake_pdf == [
        (pack.pk, "en", None),
        (pack.pk, "zh-hans", None),
        (pack.pk, "zh-hans", ("vision",)),
    ]


def test_head_downloads_their_copy_only(client, org, pack, fake_pdf):
    client.force_login(org.head_a)
    response = client.get(f"/committee/packs/{pack.pk}/csv/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert "-vision.zip" in response["Content-Disposition"]
    for name, data in _files(response).items():
        text = data.decode("utf-8-sig")
        assert "radar" not in text.lower(), name
        assert "lidar" not in text.lower(), name
    assert "vision" in _files(response)["department_totals.csv"].decode("utf-8-sig")
    client.get(f"/committee/packs/{pack.pk}/pdf/")
    assert fake_pdf == [(pack.pk, "en", ("vision",))]


def test_committee_csv_bundle_is_in_the_readers_language(client, org, pack):
    client.force_login(org.admin)
    client.cookies["django_language"] = "zh-hans"
    response = client.get(f"/committee/packs/{pack.pk}/csv/")
    manifest = json.loads(_files(response)["manifest.json"])
    assert manifest["language"] == "zh-hans"
    assert manifest["copy"] is None
    assert manifest["content_hash"] == pack.content_hash
    assert response["Content-Disposition"].endswith('-v1-zh-hans.zip"')


@pytest.mark.parametrize("suffix", ["pdf", "csv"])
@pytest.mark.parametrize("role", ["head_a", "committee"])
def test_unknown_pack_is_404(client, org, pack, fake_pdf, suffix, role):
    client.force_login(getattr(org, role))
    assert client.get(f"/committee/packs/{pack.pk + 1000}/{suffix}/").status_code == 404


@pytest.mark.parametrize("suffix", ["pdf", "csv"])
def test_users_without_a_role_are_refused(client, org, pack, suffix):
    client.force_login(org.no_role)
    assert client.get(f"/committee/packs/{pack.pk}/{suffix}/").status_code == 403


def test_pdf_unavailable_is_a_clear_503(client, org, pack, monkeypatch):
    def broken(*args, **kwargs):
        raise export.ExportUnavailable("WeasyPrint cannot be loaded on this server: no libpango")

    monkeypatch.setattr(export, "pack_pdf", broken)
    client.force_login(org.committee)
    response = client.get(f"/committee/packs/{pack.pk}/pdf/")
    assert response.status_code == 503
    assert "no libpango" in response.content.decode()
    assert "CSV" in response.content.decode()


# --- Rate cards ------------------------------------------------------------------------------------

GOOD = {
    "effective_from": "2026-12-01 00:00",
    "currency": "cny",
    "rates": "NVIDIA H100 80GB HBM3=12.50\n\nNVIDIA A100-SXM4-80GB = 8\n",
    "default_rate": "5.5",
    "note": "From the finance office.",
}


def test_committee_adds_a_rate_card_version(client, org):
    client.force_login(org.committee)
    response = client.post("/committee/rate-cards/", GOOD)
    assert response.status_code == 302
    card = RateCard.objects.get()
    assert card.version == 1
    assert card.currency == "CNY"
    assert card.rates == {"NVIDIA A100-SXM4-80GB": "8", "NVIDIA H100 80GB HBM3": "12.50"}
    assert Decimal(card.default_rate) == Decimal("5.5")
    assert card.created_by == org.committee
    entry = AuditEntry.objects.get(object_type="ratecard")
    assert entry.verb == "rate_card.create"
    assert entry.actor == org.committee
    client.force_login(org.admin)
    assert client.post("/committee/rate-cards/", {**GOOD, "rates": "H20=3.1"}).status_code == 302
    assert list(RateCard.objects.values_list("version", flat=True).order_by("version")) == [1, 2]
    page = client.get("/committee/rate-cards/").content.decode()
    assert "NVIDIA H100 80GB HBM3 = 12.50" in page
    assert "H20 = 3.1" in page


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"rates": "H100=-1"}, "rates"),
        ({"rates": "H100=0"}, "rates"),
        ({"rates": "H100=1e3"}, "rates"),
        ({"rates": "H100=12.12345"}, "rates"),
        ({"rates": "H100 12.5"}, "rates"),
        ({"rates": "=12.5"}, "rates"),
        ({"rates": "H100=1\nH100=2"}, "rates"),
        ({"default_rate": "abc"}, "default_rate"),
        ({"currency": "yuan"}, "currency"),
        ({"effective_from": "next week"}, "effective_from"),
        ({"rates": "", "default_rate": ""}, None),
    ],
)
def test_a_bad_rate_card_saves_nothing_and_says_why(client, org, change, field):
    client.force_login(org.committee)
    response = client.post("/committee/rate-cards/", {**GOOD, **change})
    assert response.status_code == 400
    assert not RateCard.objects.exists()
    assert not AuditEntry.objects.exists()
    page = response.content.decode()
    assert f'id="error-{field}"' in page if field else 'id="form-errors"' in page


def test_heads_may_not_see_or_edit_rate_cards(client, org):
    client.force_login(org.head_a)
    assert client.get("/committee/rate-cards/").status_code == 403
    assert client.post("/committee/rate-cards/", GOOD).status_code == 403
    assert not RateCard.objects.exists()


def test_hostile_rate_card_text_is_escaped(client, org):
    client.force_login(org.committee)
    client.post("/committee/rate-cards/", {**GOOD, "rates": "<script>alert(1)</script>=2"})
    page = client.get("/committee/rate-cards/").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; = 2" in page
