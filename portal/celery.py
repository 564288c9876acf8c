"""The Celery application: broker, result backend and schedule come from Django settings."""

import logging
import os

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _django_logging(loglevel=None, **kwargs) -> None:
    # Workers and beat log like the web processes (settings.LOGGING: JSON in production, with the
    # task id and name on each line) instead of Celery's own format; --loglevel still applies.
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger().setLevel(loglevel)
