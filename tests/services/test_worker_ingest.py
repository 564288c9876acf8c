"""One ingest path end to end through a real Celery worker process and the real database.

The test writes a job log, the worker (a separate process, as in production) runs
``collect_source_task``, and the chunks it stored are read back here. PostgreSQL only: an
in-memory SQLite test database cannot be shared with another process.
"""

import uuid

import pytest
from django.db import connection

from efficiency.choices import RunStatus, SourceKind
from efficiency.models import DataSource, LogChunk
from tests.factories import ClusterFactory
from tests.workers import celery_worker, database_url_for_processes, portal_python, worker_env

pytestmark = pytest.mark.broker


def test_a_worker_process_collects_a_log_directory_into_the_database(transactional_db, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: the worker process must see the test database")
    logs = tmp_path / "logs" / "9001"
    logs.mkdir(parents=True)
    (logs / "rank-3.log").write_text(
        "NCCL INFO NET/Socket : Using [0]eth0:10.0.0.7<0>\niteration 10 | lm loss: 1.5\n"
    )
    source = DataSource.objects.create(
        cluster=ClusterFactory(slug="worker"),
        kind=SourceKind.LOG_FILES,
        name="logs",
        config={"root": str(tmp_path / "logs")},
    )
    env = worker_env(database_url_for_processes(), tmp_path / "var")
    queue = f"ingest-{uuid.uuid4().hex[:8]}"
    with celery_worker(env, queue):
        client = portal_python(
            env,
            "from efficiency.tasks import collect_source_task; "
            f"print(collect_source_task.apply_async(args=[{source.pk}], queue={queue!r}).get(timeout=60))",
        )
        assert client.returncode == 0, client.stderr
        assert "'status': 'ok'" in client.stdout
    chunk = LogChunk.objects.get()
    assert (chunk.job_external_id, chunk.rank, chunk.line_count) == ("9001", 3, 2)
    assert "NET/Socket" in chunk.text
    source.refresh_from_db()
    assert source.runs.get().status == RunStatus.OK
    assert "9001/rank-3.log" in source.state["cursors"]
