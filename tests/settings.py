"""Test settings: the product's settings with the GitHub App blanked (each test that
needs it points it at the fake GitHub server) and waits shortened."""

import atexit
import os
import secrets
import shutil
import tempfile

# Outside DEBUG, Tasuku starts only with a SECRET_KEY (tasuku/settings.py): one per test
# session, in the environment, so that every process a test starts shares it.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

from tasuku.settings import *  # noqa: E402, F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Never the developer's real App: tests set these to the fake server's App.
GITHUB_APP_ID = ""
GITHUB_APP_SLUG = ""
GITHUB_PRIVATE_KEY = ""
GITHUB_PRIVATE_KEY_PATH = ""
GITHUB_WEBHOOK_SECRET = ""
GITHUB_API_URL = "https://api.github.invalid"
GITHUB_RETRY_BACKOFF = "0.01"
GITHUB_MAX_RATE_LIMIT_WAIT = "3"
GITHUB_SECONDS_BETWEEN_WRITES = "0"
TASUKU_BASE_URL = "http://tasuku.test"
# A checkout cache of the test process's own (tests that use the fake GitHub get one of
# their own test's: tests/conftest.py).
# Removed when the process that made it ends (not a process forked from it: a cluster's or
# gunicorn's workers): every process of a run (the test processes, each worker or command
# a test starts) has one, and about 45 a run used to stay behind.
TASUKU_CHECKOUT_CACHE = tempfile.mkdtemp(prefix="tasuku-test-mirrors-")


def _mirrors_remove(path: str = TASUKU_CHECKOUT_CACHE, maker: int = os.getpid()) -> None:
    if os.getpid() == maker:
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_mirrors_remove)
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost", "tasuku.test"]
TASUKU_ENABLE_NEW_REPOSITORIES = True
# The test database is migrated without the schedules: a live worker in a test runs only
# what the test gives it (tests/reviews/test_commands.py covers migrate's registration).
TASUKU_AUTO_SCHEDULES = False
# A review run in the test process holds its row in the test's uncommitted transaction,
# which the heartbeat thread's own connection cannot see: a beat would read as a lost
# lease. So the in-process heartbeat waits longer than any test's review takes (a real
# worker a test starts passes its own, short, values in the environment).
TASUKU_RUN_HEARTBEAT_SECONDS = int(os.environ.get("TASUKU_RUN_HEARTBEAT_SECONDS", "60"))
# Tests drain the queue task by task; a review started inside a delivery's task is tested
# on its own (tests/webhooks/test_one_round_trip.py).
TASUKU_INLINE_FIRST_RUN = False
TASUKU_RUN_LEASE_SECONDS = int(os.environ.get("TASUKU_RUN_LEASE_SECONDS", "180"))
