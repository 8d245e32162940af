"""Tasuku's settings: everything comes from the environment (django-environ).

Every variable read here is listed, with its default, in docs/configuration.md's table
(tests/test_readme.py checks). Values that can be malformed (the App id, the private
key, URLs, time limits) are read as plain strings here and checked by Django system
checks (`repos/checks.py`, `reviews/checks.py`), so a bad value is reported by name at
start-up instead of as a traceback in the middle of a review.
"""

from __future__ import annotations

import re
import secrets
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured
from whitenoise.compress import Compressor

from tasuku.hosts import served

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# A `.env` file in the project folder is read when present; the real environment wins.
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


# The command that makes a key, in every message that asks for one.
SECRET_KEY_COMMAND = 'python3 -c "import secrets; print(secrets.token_urlsafe(50))"'  # noqa: S105 - a command, not a key
DEBUG = env.bool("DEBUG", default=False)


def _secret_key() -> str:
    """SECRET_KEY from the environment (or `.env`). Outside DEBUG there is no fallback:
    every web and worker process must share the key (django-q2 signs queued tasks with
    it, stored credentials are sealed with it), and a key generated where it is missing
    would be one per container or host — sessions lost, sealed credentials unreadable.
    With DEBUG a key is generated once into `.secret_key` for the processes of this
    folder."""
    value = env.str("SECRET_KEY", default="")
    if value:
        return value
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Make one with\n"
            f"    {SECRET_KEY_COMMAND}\n"
            "and set it as SECRET_KEY in the environment or in .env — the same key for the "
            "web server and every worker, kept with the database backups (`make install` "
            "writes one into .env for a machine of your own)."
        )
    path = BASE_DIR / ".secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        key = secrets.token_urlsafe(50)
        path.write_text(key)
        path.chmod(0o600)
        return key


SECRET_KEY = _secret_key()
SECRET_KEY_FROM_ENV = bool(env.str("SECRET_KEY", default=""))
# Earlier SECRET_KEYs, comma-separated, during a rotation: what they signed (markers) and
# sealed (reviewer keys) still reads; `manage.py reseal_keys` moves sealed keys over.
SECRET_KEY_FALLBACKS = [k for k in env.str("SECRET_KEY_FALLBACKS", default="").split(",") if k]

# The address `make run` serves on (its BIND). Unless TASUKU_BASE_URL and ALLOWED_HOSTS
# say otherwise, it gives the URL in Tasuku's links and the hosts it answers: an
# interface's address is its own name; for a wildcard (0.0.0.0) the machine's names and
# addresses (tasuku/hosts.py), and `manage.py serve` says the URL is a guess.
TASUKU_BIND = env.str("TASUKU_BIND", default="127.0.0.1:8000")
try:
    _served = served(TASUKU_BIND)
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from exc
# (Empty reads as unset, for both.)
TASUKU_BASE_URL = (env.str("TASUKU_BASE_URL", default="") or _served.base_url).rstrip("/")
TASUKU_BASE_URL_GUESSED = _served.wildcard and not env.str("TASUKU_BASE_URL", default="")
_base_host = urlsplit(TASUKU_BASE_URL).hostname or ""
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=[]) or list(dict.fromkeys(_served.hosts))
if _base_host and _base_host not in ALLOWED_HOSTS:
    ALLOWED_HOSTS.append(_base_host if ":" not in _base_host else f"[{_base_host}]")
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
if TASUKU_BASE_URL.startswith("https://"):
    CSRF_TRUSTED_ORIGINS.append(TASUKU_BASE_URL)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_q",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "repos",
    "webhooks",
    "reviews",
    "sandbox",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "tasuku.urls"
WSGI_APPLICATION = "tasuku.wsgi.application"

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
            ],
        },
    },
]


# --- Database -------------------------------------------------------------------------
# Embedded default: a SQLite file in the project folder. WAL lets readers run beside the
# writer (web and worker share the file), the busy timeout makes a writer wait for the
# lock instead of failing at once, and IMMEDIATE transactions take the write lock at
# BEGIN, so two writers never deadlock upgrading a read lock.
SQLITE_OPTIONS = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}
try:
    DATABASES = {
        "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
    }
except (ValueError, ImproperlyConfigured) as exc:  # a bad port or host; an unknown option
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from exc

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(SQLITE_OPTIONS)
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / ".test-db.sqlite3")}
# Persistent connections: django-q2's ORM broker calls close_old_connections() before
# each enqueue, which with CONN_MAX_AGE=0 reconnects for every webhook; a reconnect costs
# more than the INSERTs themselves.
DATABASES["default"].setdefault("CONN_MAX_AGE", 60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django turns psycopg's prepared statements off, for transaction-mode poolers. Its
    # queries bind client-side and are never prepared either way; the one statement
    # Tasuku binds server-side, the webhook intake's, is prepared once per connection
    # (and sent unprepared for good if a pooler refuses it: webhooks/services.py).
    # `"prepare_threshold": None` in OPTIONS keeps everything unprepared.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("prepare_threshold", 5)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("TASUKU_STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# Source maps (12 of the 24 MB the API docs' bundles bring) are read by a browser's
# developer tools only: served as they are, not compressed at each collectstatic, which
# halves its CPU (3.7 -> 1.9 s; `make run` collects at every start).
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = [*Compressor.SKIP_COMPRESS_EXTENSIONS, "map"]

LOGIN_URL = "admin:login"
LOGIN_REDIRECT_URL = "/"

# Each line names the run, attempt, delivery, installation and repository it is about
# (tasuku/logs.py): at the end of a plain line, or as keys of one JSON object a line with
# TASUKU_LOG_FORMAT=json (for a log store to query).
TASUKU_LOG_FORMAT = env.str("TASUKU_LOG_FORMAT", default="plain").strip().lower()
if TASUKU_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(
        f"TASUKU_LOG_FORMAT={TASUKU_LOG_FORMAT!r}: use plain (the default) or json."
    )
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "redact": {"()": "repos.logging.RedactSecretsFilter"},
        "context": {"()": "tasuku.logs.ContextFilter"},
    },
    "formatters": {
        "plain": {"()": "tasuku.logs.PlainFormatter"},
        "json": {"()": "tasuku.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": TASUKU_LOG_FORMAT,
            "filters": ["redact", "context"],
        },
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        # PyGithub logs request URLs and headers at DEBUG; never let a token reach a log.
        "github": {"level": "WARNING"},
        "urllib3": {"level": "WARNING"},
    },
}


# --- GitHub App ------------------------------------------------------------------------
# Read as strings; `repos/checks.py` reports malformed values by variable name.
GITHUB_APP_ID = env.str("GITHUB_APP_ID", default="")
GITHUB_APP_SLUG = env.str("GITHUB_APP_SLUG", default="")
GITHUB_PRIVATE_KEY = env.str("GITHUB_PRIVATE_KEY", default="", multiline=True)
GITHUB_PRIVATE_KEY_PATH = env.str("GITHUB_PRIVATE_KEY_PATH", default="")
GITHUB_WEBHOOK_SECRET = env.str("GITHUB_WEBHOOK_SECRET", default="")
GITHUB_API_URL = env.str("GITHUB_API_URL", default="https://api.github.com").rstrip("/")
# GitHub's web pages (where an App is created): github.com for api.github.com,
# <name>.ghe.com for api.<name>.ghe.com (GitHub Enterprise Cloud with data residency),
# the host of a GitHub Enterprise Server's /api/v3.
GITHUB_WEB_URL = env.str(
    "GITHUB_WEB_URL",
    default="https://github.com"
    if GITHUB_API_URL == "https://api.github.com"
    else re.sub(r"^https://api\.([^/]+\.ghe\.com)$", r"https://\1", GITHUB_API_URL)
    if GITHUB_API_URL.endswith(".ghe.com")
    else GITHUB_API_URL.removesuffix("/api/v3"),
).rstrip("/")
# Retry policy of the gateway (repos/github.py): attempts in all, the first backoff in
# seconds (doubled each time, with jitter), and the longest rate-limit wait it will sleep
# through before handing the retry to the caller's own backoff.
GITHUB_MAX_ATTEMPTS = env.str("GITHUB_MAX_ATTEMPTS", default="3")
GITHUB_RETRY_BACKOFF = env.str("GITHUB_RETRY_BACKOFF", default="1.0")
GITHUB_MAX_RATE_LIMIT_WAIT = env.str("GITHUB_MAX_RATE_LIMIT_WAIT", default="30")
GITHUB_TIMEOUT = env.str("GITHUB_TIMEOUT", default="15")
# GitHub asks integrations to make requests one at a time (a run does) and to wait a
# second between many content-creating ones, and limits them to 80 a minute and 500 an
# hour per installation: an installation's writes, from every process and host, share
# one budget in the database (repos/github/budget.py): GITHUB_WRITE_BURST at once, then
# one every GITHUB_SECONDS_BETWEEN_WRITES (0: unpaced and no budget, e.g. an Enterprise
# server without rate limits), within 90 % of GITHUB_WRITES_PER_MINUTE and
# GITHUB_WRITES_PER_HOUR, GITHUB_WRITES_AT_ONCE in flight at most; reads wait for nothing.
# GITHUB_SECONDS_BETWEEN_REQUESTS: a pause PyGithub would keep before every request of
# one client, none by default.
GITHUB_SECONDS_BETWEEN_REQUESTS = None
GITHUB_SECONDS_BETWEEN_WRITES = env.str("GITHUB_SECONDS_BETWEEN_WRITES", default="1.0")
GITHUB_WRITE_BURST = env.str("GITHUB_WRITE_BURST", default="6")
GITHUB_WRITES_PER_MINUTE = env.str("GITHUB_WRITES_PER_MINUTE", default="80")
GITHUB_WRITES_PER_HOUR = env.str("GITHUB_WRITES_PER_HOUR", default="500")
GITHUB_WRITES_AT_ONCE = env.str("GITHUB_WRITES_AT_ONCE", default="10")


# --- Tasuku -------------------------------------------------------------------------
# Whether repositories that arrive with an installation event start enabled.
TASUKU_ENABLE_NEW_REPOSITORIES = env.bool("TASUKU_ENABLE_NEW_REPOSITORIES", default=True)
# Largest webhook body accepted; GitHub caps payloads at 25 MB.
TASUKU_WEBHOOK_MAX_BYTES = 25 * 1024 * 1024
# How long records are kept, in days (0: forever): reviews/queue/retention.py, pruned daily.
TASUKU_KEEP_DELIVERIES_DAYS = env.int("TASUKU_KEEP_DELIVERIES_DAYS", default=30)
TASUKU_KEEP_TRANSCRIPTS_DAYS = env.int("TASUKU_KEEP_TRANSCRIPTS_DAYS", default=90)
TASUKU_KEEP_ATTEMPTS_DAYS = env.int("TASUKU_KEEP_ATTEMPTS_DAYS", default=180)
TASUKU_KEEP_TASKS_DAYS = env.int("TASUKU_KEEP_TASKS_DAYS", default=365)
# `migrate` registers the periodic work (reviews/queue/schedules.py); false leaves it to
# `manage.py setup_schedules`.
TASUKU_AUTO_SCHEDULES = env.bool("TASUKU_AUTO_SCHEDULES", default=True)
# How long a delivery's body may take to arrive (GitHub gives up after 10 s): a slower
# client is answered 408 and its thread freed.
TASUKU_WEBHOOK_READ_SECONDS = env.float("TASUKU_WEBHOOK_READ_SECONDS", default=10.0)
# Wall-clock limit of one engine run in the sandbox, in seconds. Must stay below the
# worker's task timeout, which stays below the broker's redelivery time (reviews/checks.py).
TASUKU_SANDBOX_TIMEOUT = env.str("TASUKU_SANDBOX_TIMEOUT", default="1800")
# The CLI engines (claude-code, codex) run a coding agent that executes commands. The
# `local` runner does not isolate a process from the worker's secrets (a process of the
# same user can read them), so they are refused there unless this is set: use `docker`.
TASUKU_ALLOW_CODE_ON_LOCAL_RUNNER = env.bool("TASUKU_ALLOW_CODE_ON_LOCAL_RUNNER", default=False)
# A reviewer's reviewers repository (repos/reviewer_sources.py) is read over https only;
# true also allows file:// URLs, a repository on this machine's disk (tests, a trial).
TASUKU_REVIEWER_SOURCE_ALLOW_FILE = env.bool("TASUKU_REVIEWER_SOURCE_ALLOW_FILE", default=False)
TASUKU_WORKERS = env.str("TASUKU_WORKERS", default="2")
# Address space (MB) of an engine the local runner starts, and of each process it starts.
TASUKU_SANDBOX_MEMORY_MB = env.str("TASUKU_SANDBOX_MEMORY_MB", default="6144")
# The local runner starts engines from a fork server of each worker process that has
# imported them once (the model SDKs take seconds to import): false starts each as a
# fresh Python process (sandbox/runners/forkserver.py).
TASUKU_ENGINE_FORK_SERVER = env.bool("TASUKU_ENGINE_FORK_SERVER", default=True)
# Address space (MB) of each checker process of the static reviewer (ruff, shellcheck on
# one script). shellcheck's Haskell heap needs about 1.7 times its resident peak in address
# space (~2.9 GB resident on nvm's 4,000-line nvm.sh). One that runs out makes the review
# partial, never failed. Capped by TASUKU_SANDBOX_MEMORY_MB, which the checkers inherit.
# Unset: half the machine's memory, between 6 GB and 16 GB (sandbox/engines/static/common.py).
TASUKU_STATIC_CHECKER_MEMORY_MB = env.str("TASUKU_STATIC_CHECKER_MEMORY_MB", default="")
Q_TIMEOUT = env.str("Q_TIMEOUT", default="2700")
Q_RETRY = env.str("Q_RETRY", default="2880")


def _positive_int(raw: str, fallback: int) -> int:
    """`raw` as an int; a malformed value falls back here and is reported by the checks."""
    return int(raw) if raw.strip().isdigit() and int(raw) > 0 else fallback


# --- Worker (django-q2, ORM broker on the default database) ----------------------------
# django-q2 is only the doorbell: deliveries and runs keep their own status, attempts and
# leases in their rows (docs/architecture.md, *Durable queues*), so a task that runs twice or is lost does no harm.
Q_CLUSTER = {
    "name": "tasuku",
    "orm": "default",
    "broker_class": "tasuku.broker.LeanOrmBroker",
    "workers": _positive_int(TASUKU_WORKERS, 2),
    "recycle": 200,
    # A review run must end well before this, or the worker is killed under it.
    "timeout": _positive_int(Q_TIMEOUT, 2700),
    # An unacknowledged task is handed out again after this many seconds.
    "retry": _positive_int(Q_RETRY, 2880),
    "max_attempts": 1,
    "ack_failures": True,
    "save_limit": 500,
    "catch_up": False,
    # How often an idle worker looks at the queue: what a new delivery waits for it, a
    # tenth of a second on average. A look is one cheap statement (tasuku/broker.py); an
    # idle worker host spends under 2 % of a core in all, a look every 0.1 s would add
    # about 0.7 % (and 0.4 % of the database's) for 0.07 s less (benchmarks/latency.py).
    "poll": 0.2,
    "label": "Worker queue",
}
# With many worker hosts, Redis may carry the doorbells instead of the database (django-q2's
# redis broker; `pip install 'tasuku[redis]'`). The runs themselves stay in the database:
# a doorbell rung after commit and lost is rung again by the sweepers.
TASUKU_REDIS_URL = env.str("TASUKU_REDIS_URL", default="")
if TASUKU_REDIS_URL:
    if not TASUKU_REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(
            f"TASUKU_REDIS_URL must be a redis:// (or rediss://, unix://) URL, not {TASUKU_REDIS_URL!r}."
        )
    del Q_CLUSTER["orm"], Q_CLUSTER["broker_class"]
    Q_CLUSTER["redis"] = TASUKU_REDIS_URL

# --- Review runs ------------------------------------------------------------------------
# A worker holds a run under a 20 s lease it renews every 8 s (two renewals may be lost
# before it runs out); the reaper, a thread in every worker process (one of them wins each
# turn: reviews/queue/reaper.py), looks every 10 s and at the moment the next lease runs out, so
# a lost host's run is taken over 12 to 20 s after the host died (benchmarks/reclaim.py:
# median 17.3 s, worst 20.1 s over 20 kills); a worker process that dies is noticed by its
# own cluster at once.
TASUKU_RUN_LEASE_SECONDS = _positive_int(env.str("TASUKU_RUN_LEASE_SECONDS", default="20"), 20)
TASUKU_RUN_HEARTBEAT_SECONDS = _positive_int(
    env.str("TASUKU_RUN_HEARTBEAT_SECONDS", default="8"), 8
)
TASUKU_REAP_SECONDS = _positive_int(env.str("TASUKU_REAP_SECONDS", default="10"), 10)
# `manage.py worker` exits within this many seconds of SIGTERM or SIGINT (to its main
# process or to all of its processes): a run in publication may finish meanwhile, any
# other is handed back to another worker (docs/operations.md, *Stopping*). Keep it below
# the process manager's stop timeout (systemd's TimeoutStopSec, compose's
# stop_grace_period, Kubernetes' terminationGracePeriodSeconds).
TASUKU_STOP_SECONDS = _positive_int(env.str("TASUKU_STOP_SECONDS", default="25"), 25)
# A run that has not finished this long after it first started is failed.
TASUKU_RUN_DEADLINE_SECONDS = 45 * 60
# The worker that admits a pull request event starts its first review at once when
# nothing else waits in the queue (instead of ringing and polling for it).
TASUKU_INLINE_FIRST_RUN = env.bool("TASUKU_INLINE_FIRST_RUN", default=True)

# --- Operating ------------------------------------------------------------------------------
# /metrics answers a staff session, or a scraper that sends `Authorization: Bearer <token>`.
TASUKU_METRICS_TOKEN = env.str("TASUKU_METRICS_TOKEN", default="")
# Where workspaces are created (a fresh folder per run, removed afterwards).
TASUKU_WORKSPACE_ROOT = env.str("TASUKU_WORKSPACE_ROOT", default="") or None
# Below this much free space on the workspace root (and the checkout cache), `manage.py
# check` and /healthz report it: a checkout there would be cut short.
TASUKU_WORKSPACE_MIN_FREE_MB = _positive_int(
    env.str("TASUKU_WORKSPACE_MIN_FREE_MB", default="500"), 500
)
# The checkout cache: a bare mirror per repository, fetched incrementally, that each
# review's checkout is made from (sandbox/workspace.py). `off` clones every review afresh.
# Safe to delete at any time; a mirror no review used for TASUKU_CHECKOUT_CACHE_DAYS goes.
TASUKU_CHECKOUT_CACHE = env.str("TASUKU_CHECKOUT_CACHE", default="") or str(
    Path(TASUKU_WORKSPACE_ROOT or tempfile.gettempdir()) / "tasuku-mirrors"
)
TASUKU_CHECKOUT_CACHE_DAYS = _positive_int(env.str("TASUKU_CHECKOUT_CACHE_DAYS", default="14"), 14)

# --- Model reviewers ----------------------------------------------------------------------
# Site-wide keys and servers for the model engines; a reviewer's own key or base URL (set
# in the admin) wins. The engine receives only the one key its provider needs.
ANTHROPIC_API_KEY = env.str("ANTHROPIC_API_KEY", default="")
ANTHROPIC_BASE_URL = env.str("ANTHROPIC_BASE_URL", default="")
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="")
# Model prices in dollars per million tokens, over the built-in table (sandbox/prices.py):
# {"model": [input, output]} or {"model": {"input": …, "output": …, "cache_read": …}}.
# Checked at start-up (sandbox/checks.py).
TASUKU_MODEL_PRICES = env.str("TASUKU_MODEL_PRICES", default="")
# Web research, for reviewers that allow it (off on each reviewer by default): the class
# that searches and fetches ("module:Class", importable in the engine), and a search
# backend's URL with {query} in it (empty: fetch_url only, no web_search).
TASUKU_WEB_PROVIDER = env.str("TASUKU_WEB_PROVIDER", default="sandbox.agent.tools.web:HttpWeb")
TASUKU_WEB_SEARCH_URL = env.str("TASUKU_WEB_SEARCH_URL", default="")

# --- The docker runner ----------------------------------------------------------------------
# Reviewers whose runner is "docker" run each review in a throwaway container of this
# image (sandbox/images/Dockerfile); DOCKER_HOST picks the daemon. Model engines reach
# their API only through TASUKU_DOCKER_NETWORK (an internal network) and its egress proxy.
TASUKU_DOCKER_IMAGE = env.str("TASUKU_DOCKER_IMAGE", default="tasuku-engine:latest")
TASUKU_DOCKER_NETWORK = env.str("TASUKU_DOCKER_NETWORK", default="")
TASUKU_DOCKER_PROXY = env.str("TASUKU_DOCKER_PROXY", default="")
TASUKU_DOCKER_MEMORY = env.str("TASUKU_DOCKER_MEMORY", default="4g")
TASUKU_DOCKER_CPUS = env.str("TASUKU_DOCKER_CPUS", default="2")
TASUKU_DOCKER_PIDS = env.str("TASUKU_DOCKER_PIDS", default="512")
# Past the sandbox's own timer, the runner waits this long before it kills a container.
TASUKU_DOCKER_GRACE_SECONDS = 60
# The pull request's own tests (reviews/pr_tests/suite.py): the image they run in unless a
# repository's policy names one, and the Docker network of a repository whose policy lets
# its tests reach the network (empty: Docker's `bridge`); otherwise they have none.
TASUKU_TESTS_IMAGE = env.str("TASUKU_TESTS_IMAGE", default="") or TASUKU_DOCKER_IMAGE
TASUKU_TESTS_NETWORK = env.str("TASUKU_TESTS_NETWORK", default="")

# --- Review passes ------------------------------------------------------------------------
# The author's GitHub App: the identity a coding agent pushes and opens pull requests
# with. Tasuku posts the author's answers as it and never approves with it; reviews and
# approvals come from Tasuku's own App (GITHUB_APP_*), whose key only Tasuku holds.
TASUKU_AUTHOR_APP_ID = env.str("TASUKU_AUTHOR_APP_ID", default="")
TASUKU_AUTHOR_APP_PRIVATE_KEY = env.str("TASUKU_AUTHOR_APP_PRIVATE_KEY", default="", multiline=True)
TASUKU_AUTHOR_APP_PRIVATE_KEY_PATH = env.str("TASUKU_AUTHOR_APP_PRIVATE_KEY_PATH", default="")
# Comments reach the author's feedback once this many seconds have passed since the
# latest one: a thread being written arrives whole, not one keystroke at a time.
TASUKU_FEEDBACK_QUIET_SECONDS = env.int("TASUKU_FEEDBACK_QUIET_SECONDS", default=120)
# Review passes: an author told about feedback that neither answers, pushes nor reports
# done for this long makes its task stuck (a task's handoff may set its own).
TASUKU_AUTHOR_SILENCE_MINUTES = env.int("TASUKU_AUTHOR_SILENCE_MINUTES", default=24 * 60)

# --- The `actions` runner: reviews on GitHub Actions runners ---------------------------------
# The workflow Tasuku dispatches, on each repository's default branch.
TASUKU_ACTIONS_WORKFLOW = env.str("TASUKU_ACTIONS_WORKFLOW", default="tasuku.yml")
# Who signs the runners' OIDC tokens, and the audience they must be minted for (Tasuku's URL).
TASUKU_ACTIONS_OIDC_ISSUER = env.str(
    "TASUKU_ACTIONS_OIDC_ISSUER", default="https://token.actions.githubusercontent.com"
)
# Further issuers whose tokens are accepted (comma-separated), e.g. a GHEC enterprise's
# https://token.actions.githubusercontent.com/<enterprise>. No other issuer is ever asked.
TASUKU_ACTIONS_OIDC_ISSUERS = [
    i for i in env.str("TASUKU_ACTIONS_OIDC_ISSUERS", default="").split(",") if i.strip()
]
TASUKU_ACTIONS_AUDIENCE = env.str("TASUKU_ACTIONS_AUDIENCE", default="")
# A dispatched run with no result after this long is failed.
TASUKU_ACTIONS_RESULT_TIMEOUT = env.int("TASUKU_ACTIONS_RESULT_TIMEOUT", default=45 * 60)
# How long the worker looks for a dispatched run in the workflow's list when GitHub did not
# say which run it started (an Enterprise Server without `return_run_details`), or before
# it sends again a dispatch whose answer was lost: GitHub creates the run a few seconds
# late. A run still not listed is looked for again by the reaper (every 30 s).
TASUKU_ACTIONS_FIND_SECONDS = env.float("TASUKU_ACTIONS_FIND_SECONDS", default=20.0)

# --- The REST API (review passes) -----------------------------------------------------------
# Clients authenticate with a token (Authorization: Token <key>) made in the admin; the
# browsable API and the docs also accept a staff session.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tasuku review passes API",
    "DESCRIPTION": (
        "Hand off a task's pull requests, report done, read the feedback, answer each "
        "finding, and act on a stuck task. Authenticate with `Authorization: Token <key>`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}
