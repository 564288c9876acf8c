"""The demo's platform admin runs the portal from the Django admin, in both languages."""

import pytest

from efficiency.models import Cluster, DataSource
from efficiency.services.demo import demo_sources_ensure
from efficiency.services.organisation import demo_organisation_create
from tests.e2e.conftest import log_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo(transactional_db):
    demo_organisation_create(password="e2e-password")
    demo_sources_ensure(cluster=Cluster.objects.get())


def test_platform_admin_opens_the_admin_and_saves_a_data_source(page, demo, screenshot):
    log_in(page, "admin", "e2e-password")
    page.locator("#main-nav").get_by_role("link", name="Administration").click()
    assert "permission to view or edit anything" not in page.content()
    screenshot("admin-index-en")
    page.get_by_role("link", name="Data sources").first.click()
    page.get_by_role("link", name="slurm", exact=True).click()
    page.locator("input[name=interval_s]").fill("90")
    with page.expect_navigation():
        page.locator("input[name=_save]").click()
    page.locator(".messagelist .success").wait_for()
    assert DataSource.objects.get(name="slurm").interval_s == 90
    screenshot("admin-data-sources-en")


def test_platform_admin_sees_the_admin_in_chinese(page, demo, screenshot, live_server):
    log_in(page, "admin", "e2e-password")
    page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": live_server.url}])
    page.goto("/admin/")
    content = page.content()
    assert "数据源" in content
    assert "故障策略" in content
    screenshot("admin-index-zh")
