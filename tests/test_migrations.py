"""The suite builds its test databases from the models (`--nomigrations`, pyproject.toml):
the migrations must build the same schema, so they must describe the models whole."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_migrations_describe_every_model_as_it_is(tmp_path):
    """`makemigrations --check` in a process of its own: inside the suite the migrations
    are switched off, and it would find none to compare."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'none.sqlite3'}"}  # fmt: skip
    done = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "makemigrations", "--check", "--dry-run"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"a model differs from its migrations:\n{done.stdout}"


@pytest.mark.django_db
def test_every_test_database_has_the_data_migrations_rows():
    """What the data migrations write is in every test's database (tests/conftest.py
    gives it back), as on a freshly migrated install."""
    from repos.models import Connector, Reviewer

    assert Reviewer.objects.filter(slug="static", engine="static").exists()
    assert Connector.objects.filter(name="github_issue").exists()
