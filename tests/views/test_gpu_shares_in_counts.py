"""Headline counts of GPUs held count shares: two pods on halves of one shared GPU hold 1 GPU,
not 2 (the Alibaba 2023 trace's GPU-sharing pods ask 370-810 milli-GPUs)."""

from efficiency.selectors.home import home_summary
from tests.factories import JobFactory


def _shared_jobs(org):
    for milli in (500, 500, 370):
        JobFactory(department=org.dept_a, cluster=org.cluster, gpu_count=1, gpu_milli=milli)


def test_the_home_page_counts_gpus_held_by_share(client, org):
    _shared_jobs(org)
    # The org's two jobs hold 8 GPUs each; the shared pods 0.5 + 0.5 + 0.37 = 1.37 (not 3).
    summary = home_summary(user=org.admin)
    assert summary.running_job_count == 5
    assert summary.running_gpus_text == "17.37"
    client.force_login(org.admin)
    assert "holding 17.37 GPUs" in client.get("/").content.decode()


def test_one_whole_gpu_in_shares_reads_singular(client, org):
    org.job_a.delete()
    org.job_b.delete()
    JobFactory(department=org.dept_a, cluster=org.cluster, gpu_count=1, gpu_milli=500)
    JobFactory(department=org.dept_a, cluster=org.cluster, gpu_count=1, gpu_milli=500)
    client.force_login(org.admin)
    assert "holding 1 GPU<" in client.get("/").content.decode()


def test_the_department_list_and_api_count_gpus_in_use_by_share(client, org):
    _shared_jobs(org)
    client.force_login(org.admin)
    rows = {row["code"]: row for row in client.get("/api/v1/departments/").json()["results"]}
    assert rows["vision"]["running_gpu_count"] == 9.37
    assert rows["radar"]["running_gpu_count"] == 8
    page = client.get("/departments/").content.decode()
    assert '<td class="num">9.37</td>' in page
