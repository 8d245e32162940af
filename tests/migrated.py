"""SQLite databases migrated once for the whole run: the one `manage.py migrate` makes
(`migrated_sqlite`), and ones at the states before the data migrations a test moves
rows through (`migrated_states`).

A test whose subject is not migrating (a benchmark script, a server's health check) takes
a copy of it: migrating afresh costs each 4 to 7 CPU seconds. A fresh database's
migration is what tests/test_migrations.py and the first test of
tests/test_production_path.py prove.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _migrations_digest() -> str:
    """What the migrated template depends on: every migration file's content."""
    digest = hashlib.sha256()
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory, worker_id) -> Path:
    """A SQLite database `manage.py migrate` made, once for the run: the processes of
    `make test` share it (the first to ask builds it, under a lock, the others wait)."""
    from benchmarks.isolation import migrate

    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    template = shared / f"bench-migrated-{_migrations_digest()}.sqlite3"
    with open(shared / "bench-migrated.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            building = template.with_suffix(".building")
            building.unlink(missing_ok=True)
            env = {**os.environ, "DATABASE_URL": f"sqlite:///{building}",
                   "DJANGO_SETTINGS_MODULE": "tasuku.settings",
                   "SECRET_KEY": secrets.token_urlsafe(40)}  # fmt: skip
            migrate(env)
            assert not Path(f"{building}-wal").exists()  # all in the one file
            building.rename(template)
    return template


# A migration script's start, as manage.py's: Django and the apps loaded with the garbage
# collector kept out of what they load (tasuku/loading.py).
SETUP = """
import django
from tasuku.loading import loading
with loading():
    django.setup()
"""


# Walks the states in the order given, copying the database at each: a state whose
# migrations include everything applied so far continues from there, one that does not
# starts again from an empty database, so each copy holds exactly what migrating an
# empty database to that state applies.
_STATES_SCRIPT = r"""
import json, os, shutil, sys
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

database = connection.settings_dict["NAME"]
for targets, path in json.loads(sys.argv[1]):
    targets = [tuple(t) for t in targets]
    executor = MigrationExecutor(connection)
    graph = executor.loader.graph
    wanted = set()
    for target in targets:
        wanted |= set(graph.forwards_plan(target))
    applied = {key for key in executor.loader.applied_migrations if key in graph.nodes}
    if not applied <= wanted:
        connection.close()
        os.unlink(database)
        executor = MigrationExecutor(connection)
    executor.migrate(targets)
    applied = {key for key in MigrationExecutor(connection).loader.applied_migrations
               if key in graph.nodes}
    assert applied == wanted, sorted(applied ^ wanted)
    connection.close()
    assert not os.path.exists(database + "-wal")
    shutil.copyfile(database, path)
print("ok")
"""


def migrated_states(states, tmp_path_factory, worker_id) -> dict[str, Path]:
    """SQLite databases migrated to each of `states` (each a list of (app, migration)
    targets, as `MigrationExecutor.migrate` takes them), built once for the run by one
    process that walks them in order (tests/test_migrations.py: a data migration's test
    starts from the state before it instead of migrating an empty database there; the
    empty database's own migration is what the squash test and the production path
    prove). Keyed by `state_key(state)`; copy one before changing it."""
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    digest = hashlib.sha256((_migrations_digest() + repr(states)).encode()).hexdigest()[:16]
    folder = shared / f"migrated-states-{digest}"
    paths = {state_key(state): folder / f"{index}.sqlite3" for index, state in enumerate(states)}
    with open(shared / "migrated-states.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not folder.exists():
            building = folder.with_suffix(".building")
            shutil.rmtree(building, ignore_errors=True)
            building.mkdir()
            plan = [[state, str(building / path.name)] for state, path in
                    zip(states, paths.values(), strict=True)]  # fmt: skip
            env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
                   "DATABASE_URL": f"sqlite:///{building / 'walk.sqlite3'}"}  # fmt: skip
            done = subprocess.run(  # noqa: S603
                [sys.executable, "-c", SETUP + _STATES_SCRIPT, json.dumps(plan)],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:]
            (building / "walk.sqlite3").unlink()
            building.rename(folder)
    return paths


def state_key(state) -> str:
    return json.dumps([list(target) for target in state])
