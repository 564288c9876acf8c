"""Settings for the GPU Efficiency Portal, read from the environment.

Two modes:

* the embedded default (no variables set): SQLite and a file-system Celery broker under
  ``var/``, so ``make run`` needs nothing but Python;
* production (``PORTAL_ENV=production``): PostgreSQL via ``DATABASE_URL``, Redis or RabbitMQ via
  ``CELERY_BROKER_URL``, HTTPS-only cookies and HSTS; ``manage.py check --deploy`` is clean.
"""

import secrets
from datetime import time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfoNotFoundError

import dj_database_url
import plotly
from celery.schedules import crontab
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from efficiency.analysis.node_classes import ClassThresholds
from efficiency.analysis.tickets.calendar import WorkingCalendar, holidays_from_json
from portal.envutils import env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PORTAL_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)

PORTAL_ENV = env_str("PORTAL_ENV", "embedded")
if PORTAL_ENV not in {"embedded", "production"}:
    raise ImproperlyConfigured(f"PORTAL_ENV={PORTAL_ENV!r}: use 'embedded' or 'production'.")
PRODUCTION = PORTAL_ENV == "production"

DEBUG = env_bool("DEBUG", False)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG must be off when PORTAL_ENV=production.")


def _secret_key() -> str:
    key = env_str("SECRET_KEY")
    if key:
        return key
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY must be set when PORTAL_ENV=production.")
    # Embedded mode: keep one generated key under var/ so sessions survive restarts.
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(64))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "efficiency",
]

MIDDLEWARE = [
    # First: the request id is on every log line of the request, redirects and refusals included.
    "efficiency.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "efficiency.middleware.PortalLoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                "efficiency.context_processors.portal",
            ],
        },
    },
]

# --- Database --------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'portal.sqlite3'}")
# PORTAL_DB_POOL=1 (PostgreSQL only): each process keeps a psycopg connection pool of
# PORTAL_DB_POOL_MIN_SIZE to PORTAL_DB_POOL_MAX_SIZE connections, and a request or task that finds
# none free waits up to PORTAL_DB_POOL_TIMEOUT_S. Django refuses a pool with persistent
# connections, so DB_CONN_MAX_AGE is then ignored. PgBouncer in front: session mode (the sources'
# claims hold session advisory locks, and large reads use server-side cursors).
DB_POOL = env_bool("PORTAL_DB_POOL", False)
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=0 if DB_POOL else env_int("DB_CONN_MAX_AGE", 60),
        # With the pool, Django has it check a connection before handing it out: one the server
        # dropped (a restart, a failover) is replaced, not given to a request.
        conn_health_checks=True,
    )
}
if DB_POOL:
    if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured("PORTAL_DB_POOL=1 needs PostgreSQL (DATABASE_URL=postgres://...).")
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env_int("PORTAL_DB_POOL_MIN_SIZE", 2),
        "max_size": env_int("PORTAL_DB_POOL_MAX_SIZE", 4),
        "timeout": env_float("PORTAL_DB_POOL_TIMEOUT_S", 10.0),
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default has a web server and a Celery worker writing one file: WAL lets
    # readers go on during a write, IMMEDIATE avoids "database is locked" on lock upgrades.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth ------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "efficiency:home"
LOGOUT_REDIRECT_URL = "login"
INSTALLED_APPS += ["axes", "simple_history"]
# Last, after authentication: the audit trail records who made a change, and axes turns a
# lockout into the login page's (or the API's) 429.
MIDDLEWARE += ["simple_history.middleware.HistoryRequestMiddleware", "axes.middleware.AxesMiddleware"]
# Login throttling (django-axes): after PORTAL_LOGIN_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair is refused for PORTAL_LOGIN_COOLOFF_MIN minutes (any
# try meanwhile starts the wait again); a right password resets the count.
AUTHENTICATION_BACKENDS = [
    "efficiency.auth.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("PORTAL_LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("PORTAL_LOGIN_COOLOFF_MIN", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "efficiency.auth.lockout_response"
AXES_VERBOSE = False
# The log names the username and address of a failure and a lockout (ops need both to act).
AXES_SENSITIVE_PARAMETERS: list[str] = []
# API tokens (efficiency.models.ApiToken): stored as SHA-256 digests, valid this many days.
PORTAL_API_TOKEN_DAYS = env_int("PORTAL_API_TOKEN_DAYS", 90)

# --- I18n and time ---------------------------------------------------------------------------
LANGUAGE_CODE = env_str("LANGUAGE_CODE", "en")
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_I18N = True
TIME_ZONE = env_str("TIME_ZONE", "Asia/Shanghai")
USE_TZ = True  # stored in UTC, shown in TIME_ZONE

# --- Static files ----------------------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [
    BASE_DIR / "static",
    # plotly.js ships inside the plotly wheel: serve that copy, so the browser library always
    # matches the Python library that builds the figures, and no CDN is needed.
    ("vendor/plotly", Path(plotly.__file__).parent / "package_data"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
# Outside production static files are served straight from the finders: no collectstatic step.
WHITENOISE_USE_FINDERS = not PRODUCTION
# Pages name static files through {% static %} (hashed names) only, and PDFs load none, so the
# unhashed copies are not needed: collectstatic compresses (gzip and Brotli) each file once, not
# twice, which halves a deploy's collectstatic (plotly.js is 4.8 MB).
WHITENOISE_KEEP_ONLY_HASHED_FILES = True

# --- Security --------------------------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Content-Security-Policy (django-csp): scripts and styles from our own static files only, no
# inline script or handler anywhere (the charts' data travel as JSON script blocks, which never
# run). plotly.js writes style attributes and a <style> element as it draws, hence inline
# styles; nothing may be framed, posted elsewhere or loaded from another origin.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    # Load balancers probe over plain HTTP inside the network; a redirect would read as "down".
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    if env_bool("TRUST_X_FORWARDED_PROTO", False):
        # Only behind a proxy that sets (and strips incoming) X-Forwarded-Proto.
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- REST API --------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: an anonymous API call gets 401 with "WWW-Authenticate: Token".
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "efficiency.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "efficiency.api.pagination.PortalPagination",
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "efficiency.api.params.StrictOrderingFilter",
    ],
    # drf-spectacular's, plus the declared query parameters and the 400/401/403/404 answers.
    "DEFAULT_SCHEMA_CLASS": "efficiency.api.schema.PortalAutoSchema",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Efficiency Portal API",
    "DESCRIPTION": "Read and act on GPU usage, quotas, jobs and faults. Scoped to your departments.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "NodeStateEnum": "efficiency.choices.NodeState",
        "JobStateEnum": "efficiency.choices.JobState",
        "QuotaCycleStatusEnum": "efficiency.choices.QuotaCycleStatus",
        "IncidentStatusEnum": "efficiency.choices.IncidentStatus",
        "SignalSourceEnum": "efficiency.choices.SignalSource",
        "JobSourceEnum": "efficiency.choices.JobSource",
        "QuotaCycleOriginEnum": "efficiency.choices.QuotaCycleOrigin",
        # The ticket moves people make (the portal's own are not theirs to ask for).
        "TicketMoveEnum": ["start", "wait", "resume", "resolve", "close", "reopen", "wont_fix"],
        "TicketCreateOriginEnum": ["manual", "committee"],
        "RecommendationDecisionEnum": ["accept", "reject", "snooze", "comment"],
    },
}

# --- Celery ----------------------------------------------------------------------------------
# "localhost" names no server: the file-system transport wants a host only to stop it warning.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://localhost//")
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The embedded broker: messages are files under var/broker, so no server is needed; each is
    # written whole before a worker can see it (portal.broker).
    CELERY_BROKER_TRANSPORT = "portal.broker:Transport"
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "store_processed": False,
        "control_folder": str(_broker_dir / "control"),
    }
    _default_backend = f"file://{VAR_DIR / 'celery-results'}"
    (VAR_DIR / "celery-results").mkdir(exist_ok=True)
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    _default_backend = CELERY_BROKER_URL
else:
    _default_backend = "rpc://"
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", _default_backend)
CELERY_RESULT_EXPIRES = 3600
CELERY_TIMEZONE = "UTC"
CELERY_ENABLE_UTC = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A collector task that dies half-way must run again rather than lose its data: acknowledge
# after the task has finished, and re-queue when the worker process is killed.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 30 * 60)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 60
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Three queues, so that slow work never holds up urgent work: "collection" (scrapes, reads and
# their fan-out: due every 15 s), "analysis" (rollups, classification, fault detection,
# recommendations, quotas, committee packs, retention: minutes of work at times) and "actions"
# (notifications and actuators: an incident's isolation or a page must not wait behind a rollup).
# One worker can consume all three (``make run`` does: -Q collection,analysis,actions), or each
# host runs workers for some of them (README: "Workers and queues").
PORTAL_QUEUE_COLLECTION, PORTAL_QUEUE_ANALYSIS, PORTAL_QUEUE_ACTIONS = "collection", "analysis", "actions"
PORTAL_QUEUES = (PORTAL_QUEUE_COLLECTION, PORTAL_QUEUE_ANALYSIS, PORTAL_QUEUE_ACTIONS)
# A task not listed below (ping_task, a new task) goes to the analysis queue.
CELERY_TASK_DEFAULT_QUEUE = PORTAL_QUEUE_ANALYSIS
_TASK_QUEUES = {
    PORTAL_QUEUE_COLLECTION: ["collect_due_sources_task", "collect_source_task"],
    PORTAL_QUEUE_ANALYSIS: [
        "rollups_refresh_task",
        "node_classes_refresh_task",
        "retention_prune_task",
        "worker_heartbeat_prune_task",
        "quota_cycles_roll_task",
        "quota_backtest_task",
        "capacity_check_task",
        "fault_scan_source_task",
        "fault_scan_task",
        "fault_detect_task",
        "incidents_group_task",
        "incidents_refresh_task",
        "recommendations_refresh_task",
        "tickets_verify_task",
        "committee_pack_request_task",
        "committee_pack_generate_task",
    ],
    PORTAL_QUEUE_ACTIONS: [
        "incident_policy_task",
        "notification_route_task",
        "notifications_deliver_task",
        "notifications_sla_scan_task",
        "demo_fix_apply_task",
    ],
}
CELERY_TASK_ROUTES = {
    f"efficiency.tasks.{task}": {"queue": queue} for queue, tasks in _TASK_QUEUES.items() for task in tasks
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# One beat sends the schedule however many are started; the others stand by and take over when
# it stops (portal.beat: a PostgreSQL advisory lock, or a file lock for the embedded default).
CELERY_BEAT_SCHEDULER = "portal.beat:SingleBeatScheduler"
PORTAL_BEAT_STANDBY_POLL_S = env_int("PORTAL_BEAT_STANDBY_POLL_S", 10)
# Beat's collection pass: how often it looks for sources whose interval has passed (the
# shortest interval a source can have in practice; services.sources.due_slack is half of it).
PORTAL_COLLECTION_PASS_S = 15.0
# Every periodic job of the portal, in one place, each with its cadence in words.
CELERY_BEAT_SCHEDULE = {
    # Every minute, on each queue: a worker of that queue records that its host is alive, so
    # /healthz can tell a stuck queue.
    **{
        f"worker-heartbeat-{queue}": {
            "task": "efficiency.tasks.worker_heartbeat_task",
            "schedule": 60.0,
            "options": {"queue": queue},
        }
        for queue in PORTAL_QUEUES
    },
    # Every 15 seconds: collect from every data source whose own interval has passed.
    "collect-due-sources": {
        "task": "efficiency.tasks.collect_due_sources_task",
        "schedule": PORTAL_COLLECTION_PASS_S,
    },
    # Every minute: recompute the hourly rollups of hours that got new or late data.
    "rollups-refresh": {"task": "efficiency.tasks.rollups_refresh_task", "schedule": 60.0},
    # Daily at 00:20 UTC: classify nodes over the cycle that ended at midnight.
    "node-classes-refresh": {
        "task": "efficiency.tasks.node_classes_refresh_task",
        "schedule": crontab(hour=0, minute=20),
    },
    # Daily at 00:40 UTC: make the first cycle (the fixed partition) of a new cluster, and
    # propose the next cycle's quotas PORTAL_QUOTA_PROPOSE_DAYS_AHEAD days before it begins.
    "quota-cycles-roll": {
        "task": "efficiency.tasks.quota_cycles_roll_task",
        "schedule": crontab(hour=0, minute=40),
    },
    # Every hour at :25: raise or resolve capacity alerts (shared pool exhausted, demand trend).
    "capacity-check": {
        "task": "efficiency.tasks.capacity_check_task",
        "schedule": crontab(minute=25),
    },
    # Every minute: scan log sources for faults (collections also scan what they stored at once).
    "fault-scan": {"task": "efficiency.tasks.fault_scan_task", "schedule": 60.0},
    # Every minute: progress detectors (slowdown, straggler node, hang) over recent jobs' logs.
    "fault-detect": {"task": "efficiency.tasks.fault_detect_task", "schedule": 60.0},
    # Every 5 minutes: mark incidents recovered when their job or its resubmission runs again.
    "incidents-refresh": {"task": "efficiency.tasks.incidents_refresh_task", "schedule": 300.0},
    # Every 5 minutes: recommendations of the job families that got new logs or hours since the
    # last run (incremental); daily at 01:10 UTC: every family of the window, closing what no
    # longer holds (full).
    "recommendations-refresh": {
        "task": "efficiency.tasks.recommendations_refresh_task",
        "schedule": 300.0,
    },
    "recommendations-nightly": {
        "task": "efficiency.tasks.recommendations_refresh_task",
        "schedule": crontab(hour=1, minute=10),
        "kwargs": {"full": True},
    },
    # Daily at 03:00 UTC: drop raw samples and log chunks past PORTAL_RAW_RETENTION_DAYS.
    "retention-prune": {
        "task": "efficiency.tasks.retention_prune_task",
        "schedule": crontab(hour=3, minute=0),
    },
    # Daily at 03:30 UTC: drop heartbeats of workers that have been gone for a week.
    "heartbeat-prune": {
        "task": "efficiency.tasks.worker_heartbeat_prune_task",
        "schedule": crontab(hour=3, minute=30),
    },
    # Every 15 minutes: measure the gain of resolved tickets that are verifying.
    "tickets-verify": {"task": "efficiency.tasks.tickets_verify_task", "schedule": 900.0},
    # Every 5 minutes: announce tickets that became due soon or overdue (once per due date).
    "notifications-sla-scan": {"task": "efficiency.tasks.notifications_sla_scan_task", "schedule": 300.0},
    # Every minute: send the notification deliveries whose batching window or retry delay has passed.
    "notifications-deliver": {"task": "efficiency.tasks.notifications_deliver_task", "schedule": 60.0},
    # Every hour at :50: seal the committee's review pack of a period that has ended (once per
    # period; the pack is built in the worker, never in a request) and notify the committee.
    "committee-pack": {
        "task": "efficiency.tasks.committee_pack_generate_task",
        "schedule": crontab(minute=50),
    },
}

# --- Portal ----------------------------------------------------------------------------------
# A worker heartbeat older than this makes /healthz report the workers as stale.
PORTAL_WORKER_STALE_AFTER_S = env_int("PORTAL_WORKER_STALE_AFTER_S", 180)
# A dcgm source's exporter URLs fetched at once by one collection (threads of the worker that
# runs it): 1,250 exporters answering in 50 ms take 2 s at 32, a minute one after another.
PORTAL_SCRAPE_CONCURRENCY = env_int("PORTAL_SCRAPE_CONCURRENCY", 32)
if PORTAL_SCRAPE_CONCURRENCY < 1:
    raise ImproperlyConfigured("PORTAL_SCRAPE_CONCURRENCY must be at least 1.")

# Logs: one JSON object a line in production (LOG_FORMAT=json), a readable line in development
# (LOG_FORMAT=text); each carries the request id (X-Request-ID, echoed in the response) or the
# Celery task id and name it was written under (efficiency.logging).
LOG_FORMAT = env_str("LOG_FORMAT", "json" if PRODUCTION else "text")
if LOG_FORMAT not in {"json", "text"}:
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r}: use 'json' or 'text'.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "efficiency.logging.LogContextFilter"}},
    "formatters": {
        "json": {"()": "efficiency.logging.PortalJsonFormatter"},
        "text": {"()": "efficiency.logging.PortalTextFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["context"]}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # A 403 or 404 is an ordinary answer, not an error of the portal: Django logs those at
        # WARNING (with a traceback for a 403); server errors are logged at ERROR and kept.
        # Refused CSRF tokens and other security events still go through django.security.
        "django.request": {"level": "ERROR"},
        # Every sign-in is an INFO line from django-axes; lockouts are warnings and stay.
        "axes": {"level": "WARNING"},
    },
}
# Raw GPU samples older than this are dropped (rollups keep the history).
PORTAL_RAW_RETENTION_DAYS = env_int("PORTAL_RAW_RETENTION_DAYS", 35)
# PostgreSQL: daily partitions of the raw tables are made this many days ahead (by the daily
# retention task; ingest also makes a missing day's partition before writing to it).
PORTAL_PARTITIONS_AHEAD_DAYS = env_int("PORTAL_PARTITIONS_AHEAD_DAYS", 3)
# Directories file sources (an sacct dump's "path", a log tree's "root") may read from; anything
# else, the secret key included, is refused. Default: the demo's var/sim and var/sources.
PORTAL_SOURCE_ROOTS = env_list("PORTAL_SOURCE_ROOTS", f"{VAR_DIR / 'sim'},{VAR_DIR / 'sources'}")
# Nodes a source discovers (Slurm, Kubernetes, dcgm-exporter labels) start as "discovered" for an
# admin to confirm; with this set they are active, and count in capacity, at once.
PORTAL_DISCOVERY_AUTO_ACCEPT = env_bool("PORTAL_DISCOVERY_AUTO_ACCEPT", False)
# The log scanner's engine (efficiency.analysis.faults.scanner reads the variable itself, so that
# it stays plain Python): Hyperscan where installed, or the pure-Python prefilter. Checked here so
# that a typo stops the process at start-up rather than failing the first scan.
_SCAN_ENGINE = env_str("PORTAL_SCAN_ENGINE")
if _SCAN_ENGINE not in ("", "hyperscan", "python"):
    raise ImproperlyConfigured(f"PORTAL_SCAN_ENGINE={_SCAN_ENGINE!r}: use 'hyperscan' or 'python'.")
# The demo's simulated dcgm-exporter (manage.py simulate serve) listens here.
PORTAL_SIMULATOR_PORT = env_int("PORTAL_SIMULATOR_PORT", 9400)
# The planning cycle (the GPU committee meets every two weeks) and node class thresholds
# (efficiency.analysis.node_classes.ClassThresholds, whose checks reject a value out of range at
# start-up): an hour is idle below PORTAL_NODE_IDLE_UTIL_PCT and hot above
# PORTAL_NODE_HOT_UTIL_PCT; a node is idle / hot when at least that share (0-1) of its covered
# hours is, fluctuating when the hourly std-dev reaches PORTAL_NODE_FLUCTUATION_PCT points, and
# "unknown" with fewer than PORTAL_NODE_MIN_COVERED_HOURS covered hours in the cycle.
PORTAL_CYCLE_DAYS = env_int("PORTAL_CYCLE_DAYS", 14)
# The committee's KPI targets shown in the review pack's summary (ratios 0-1, seconds, a count).
PORTAL_COMMITTEE_TARGET_UTILIZATION = env_float("PORTAL_COMMITTEE_TARGET_UTILIZATION", 0.45)
PORTAL_COMMITTEE_TARGET_ALLOCATION_RATE = env_float("PORTAL_COMMITTEE_TARGET_ALLOCATION_RATE", 0.8)
PORTAL_COMMITTEE_TARGET_MTTR_S = env_float("PORTAL_COMMITTEE_TARGET_MTTR_S", 4 * 3600.0)
PORTAL_COMMITTEE_TARGET_ETTR = env_float("PORTAL_COMMITTEE_TARGET_ETTR", 0.9)
PORTAL_COMMITTEE_TARGET_OVERDUE_TICKETS = env_int("PORTAL_COMMITTEE_TARGET_OVERDUE_TICKETS", 0)
PORTAL_NODE_CLASS_THRESHOLDS: dict[str, float] = {
    "idle_util_pct": env_float("PORTAL_NODE_IDLE_UTIL_PCT", 1.0),
    "idle_hour_share": env_float("PORTAL_NODE_IDLE_HOUR_SHARE", 0.8),
    "hot_util_pct": env_float("PORTAL_NODE_HOT_UTIL_PCT", 80.0),
    "hot_hour_share": env_float("PORTAL_NODE_HOT_HOUR_SHARE", 0.4),
    "fluctuation_pct": env_float("PORTAL_NODE_FLUCTUATION_PCT", 20.0),
    "min_covered_hours": env_int("PORTAL_NODE_MIN_COVERED_HOURS", 24),
}
try:  # a typo in the environment fails at start-up, not at the first nightly classification
    ClassThresholds(**PORTAL_NODE_CLASS_THRESHOLDS)
except ValueError as error:
    raise ImproperlyConfigured(f"Node class thresholds: {error}") from None
# Tuning recommendations (efficiency.analysis.recommendations.rules.Settings): the engine reads
# the jobs of the last PORTAL_RECOMMENDATION_WINDOW_DAYS days. GPUs held at or below
# PORTAL_IDLE_ACTIVITY_PCT are idle: a warning at 60 and 105 minutes, a release proposed at 120
# (Princeton's Job Defense Shield). A job family below PORTAL_LOW_EFFICIENCY_PCT activity over 7
# days with at least PORTAL_LOW_EFFICIENCY_MIN_GPU_H GPU-hours is low-efficiency.
# A change that saves less than PORTAL_RECOMMENDATION_MIN_GAIN_PCT of a family's GPU time is not
# proposed. PORTAL_ACCELERATED_IMAGES / PORTAL_STOCK_IMAGES (comma-separated image repositories) tell the
# acceleration library's images from stock framework images.
PORTAL_RECOMMENDATION_WINDOW_DAYS = env_int("PORTAL_RECOMMENDATION_WINDOW_DAYS", 14)
PORTAL_RECOMMENDATIONS: dict = {
    "idle_activity_pct": env_float("PORTAL_IDLE_ACTIVITY_PCT", 1.0),
    "idle_warn_min": env_float("PORTAL_IDLE_WARN_MIN", 60.0),
    "idle_final_warn_min": env_float("PORTAL_IDLE_FINAL_WARN_MIN", 105.0),
    "idle_release_min": env_float("PORTAL_IDLE_RELEASE_MIN", 120.0),
    "low_efficiency_pct": env_float("PORTAL_LOW_EFFICIENCY_PCT", 25.0),
    "low_efficiency_min_gpu_h": env_float("PORTAL_LOW_EFFICIENCY_MIN_GPU_H", 50.0),
    "starved_activity_pct": env_float("PORTAL_STARVED_ACTIVITY_PCT", 35.0),
    "min_gain_pct": env_float("PORTAL_RECOMMENDATION_MIN_GAIN_PCT", 2.0),
    "accelerated_images": tuple(
        env_list("PORTAL_ACCELERATED_IMAGES", "registry.internal/ai-platform/accel-train")
    ),
    "stock_images": tuple(
        env_list(
            "PORTAL_STOCK_IMAGES",
            "pytorch/pytorch,docker.io/pytorch/pytorch,huggingface/transformers-pytorch-gpu",
        )
    ),
}
if not (
    PORTAL_RECOMMENDATIONS["idle_warn_min"]
    <= PORTAL_RECOMMENDATIONS["idle_final_warn_min"]
    <= PORTAL_RECOMMENDATIONS["idle_release_min"]
):
    raise ImproperlyConfigured(
        "PORTAL_IDLE_WARN_MIN <= PORTAL_IDLE_FINAL_WARN_MIN <= PORTAL_IDLE_RELEASE_MIN must hold."
    )
# Remediation tickets (efficiency.services.tickets): a ticket is due this many business hours
# after it is opened, by severity, on the working calendar: PORTAL_WORKING_ZONE, working hours
# PORTAL_WORKING_HOURS ("9-18"), Monday to Friday, with the public holidays and swapped working days
# of PORTAL_HOLIDAYS_FILE (China's State Council notices are shipped). "Due soon" starts
# PORTAL_TICKET_DUE_SOON_HOURS business hours before the due date. Verification of a resolved
# ticket's gain waits for PORTAL_TICKET_VERIFY_MIN_ITERATIONS iteration-time lines and
# PORTAL_TICKET_VERIFY_MIN_GPU_H GPU-hours of the family after the fix, and compares them with the
# PORTAL_TICKET_VERIFY_BEFORE_DAYS before it; it gives up (no gain) after PORTAL_TICKET_VERIFY_MAX_DAYS.
PORTAL_TICKET_SLA_HOURS: dict[str, float] = {
    "critical": env_float("PORTAL_TICKET_SLA_CRITICAL_H", 4.0),
    "high": env_float("PORTAL_TICKET_SLA_HIGH_H", 18.0),
    "medium": env_float("PORTAL_TICKET_SLA_MEDIUM_H", 45.0),
    "low": env_float("PORTAL_TICKET_SLA_LOW_H", 90.0),
}
PORTAL_TICKET_DUE_SOON_HOURS = env_float("PORTAL_TICKET_DUE_SOON_HOURS", 4.0)
PORTAL_WORKING_ZONE = env_str("PORTAL_WORKING_ZONE", "Asia/Shanghai")
PORTAL_WORKING_HOURS = env_str("PORTAL_WORKING_HOURS", "9-18")
PORTAL_HOLIDAYS_FILE = env_str("PORTAL_HOLIDAYS_FILE", "")  # empty: the shipped China calendar
PORTAL_TICKET_VERIFICATION: dict = {
    "min_after_iterations": env_int("PORTAL_TICKET_VERIFY_MIN_ITERATIONS", 200),
    "min_after_gpu_h": env_float("PORTAL_TICKET_VERIFY_MIN_GPU_H", 8.0),
    "before_days": env_int("PORTAL_TICKET_VERIFY_BEFORE_DAYS", 7),
    "max_days": env_int("PORTAL_TICKET_VERIFY_MAX_DAYS", 14),
}
try:  # a typo in the calendar fails at start-up, not at the first ticket
    _start, _end = (int(part) for part in PORTAL_WORKING_HOURS.split("-"))
    WorkingCalendar(zone=PORTAL_WORKING_ZONE, day_start=time(_start), day_end=time(_end))
    if PORTAL_HOLIDAYS_FILE:
        holidays_from_json(PORTAL_HOLIDAYS_FILE)
except (ValueError, KeyError, OSError, ZoneInfoNotFoundError) as error:
    raise ImproperlyConfigured(
        f"Working calendar (PORTAL_WORKING_ZONE, PORTAL_WORKING_HOURS as 9-18, PORTAL_HOLIDAYS_FILE): {error}"
    ) from None
if any(hours <= 0 for hours in PORTAL_TICKET_SLA_HOURS.values()):
    raise ImproperlyConfigured("Every PORTAL_TICKET_SLA_*_H must be a positive number of business hours.")
# Notifications (efficiency.services.notifications): events about tickets, recommendations and
# incidents are collected per target for PORTAL_NOTIFICATION_WINDOW_S seconds and sent as one
# message, or as a digest when more than PORTAL_NOTIFICATION_DIGEST_OVER piled up. A failed send is
# tried again after each of PORTAL_NOTIFICATION_RETRY_S (seconds), then marked failed for the admin.
# Each webhook call gives up after PORTAL_NOTIFICATION_TIMEOUT_S. Messages are written in
# PORTAL_NOTIFICATION_LANGUAGE and link to pages under PORTAL_BASE_URL (the portal's address as
# its users reach it). Email goes through Django's mail settings (EMAIL_*, DEFAULT_FROM_EMAIL).
PORTAL_NOTIFICATION_WINDOW_S = env_int("PORTAL_NOTIFICATION_WINDOW_S", 60)
PORTAL_NOTIFICATION_DIGEST_OVER = env_int("PORTAL_NOTIFICATION_DIGEST_OVER", 5)
PORTAL_NOTIFICATION_RETRY_S = [int(s) for s in env_list("PORTAL_NOTIFICATION_RETRY_S", "60,300,1800")]
PORTAL_NOTIFICATION_TIMEOUT_S = env_float("PORTAL_NOTIFICATION_TIMEOUT_S", 10.0)
PORTAL_NOTIFICATION_LANGUAGE = env_str("PORTAL_NOTIFICATION_LANGUAGE", LANGUAGE_CODE)
PORTAL_BASE_URL = env_str("PORTAL_BASE_URL", "http://localhost:8000").rstrip("/")
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")
if PORTAL_NOTIFICATION_WINDOW_S < 0 or PORTAL_NOTIFICATION_DIGEST_OVER < 1:
    raise ImproperlyConfigured(
        "PORTAL_NOTIFICATION_WINDOW_S must be >= 0 and PORTAL_NOTIFICATION_DIGEST_OVER >= 1."
    )
if any(delay <= 0 for delay in PORTAL_NOTIFICATION_RETRY_S):
    raise ImproperlyConfigured("PORTAL_NOTIFICATION_RETRY_S must list positive numbers of seconds.")
# Quota planning (efficiency.analysis.quotas): the next cycle's guarantee is this percentile of
# last cycle's hourly demand, moved at most PORTAL_QUOTA_MAX_CHANGE_PCT per cycle, at least
# PORTAL_QUOTA_FLOOR_GPUS, and all guarantees of a GPU model together at most
# PORTAL_QUOTA_GUARANTEED_SHARE of its capacity (the rest is the shared pool). The proposal is
# computed PORTAL_QUOTA_PROPOSE_DAYS_AHEAD days before the cycle in force ends.
PORTAL_QUOTA_PERCENTILE = env_float("PORTAL_QUOTA_PERCENTILE", 75.0)
PORTAL_QUOTA_MAX_CHANGE_PCT = env_float("PORTAL_QUOTA_MAX_CHANGE_PCT", 25.0)
PORTAL_QUOTA_FLOOR_GPUS = env_int("PORTAL_QUOTA_FLOOR_GPUS", 8)
PORTAL_QUOTA_GUARANTEED_SHARE = env_float("PORTAL_QUOTA_GUARANTEED_SHARE", 0.8)
PORTAL_QUOTA_PROPOSE_DAYS_AHEAD = env_int("PORTAL_QUOTA_PROPOSE_DAYS_AHEAD", 3)
# Capacity alerts (efficiency.analysis.capacity): the shared pool counts as exhausted when it is
# used up while a job has waited longer than PORTAL_CAPACITY_WAIT_THRESHOLD_S, for
# PORTAL_CAPACITY_SUSTAINED_HOURS hours in a row; the GPUs needed are those that bring the P95
# wait under PORTAL_CAPACITY_WAIT_TARGET_S in the backtest. The demand trend is fitted over
# PORTAL_CAPACITY_TREND_DAYS and looks PORTAL_CAPACITY_HORIZON_WEEKS ahead.
PORTAL_CAPACITY_WAIT_THRESHOLD_S = env_int("PORTAL_CAPACITY_WAIT_THRESHOLD_S", 3600)
PORTAL_CAPACITY_SUSTAINED_HOURS = env_int("PORTAL_CAPACITY_SUSTAINED_HOURS", 6)
PORTAL_CAPACITY_WAIT_TARGET_S = env_int("PORTAL_CAPACITY_WAIT_TARGET_S", 3600)
PORTAL_CAPACITY_TREND_DAYS = env_int("PORTAL_CAPACITY_TREND_DAYS", 28)
PORTAL_CAPACITY_HORIZON_WEEKS = env_int("PORTAL_CAPACITY_HORIZON_WEEKS", 4)
# Faults: when a job's last checkpoint is not in its logs, assume it was half this long before
# the fault (GPU-hours lost = GPUs x (time since the last checkpoint + downtime)).
PORTAL_CHECKPOINT_INTERVAL_S = env_int("PORTAL_CHECKPOINT_INTERVAL_S", 3600)
