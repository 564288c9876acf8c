"""WSGI entry point (gunicorn portal.wsgi)."""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

application = get_wsgi_application()
# Import every view now (the URL configuration is otherwise loaded by the first request), then
# move all that start-up made into the permanent generation: the garbage collector no longer
# rescans those objects in each full collection, which showed as p95 spikes of the pages' server
# time (bench/usage_pages.py; issue 19).
get_resolver().url_patterns  # noqa: B018 -- loading it is the point
gc.freeze()
