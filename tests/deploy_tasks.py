"""A slow task for the shutdown tests: a worker started with ``--include tests.deploy_tasks`` runs it."""

import os
import time
from pathlib import Path

from celery import shared_task


@shared_task
def slow_write_task(directory: str, seconds: float) -> int:
    """Note the start (with this process's id), take ``seconds``, then note the end."""
    with (Path(directory) / "started").open("a") as started:
        started.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    with (Path(directory) / "finished").open("a") as finished:
        finished.write(f"{os.getpid()}\n")
    return os.getpid()
