"""Quota planning's periodic work through a real Celery worker process and the real database."""

import uuid

import pytest
from django.db import connection

from efficiency.models import CapacityAlert, QuotaBacktest, QuotaCycle
from tests.quota_fixtures import make_planning
from tests.workers import celery_worker, database_url_for_processes, portal_python, worker_env

pytestmark = pytest.mark.broker


def test_a_worker_rolls_cycles_backtests_a_proposal_and_checks_capacity(transactional_db, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: the worker process must see the test database")
    make_planning()
    # Propose at once: the first cycle (from today) ends within 14 days.
    env = worker_env(database_url_for_processes(), tmp_path / "var", PORTAL_QUOTA_PROPOSE_DAYS_AHEAD="14")
    queue = f"quotas-{uuid.uuid4().hex[:8]}"
    with celery_worker(env, queue):
        client = portal_python(
            env,
            "from efficiency.tasks import quota_cycles_roll_task, quota_backtest_task, capacity_check_task; "
            "from efficiency.models import QuotaCycle; "
            f"print(quota_cycles_roll_task.apply_async(queue={queue!r}).get(timeout=60)); "
            f"print(quota_cycles_roll_task.apply_async(queue={queue!r}).get(timeout=60)); "
            "cycle = QuotaCycle.objects.get(status='proposed'); "
            f"print(quota_backtest_task.apply_async(args=[cycle.pk], queue={queue!r}).get(timeout=60)); "
            f"print(capacity_check_task.apply_async(queue={queue!r}).get(timeout=60))",
        )
        assert client.returncode == 0, client.stderr
    lines = client.stdout.splitlines()
    assert lines[0] == "{'created': 1, 'proposed': 0}"
    assert lines[1] == "{'created': 0, 'proposed': 1}"
    proposal = QuotaCycle.objects.get(status="proposed")
    backtest = QuotaBacktest.objects.get(cycle=proposal)
    assert [r["key"] for r in backtest.results] == ["fixed", "current", "cycle"]
    assert backtest.job_count == 4
    # The fixed partition is in force (no shared pool) and vision's jobs have waited for weeks.
    assert CapacityAlert.objects.filter(kind="pool_exhausted", resolved_at__isnull=True).count() == 1
