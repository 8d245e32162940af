from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from repos import github as gateway_module
from repos.github.usage import usage_take
from tests.fakes.github import FakeGitHub, rsa_keypair
from tests.fakes.github.contract import summary as contract_summary

pytest_plugins = [
    "tests.fakes.models.plugin",
    "tests.costs",
    "tests.fast",
    "tests.warm",
    "tests.migrated",
]

APP_ID = 4242
APP_SLUG = "tasuku-test"
WEBHOOK_SECRET = "It's a Secret to Everybody"


@dataclass(frozen=True)
class TestApp:
    app_id: int
    slug: str
    private_key: str
    public_key: str
    webhook_secret: str


# A test process loads Django, the SDKs and every test module before its first test, with
# the cyclic garbage collector off, as Tasuku's own processes load (tasuku/loading.py):
# collecting as the objects came cost a process about 0.55 of its 3.9 CPU s of collection.
gc.disable()


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """The objects a test process has once it collected (Django, the SDKs, every test
    module: some 160,000) live to its end: frozen, the cyclic garbage collector never
    walks them again in its full collections, and it runs a tenth as often. An
    end-to-end review allocates tens of thousands of objects, so at Python's default
    thresholds it spent about 9 % of a test process's CPU in about 1,300 collections a
    file (`tests/reviews/test_honest_gate.py`: 1.5 s of 17.7; after: 0.4 s in 435)."""
    try:
        return (yield)
    finally:
        gc.freeze()
        gc.set_threshold(7000, 10, 10)
        gc.enable()


@pytest.fixture(scope="session")
def test_app() -> TestApp:
    private, public = rsa_keypair()
    return TestApp(APP_ID, APP_SLUG, private, public, WEBHOOK_SECRET)


@pytest.fixture(scope="session")
def fake_github_server(test_app: TestApp) -> Iterator[FakeGitHub]:
    fake = FakeGitHub().start()
    yield fake
    fake.stop()


@pytest.fixture
def fake_github(
    fake_github_server: FakeGitHub, test_app: TestApp, settings, tmp_path_factory
) -> Iterator[FakeGitHub]:
    """The fake GitHub, emptied, with the test App registered, and Tasuku configured
    to talk to it (with a checkout cache of the test's own: its repositories' ids are
    the next test's too)."""
    fake = fake_github_server
    settings.TASUKU_CHECKOUT_CACHE = str(tmp_path_factory.mktemp("mirrors"))
    fake.reset()
    fake.add_app(test_app.app_id, test_app.public_key, test_app.slug)
    settings.GITHUB_API_URL = fake.url
    settings.GITHUB_APP_ID = str(test_app.app_id)
    settings.GITHUB_APP_SLUG = test_app.slug
    settings.GITHUB_PRIVATE_KEY = test_app.private_key
    settings.GITHUB_WEBHOOK_SECRET = test_app.webhook_secret
    gateway_module.caches_clear()
    # GitHub calls an earlier test counted and did not flush are its own, not this one's
    # (a request of this test would write them: tests/webhooks/test_one_round_trip.py).
    usage_take()
    yield fake
    gateway_module.caches_clear()
    # The contract tests: what Tasuku sent and what the fake answered must stay within
    # GitHub's published description (tests/fakes/github/contract.py).
    violations = fake.contract.take()
    if violations:
        pytest.fail(
            f"{len(violations)} exchange(s) with the fake GitHub left GitHub's published "
            "description (tests/contract/; a request is the gateway's, a response the "
            "fake's):\n  " + "\n  ".join(contract_summary(violations)),
            pytrace=False,
        )


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_user("operator", password="pw", is_staff=True)
    client.force_login(user)
    return client


@pytest.fixture
def operator_client(django_user_model):
    """A staff user who may act (retry runs and deliveries, review now): the one
    permission "Can change review run". `staff_client` is the read-only role."""
    from django.contrib.auth.models import Permission
    from django.test import Client

    user = django_user_model.objects.create_user("maintainer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="change_reviewrun"))
    client = Client()
    client.force_login(user)
    return client


# The data migrations' rows a fresh install has (each function is idempotent).
FRESH_INSTALL_ROWS = (
    ("repos.migrations.0002_static_reviewer", "create_static_reviewer"),
    ("repos.migrations.0017_github_issue_connector", "create"),
)


@pytest.fixture(autouse=True)
def _fresh_install_rows_after_a_flush(request):
    """A test may start after a transactional test's flush, which empties what the data
    migrations wrote (the processes of `make test` take tests in any order): give it back
    the rows a fresh install has (the `static` reviewer, the `github_issue` connector), by
    the migrations' own functions, inside the test's own transaction where it has one.
    Rather than serialized rollback, whose teardown leaves the tables empty for the
    transactional tests after it."""
    marker = request.node.get_closest_marker("django_db")
    names = set(request.fixturenames)
    transactional = "transactional_db" in names or bool(
        marker is not None and marker.kwargs.get("transaction")
    )
    if not (transactional or marker is not None or "db" in names):
        return
    request.getfixturevalue("transactional_db" if transactional else "db")
    import importlib

    from django.apps import apps

    for module, function in FRESH_INSTALL_ROWS:
        getattr(importlib.import_module(module), function)(apps, None)


@pytest.fixture(autouse=True)
def _database_reachable_afresh(monkeypatch):
    """A test that made the database unreachable (tasuku/outage.py) leaves no other test's
    sweeper holding back from the leases it would judge."""
    from tasuku import outage

    monkeypatch.setattr(outage, "OUTAGE", outage.Outage())


@pytest.fixture(autouse=True)
def _app_registration_read_afresh():
    """The App created on the setup page is cached per process for a while: no test sees
    the one another test made (and rolled back)."""
    from repos.github import registration_forget

    registration_forget()
    yield
    registration_forget()


# Fixtures through which a test reaches the suite's database (directly or through
# another fixture: `item.fixturenames` is the whole closure).
DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback"}
)


# The database-free tests CI runs in its SQLite run (the others in its PostgreSQL run,
# which has more tests of its own): chosen so that the two runs take about as long.
_SQLITE_RUN = (
    "tests/sandbox/",
    "tests/test_benchmarks.py",
    "tests/test_production_path.py",
    "tests/test_deploy_files.py",
    "tests/test_demo.py",
    "tests/repos/test_github_actions.py",
    "tests/test_fake_github_actions.py",
    # Each migrates SQLite databases of its own (36 CPU s): in the PostgreSQL run, the two
    # runs ended 37 s apart.
    "tests/test_migrations.py",
)
_POSTGRESQL_RUN_BENCHMARKS = (
    "tests/test_benchmarks.py::test_the_latency_benchmark_",
    "tests/test_benchmarks.py::test_a_benchmark_script_runs[webhook_intake.py",
)


def pytest_collection_modifyitems(config, items):
    """Mark `database_free` every test that cannot touch the suite's database (pytest-django
    refuses it any query): it runs the same on PostgreSQL and on SQLite, so CI runs it
    once, in one of its two runs (.ci/run)."""
    for item in items:
        if item.get_closest_marker("django_db") is None and not (
            DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        ):
            item.add_marker(pytest.mark.database_free)
            # CI shares them out (_SQLITE_RUN) so that the two runs take about as long
            # (the two longest benchmarks' go with PostgreSQL: the latency benchmark's then
            # runs Tasuku on PostgreSQL, as deployed).
            if item.nodeid.startswith(_SQLITE_RUN) and not (
                item.nodeid.startswith(_POSTGRESQL_RUN_BENCHMARKS)
            ):
                item.add_marker(pytest.mark.second_run)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """At the end, a connection something left open to a PostgreSQL test database (a
    thread's, a worker process's) is ended, so that the database can be dropped rather
    than left behind with a warning."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
