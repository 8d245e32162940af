"""A malformed setting is a system check error naming the variable, not a traceback."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from repos.checks import github_settings_check
from sandbox.checks import time_limits_check


def ids(messages) -> list[str]:
    return [m.id for m in messages]


@pytest.fixture
def configured(settings, test_app):
    settings.GITHUB_APP_ID = str(test_app.app_id)
    settings.GITHUB_APP_SLUG = test_app.slug
    settings.GITHUB_PRIVATE_KEY = test_app.private_key
    settings.GITHUB_WEBHOOK_SECRET = "s"
    settings.GITHUB_API_URL = "https://api.github.com"
    return settings


def test_a_configured_app_passes(configured):
    assert github_settings_check() == []


def test_a_non_numeric_app_id_is_an_error_naming_the_variable(configured):
    configured.GITHUB_APP_ID = "Iv1.abc"
    [error] = github_settings_check()
    assert error.id == "tasuku.E001"
    assert "GITHUB_APP_ID" in error.msg


def test_an_unreadable_key_file_is_an_error_naming_the_variable(configured, tmp_path):
    configured.GITHUB_PRIVATE_KEY = ""
    configured.GITHUB_PRIVATE_KEY_PATH = str(tmp_path / "missing.pem")
    [error] = github_settings_check()
    assert error.id == "tasuku.E002"
    assert error.msg.startswith("GITHUB_PRIVATE_KEY_PATH: cannot read")


def test_a_key_file_that_is_not_a_key_is_an_error(configured, tmp_path):
    path = tmp_path / "key.pem"
    path.write_text("-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----\n")
    configured.GITHUB_PRIVATE_KEY = ""
    configured.GITHUB_PRIVATE_KEY_PATH = str(path)
    [error] = github_settings_check()
    assert error.id == "tasuku.E003"
    assert "GITHUB_PRIVATE_KEY_PATH is not a PEM private key" in error.msg


def test_a_readable_key_file_passes(configured, tmp_path, test_app):
    path = tmp_path / "key.pem"
    path.write_text(test_app.private_key)
    configured.GITHUB_PRIVATE_KEY = ""
    configured.GITHUB_PRIVATE_KEY_PATH = str(path)
    assert github_settings_check() == []


def test_both_key_variables_at_once_is_an_error(configured, tmp_path):
    configured.GITHUB_PRIVATE_KEY_PATH = str(tmp_path / "k.pem")
    assert ids(github_settings_check()) == ["tasuku.E002"]


@pytest.mark.parametrize("variable", ["GITHUB_API_URL", "TASUKU_BASE_URL"])
def test_urls_must_be_absolute(configured, variable):
    setattr(configured, variable, "api.github.com")
    [error] = github_settings_check()
    assert error.id == "tasuku.E004"
    assert variable in error.msg


def test_retry_settings_must_be_numbers(configured):
    configured.GITHUB_MAX_ATTEMPTS = "three"
    [error] = github_settings_check()
    assert "GITHUB_MAX_ATTEMPTS" in error.msg


@pytest.mark.parametrize(
    "variable", ["GITHUB_WRITES_PER_MINUTE", "GITHUB_WRITES_PER_HOUR", "GITHUB_WRITES_AT_ONCE"]
)
def test_the_write_budgets_limits_must_be_whole_numbers(configured, variable):
    setattr(configured, variable, "0.5")
    [error] = github_settings_check()
    assert error.id == "tasuku.E006" and variable in error.msg


def test_missing_github_settings_are_a_warning_that_names_them(settings):
    settings.GITHUB_APP_ID = ""
    settings.GITHUB_PRIVATE_KEY = ""
    settings.GITHUB_PRIVATE_KEY_PATH = ""
    settings.GITHUB_WEBHOOK_SECRET = ""
    [warning] = github_settings_check()
    assert warning.id == "tasuku.W001"
    assert not warning.is_serious()
    assert "GITHUB_APP_ID" in warning.msg and "GITHUB_WEBHOOK_SECRET" in warning.msg


def test_the_default_time_limits_are_ordered(settings):
    assert time_limits_check() == []
    assert (
        int(settings.TASUKU_SANDBOX_TIMEOUT)
        < settings.Q_CLUSTER["timeout"]
        < settings.Q_CLUSTER["retry"]
    )


def test_time_limits_out_of_order_are_an_error(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 600, "retry": 300}
    [error] = time_limits_check()
    assert error.id == "tasuku.E011"
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 600, "retry": 900}
    settings.TASUKU_SANDBOX_TIMEOUT = "700"
    assert ids(time_limits_check()) == ["tasuku.E011"]


def test_a_malformed_time_limit_names_its_variable(settings):
    settings.Q_TIMEOUT = "45m"
    [error] = time_limits_check()
    assert "Q_TIMEOUT" in error.msg


def test_manage_py_check_fails_on_a_malformed_value(configured):
    configured.GITHUB_APP_ID = "not-a-number"
    with pytest.raises(SystemCheckError, match="GITHUB_APP_ID"):
        call_command("check")


def test_the_worker_refuses_to_start_on_a_malformed_value(configured, monkeypatch):
    """The worker runs the system checks before its cluster starts: a bad value stops
    it, naming the variable, before it takes any work."""
    from tasuku import cluster

    def started(self):
        raise AssertionError("the cluster started despite the malformed value")

    monkeypatch.setattr(cluster.Cluster, "run", started)
    configured.GITHUB_APP_ID = "not-a-number"
    with pytest.raises(SystemCheckError, match="GITHUB_APP_ID"):
        call_command("worker", skip_checks=False)  # as `manage.py worker` runs it


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("nope.Web", "cannot be imported"),
        ("sandbox.agent.tools.web:Missing", "cannot be imported"),
        ("sandbox.agent.tools.web:WebError", "has no search(query) and fetch(url)"),
    ],
)
def test_a_web_provider_that_cannot_serve_is_named(settings, path, problem):
    from sandbox.checks import web_provider_check

    assert web_provider_check() == []  # the shipped one, by default
    settings.TASUKU_WEB_PROVIDER = path
    [error] = web_provider_check()
    assert error.id == "tasuku.E021" and problem in error.msg


def test_a_heartbeat_not_under_the_lease_is_an_error(settings):
    assert settings.TASUKU_RUN_HEARTBEAT_SECONDS < settings.TASUKU_RUN_LEASE_SECONDS
    settings.TASUKU_RUN_HEARTBEAT_SECONDS = settings.TASUKU_RUN_LEASE_SECONDS
    assert ids(time_limits_check()) == ["tasuku.E012"]


def test_without_a_secret_key_outside_debug_tasuku_refuses_to_start_and_says_how():
    """No key is generated behind the operator's back (one per container or host would
    split sessions and sealed credentials): the command says what to run instead."""
    import os
    import subprocess
    import sys

    from django.conf import settings

    # An empty SECRET_KEY in the environment: `.env` (which only fills what is unset)
    # cannot supply one either.
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(SECRET_KEY="", DEBUG="false")
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=settings.BASE_DIR,  # noqa: S603
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "SECRET_KEY is not set" in done.stderr
    assert "secrets.token_urlsafe(50)" in done.stderr  # the command that makes one
    assert "Traceback" not in done.stderr


def test_make_install_writes_a_key_once_and_keeps_an_earlier_one(tmp_path, monkeypatch):
    from tasuku.devkey import key_ensure

    monkeypatch.delenv("SECRET_KEY", raising=False)
    env_file, legacy = tmp_path / ".env", tmp_path / ".secret_key"
    assert "a new one" in key_ensure(env_file, legacy)
    first = env_file.read_text()
    assert first.startswith("SECRET_KEY=") and len(first.strip()) > 60
    assert env_file.stat().st_mode & 0o077 == 0  # a secret: the owner's alone
    assert key_ensure(env_file, legacy) is None and env_file.read_text() == first

    # A .env without a key (the demo's GITHUB_* block, say) gets one appended; a key
    # earlier versions generated into .secret_key is moved, so what it sealed opens.
    env_file.write_text("GITHUB_APP_ID=1")
    legacy.write_text("an-earlier-generated-key-of-fifty-characters-or-so\n")
    assert "moved" in key_ensure(env_file, legacy)
    assert env_file.read_text() == (
        "GITHUB_APP_ID=1\nSECRET_KEY=an-earlier-generated-key-of-fifty-characters-or-so\n"
    )
    assert not legacy.exists()

    monkeypatch.setenv("SECRET_KEY", "from-the-environment")
    other = tmp_path / "other.env"
    assert key_ensure(other, legacy) is None and not other.exists()


@pytest.mark.parametrize(
    "url, why",
    [
        ("postgres://tasuku@db:notaport/tasuku", "Port could not be cast to integer value"),
        ("postgres://tasuku@db:99999999/tasuku", "Port out of range"),
    ],
)
def test_a_database_url_that_does_not_parse_stops_with_its_name(url, why):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["DATABASE_URL"] = url
    done = subprocess.run([sys.executable, "manage.py", "check"],  # noqa: S603
                          cwd=Path(__file__).resolve().parent.parent, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "DATABASE_URL is not a valid database URL: " + why in done.stderr
