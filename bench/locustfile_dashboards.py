"""Locust users for ``bench/load_dashboards.py``: signed-in people reading the dashboards.

Each simulated user is signed in as one of the demo logins (a platform admin, the GPU committee,
or a department head) and reads pages with a few seconds of reading time between them, the
way the portal is used: the home page, the cluster overview, a department page with the two
parts htmx loads right after it, the node, job, quota and fault pages. Static files are left
out: a browser caches them and in production they are served by the web server's front.
"""

import itertools
import os

from locust import HttpUser, between, task

# "username department session-key" per line: sessions the runner signed in beforehand, so the
# measured minute is spent on the dashboards, not on 50 password hashes (PBKDF2 by design).
SESSIONS = [line.split() for line in os.environ["BENCH_SESSIONS"].splitlines() if line.strip()]
COOKIE = os.environ.get("BENCH_SESSION_COOKIE", "sessionid")
_next_session = itertools.cycle(SESSIONS)


class DashboardUser(HttpUser):
    wait_time = between(2, 8)  # reading time between two pages

    def on_start(self) -> None:
        self.username, self.department, key = next(_next_session)
        self.client.cookies.set(COOKIE, key)

    @task(3)
    def home(self) -> None:
        self.client.get("/", name="/")

    @task(3)
    def usage(self) -> None:
        if self.username.startswith("head-"):  # the cluster overview is the committee's and admins'
            self.department()
        else:
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
