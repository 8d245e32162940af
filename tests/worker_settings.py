"""Settings of a real `manage.py worker` that a test starts beside itself: the
test settings, pointed at the test's database and the test's fake GitHub."""

import os

from tests.settings import *  # noqa: F403

GITHUB_API_URL = os.environ["GITHUB_API_URL"]
GITHUB_APP_ID = os.environ["GITHUB_APP_ID"]
GITHUB_APP_SLUG = os.environ["GITHUB_APP_SLUG"]
GITHUB_PRIVATE_KEY = os.environ["GITHUB_PRIVATE_KEY"]
GITHUB_WEBHOOK_SECRET = os.environ["GITHUB_WEBHOOK_SECRET"]
DATABASES["default"]["NAME"] = os.environ["TASUKU_TEST_DB_NAME"]  # noqa: F405
DATABASES["default"]["TEST"] = {"NAME": os.environ["TASUKU_TEST_DB_NAME"]}  # noqa: F405
if os.environ.get("TASUKU_TEST_DB_PORT"):  # through a proxy the test can cut (tests/dbproxy.py)
    DATABASES["default"].update(HOST="127.0.0.1", PORT=os.environ["TASUKU_TEST_DB_PORT"])  # noqa: F405
# A worker a test starts looks at its queue every 0.05 s rather than production's 0.2 s:
# the tests wait on what it does, and a look is one cheap statement.
Q_CLUSTER = {**Q_CLUSTER, "poll": 0.05}  # noqa: F405
