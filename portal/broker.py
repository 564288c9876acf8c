"""The embedded broker: kombu's file-system transport, with each message written whole before a
worker can see it.

kombu's ``filesystem`` transport creates a message's file and then writes it; a worker polling
the folder in between moves the still-empty file away, fails to decode it, and Celery stops the
worker with "Unrecoverable error: JSONDecodeError" (kombu issue 1551; seen here on ``make run``
under a browser walk: the portal stopped). Here a message is written to a file no reader picks,
then renamed to its real name, which is atomic within one folder; a file that still cannot be
decoded (left by an older version) is logged and skipped instead of stopping the worker.
"""

import logging
import os
import uuid
from queue import Empty
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

logger = logging.getLogger(__name__)


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` on ``queue``: written as ``.tmp-<uuid>`` (not a message name: readers
        take only ``*.<queue>.msg``), then renamed to the name the upstream transport gives it."""
        data = str_to_bytes(dumps(payload))
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        temporary = os.path.join(self.data_folder_out, f".tmp-{uuid.uuid4()}")
        try:
            with open(temporary, "wb") as handle:
                handle.write(data)
            os.replace(temporary, os.path.join(self.data_folder_out, name))
        except OSError as error:
            raise ChannelError(f"Cannot add file {name!r} to directory") from error

    def _get(self, queue):
        try:
            return super()._get(queue)
        except ValueError:  # a message file that is not JSON: it was taken off the queue already
            logger.exception("Skipped a broken message file of queue %s", queue)
            raise Empty() from None


class Transport(filesystem.Transport):
    Channel = Channel
