"""What the README and docs/ tell a user to type exists: every `manage.py` command,
every TASUKU_/GITHUB_ setting, every path on Tasuku's site, every file they link to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import get_commands
from django.urls import Resolver404, resolve

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
READ_FROM_ENVIRONMENT = set(
    re.findall(
        r'env(?:\.\w+)?\(\s*["\x27]([A-Z0-9_]+)["\x27]',
        (ROOT / "tasuku" / "settings.py").read_text(),
    )
)
# Names in the docs that are not Tasuku's settings: the test suite's own, the workflow
# file's repository variables (docs/actions/tasuku.yml), GitHub's Actions variables.
NOT_SETTINGS = {
    "TASUKU_CHROMIUM", "TASUKU_CONTRACT_LOG", "TASUKU_RUNNER_PACKAGE", "TASUKU_ADMIN_USER", "TASUKU_ADMIN_PASSWORD", "TASUKU_URL",
    "TASUKU_RUN_ID", "TASUKU_JOB_URL", "TASUKU_RESULT_URL", "GITHUB_TOKEN", "GITHUB_OUTPUT",
    "GITHUB_RUN_ID", "GITHUB_REPOSITORY", "GITHUB_SHA", "GITHUB_WORKSPACE", "GITHUB_ACTIONS",
    "GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY", "GITHUB_ENV",
    "TASUKU_JUNIT",  # given to the pull request's tests, not read by Tasuku
}  # fmt: skip


def pages():
    return [pytest.param(page, id=str(page.relative_to(ROOT))) for page in PAGES]


@pytest.mark.parametrize("page", pages())
def test_every_manage_command_shown_exists(page):
    known = set(get_commands())
    for command in re.findall(r"manage\.py ([a-z_]+)", page.read_text()):
        assert command in known, f"{page.name}: manage.py {command}"


@pytest.mark.parametrize("page", pages())
def test_every_setting_named_is_one_tasuku_reads(page):
    for name in set(
        re.findall(r"\b((?:TASUKU|GITHUB)_[A-Z][A-Z0-9_]*[A-Z0-9])\b", page.read_text())
    ):
        if name.endswith("_") or name in NOT_SETTINGS:
            continue
        assert name in READ_FROM_ENVIRONMENT, f"{page.name}: {name}"


@pytest.mark.parametrize("page", pages())
def test_every_path_on_tasukus_site_shown_resolves(page):
    text = page.read_text()
    for path in set(
        re.findall(
            r"`(/(?:admin|api|runs|status|setup|healthz|livez|metrics|repos|tasks|pulls|diagnostics|webhooks)[^`\s]*)`",
            text,
        )
    ):
        if path.startswith("/api/v3"):
            continue  # a GitHub Enterprise Server's API, not Tasuku's
        concrete = re.sub(r"<[^>]+>", "1", path).split("?")[0]
        try:
            resolve(concrete)
        except Resolver404:
            pytest.fail(f"{page.name}: {path} is not a page of Tasuku")


@pytest.mark.parametrize("page", pages())
def test_every_file_linked_exists(page):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.name}: {target}"


def test_every_setting_tasuku_reads_is_in_the_configuration_table():
    """docs/configuration.md's table names every variable tasuku/settings.py reads from
    the environment, and names nothing else but variables read elsewhere (each listed
    here with its reader)."""
    table = set(
        re.findall(
            r"^\| `([A-Z][A-Z0-9_]*)`", (ROOT / "docs" / "configuration.md").read_text(), re.M
        )
    )
    read_elsewhere = {
        "DOCKER_HOST": ROOT / "sandbox" / "runners" / "docker.py",  # the Docker client's
        "TASUKU_ADMIN_USER": ROOT / "reviews" / "management" / "commands" / "ensure_admin.py",
        "TASUKU_ADMIN_PASSWORD": ROOT / "reviews" / "management" / "commands" / "ensure_admin.py",
    }
    assert READ_FROM_ENVIRONMENT - table == set(), "read by settings.py, not in the table"
    assert table - READ_FROM_ENVIRONMENT == set(read_elsewhere)
    for name, reader in read_elsewhere.items():
        assert name in reader.read_text(), (name, reader)
