"""Settings, read from the environment (12-factor).

Two profiles run the same code:

* **embedded** (no ``DATABASE_URL`` / ``REDIS_URL``): a SQLite file, the in-memory channel
  layer and Celery tasks run eagerly. This is what ``make run`` and a laptop use.
* **production** (``DATABASE_URL`` or ``REDIS_URL`` set): PostgreSQL, the Redis channel layer
  and a Celery Redis broker. It refuses to start with the development secret key or DEBUG on.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

DATABASE_URL: str = env.str("DATABASE_URL", default="")
REDIS_URL: str = env.str("REDIS_URL", default="")
PROFILE = "production" if (DATABASE_URL or REDIS_URL) else "embedded"
if PROFILE == "production" and not (DATABASE_URL and REDIS_URL):
    raise ImproperlyConfigured(
        "The production profile needs both DATABASE_URL and REDIS_URL; set both, or neither "
        "for the embedded profile."
    )

# --- Security -------------------------------------------------------------------------------
# Only for the embedded profile; production refuses to start with it (below).
DEVELOPMENT_SECRET_KEY = "django-insecure-synapsia-development-key-never-use-in-production"  # noqa: S105
SECRET_KEY: str = env.str("SYNAPSIA_SECRET_KEY", default=DEVELOPMENT_SECRET_KEY)
# Off unless the owner turns it on (SYNAPSIA_DEBUG=1): Django's debug pages list every route
# and setting, so not even the embedded default shows them by itself.
DEBUG: bool = env.bool("SYNAPSIA_DEBUG", default=False)
ALLOWED_HOSTS: list[str] = env.list(
    "SYNAPSIA_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"]
)
CSRF_TRUSTED_ORIGINS: list[str] = env.list("SYNAPSIA_CSRF_TRUSTED_ORIGINS", default=[])

# The image build (deploy/Dockerfile) runs collectstatic on the production profile with
# placeholder keys and URLs. SYNAPSIA_BUILD_ONLY=1 accepts them and serves no host; without it
# any placeholder value is refused, so a build's environment can never serve by accident.
BUILD_ONLY: bool = env.bool("SYNAPSIA_BUILD_ONLY", default=False)
BUILD_PLACEHOLDER = "build-only-placeholder"
if BUILD_ONLY:
    ALLOWED_HOSTS = []
elif any(
    BUILD_PLACEHOLDER in env.str(variable, default="")
    for variable in (
        "DATABASE_URL",
        "REDIS_URL",
        "SYNAPSIA_SECRET_KEY",
        "SYNAPSIA_VAULT_KEY",
        "SYNAPSIA_MASTER_KEY",
        "SYNAPSIA_LEDGER_SIGNING_KEY",
    )
):
    raise ImproperlyConfigured(
        "A build-only placeholder (deploy/Dockerfile) is set as a real key or URL: set the "
        "real DATABASE_URL, REDIS_URL and SYNAPSIA_* keys for this deployment."
    )

if PROFILE == "production":
    if SECRET_KEY == DEVELOPMENT_SECRET_KEY or len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
        raise ImproperlyConfigured(
            "Production profile: set SYNAPSIA_SECRET_KEY to a random value of 50+ characters "
            '(python -c "import secrets; print(secrets.token_urlsafe(64))").'
        )
    if DEBUG:
        raise ImproperlyConfigured("Production profile: SYNAPSIA_DEBUG must be off.")
    # TLS terminates at the proxy in front of Daphne (see deploy/).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT: bool = env.bool("SYNAPSIA_SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS: int = env.int("SYNAPSIA_HSTS_SECONDS", default=31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"

# Content-Security-Policy on every response (django-csp; docs/operations.md): our own scripts,
# styles, fonts and images only, never inline; the page's WebSocket back to this host ('self'
# covers ws:/wss: of the same host in CSP 3; frontend.middleware.ContentSecurityPolicyMiddleware
# names the socket's origin too, for browsers that read 'self' as http(s) only).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'none'"],
        "object-src": ["'none'"],
    }
}

# --- Applications ---------------------------------------------------------------------------
INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "servestatic",
    "django.contrib.staticfiles",
    "csp",
    "channels",
    "ninja",
    # Failed-login records for throttling with lockout (docs/threat-model.md).
    "axes",
    "ledger",
    "slips",
    "dining",
    "gatekeeper",
    "rooms",
    # Shared artifacts: sealed under the room's data key, shared only as the slip says.
    "artifacts",
    "frontend",
    "practice",
    # The operator's side: exit notes, the aggregate dashboard, abuse reports (docs/operator.md).
    # After django.contrib.auth: its admin replaces the stock user admin.
    "stewards",
]

MIDDLEWARE = [
    # First: every request's log lines carry its id; /metrics counts every answer by route.
    "synapsia.logs.CorrelationMiddleware",
    "synapsia.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Above ServeStatic, which answers /static/ itself: static files carry the policy too.
    "frontend.middleware.ContentSecurityPolicyMiddleware",
    "servestatic.middleware.ServeStaticMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication: pages and forms read times in the signed-in owner's zone.
    "frontend.middleware.OwnerTimeZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last: turns a login refused for too many failures into the 429 lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "synapsia.urls"
ASGI_APPLICATION = "synapsia.asgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "frontend.context_processors.owner_time_zone",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
if DATABASE_URL:
    DATABASES = {"default": env.db_url_config(DATABASE_URL)}
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("SYNAPSIA_CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # Prepared statements: the statements a turn and a say repeat (the same few, thousands of
    # times a connection) are parsed and planned once per connection, not on every execute,
    # which took a third of the database's CPU per turn (docs/benchmarks-log.md). psycopg
    # prepares a statement after this many executions; that needs server-side binding
    # (values sent apart from the SQL, never quoted into it). "off" for a pooler that cannot
    # keep a session's prepared statements (PgBouncer before 1.21 in transaction mode).
    _prepare_after = env.str("SYNAPSIA_DB_PREPARE_THRESHOLD", default="5").strip().lower()
    if _prepare_after != "off":
        if not _prepare_after.isdigit():
            raise ImproperlyConfigured(
                "SYNAPSIA_DB_PREPARE_THRESHOLD must be a whole number of executions (0 "
                f"prepares at once) or 'off', not {_prepare_after!r}."
            )
        DATABASES["default"].setdefault("OPTIONS", {}).update(
            server_side_binding=True, prepare_threshold=int(_prepare_after)
        )
else:
    sqlite_path = Path(
        env.str("SYNAPSIA_SQLITE_PATH", default=str(BASE_DIR / "var" / "db.sqlite3"))
    )
    # A fresh checkout has no var/: the embedded default makes it (``pytest`` alone, manage.py).
    sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            # Django's SQLite backend, each statement's placeholders rewritten once per text
            # rather than on every execute (synapsia/db/sqlite3).
            "ENGINE": "synapsia.db.sqlite3",
            "NAME": sqlite_path,
            # WAL + synchronous=NORMAL: ~15x the append rate of the default journal here;
            # IMMEDIATE transactions take the write lock up front, so concurrent writers
            # queue instead of failing with "database is locked" on lock upgrade.
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                # secure_delete: a deleted row's bytes are overwritten in the file, so deleted
                # room content is gone from primary storage, not only unlinked (rooms.deletion).
                "init_command": (
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA secure_delete=ON;"
                ),
            },
            # A file (not :memory:) so a Daphne subprocess in the e2e tests sees the test data.
            "TEST": {"NAME": str(sqlite_path.with_name(sqlite_path.stem + "-test.sqlite3"))},
            # Reopening SQLite (and re-running the PRAGMAs) on every socket hop cost ~19% of
            # the server's time per message (bench/, py-spy).
            "CONN_MAX_AGE": env.int("SYNAPSIA_CONN_MAX_AGE", default=600),
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels -------------------------------------------------------------------------------
if REDIS_URL:
    # The pub/sub layer has no per-channel capacity to overflow; the database, not the layer,
    # is the record of what was said, and consumers backfill any gap from it.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    # channels' in-memory layer, its expiry scan of every channel and group run at most once
    # a second instead of on every receive (rooms.realtime).
    CHANNEL_LAYERS = {"default": {"BACKEND": "rooms.realtime.SweptInMemoryChannelLayer"}}

# --- Cache: the throttles' counters (API, password reset) --------------------------------------
# Production shares them across processes in Redis; the embedded default (one process) keeps
# them in memory.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "synapsia",
        }
    }

# --- Celery ---------------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER: bool = env.bool("SYNAPSIA_TASKS_EAGER", default=not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
# Worker and beat log through LOGGING (JSON lines in production) instead of Celery's own format.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    # Ledger retention: delete events past the window, leaving a verifiable checkpoint. Also
    # run by the retention purge below; kept for deployments that call it by name (a second
    # run in a day finds nothing expired and records nothing).
    "ledger-purge-expired": {"task": "ledger.purge_expired", "schedule": 24 * 60 * 60.0},
    # Retention (rooms/retention.py): every registered purge (transcripts, ledger events with
    # a verifiable checkpoint, ...), each recorded as a ledger event with counts.
    "retention-purge-expired": {
        "task": "rooms.purge_expired",
        "schedule": env.float("SYNAPSIA_RETENTION_PURGE_SECONDS", default=24 * 60 * 60.0),
    },
    # Grants not answered by their deadline end as denials (docs/gatekeeper.md).
    "gatekeeper-grants-expire": {"task": "gatekeeper.grants_expire", "schedule": 60.0},
    # A webhook action whose settlement signal was lost (a worker stopped after its delivery's
    # final status committed) is settled from the delivery all the same (rooms.forks).
    "rooms-actions-settle": {"task": "rooms.actions_settle", "schedule": 60.0},
    # A webhook delivery whose task was lost on its way to a worker (queued 10 minutes ago and
    # still pending) is queued again (gatekeeper.webhooks.webhook_deliveries_lost).
    "gatekeeper-deliveries-requeue": {
        "task": "gatekeeper.webhook_deliveries_requeue",
        "schedule": 60.0,
    },
    # "ledger-sign-stale-heads" is added below SYNAPSIA: its period derives from T.
}

# --- Auth, i18n, static ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
# The throttle first: a locked-out owner (or address) is refused before the password is checked.
AUTHENTICATION_BACKENDS = [
    "frontend.login_throttle.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
# The embedded default serves static files straight from the apps (no collectstatic for
# `make run`), whether or not DEBUG is on; production serves what collectstatic gathered.
SERVESTATIC_USE_FINDERS = PROFILE == "embedded" or DEBUG
SERVESTATIC_AUTOREFRESH = PROFILE == "embedded" or DEBUG

# --- Email (password reset) -------------------------------------------------------------------
# SYNAPSIA_EMAIL_URL, e.g. smtp+tls://user:password@mail.example.org:587 (django-environ's
# email URL). Without it the embedded default prints emails to the console, and production
# does not offer password reset by email at all (a reset link in a server log is a key to the
# account).
EMAIL_URL: str = env.str("SYNAPSIA_EMAIL_URL", default="")
if EMAIL_URL:
    globals().update(env.email_url_config(EMAIL_URL))
elif PROFILE == "embedded":
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
PASSWORD_RESET_BY_EMAIL: bool = bool(EMAIL_URL) or PROFILE == "embedded"
DEFAULT_FROM_EMAIL: str = env.str("SYNAPSIA_DEFAULT_FROM_EMAIL", default="synapsia@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
PASSWORD_RESET_TIMEOUT: int = env.int("SYNAPSIA_PASSWORD_RESET_SECONDS", default=3 * 60 * 60)

# --- Throttling (docs/threat-model.md; docs/protocol.md "Limits") -----------------------------
# Logins (owner, admin): after AXES_FAILURE_LIMIT wrong passwords for one username, or from one
# address, within the cool-off, that username (from anywhere) and that address (for any
# username) are refused with HTTP 429 until AXES_COOLOFF_TIME has passed since the last
# failure, even with the right password. A completed password reset lifts the username's
# lock. Only failures are kept (no log of successful logins), for no longer than the cool-off.
AXES_FAILURE_LIMIT: int = env.int("SYNAPSIA_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("SYNAPSIA_LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# Refused attempts during a lockout do not extend it: "try again in 15 minutes" stays true.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "frontend.login_throttle.lockout_response"
AXES_DISABLE_ACCESS_LOG = True
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "csrfmiddlewaretoken", "next"]
AXES_VERBOSE = False
# The client address is REMOTE_ADDR: Daphne's --proxy-headers already set it from the proxy's
# X-Forwarded-For (deploy/); ninja must not read that header a second time.
NINJA_NUM_PROXIES = 0

# Logs go to stderr: one JSON object per line in production (synapsia/logs.py: time, level,
# logger, message, request/room/agent ids; never content), plain text on the embedded default.
# SYNAPSIA_LOG_FILE also appends them to a file (every process of a deployment may share it).
LOG_FORMAT: str = env.str(
    "SYNAPSIA_LOG_FORMAT", default="json" if PROFILE == "production" else "text"
)
if LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured("SYNAPSIA_LOG_FORMAT must be json or text.")
LOG_FILE: str = env.str("SYNAPSIA_LOG_FILE", default="")
_log_handlers: dict[str, dict[str, object]] = {
    "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["ids"]}
}
if LOG_FILE:
    _log_handlers["file"] = {
        "class": "logging.FileHandler",
        "filename": LOG_FILE,
        "formatter": LOG_FORMAT,
        "filters": ["ids"],
    }
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "ids": {"()": "synapsia.logs.CorrelationFilter"},
        "cancelled_cleanup": {"()": "synapsia.logs.CancelledCleanupFilter"},
    },
    "formatters": {
        "json": {"()": "synapsia.logs.JsonFormatter"},
        "text": {"format": "%(message)s"},
    },
    "handlers": _log_handlers,
    # A socket's Redis clean-up cancelled as the server stops: INFO in words, not a traceback.
    "loggers": {"channels_redis.pubsub": {"filters": ["cancelled_cleanup"]}},
    "root": {
        "handlers": list(_log_handlers),
        "level": env.str("SYNAPSIA_LOG_LEVEL", default="INFO"),
    },
}

# Prometheus metrics at /metrics (synapsia/metrics.py): the bearer token the scraper sends;
# unset, the endpoint answers 404. Windowed series count the last this many seconds.
SYNAPSIA_METRICS_TOKEN: str = env.str("SYNAPSIA_METRICS_TOKEN", default="")
SYNAPSIA_METRICS_WINDOW_SECONDS: int = env.int("SYNAPSIA_METRICS_WINDOW_SECONDS", default=3600)

# --- Synapsia -------------------------------------------------------------------------------
SYNAPSIA = {
    # Largest WebSocket frame we parse; bigger frames get an "oversized" error frame.
    "MAX_FRAME_BYTES": env.int("SYNAPSIA_MAX_FRAME_BYTES", default=64 * 1024),
    "MAX_CHARTER_CHARS": env.int("SYNAPSIA_MAX_CHARTER_CHARS", default=4_000),
    "INVITE_TTL_HOURS": env.int("SYNAPSIA_INVITE_TTL_HOURS", default=72),
    # How often an idle connection re-reads the record to catch anything the layer dropped.
    "CATCH_UP_SECONDS": env.float("SYNAPSIA_CATCH_UP_SECONDS", default=5.0),
    # Sealed offers (rooms.sealed): from the first seal, how long before what is sealed is
    # revealed even if the other agent has not sealed.
    "SEALED_OFFER_SECONDS": env.float("SYNAPSIA_SEALED_OFFER_SECONDS", default=60.0),
    # Gatekeeper (docs/gatekeeper.md): a check slower than this, or during which the wall
    # clock moved this much more than the monotonic one, is a denial.
    "GATEKEEPER_TIMEOUT_SECONDS": env.float("SYNAPSIA_GATEKEEPER_TIMEOUT_SECONDS", default=1.0),
    "CLOCK_JUMP_SECONDS": env.float("SYNAPSIA_CLOCK_JUMP_SECONDS", default=2.0),
    # How long an owner has to answer a grant request before it ends as a denial.
    "GRANT_TTL_SECONDS": env.int("SYNAPSIA_GRANT_TTL_SECONDS", default=15 * 60),
    # The operator's dashboard (docs/operator.md): a count of fewer rooms than this is shown
    # as "fewer than k", never as its number (k-anonymity).
    "OPERATOR_MIN_ROOMS": env.int("SYNAPSIA_OPERATOR_MIN_ROOMS", default=3),
    # Trust ledger (docs/ledger.md): events older than this many days are purged daily.
    "LEDGER_RETENTION_DAYS": env.int("SYNAPSIA_LEDGER_RETENTION_DAYS", default=90),
    # Signed heads the database cannot skip (docs/ledger.md): at every pause, close and purge,
    # at every Nth event, and (beat: ledger-sign-stale-heads) for a tip unsigned longer than T;
    # verifiers allow T plus the grace before they call a purge's heads inconsistent.
    "LEDGER_HEAD_EVERY_EVENTS": env.int("SYNAPSIA_LEDGER_HEAD_EVERY_EVENTS", default=64),
    "LEDGER_HEAD_EVERY_SECONDS": env.int("SYNAPSIA_LEDGER_HEAD_EVERY_SECONDS", default=3600),
    "LEDGER_HEAD_GRACE_SECONDS": env.int("SYNAPSIA_LEDGER_HEAD_GRACE_SECONDS", default=3600),
    # Retention per data class (docs/data-lifecycle.md; rooms/retention.py shows them all):
    # transcript (messages, whispers, fork snapshots) after the room closes; shared artifacts;
    # exit notes; telemetry (logs: kept by the log system, never room content); abuse evidence
    # after its report is resolved; the notice telling an owner their partner deleted a room.
    "TRANSCRIPT_RETENTION_DAYS": env.int("SYNAPSIA_TRANSCRIPT_RETENTION_DAYS", default=30),
    "ARTIFACT_RETENTION_DAYS": env.int("SYNAPSIA_ARTIFACT_RETENTION_DAYS", default=90),
    "EXIT_NOTE_RETENTION_DAYS": env.int("SYNAPSIA_EXIT_NOTE_RETENTION_DAYS", default=30),
    "TELEMETRY_RETENTION_DAYS": env.int("SYNAPSIA_TELEMETRY_RETENTION_DAYS", default=30),
    # An API add's Idempotency-Key, digested (gatekeeper.add_keys): long enough for any retry.
    "ADD_KEY_RETENTION_DAYS": env.int("SYNAPSIA_ADD_KEY_RETENTION_DAYS", default=1),
    "ABUSE_EVIDENCE_RETENTION_DAYS": env.int("SYNAPSIA_ABUSE_EVIDENCE_RETENTION_DAYS", default=180),
    "DELETION_NOTICE_RETENTION_DAYS": env.int(
        "SYNAPSIA_DELETION_NOTICE_RETENTION_DAYS", default=30
    ),
    # Append-only journal of deletions (room ids, account ids, when; no content), kept OUTSIDE
    # the database so a restored backup cannot take it back: reapply_deletions reads it.
    "DELETION_JOURNAL_PATH": env.str(
        "SYNAPSIA_DELETION_JOURNAL_PATH", default=str(BASE_DIR / "var" / "deletions.jsonl")
    ),
    # base64 of a 32-byte Ed25519 seed; required to sign ledger heads in production.
    "LEDGER_SIGNING_KEY": env.str("SYNAPSIA_LEDGER_SIGNING_KEY", default=""),
    # Embedded profile only: where the generated head-signing key is kept (0600).
    "LEDGER_SIGNING_KEY_PATH": env.str(
        "SYNAPSIA_LEDGER_SIGNING_KEY_PATH", default=str(BASE_DIR / "var" / "ledger-signing.key")
    ),
    # Public keys (base64) of retired signing keys whose signed heads still verify.
    "LEDGER_RETIRED_PUBLIC_KEYS": env.list("SYNAPSIA_LEDGER_RETIRED_PUBLIC_KEYS", default=[]),
    # Tool policy (docs/tools.md): optional JSON file of per-agent allow/deny lists (re-read on
    # every decision), and what applies when no entry does: deny_all or allow_all.
    "TOOL_POLICY_FILE": env.str("SYNAPSIA_TOOL_POLICY_FILE", default=""),
    "TOOL_POLICY_DEFAULT": env.str(
        "SYNAPSIA_TOOL_POLICY_DEFAULT",
        default="deny_all" if PROFILE == "production" else "allow_all",
    ),
    # Owners' outgoing webhooks: https only, except these hosts (plain http, local addresses).
    "WEBHOOK_INSECURE_HOSTS": env.list(
        "SYNAPSIA_WEBHOOK_INSECURE_HOSTS",
        default=[] if PROFILE == "production" else ["127.0.0.1", "localhost"],
    ),
    "WEBHOOK_TIMEOUT_SECONDS": env.float("SYNAPSIA_WEBHOOK_TIMEOUT_SECONDS", default=5.0),
    # How much one owner may hold at once (gatekeeper/owner_limits.py): far above what a person
    # uses, low enough that one account cannot fill the database through the pages.
    "OWNER_LIMITS": {
        "agents": env.int("SYNAPSIA_OWNER_LIMIT_AGENTS", default=50),  # not revoked
        "rooms": env.int("SYNAPSIA_OWNER_LIMIT_ROOMS", default=100),  # created, not closed
        "vault_items": env.int("SYNAPSIA_OWNER_LIMIT_VAULT_ITEMS", default=500),
        "device_keys": env.int("SYNAPSIA_OWNER_LIMIT_DEVICE_KEYS", default=10),  # in use
        "invites": env.int("SYNAPSIA_OWNER_LIMIT_INVITES", default=20),  # not used, not expired
        "webhooks": env.int("SYNAPSIA_OWNER_LIMIT_WEBHOOKS", default=10),  # on
    },
    # REST API rates (ninja's "count/period"): per signed-in owner, and per address for
    # requests without a session; over it, 429 "rate_limited" with Retry-After.
    "API_RATE_OWNER": env.str("SYNAPSIA_API_RATE_OWNER", default="300/min"),
    "API_RATE_ANONYMOUS": env.str("SYNAPSIA_API_RATE_ANONYMOUS", default="60/min"),
    # Room sockets (docs/protocol.md, Limits). Per agent and room ("count/period", or "off"):
    # a burst of count, then count per period; each refusal is an error frame, and an agent
    # that keeps running into them is flared as looping (rooms/limits.py).
    "SOCKET_RATES": {
        "say": env.str("SYNAPSIA_SOCKET_RATE_SAY", default="120/m"),
        "context_request": env.str("SYNAPSIA_SOCKET_RATE_CONTEXT_REQUEST", default="30/m"),
        "act": env.str("SYNAPSIA_SOCKET_RATE_ACT", default="30/m"),
        "grant_request": env.str("SYNAPSIA_SOCKET_RATE_GRANT_REQUEST", default="10/h"),
    },
    # The CPU a server process runs on (synapsia.cpu, read by the ASGI entry point only):
    # empty, the system places it; checked there, with a message, before anything is served.
    "SERVER_CPU": env.str("SYNAPSIA_SERVER_CPU", default=""),
    # Context requests (each a new turn spending slip uses) while nothing new was said.
    "CONTEXT_REQUESTS_PER_TURN": env.int("SYNAPSIA_CONTEXT_REQUESTS_PER_TURN", default=3),
    # Frames received and not yet handled; past it the socket is closed (4429).
    "SOCKET_INBOX_MAX_FRAMES": env.int("SYNAPSIA_SOCKET_INBOX_MAX_FRAMES", default=256),
    # Live deliveries waiting for their standing check; past it they are read back from the
    # record instead (memory stays bounded, nothing is lost).
    "SOCKET_OUTBOX_MAX_FRAMES": env.int("SYNAPSIA_SOCKET_OUTBOX_MAX_FRAMES", default=512),
    # Bytes written to a socket that its client has not read yet (Daphne's send buffer);
    # past it the socket is a slow reader and is closed (4408), its buffer released.
    "SOCKET_SEND_BUFFER_MAX_BYTES": env.int(
        "SYNAPSIA_SOCKET_SEND_BUFFER_MAX_BYTES", default=4 * 1024 * 1024
    ),
    # Password-reset requests (each may send an email) per client address per hour.
    "PASSWORD_RESETS_PER_ADDRESS_PER_HOUR": env.int(
        "SYNAPSIA_PASSWORD_RESETS_PER_ADDRESS_PER_HOUR", default=5
    ),
    # Signups refused on their username (taken or not allowed) per client address per hour;
    # past it the signup form answers 429, so probing usernames there is slow.
    "SIGNUP_USERNAME_REFUSALS_PER_ADDRESS_PER_HOUR": env.int(
        "SYNAPSIA_SIGNUP_USERNAME_REFUSALS_PER_ADDRESS_PER_HOUR", default=10
    ),
    # Venue catalogues this deployment offers (docs/dining.md): paths of catalogue files; a
    # room names one by id in its terms. The first is the default for new dinner rooms.
    "VENUE_CATALOGUES": env.list(
        "SYNAPSIA_VENUE_CATALOGUES",
        default=[str(BASE_DIR / "dining" / "data" / "berlin.venues.json")],
    ),
}

# A quiet room's unsigned tail must get its head within T (LEDGER_HEAD_EVERY_SECONDS): the beat
# looks at least every T/2, and every 15 minutes at most often.
CELERY_BEAT_SCHEDULE["ledger-sign-stale-heads"] = {
    "task": "ledger.sign_stale_heads",
    "schedule": min(15 * 60.0, SYNAPSIA["LEDGER_HEAD_EVERY_SECONDS"] / 2),
}

# --- Slips: device keys, vault, signed permission slips (docs/slips.md) ----------------------
SLIPS = {
    # base64 of 32+ random bytes. Required in production, where the vault refuses to operate
    # without it; the embedded profile derives a key from SECRET_KEY instead.
    "VAULT_KEY": env.str("SYNAPSIA_VAULT_KEY", default=""),
    # The master key that wraps every data key (slips.datakeys; docs/data-lifecycle.md, "Keys");
    # SYNAPSIA_VAULT_KEY is used when it is unset. Rotation: the old one goes in RETIRED
    # (comma-separated) until `manage.py rewrap_data_keys` has run.
    "MASTER_KEY": env.str("SYNAPSIA_MASTER_KEY", default=""),
    "MASTER_KEYS_RETIRED": env.str("SYNAPSIA_MASTER_KEYS_RETIRED", default=""),
    # The wrapped data keys, OUTSIDE the database (a backup of it must not hold them); by
    # default beside the deletion journal, on its volume (var/ embedded, the image's volume).
    "KEY_STORE_PATH": env.str(
        "SYNAPSIA_KEY_STORE_PATH",
        default=str(Path(SYNAPSIA["DELETION_JOURNAL_PATH"]).parent / "keys.sqlite3"),
    ),
    # How long a key-enrolment challenge can be signed (single use either way).
    "CHALLENGE_TTL_SECONDS": env.int("SYNAPSIA_SLIP_CHALLENGE_TTL_SECONDS", default=300),
    # Tolerated difference between a browser's clock and ours for a slip's issued_at.
    "CLOCK_SKEW_SECONDS": env.int("SYNAPSIA_SLIP_CLOCK_SKEW_SECONDS", default=300),
    "MAX_LIFETIME_DAYS": env.int("SYNAPSIA_SLIP_MAX_LIFETIME_DAYS", default=90),
}

if PROFILE == "production":
    # Both keys guard the trust core; without them the ledger cannot sign its heads and the
    # vault cannot open, so refuse to start rather than fail on the first request.
    for variable, value in (
        ("SYNAPSIA_LEDGER_SIGNING_KEY", SYNAPSIA["LEDGER_SIGNING_KEY"]),
        ("SYNAPSIA_MASTER_KEY (or SYNAPSIA_VAULT_KEY)", SLIPS["MASTER_KEY"] or SLIPS["VAULT_KEY"]),
    ):
        if not value:
            raise ImproperlyConfigured(
                f"Production profile: set {variable} (base64 of 32 random bytes: "
                'python -c "import base64, os; print(base64.b64encode(os.urandom(32)).decode())").'
            )
