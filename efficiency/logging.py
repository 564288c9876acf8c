"""Log context: every record carries the HTTP request or the Celery task it was written under.

``RequestIdMiddleware`` (efficiency.middleware) sets ``request_id`` for the length of a request;
``LogContextFilter``, on the handlers in ``settings.LOGGING``, copies it onto each record together
with the id and name of the Celery task under way (Celery keeps those on its own task stack, so
tasks run by a worker, eagerly or through ``apply()`` are all covered). The two formatters write
the same fields: one JSON object a line in production, a readable line in development.
"""

import logging
import re
import uuid
from contextvars import ContextVar

from celery._state import get_current_task
from pythonjsonlogger.json import JsonFormatter

request_id: ContextVar[str] = ContextVar("request_id", default="")

# What a proxy or client may hand us as a request id: a token that is safe to echo in a header
# and to write into a log line (no spaces, quotes or line breaks), of a sane length.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def request_id_choose(incoming: str | None) -> str:
    """The incoming ``X-Request-ID`` when it is a sane token, else a new random id."""
    if incoming and _SANE_REQUEST_ID.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


class LogContextFilter(logging.Filter):
    """Add ``request_id``, ``task_id`` and ``task_name`` to a record, where there are any."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = request_id.get()
        if current and not hasattr(record, "request_id"):
            record.request_id = current
        task = get_current_task()
        if task is not None and task.request.id and not hasattr(record, "task_id"):
            record.task_id = task.request.id
            record.task_name = task.name
        return True


class PortalJsonFormatter(JsonFormatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message, context and extras."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("fmt", "%(levelname)s %(name)s %(message)s")
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", "time")
        super().__init__(*args, **kwargs)


class PortalTextFormatter(logging.Formatter):
    """A readable line for development, with the request or task in brackets when there is one."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("fmt", "%(asctime)s %(levelname)s %(name)s %(context)s%(message)s")
        super().__init__(*args, **kwargs)

    def formatMessage(self, record: logging.LogRecord) -> str:
        parts = []
        if getattr(record, "request_id", ""):
            parts.append(f"request={record.request_id}")
        if getattr(record, "task_id", ""):
            parts.append(f"task={record.task_name}[{record.task_id}]")
        # Not set on the record itself: another handler's formatter would pick it up as an extra.
        context = f"[{' '.join(parts)}] " if parts else ""
        return self._style._fmt % {**record.__dict__, "context": context}
