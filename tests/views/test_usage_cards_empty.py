"""The coverage card of a range without GPU time says so, rather than "— of GPU time has samples"."""

import pytest
from django.urls import reverse

from efficiency.permissions import Role
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

EMPTY_RANGE = {"range": "custom", "start": "2020-01-01", "end": "2020-01-02"}


@pytest.mark.parametrize(
    ("language", "expected", "not_expected"),
    [
        ("en", "no GPU time in this range", "of GPU time has activity samples"),
        ("zh-hans", "此范围内没有 GPU 时间", "的 GPU 时间有活动度样本"),
    ],
)
def test_the_coverage_card_of_an_empty_range_says_there_was_no_gpu_time(
    client, language, expected, not_expected
):
    client.force_login(UserFactory(role=Role.COMMITTEE))
    client.cookies["django_language"] = language

    page = client.get(reverse("efficiency:usage-overview"), EMPTY_RANGE).content.decode()

    card = page.split('id="card-coverage"')[1].split("</article>")[0]
    assert expected in card
    assert not_expected not in card
