"""Locust users for ``bench/load_dashboards.py``: signed-in people reading the dashboards.

Each simulated user signs in once as one of the demo logins (a platform admin, the GPU committee,
or a department head), then reads pages with a few seconds of reading time between them, the
way the portal is used: the home page, the cluster overview, a department page with the two
parts htmx loads right after it, the node, job, quota and fault pages. Static files are left
out: a browser caches them and in production they are served by the web server's front.
"""

import itertools
import os
import re

from locust import HttpUser, between, task

PASSWORD = os.environ.get("BENCH_PASSWORD", "bench-pass")
# (username, department code the user may read): heads read their own department.
LOGINS = [("admin", "vision"), ("committee", "radar"), ("head-vision", "vision"), ("head-radar", "radar")]
_next_login = itertools.cycle(LOGINS)
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class DashboardUser(HttpUser):
    wait_time = between(2, 8)  # reading time between two pages

    def on_start(self) -> None:
        self.username, self.department = next(_next_login)
        page = self.client.get("/login/", name="/login/ (form)")
        token = CSRF.search(page.text).group(1)
        with self.client.post(
            "/login/",
            data={"username": self.username, "password": PASSWORD, "csrfmiddlewaretoken": token},
            headers={"Referer": f"{self.host}/login/"},
            name="/login/ (sign in)",
            catch_response=True,
        ) as answer:
            if "/login/" in answer.url:
                answer.failure(f"{self.username} could not sign in")

    @task(3)
    def home(self) -> None:
        self.client.get("/", name="/")

    @task(3)
    def usage(self) -> None:
        self.client.get("/usage/?range=7d", name="/usage/?range=7d")

    @task(3)
    def department(self) -> None:
        base = f"/departments/{self.department}/"
        self.client.get(f"{base}?range=7d", name="/departments/<code>/")
        self.client.get(f"{base}heatmap/?range=7d", name="/departments/<code>/heatmap/")
        self.client.get(f"{base}jobs/?range=7d", name="/departments/<code>/jobs/")

    @task(1)
    def nodes(self) -> None:
        self.client.get("/nodes/", name="/nodes/")

    @task(1)
    def jobs(self) -> None:
        self.client.get("/jobs/", name="/jobs/")

    @task(1)
    def quotas(self) -> None:
        self.client.get("/quotas/", name="/quotas/")

    @task(1)
    def faults(self) -> None:
        self.client.get("/faults/", name="/faults/")
