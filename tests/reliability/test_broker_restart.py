"""The broker (Redis) restarted in the middle of a run of tasks: the worker reconnects by itself,
every queued task runs, nothing is lost.

The test runs a Redis server of its own (so it can restart it without disturbing anything else),
queues one log collection per source, restarts Redis after the first few and checks that every
source was collected. Redis keeps its queue over a restart with its default persistence (a
snapshot on a clean shutdown); a Redis without persistence would lose the queued messages.

Redis delivery is at most once for the one message being popped as the server shuts down: a BRPOP
executed in Redis's last event-loop turn empties the list before the snapshot, and its reply is never
sent (seen once in CI: 15 of 16 collected). What makes "nothing is lost" true for the portal is the
schedule: beat's collect-due-sources pass queues every source not attempted within its interval, and
a collection starts from the source's watermark. So the test runs that pass once after the restart,
as beat would within a minute, and a source collected twice still stores its lines once.
"""

import time

import pytest
import redis
from django.conf import settings

from efficiency.choices import RunStatus, SourceKind
from efficiency.models import LogChunk, SourceRun
from tests.factories import ClusterFactory, DataSourceFactory
from tests.reliability.processes import (
    Client,
    RedisServer,
    new_queue,
    require_postgresql,
    require_redis_server,
    wait_for,
    worker_process,
)
from tests.workers import database_url_for_processes, free_port, worker_env

pytestmark = pytest.mark.broker

SOURCES = 16
DOWN_S = 3.0


def test_work_resumes_after_the_broker_restarts_and_nothing_is_lost(transactional_db, tmp_path):
    require_postgresql()
    require_redis_server()
    cluster = ClusterFactory(slug="broker-restart")
    sources = []
    for number in range(SOURCES):
        logs = tmp_path / "logs" / f"s{number}" / f"{7000 + number}"
        logs.mkdir(parents=True)
        (logs / "rank-0.log").write_text(f"iteration {number} | lm loss: 1.5\n")
        sources.append(
            DataSourceFactory(
                cluster=cluster,
                kind=SourceKind.LOG_FILES,
                name=f"logs-{number}",
                config={"root": str(tmp_path / "logs" / f"s{number}")},
                interval_s=3600,  # due again only if never attempted: the pass below re-queues the lost
            )
        )
    broker = RedisServer(tmp_path / "redis", free_port())
    broker.start()
    try:
        env = worker_env(database_url_for_processes(), tmp_path / "var")
        env["CELERY_BROKER_URL"] = broker.url
        queue = new_queue("broker-restart")
        client = Client(env, queue)
        # The broker is the test's own, so its worker also takes the collection queue, where beat's
        # collect-due-sources pass sends the collections it queues.
        with worker_process(env, f"{queue},{settings.PORTAL_QUEUE_COLLECTION}") as worker:
            client.send_each("collect_source_task", [source.pk for source in sources])
            wait_for(lambda: SourceRun.objects.count() >= 3, what="the first collections")
            queued = redis.Redis.from_url(broker.url).llen(queue)
            assert queued > 0, "every task ran before the restart: nothing was tested"
            broker.stop()
            time.sleep(DOWN_S)
            broker.start()
            # The worker takes new work after the restart, and results come back through Redis; the
            # ping queued behind the collections also says the queue has been worked through.
            assert client.call("ping_task", "after-restart", timeout_s=120)["pong"] == "after-restart"
            attempted = set(SourceRun.objects.values_list("source_id", flat=True))
            client.call("collect_due_sources_task", timeout_s=120)  # beat's pass, a minute later
            try:
                wait_for(
                    lambda: LogChunk.objects.filter(source__cluster=cluster).count() == SOURCES,
                    what="every source to be collected after the broker came back",
                    timeout_s=120,
                )
            except AssertionError as error:
                worker.terminate()
                collected = set(LogChunk.objects.values_list("source_id", flat=True))
                missing = sorted({source.pk for source in sources} - collected)
                log = worker.stdout.read()[-6000:]
                raise AssertionError(f"{error}; not collected: {missing}; the worker said:\n{log}") from None
            assert worker.poll() is None, "the worker had to be restarted"
    finally:
        broker.stop()
    chunks = LogChunk.objects.filter(source__cluster=cluster)
    assert sorted(chunks.values_list("source_id", flat=True)) == sorted(s.pk for s in sources)  # each once
    assert not SourceRun.objects.exclude(status=RunStatus.OK).exists()
    lost = SOURCES - len(attempted)
    print(f"{queued} of {SOURCES} tasks queued when Redis stopped for {DOWN_S:.0f} s; {lost} lost")
