"""A real Celery worker process takes a task from a real broker and its result comes back.

Both ends run as separate processes with the portal's own settings, so this proves the
configuration that `make run` (file-system broker) and production (Redis) use.
"""

import os
import time
import uuid
from pathlib import Path

import pytest

from tests.workers import celery_worker, portal_python

pytestmark = pytest.mark.broker


def _redis_url() -> str | None:
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("redis://"):
        url = os.environ.get("PORTAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as error:
        reason = f"no Redis broker reachable at {url}: {error}"
        if os.environ.get("PORTAL_REQUIRE_BROKER") == "1":
            pytest.fail(reason)
        print(reason)
        return None
    return url


def _env(tmp_path: Path, broker_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "PORTAL_"))}
    env.update(
        PORTAL_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'portal.sqlite3'}",
        CELERY_BROKER_URL=broker_url,
        DJANGO_SETTINGS_MODULE="portal.settings",
    )
    return env


@pytest.mark.parametrize("transport", ["filesystem", "redis"])
def test_task_result_comes_back_from_a_real_worker(tmp_path, transport):
    broker_url = "filesystem://localhost//" if transport == "filesystem" else _redis_url()
    if broker_url is None:
        pytest.skip("no Redis broker reachable (reason printed above)")
    env = _env(tmp_path, broker_url)
    queue = f"roundtrip-{uuid.uuid4().hex[:8]}"  # no other worker can steal it
    with celery_worker(env, queue):
        payload = f"hello-{uuid.uuid4().hex[:6]}"
        started = time.monotonic()
        client = portal_python(
            env,
            "from efficiency.tasks import ping_task; "
            f"print(ping_task.apply_async(args=[{payload!r}], queue={queue!r}).get(timeout=60)['pong'])",
        )
        assert client.returncode == 0, client.stderr
        assert client.stdout.strip().splitlines()[-1] == payload
        print(f"{transport}: round trip in {time.monotonic() - started:.1f}s")
