"""One SQLite database `manage.py migrate` made for the whole run (`migrated_sqlite`).

A test whose subject is not migrating (a benchmark script, a server's health check) takes
a copy of it: migrating afresh costs each 4 to 7 CPU seconds. A fresh database's
migration is what tests/test_migrations.py and the first test of
tests/test_production_path.py prove.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
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
