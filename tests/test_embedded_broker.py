"""The embedded broker (``make run``'s file-system transport) hands a reader only whole messages.

kombu's own file-system transport lets a polling reader take a message file that its writer has
created but not yet written: the reader cannot decode it and Celery stops the worker
("Unrecoverable error: JSONDecodeError", kombu issue 1551). A browser walk of ``make run`` hit it
and the whole portal stopped. On this machine two writer processes of 3,000 messages each
against one reader gave 15 such errors with kombu's transport and none with the portal's
(``portal.broker``). The writers here are separate processes, as beat, the web and the worker are.
"""

import os
import queue
import subprocess
import sys
import time
from pathlib import Path

from kombu import Connection

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = 3_000  # per writer (2,000 did not always catch kombu's transport; 3,000 did, three runs in three)
TRANSPORT = "portal.broker:Transport"
WRITER = """
import sys
from kombu import Connection
folder, writer, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = {"data_folder_in": folder, "data_folder_out": folder, "control_folder": folder + "-control"}
transport = "portal.broker:Transport"
with Connection("filesystem://localhost//", transport=transport, transport_options=options) as c:
    work = c.SimpleQueue("work")
    for number in range(count):
        work.put({"writer": writer, "number": number, "padding": "x" * 4000})
"""


def test_two_writer_processes_and_a_polling_reader_lose_and_break_no_message(tmp_path):
    folder = tmp_path / "queue"
    for path in (folder, tmp_path / "queue-control", tmp_path / "processed"):
        path.mkdir()
    options = {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "control_folder": str(tmp_path / "queue-control"),
        "processed_folder": str(tmp_path / "processed"),
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(folder), name, str(MESSAGES)], env=env)
        for name in ("beat", "web")
    ]
    received, errors = [], []
    with Connection(
        "filesystem://localhost//", transport="portal.broker:Transport", transport_options=options
    ) as c:
        work = c.SimpleQueue("work")
        deadline = time.monotonic() + 180
        while len(received) < 2 * MESSAGES and time.monotonic() < deadline:
            try:
                message = work.get(timeout=0.001)
            except queue.Empty:
                continue
            except Exception as error:  # what kombu's own transport raises here: JSONDecodeError
                errors.append(repr(error))
                continue
            received.append((message.payload["writer"], message.payload["number"]))
            message.ack()
    for writer in writers:
        assert writer.wait(timeout=60) == 0
    assert errors == []
    assert sorted(received) == sorted((name, n) for name in ("beat", "web") for n in range(MESSAGES))
    assert not list(folder.iterdir())  # no message, and no half-written file, left behind


def test_the_embedded_default_uses_the_whole_message_transport():
    env = {k: v for k, v in os.environ.items() if not k.startswith("CELERY_")}
    env.update(DJANGO_SETTINGS_MODULE="portal.settings", PYTHONPATH=str(ROOT))
    shown = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.CELERY_BROKER_TRANSPORT)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert shown.stdout.strip() == "portal.broker:Transport"
