"""Gunicorn settings of the portal's web process, for systemd (portal-web.service) and the image.

Read from the environment, so one file serves every host: PORTAL_BIND, PORTAL_WEB_WORKERS (processes),
PORTAL_WEB_THREADS (threads per process). Threaded workers keep answering gunicorn's arbiter while a
thread streams a long CSV; a sync worker would be killed at ``timeout`` mid-download.
"""

import os

wsgi_app = "portal.wsgi"
bind = os.environ.get("PORTAL_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("PORTAL_WEB_WORKERS", "2"))
worker_class = "gthread"
threads = int(os.environ.get("PORTAL_WEB_THREADS", "4"))
# SIGTERM: stop accepting, let requests in flight finish for this long, then stop. The unit's
# TimeoutStopSec and compose's stop_grace_period are a little longer.
graceful_timeout = int(os.environ.get("PORTAL_WEB_GRACEFUL_TIMEOUT_S", "60"))
# Logs go to stdout/stderr: the journal or the container runtime keeps them.
accesslog = "-"
errorlog = "-"
# The load balancer or reverse proxy in front sets X-Forwarded-For/-Proto; trust it only from there.
forwarded_allow_ips = os.environ.get("PORTAL_FORWARDED_ALLOW_IPS", "127.0.0.1")
